#!/usr/bin/env bash
# Builds the RPM (and the source RPM) from this checkout: a source tarball
# of the repository's files with every crate vendored and a
# .cargo/config.toml that points cargo at them, so that rpmbuild compiles
# offline with the versions of Cargo.lock; then rpmbuild -ba on
# deploy/rpm/latencyd.spec with its top directory in target/rpm/.
# Prints the path of the binary RPM.
#
# Usage: deploy/rpm/build-rpm.sh
# Environment: RPM_PACKAGER ("Name <address>") sets the Packager tag;
# RPM_SIGN_KEY, a gpg key to sign both packages with (rpmsign).
# Needs rpmbuild (Debian's or Ubuntu's `rpm` package, or rpm-build) and
# network access to the crate registry for `cargo vendor` (the build
# itself needs none). On a host whose rpm database does not list the
# build dependencies (Debian), the check of BuildRequires is skipped
# (--nodeps) and cargo is whatever is on PATH; where rpm makes no
# debuginfo packages (Debian's rpm), cargo strips the binary instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v rpmbuild >/dev/null || {
    echo "build-rpm: rpmbuild is missing: install rpm (Debian) or rpm-build (Fedora)" >&2
    exit 2
}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
revision=$(git rev-parse --short=12 HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || revision="$revision-dirty"
top=$PWD/target/rpm
stage=$top/stage/latencyd-$version
rm -rf "$top/stage" && mkdir -p "$stage" "$top/SOURCES"
# The repository's files as they are in the working tree (new ones not
# yet committed included, ignored ones not).
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do
        [ -e "$file" ] && printf '%s\0' "$file"
    done | xargs -0 cp --parents -t "$stage"
(cd "$stage" && cargo vendor --locked --quiet vendor >/dev/null)
mkdir -p "$stage/.cargo"
cat >"$stage/.cargo/config.toml" <<'CONFIG'
# Written by deploy/rpm/build-rpm.sh: the crates come from vendor/.
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"
CONFIG
tar -C "$top/stage" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$(git log -1 --format=%ct)" -czf "$top/SOURCES/latencyd-$version.tar.gz" \
    "latencyd-$version"
cp systemd/latencyd.sysusers "$top/SOURCES/latencyd.sysusers"
rm -rf "$top/stage"
# Whoever builds for a fleet names themselves (RPM_PACKAGER, "Name
# <address>"); else Cargo.toml's maintainer, as the Debian package does.
packager=${RPM_PACKAGER:-$(sed -n 's/^maintainer = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}
options=(--define "_topdir $top" --define "version_from_cargo $version"
    --define "revision $revision" --define "packager $packager")
if ! rpm -q rpm >/dev/null 2>&1; then
    options+=(--nodeps)
fi
if [ -z "$(rpm --eval '%{?_enable_debug_packages}')" ]; then
    options+=(--define "debug_package %{nil}" --define "strip_in_cargo 1")
fi
rm -rf "$top/RPMS" "$top/SRPMS"
rpmbuild -ba --quiet "${options[@]}" deploy/rpm/latencyd.spec >&2
rpm=$(ls "$top"/RPMS/*/latencyd-"$version"-*.rpm)
# Signed with the key RPM_SIGN_KEY names (a gpg user id in the builder's
# keyring), as a repository's packages are before they are published.
if [ -n "${RPM_SIGN_KEY:-}" ]; then
    rpmsign --addsign --define "_gpg_name $RPM_SIGN_KEY" --define "__gpg $(command -v gpg)" "$rpm" "$top"/SRPMS/*.src.rpm >&2
fi
echo "$rpm"
