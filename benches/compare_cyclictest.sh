#!/usr/bin/env bash
# latencyd measure vs cyclictest, same settings, alternating runs.
#
# For each scenario (idle, then under stress-ng) it runs cyclictest and
# latencyd in turn, A B A B ..., PAIRS times each, with one SCHED_FIFO
# thread per CPU at the same priority and interval, memory locked and
# /dev/cpu_dma_latency held at 0 by both. Each run writes cyclictest's
# JSON with a 1 µs histogram; percentiles are computed from those
# histograms by the same code for both tools, pooled over the runs.
# Prints per CPU: min, p50, p99, avg, max for each tool and the ratio
# latencyd / cyclictest (lower is better; 1.00 means equal).
#
# Usage: benches/compare_cyclictest.sh
# Environment: LATENCYD (binary), PAIRS (3), DURATION (10s), INTERVAL_US
# (1000), PRIORITY (80), HIST_US (20000), SCENARIOS ("idle stress").
# Needs root, cyclictest (rt-tests), stress-ng and python3.
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
pairs=${PAIRS:-3}
duration=${DURATION:-10s}
interval_us=${INTERVAL_US:-1000}
priority=${PRIORITY:-80}
hist_us=${HIST_US:-20000}
scenarios=${SCENARIOS:-idle stress}

[ "$(id -u)" = 0 ] || { echo "run as root: both tools need SCHED_FIFO and mlockall" >&2; exit 2; }
for tool in cyclictest stress-ng python3; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${stress_pid:-}" ] && kill "$stress_pid" 2>/dev/null; true' EXIT
common=(-q -m -S -p "$priority" -i "$interval_us" -D "$duration" -h "$hist_us" --latency 0)

echo "# $(uname -r), $(nproc) CPUs, interval ${interval_us}us, priority $priority, $duration per run, $pairs pairs"
for scenario in $scenarios; do
    stress_pid=
    if [ "$scenario" = stress ]; then
        # CPU, memory and context-switch load on every CPU, bounded in time.
        stress-ng --cpu "$(nproc)" --vm 2 --vm-bytes 256M --switch 1 \
            --timeout $((pairs * 2 * 60 + 60))s >/dev/null 2>&1 &
        stress_pid=$!
        sleep 2
    fi
    for pair in $(seq 1 "$pairs"); do
        cyclictest "${common[@]}" -d 0 --json="$out/$scenario-cyclictest-$pair.json" >/dev/null
        "$bin" measure "${common[@]}" --json="$out/$scenario-latencyd-$pair.json" >/dev/null
    done
    if [ -n "$stress_pid" ]; then
        kill "$stress_pid" 2>/dev/null || true
        wait "$stress_pid" 2>/dev/null || true
        stress_pid=
    fi
done

python3 - "$out" "$pairs" $scenarios <<'PY'
import json, math, sys

out, pairs, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def load(path):
    with open(path) as f:
        return json.load(f)["thread"]

def pooled(runs):
    """Per CPU: histogram, count, overflows, sum, min, max over the runs."""
    cpus = {}
    for threads in runs:
        for t in threads.values():
            c = cpus.setdefault(t["cpu"], {"hist": {}, "n": 0, "over": 0, "sum": 0.0, "min": None, "max": 0})
            in_bins = 0
            for b, k in t["histogram"].items():
                c["hist"][int(b)] = c["hist"].get(int(b), 0) + k
                in_bins += k
            c["over"] += t["cycles"] - in_bins
            c["n"] += t["cycles"]
            c["sum"] += t["avg"] * t["cycles"]
            c["min"] = t["min"] if c["min"] is None else min(c["min"], t["min"])
            c["max"] = max(c["max"], t["max"])
    return cpus

def quantile(c, q):
    """Nearest rank over the 1 us bins; overflowed samples rank last."""
    rank = max(1, math.ceil(q * c["n"]))
    seen = 0
    for b in sorted(c["hist"]):
        seen += c["hist"][b]
        if seen >= rank:
            return b
    return c["max"]

def stats(c):
    return {"min": c["min"], "p50": quantile(c, 0.5), "p99": quantile(c, 0.99),
            "avg": c["sum"] / c["n"], "max": c["max"]}

for scenario in scenarios:
    tools = {tool: pooled([load(f"{out}/{scenario}-{tool}-{i}.json") for i in range(1, pairs + 1)])
             for tool in ("cyclictest", "latencyd")}
    print(f"\n## {scenario}: latency in us, {pairs} runs of each tool pooled")
    print(f"| CPU | metric | cyclictest | latencyd | ratio |")
    print(f"|---|---|---:|---:|---:|")
    for cpu in sorted(tools["cyclictest"]):
        a, b = stats(tools["cyclictest"][cpu]), stats(tools["latencyd"][cpu])
        for m in ("min", "p50", "p99", "avg", "max"):
            ratio = b[m] / a[m] if a[m] else float("nan")
            fa = f"{a[m]:.2f}" if m == "avg" else str(a[m])
            fb = f"{b[m]:.2f}" if m == "avg" else str(b[m])
            print(f"| {cpu} | {m} | {fa} | {fb} | {ratio:.2f} |")
    # The spread between pairs shows how much of a ratio is noise.
    per_pair = []
    for i in range(1, pairs + 1):
        a = pooled([load(f"{out}/{scenario}-cyclictest-{i}.json")])
        b = pooled([load(f"{out}/{scenario}-latencyd-{i}.json")])
        r_avg = [stats(b[c])["avg"] / stats(a[c])["avg"] for c in a]
        r_p99 = [stats(b[c])["p99"] / max(stats(a[c])["p99"], 1) for c in a]
        per_pair.append(f"pair {i}: avg {sum(r_avg)/len(r_avg):.2f}, p99 {sum(r_p99)/len(r_p99):.2f}")
    print("\nratios per pair (mean over CPUs): " + "; ".join(per_pair))
PY
