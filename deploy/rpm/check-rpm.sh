#!/usr/bin/env bash
# Checks the RPM built by deploy/rpm/build-rpm.sh:
#  1. rpmlint on the package, the source package and the spec: no error,
#     and every warning named in the spec with its reason ("# rpmlint:");
#  2. its payload against the Debian package's (when a .deb is given):
#     the same files at the same paths, but for the differences each
#     distribution's layout makes, listed below;
#  3. an install into a scratch root (an overlay of this host's / whose
#     writes go to a temporary directory, so the host is not changed):
#     the scriptlets run in it as far as a root without a running systemd
#     allows (systemctl works offline there; nothing is started), then
#     the user and groups, the state directory, the unit not enabled, the
#     binary and its configuration, `rpm -V`, a configuration edit kept
#     across a reinstall (%config(noreplace)) and saved at removal.
# Needs rpm, rpmlint, and root for step 3 (mount).
#
# Usage: deploy/rpm/check-rpm.sh PACKAGE.rpm [PACKAGE.deb]
set -euo pipefail
cd "$(dirname "$0")/../.."
rpm=$1
deb=${2:-}
srpm=$(ls target/rpm/SRPMS/latencyd-*.src.rpm)
spec=deploy/rpm/latencyd.spec
fail() { echo "check-rpm: $*" >&2; exit 1; }

# 1. rpmlint.
lint=$(rpmlint "$rpm" "$srpm" "$spec" 2>&1) || true
echo "$lint" | grep -E '(E|W): ' >&2 || true
errors=$(grep -E ': E: ' <<<"$lint" || true)
[ -z "$errors" ] || fail "rpmlint errors:
$errors"
for id in $(sed -n 's/.*: W: \([^ ]*\).*/\1/p' <<<"$lint" | sort -u); do
    grep -qE "^# rpmlint:.*[ ,]$id[,:]" "$spec" ||
        fail "rpmlint warns $id, and $spec does not say why (a '# rpmlint: $id: ...' line)"
done
echo "check-rpm: rpmlint: no error, $(grep -c ': W: ' <<<"$lint" || true) warnings, each explained in the spec" >&2

# 2. The payload against the Debian package's.
if [ -n "$deb" ]; then
    # Files and symbolic links, not directories.
    rpm_files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpm" | awk '$1 !~ /^d/ { print $2 }' |
        grep -v -e '^/usr/lib/\.build-id/' -e '^/usr/share/licenses/' -e '^/usr/lib/tmpfiles\.d/latencyd\.conf$' |
        sed -e 's|^/usr/share/zsh/site-functions/|/usr/share/zsh/vendor-completions/|' | sort)
    deb_files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./|/|' |
        grep -v -e '^/usr/share/doc/latencyd/copyright$' -e '^/usr/share/doc/latencyd/changelog\.Debian\.gz$' | sort)
    difference=$(diff <(echo "$deb_files") <(echo "$rpm_files") || true)
    [ -z "$difference" ] || fail "the payloads differ (< only in the .deb, > only in the .rpm):
$difference"
    echo "check-rpm: the payload is the Debian package's ($(wc -l <<<"$rpm_files") files), but for the layouts' differences" >&2
fi

# 3. Into a scratch root.
if [ "$(id -u)" != 0 ]; then
    echo "check-rpm: not root: no install into a scratch root (needs mount)" >&2
    exit 0
fi
scratch=$(mktemp -d /tmp/latencyd-rpm-root.XXXXXX)
root=$scratch/root
mkdir -p "$scratch"/{upper,work,root}
mount -t overlay overlay -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$root"
# A root has /proc mounted (systemd-tmpfiles refuses to run without it).
mount --bind /proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null; umount "$root" 2>/dev/null; rm -rf "$scratch"' EXIT
# Debian's rpm asks for this flag before it installs into any root.
debian=()
rpm --help 2>/dev/null | grep -q -- --force-debian && debian=(--force-debian)
in_root() { chroot "$root" "$@"; }
# The host's own latencyd user (an installed service) is not the package's doing.
in_root userdel latencyd 2>/dev/null || true
in_root groupdel latencyd 2>/dev/null || true
in_root groupdel cpu-dma-latency 2>/dev/null || true
rm -rf "$root/var/lib/latencyd" "$root/etc/latencyd" "$root/var/lib/rpm"
rpm --root "$root" --initdb
# --nodeps: the scratch root's rpm database lists none of the libraries
# the package needs, though the root has them.
rpm --root "$root" -i --nodeps "${debian[@]}" "$rpm" || fail "rpm -i into the scratch root failed"
in_root getent passwd latencyd | grep -qE ':(/usr)?/sbin/nologin$' || fail "no latencyd user with nologin"
in_root getent group cpu-dma-latency >/dev/null || fail "no cpu-dma-latency group"
state=$(in_root stat -c '%a %U' /var/lib/latencyd 2>/dev/null) || fail "no /var/lib/latencyd (tmpfiles.d)"
[ "$state" = "750 latencyd" ] || fail "/var/lib/latencyd is '$state', not '750 latencyd'"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/latencyd.service" ] || fail "installing enabled the unit"
in_root /usr/bin/latencyd --version | grep -q '^latencyd ' || fail "the binary does not run"
in_root /usr/bin/latencyd check-config /etc/latencyd/latencyd.toml >/dev/null || fail "the shipped configuration is invalid"
verify=$(rpm --root "$root" -V --nodeps latencyd 2>&1) || fail "rpm -V: $verify"
echo "# edited" >>"$root/etc/latencyd/latencyd.toml"
rpm --root "$root" -U --replacepkgs --nodeps "${debian[@]}" "$rpm" || fail "reinstalling failed"
grep -q '^# edited' "$root/etc/latencyd/latencyd.toml" || fail "a reinstall replaced the edited configuration"
rpm --root "$root" -e "${debian[@]}" latencyd || fail "rpm -e failed"
[ ! -e "$root/usr/bin/latencyd" ] || fail "rpm -e left /usr/bin/latencyd"
[ -f "$root/etc/latencyd/latencyd.toml.rpmsave" ] || fail "rpm -e did not keep the edited configuration as .rpmsave"
echo "check-rpm: installed into a scratch root: user, groups, state directory, unit not enabled, binary, configuration, rpm -V; the edit kept and saved at removal" >&2
