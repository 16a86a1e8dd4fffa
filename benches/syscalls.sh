#!/usr/bin/env bash
# Counts the system calls each sampler thread makes while it samples.
#
# Runs `latencyd measure --loops N` under `strace -f`, finds each sampler
# thread by the tid its JSON reports, and counts that thread's calls from
# its first clock_nanosleep to its last: the invariant is exactly one call
# (the sleep) per sample and nothing else — clock_gettime is served by the
# vDSO and never reaches strace.
#
# Usage: benches/syscalls.sh [--check]   (env: LATENCYD, LOOPS, INTERVAL_US)
# With --check it exits 1 when any sampler breaks the invariant.
set -euo pipefail

check=0
[ "${1:-}" = "--check" ] && check=1
bin=${LATENCYD:-target/release/latencyd}
loops=${LOOPS:-2000}
interval_us=${INTERVAL_US:-500}
command -v strace >/dev/null || { echo "strace is not installed (apt-get install strace)" >&2; exit 2; }
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release, or set LATENCYD)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=()
[ "$(id -u)" = 0 ] || flags=(--allow-non-rt --default-system)

strace -f -qq -o "$tmp/trace" "$bin" measure -q -l "$loops" -i "$interval_us" \
    "${flags[@]}" --json "$tmp/run.json" >/dev/null
tids=$(grep -o '"tid": [0-9]*' "$tmp/run.json" | grep -o '[0-9]*$')
[ -n "$tids" ] || { echo "no sampler tids in the JSON" >&2; exit 1; }

printf '%-8s %8s %16s %14s %12s %10s\n' tid samples clock_nanosleep other_in_loop setup_calls per_sample
bad=0
for tid in $tids; do
    # Fields: sleeps in the loop, other calls in the loop, calls before it.
    read -r sleeps others setup other_names < <(awk -v tid="$tid" '
        $1 == tid && $2 !~ /^<\.\.\./ {
            name = $2; sub(/\(.*/, "", name)
            n++; names[n] = name
            if (name == "clock_nanosleep") { if (!first) first = n; last = n }
        }
        END {
            s = 0; o = 0; list = ""
            for (i = first; i <= last && first; i++) {
                if (names[i] == "clock_nanosleep") s++
                else { o++; count[names[i]]++ }
            }
            for (name in count) list = list name "x" count[name] " "
            print s, o, (first ? first - 1 : n), (list == "" ? "-" : list)
        }' "$tmp/trace")
    per_sample=$(awk -v s="$sleeps" -v o="$others" -v n="$loops" 'BEGIN { printf "%.3f", (s + o) / n }')
    printf '%-8s %8s %16s %14s %12s %10s\n' "$tid" "$loops" "$sleeps" "$others" "$setup" "$per_sample"
    if [ "$sleeps" != "$loops" ] || [ "$others" != 0 ]; then
        echo "  tid $tid: expected $loops sleeps and nothing else; other calls: $other_names" >&2
        bad=1
    fi
done
if [ $check = 1 ] && [ $bad = 1 ]; then
    exit 1
fi
