#!/usr/bin/env bash
# Checks meta-latencyd without bitbake: the crate list matches Cargo.lock
# (deploy/yocto/update-crates --check), the licence checksums match the
# licence files, every file the recipe installs from the source tree
# exists, and oelint-adv (PyPI's bitbake recipe linter; OELINT names
# another binary) reports nothing on the recipe, its crate list and the
# layer configuration. The cross-builds for the recipe's targets are
# scripts/arm64 and scripts/armv7.
#
# Usage: deploy/yocto/check-layer.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
layer=deploy/yocto/meta-latencyd
recipe=$layer/recipes-support/latencyd/latencyd_0.1.0.bb
fail() { echo "check-layer: $*" >&2; exit 1; }

deploy/yocto/update-crates --check
# LIC_FILES_CHKSUM = "file://NAME;md5=SUM ...": each against the file.
for entry in $(sed -n '/^LIC_FILES_CHKSUM/,/"$/p' "$recipe" | grep -o 'file://[^ "]*'); do
    file=${entry#file://}; file=${file%%;*}
    want=${entry##*md5=}
    have=$(md5sum "$file" | cut -d' ' -f1)
    [ "$have" = "$want" ] || fail "$file's md5 is $have, the recipe says $want"
done
# ${S}/PATH in do_install: every path (globs too) names files of the tree.
for path in $(grep -o '\${S}/[^ ]*' "$recipe" | sed 's|^\${S}/||' | sort -u); do
    compgen -G "$path" >/dev/null || fail "the recipe installs $path, which is not in the tree"
done
oelint=${OELINT:-oelint-adv}
command -v "$oelint" >/dev/null || fail "$oelint is missing: pip install oelint-adv"
findings=$("$oelint" --quiet "$recipe" "$layer/recipes-support/latencyd/latencyd-crates.inc" \
    "$layer/conf/layer.conf" 2>&1) || fail "oelint-adv:
$findings"
[ -z "$findings" ] || fail "oelint-adv:
$findings"
echo "check-layer: crates match Cargo.lock, licence checksums match, installed files exist, oelint-adv $("$oelint" --version | cut -d' ' -f2): nothing found" >&2
