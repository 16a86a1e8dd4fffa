#!/usr/bin/env python3
"""The analysis half of benches/compare_cyclictest.sh.

Reads the cyclictest-format JSON files a comparison wrote,
DIR/SCENARIO-TOOL-PAIR.json with TOOL cyclictest or latencyd and PAIR
1..PAIRS, and prints per scenario: each tool's latencies pooled over its
runs, and the median over pairs of the ratio latencyd / cyclictest with
a 95 % interval of that median.

A pair's ratio is the geometric mean over CPUs of the per-CPU ratios.
The arithmetic mean of ratios is biased upwards whenever they spread:
CPUs at 2.0 and 0.5 average 1.25, and swapping the two tools gives 1.25
again. Under stress a VM's per-CPU p99 ratios spread by a factor of
1.4 (sd of the log ratio ~0.3), which put cyclictest against itself at
1.08 (95 % interval 1.02 to 1.14) in 150 pairs; see docs/benchmarks.md.
The geometric mean turns into its reciprocal when the tools are swapped,
so identical tools have a median of 1 whatever the spread.

Usage: [PERIODS=N] benches/compare_cyclictest.py DIR PAIRS SCENARIO...
(PERIODS: how many periods a run lasts, -D over -i)
"""
import json
import math
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)["thread"]
    except FileNotFoundError:
        sys.exit(f"{path} is missing: DIR must hold SCENARIO-TOOL-PAIR.json for both "
                 "tools and every pair from 1 to PAIRS (KEEP= of compare_cyclictest.sh)")
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"{path} is not cyclictest's JSON with a 'thread' object: {e}")


def pooled(runs):
    """Per CPU: histogram, count, overflows, sums, min and max over the runs."""
    cpus = {}
    for threads in runs:
        for t in threads.values():
            c = cpus.setdefault(t["cpu"], {"hist": {}, "n": 0, "over": 0, "own_sum": 0.0,
                                           "bin_sum": 0, "in_bins": 0, "min": None, "max": 0})
            in_bins = 0
            for b, k in t["histogram"].items():
                c["hist"][int(b)] = c["hist"].get(int(b), 0) + k
                c["bin_sum"] += int(b) * k
                in_bins += k
            c["in_bins"] += in_bins
            c["over"] += t["cycles"] - in_bins
            c["n"] += t["cycles"]
            c["own_sum"] += t["avg"] * t["cycles"]
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
    """The average is over the 1 us bins (each sample cut to whole us, as
    cyclictest's own avg is); own_avg is the tool's own avg field."""
    return {"min": c["min"], "p50": quantile(c, 0.5), "p99": quantile(c, 0.99),
            "avg": c["bin_sum"] / max(c["in_bins"], 1), "max": c["max"],
            "own_avg": c["own_sum"] / max(c["n"], 1)}


def pair_ratio(a, b, metric):
    """Geometric mean over the CPUs of b's metric over a's. A p99 under
    1 us counts as 1 us (its bin is 0), an average under 1 ns as 1 ns, on
    both sides alike, so that every ratio exists."""
    floor = 1 if metric == "p99" else 1e-3
    logs = [math.log(max(stats(b[c])[metric], floor) / max(stats(a[c])[metric], floor))
            for c in a]
    return math.exp(sum(logs) / len(logs))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def median_ci(xs):
    """A distribution-free 95 % interval for the median: order statistics
    k and n-k+1, k the largest with P(Binomial(n, 1/2) < k) <= 2.5 %."""
    n, xs = len(xs), sorted(xs)
    k, below = 0, 0.0
    while k < n // 2 and below + math.comb(n, k) / 2**n <= 0.025:
        below += math.comb(n, k) / 2**n
        k += 1
    return (xs[k - 1], xs[n - k]) if k >= 1 else None


