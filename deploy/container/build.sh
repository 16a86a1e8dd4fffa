#!/usr/bin/env bash
# Builds the container image latencyd:VERSION with buildah, from scratch:
# the latencyd binary, the shared libraries it is linked against (as ldd
# lists them, the dynamic loader included), DejaVu Sans for /plot.svg, the
# example configuration, and the empty directories a runtime mounts over.
# No shell, no package manager, nothing else.
#
# Usage: deploy/container/build.sh [--oci-archive FILE]
#   --oci-archive FILE   also write the image to FILE (an OCI archive, for
#                        `skopeo copy oci-archive:FILE docker://REGISTRY/...`
#                        or `podman load -i FILE`)
# Environment: LATENCYD_BINARY (default target/release/latencyd, built
# when absent), LATENCYD_ARCH (the binary's Debian architecture, default
# this machine's) and for another architecture LATENCYD_LIBDIR, where its
# glibc is (scripts/arm64 image sets both), IMAGE (default
# latencyd:VERSION, latencyd:VERSION-ARCH for another architecture).
# Storage is buildah's (CONTAINERS_STORAGE_CONF chooses another). Needs root and buildah
# (Debian's buildah package), fonts-dejavu-core.
set -euo pipefail
cd "$(dirname "$0")/../.."

archive=
while [ $# -gt 0 ]; do
    case "$1" in
        --oci-archive) archive=${2:?--oci-archive needs a file}; shift 2 ;;
        *) echo "build.sh: unknown argument $1 (usage: build.sh [--oci-archive FILE])" >&2; exit 2 ;;
    esac
done
command -v buildah >/dev/null || { echo "build.sh: buildah is missing: apt-get install buildah" >&2; exit 2; }
font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[ -f "$font" ] || { echo "build.sh: $font is missing: apt-get install fonts-dejavu-core" >&2; exit 2; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
native=$(dpkg --print-architecture 2>/dev/null || echo amd64)
arch=${LATENCYD_ARCH:-$native}
if [ "$arch" = "$native" ]; then
    image=${IMAGE:-latencyd:$version}
else
    image=${IMAGE:-latencyd:$version-$arch}
fi
binary=${LATENCYD_BINARY:-target/release/latencyd}
if [ ! -x "$binary" ]; then
    cargo build --release --locked
fi

rootfs=$(mktemp -d)
container=
cleanup() {
    [ -n "$container" ] && buildah rm "$container" >/dev/null 2>&1
    rm -rf "$rootfs"
}
trap cleanup EXIT

install -D -m 755 "$binary" "$rootfs/usr/bin/latencyd"
# The libraries at the paths the loader will look for them, and the loader.
if [ "$arch" = "$native" ]; then
    ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
        while read -r lib; do
            mkdir -p "$rootfs$(dirname "$lib")"
            cp -L "$lib" "$rootfs$lib"
        done
else
    # Another architecture's binary: ldd cannot run it; readelf reads what
    # it needs (glibc's libraries need only each other), taken from
    # LATENCYD_LIBDIR, that architecture's glibc.
    case "$arch" in
        arm64) multiarch=aarch64-linux-gnu ;;
        *) echo "build.sh: no library layout known for $arch" >&2; exit 2 ;;
    esac
    sysroot=${LATENCYD_LIBDIR:?LATENCYD_LIBDIR must name the $arch glibc (scripts/arm64 image)}
    [ -d "$sysroot" ] || { echo "build.sh: $sysroot is missing" >&2; exit 2; }
    loader=$(readelf -l "$binary" | sed -n 's/.*program interpreter: \(.*\)\]/\1/p')
    install -D -m 755 "$(readlink -f "$sysroot/$(basename "$loader")")" "$rootfs$loader"
    for lib in $(readelf -d "$binary" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
        install -D -m 644 "$(readlink -f "$sysroot/$lib")" "$rootfs/lib/$multiarch/$lib"
    done
fi
install -D -m 644 "$font" "$rootfs$font"
install -D -m 644 config.example.toml "$rootfs/etc/latencyd/latencyd.toml"
# Mount points: the runtime's, and the record's state directory.
mkdir -p "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/tmp" "$rootfs/var/lib/latencyd"
chmod 1777 "$rootfs/tmp"

container=$(buildah from scratch)
buildah copy --quiet "$container" "$rootfs" / >/dev/null
# Root in the container: Kubernetes grants added capabilities (SYS_NICE,
# IPC_LOCK) only to uid 0 (deploy/kubernetes/base/daemonset.yaml).
buildah config \
    --arch "$arch" \
    --entrypoint '["/usr/bin/latencyd"]' \
    --cmd '["run", "--config", "/etc/latencyd/latencyd.toml"]' \
    --user 0:0 \
    --workingdir / \
    --port 9479/tcp \
    --env LATENCYD_LOG__FORMAT=json \
    --label org.opencontainers.image.title=latencyd \
    --label "org.opencontainers.image.description=Continuous wake-up latency monitoring for real-time Linux" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.licenses=MIT OR Apache-2.0" \
    "$container"
buildah commit --quiet --rm "$container" "$image" >/dev/null
container=
if [ -n "$archive" ]; then
    rm -f "$archive"
    buildah push --quiet "$image" "oci-archive:$archive:$image"
fi
echo "build.sh: built $image (revision $revision)${archive:+, written to $archive}"
