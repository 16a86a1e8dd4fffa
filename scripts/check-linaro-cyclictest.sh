#!/usr/bin/env bash
# Runs Linaro's LAVA test definition for cyclictest
# (automated/linux/cyclictest/cyclictest.sh in a checkout of Linaro's
# test-definitions, given as the first argument) three times: with the
# real cyclictest, with `latencyd measure` standing in for it on PATH, and
# with cyclictest again. Prints the result files (what LAVA records: one
# line per test case, with its measurement) and fails if the test cases or
# their pass/fail differ, or if latencyd's minimum or average of a thread
# lies outside the spread of cyclictest against itself. The definition is not part of this project; point this script
# at your own checkout.
#
# Usage: scripts/check-linaro-cyclictest.sh TEST_DEFINITIONS_DIR [DURATION]
# Environment: LATENCYD (binary; default target/release/latencyd).
# Needs root, cyclictest (rt-tests) and python3.
set -euo pipefail

definitions=${1:?usage: $0 TEST_DEFINITIONS_DIR [DURATION]}
duration=${2:-5s}
bin=$(realpath "${LATENCYD:-target/release/latencyd}")
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }
real=$(command -v cyclictest) || { echo "cyclictest is missing (apt-get install rt-tests)" >&2; exit 2; }
case_dir="$definitions/automated/linux/cyclictest"
[ -f "$case_dir/cyclictest.sh" ] || { echo "no $case_dir/cyclictest.sh" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/real" "$work/latencyd"
ln -s "$real" "$work/real/cyclictest"
printf '#!/bin/sh\nexec %s measure "$@"\n' "$bin" >"$work/latencyd/cyclictest"
chmod +x "$work/latencyd/cyclictest"

run() {
    local tool=$1
    # The definition writes output/ beside itself; run each in a copy.
    local copy="$work/run-$tool"
    mkdir -p "$copy"
    cp -r "$definitions/automated" "$copy/"
    (cd "$copy/automated/linux/cyclictest" &&
        PATH="$work/$tool:$PATH" ./cyclictest.sh -t 0 -D "$duration" >"$work/$tool.log" 2>&1)
    cp "$copy/automated/linux/cyclictest/output/result.txt" "$work/$tool-result.txt"
    echo "== $tool ($(head -1 "$work/$tool.log" 2>/dev/null))"
    cat "$work/$tool-result.txt"
}

run real
run latencyd
mv "$work/real-result.txt" "$work/real1-result.txt"
run real
mv "$work/real-result.txt" "$work/real2-result.txt"

# Test case names and pass/fail must match; every thread must have its
# lines; each min and avg must lie within the spread of cyclictest against
# itself: its two runs' range, widened by their difference or a quarter of
# the larger value, whichever is more, and 1 us (two runs that happen to
# agree say little of the spread: on this project's VM one 5 s run of
# cyclictest reads up to a quarter off another, pair ratios of the average
# 0.74-1.14 in 30 pairs at 1 ms, CONTROL=1 benches/compare_cyclictest.sh;
# the fault this exists for, a default that differs, read 1.93x).
# Maxima are printed, not judged: one run's maximum says little on a
# noisy machine.
python3 - "$work/real1-result.txt" "$work/latencyd-result.txt" "$work/real2-result.txt" <<'PY'
import sys

def read(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 2:
            out[f[0]] = (f[1], float(f[2]) if len(f) > 2 else None)
    return out

first, ours, again = (read(p) for p in sys.argv[1:])
failures = []
if sorted((k, v[0]) for k, v in ours.items()) != sorted((k, v[0]) for k, v in first.items()):
    failures.append(f"test cases or results differ: {sorted(first)} vs {sorted(ours)}")
threads = {k.split("-")[0] for k in first if k.startswith("t") and "-latency" in k}
if not threads:
    failures.append("cyclictest's run has no per-thread test cases")
for case, (_, value) in sorted(ours.items()):
    if not (case.endswith("-min-latency") or case.endswith("-avg-latency")):
        continue
    if case not in first or case not in again or value is None:
        failures.append(f"{case}: missing from a run")
        continue
    a, b = first[case][1], again[case][1]
    spread = max(abs(a - b), 0.25 * max(a, b)) + 1
    low, high = min(a, b) - spread, max(a, b) + spread
    if not low <= value <= high:
        failures.append(f"{case}: {value:g} outside cyclictest's {a:g}/{b:g} widened to [{low:g}, {high:g}]")
    else:
        print(f"{case}: latencyd {value:g}, cyclictest {a:g} and {b:g}")
for case in sorted(ours):
    if case.endswith("-max-latency"):
        print(f"{case}: latencyd {ours[case][1]:g}, cyclictest {first[case][1]:g} and {again[case][1]:g} (not judged)")
if failures:
    print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"same test cases and results, {len(threads)} threads, mins and averages within cyclictest's own spread")
PY
