#!/usr/bin/env bash
# Installs the Debian package built by deploy/debian/build-package.sh,
# checks what it put on the system, then removes it again. Run as root on
# Debian (scripts/test does, after building the package).
#
# Usage: deploy/debian/check-package.sh [PACKAGE.deb]
set -euo pipefail
cd "$(dirname "$0")/../.."
deb=${1:-$(ls -t target/debian/latencyd_*.deb | head -n 1)}
[ "$(id -u)" = 0 ] || { echo "check-package: needs root (dpkg -i)" >&2; exit 2; }

fail() { echo "check-package: $*" >&2; exit 1; }

# latencyd processes already running (a developer's own, say) are not the
# install's doing: only new ones count.
before=$(pgrep -x latencyd | sort || true)
dpkg -i "$deb" >/dev/null
trap 'dpkg --purge latencyd >/dev/null 2>&1 || true' EXIT

dpkg -s latencyd | grep -q '^Status: install ok installed' || fail "not installed"
/usr/bin/latencyd --version | grep -q '^latencyd ' || fail "the binary does not run"
getent passwd latencyd >/dev/null || fail "no latencyd user"
getent group cpu-dma-latency >/dev/null || fail "no cpu-dma-latency group"
unit=/usr/lib/systemd/system/latencyd.service
[ -f "$unit" ] || fail "no unit at $unit"
verify=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify says: $verify"
score=$(systemd-analyze security --offline=true "$unit" | sed -n 's/.*exposure level for latencyd.service: \([0-9.]*\).*/\1/p')
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "security exposure $score > 2.0"
# Installing starts no real-time thread on a production host: the unit
# is neither enabled nor started until the operator says so.
[ ! -e /etc/systemd/system/multi-user.target.wants/latencyd.service ] || fail "installing enabled the unit"
started=$(comm -13 <(echo "$before") <(pgrep -x latencyd | sort || true) | grep . || true)
[ -z "$started" ] || fail "installing started latencyd (pid $started)"
# Recommends the font the plots need.
dpkg-query -W -f='${Recommends}\n' latencyd | grep -q fonts-dejavu-core || fail "no Recommends: fonts-dejavu-core"
# The man page and completions, generated from the binary's options.
man=/usr/share/man/man8/latencyd.8.gz
[ -f "$man" ] || fail "no man page at $man"
zcat "$man" | grep -q '^\.TH latencyd 8' || fail "$man is not latencyd(8)"
command -v groff >/dev/null || fail "groff is missing (Debian's groff-base): the man page cannot be checked"
warnings=$(zcat "$man" | groff -man -Tutf8 -ww -z 2>&1) || fail "groff: $warnings"
[ -z "$warnings" ] || fail "groff warns: $warnings"
page=$(zcat "$man" | groff -man -Tascii -P-cbou 2>/dev/null)
for text in "LATENCYD MEASURE" "--histogram" "check-config" "completions" "--web.listen-address" "EXIT STATUS"; do
    grep -q -- "$text" <<<"$page" || fail "$man does not mention $text"
done
bash_completion=/usr/share/bash-completion/completions/latencyd
[ -f "$bash_completion" ] || fail "no bash completion at $bash_completion"
bash -n "$bash_completion" || fail "$bash_completion is not valid bash"
grep -q -- '--web.listen-address' "$bash_completion" || fail "$bash_completion lacks the run flags"
[ -f /usr/share/zsh/vendor-completions/_latencyd ] || fail "no zsh completion"
head -n 1 /usr/share/zsh/vendor-completions/_latencyd | grep -q '^#compdef latencyd' || fail "the zsh completion lacks #compdef"
[ -f /usr/share/fish/vendor_completions.d/latencyd.fish ] || fail "no fish completion"
grep -q '^complete -c latencyd' /usr/share/fish/vendor_completions.d/latencyd.fish || fail "the fish completion is empty"
[ -f /usr/share/doc/latencyd/examples/web-config.example.yml ] || fail "no web-config example"
[ -f /usr/share/doc/latencyd/changelog.Debian.gz ] || fail "no changelog.Debian.gz"
# A well-formed Maintainer: "Name <user@domain>", the domain qualified
# and not this host (lintian refuses localhost too). Whether anyone reads
# that address is for the one who builds the package to make true.
address='^[^<>]*[^<> ] <[^@<> ]+@([^@<> .]+\.)+[^@<> .]+>$'
maintainer=$(dpkg-query -W -f='${Maintainer}' latencyd)
[[ $maintainer =~ $address ]] || fail "Maintainer '$maintainer' is not 'Name <user@domain>'"
case $maintainer in
*@localhost* | *localdomain*) fail "Maintainer '$maintainer' is on localhost: set DEBFULLNAME and DEBEMAIL, or Cargo.toml's maintainer" ;;
esac
signer=$(zcat /usr/share/doc/latencyd/changelog.Debian.gz | sed -n 's/^ -- \(.*>\)  .*/\1/p' | head -n 1)
[[ $signer =~ $address ]] || fail "the changelog's trailer '$signer' is not 'Name <user@domain>'"
/usr/bin/latencyd check-config /etc/latencyd/latencyd.toml >/dev/null || fail "the shipped configuration is invalid"
for f in grafana/dashboards/latencyd-host.json grafana/dashboards/latencyd-fleet.json \
         prometheus/latencyd.rules.yml prometheus/agent.yml prometheus/vmagent.yml \
         systemd/latencyd-pmqos.conf systemd/latencyd-forensics.conf \
         systemd/latencyd-observe.conf systemd/latencyd-load.conf \
         udev/60-cpu-dma-latency.rules; do
    [ -f "/usr/share/latencyd/$f" ] || fail "missing /usr/share/latencyd/$f"
done
[ -f /usr/share/doc/latencyd/runbooks.md ] || fail "missing /usr/share/doc/latencyd/runbooks.md"
for doc in README configuration metrics api operations runbooks forensics observe record measure benchmarks; do
    [ -f "/usr/share/doc/latencyd/docs/$doc.md" ] || fail "missing /usr/share/doc/latencyd/docs/$doc.md (README links to it)"
done
dpkg-query -W -f='${Conffiles}\n' latencyd | grep -q /etc/latencyd/latencyd.toml || fail "the configuration is not a conffile"

dpkg --purge latencyd >/dev/null
[ ! -e /usr/bin/latencyd ] || fail "the binary is still there after purge"
trap - EXIT
echo "check-package: $(basename "$deb") installed, checked (unit exposure $score) and purged"