def report(out, pairs, scenario, expected_periods):
    # Each tool's runs, read once: runs[tool][i - 1] is pair i's.
    runs = {tool: [load(f"{out}/{scenario}-{tool}-{i}.json") for i in range(1, pairs + 1)]
            for tool in ("cyclictest", "latencyd")}
    tools = {tool: pooled(runs[tool]) for tool in runs}
    for i in range(1, pairs + 1):
        cpus = {tool: sorted(t["cpu"] for t in runs[tool][i - 1].values()) for tool in runs}
        if cpus["cyclictest"] != cpus["latencyd"] or not cpus["cyclictest"]:
            sys.exit(f"{scenario}, pair {i}: cyclictest measured CPUs {cpus['cyclictest']}, "
                     f"latencyd {cpus['latencyd']}; a pair compares the same CPUs")
    print(f"\n## {scenario}: latency in us, {pairs} runs of each tool pooled")
    print("| CPU | metric | cyclictest | latencyd | ratio |")
    print("|---|---|---:|---:|---:|")
    for cpu in sorted(tools["cyclictest"]):
        a, b = stats(tools["cyclictest"][cpu]), stats(tools["latencyd"][cpu])
        for m in ("min", "p50", "p99", "avg", "max"):
            ratio = b[m] / a[m] if a[m] else float("nan")
            fa = f"{a[m]:.2f}" if m == "avg" else str(a[m])
            fb = f"{b[m]:.2f}" if m == "avg" else str(b[m])
            print(f"| {cpu} | {m} | {fa} | {fb} | {ratio:.2f} |")
    # The spread between pairs shows how much of a ratio is noise.
    per_pair, pair_ratios = [], []
    for i in range(1, pairs + 1):
        a, b = pooled([runs["cyclictest"][i - 1]]), pooled([runs["latencyd"][i - 1]])
        pair_ratios.append(tuple(pair_ratio(a, b, m) for m in ("avg", "p99", "own_avg")))
        per_pair.append(f"pair {i}: avg {pair_ratios[-1][0]:.2f}, p99 {pair_ratios[-1][1]:.2f}, "
                        f"own-avg {pair_ratios[-1][2]:.2f}")
    overflows = {tool: sum(c["over"] for c in tools[tool].values()) for tool in tools}
    print(f"\nsamples past the histogram (left out of avg): "
          f"cyclictest {overflows['cyclictest']}, latencyd {overflows['latencyd']}")
    # Periods per CPU and run: the tools should have run alike long.
    # cyclictest runs its -D, one period per interval, and skips the
    # periods a late wake-up overran without saying how many; latencyd
    # counts them ("missed"). Samples kept are both tools' "cycles".
    cycles = {tool: sorted(t["cycles"] for threads in runs[tool] for t in threads.values())
              for tool in runs}
    periods = sorted(t["cycles"] + t.get("missed", 0)
                     for threads in runs["latencyd"] for t in threads.values())
    print(f"periods per CPU and run (median): cyclictest {expected_periods} (its -D over -i), "
          f"latencyd {periods[len(periods) // 2]} (samples + missed)")
    print("samples kept per CPU and run (median): "
          f"cyclictest {cycles['cyclictest'][len(cycles['cyclictest']) // 2]}, "
          f"latencyd {cycles['latencyd'][len(cycles['latencyd']) // 2]}")
    print("ratios per pair (geometric mean over CPUs): " + "; ".join(per_pair))
    for k, name in ((0, "avg"), (1, "p99"), (2, "own-avg (fields, not like for like)")):
        xs = [r[k] for r in pair_ratios]
        ci = median_ci(xs)
        ci_text = f", 95% interval of the median {ci[0]:.2f} to {ci[1]:.2f}" if ci else ""
        print(f"median pair ratio {name}: {median(xs):.2f} "
              f"(range {min(xs):.2f} to {max(xs):.2f}{ci_text})")


def main(argv):
    if len(argv) < 4 or not argv[2].isdigit() or int(argv[2]) < 1:
        sys.exit("usage: compare_cyclictest.py DIR PAIRS SCENARIO... "
                 "(PAIRS a whole number from 1)")
    # The periods a run of cyclictest lasts: its -D over its -i, when the
    # caller says them (compare_cyclictest.sh does).
    expected = os.environ.get("PERIODS", "unknown")
    for scenario in argv[3:]:
        report(argv[1], int(argv[2]), scenario, expected)


if __name__ == "__main__":
    main(sys.argv)
