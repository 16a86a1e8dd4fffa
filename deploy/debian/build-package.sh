#!/usr/bin/env bash
# Builds the Debian package: the release binary, then the man page
# latencyd(8) and the bash, zsh and fish completions generated from it
# (so they cannot drift from its options), then `cargo deb --no-build`.
# Prints the path of the .deb.
#
# Usage: deploy/debian/build-package.sh
# Environment: DEBFULLNAME and DEBEMAIL set the Maintainer field;
# LATENCYD_DEB_TARGET, another target's package (aarch64-unknown-linux-gnu:
# scripts/arm64 deb builds its binary first, with CARGO_TARGET_DIR set).
# Needs cargo-deb (`cargo install --locked cargo-deb`) and gzip.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v cargo-deb >/dev/null || {
    echo "build-package: cargo-deb is missing: cargo install --locked cargo-deb" >&2
    exit 2
}
# The man page and completions come from this machine's own binary (they
# are text, the same for every architecture), built with its own toolchain.
(unset RUSTC RUSTDOC CARGO_TARGET_DIR; cargo build --release --locked --quiet)
deb_target=()
[ -n "${LATENCYD_DEB_TARGET:-}" ] && deb_target=(--target "$LATENCYD_DEB_TARGET")
assets=target/assets
mkdir -p "$assets"
bin=target/release/latencyd
"$bin" manpage | gzip -9n >"$assets/latencyd.8.gz"
"$bin" completions bash >"$assets/latencyd.bash"
"$bin" completions zsh >"$assets/_latencyd"
"$bin" completions fish >"$assets/latencyd.fish"
# Whoever builds for a fleet signs it as its maintainer, with Debian's own
# variables (as dch uses them); else Cargo.toml's field.
maintainer=()
if [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
    maintainer=(--maintainer "$DEBFULLNAME <$DEBEMAIL>")
fi
cargo deb --no-build --quiet "${deb_target[@]}" "${maintainer[@]}" >&2
ls -t "${CARGO_TARGET_DIR:-target}"/${LATENCYD_DEB_TARGET:+$LATENCYD_DEB_TARGET/}debian/latencyd_*.deb | head -n 1
