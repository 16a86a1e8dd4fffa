#!/usr/bin/env python3
"""Idle against loaded: is `measure --load` a real load?

Runs `latencyd measure` idle and with `--load PROFILE`, alternating (idle
first in odd pairs, loaded first in even ones, so that neither always runs
second), PAIRS pairs of DURATION seconds each, and reads each run's JSON:
the maximum over all CPUs, the worst CPU's p99 and p99.9, the mean over all
samples, and the load's throughput. Prints every run, then per statistic
the median of the pair ratios loaded / idle and their range.

Both runs of a pair measure under the same conditions: the same interval
and priority, /dev/cpu_dma_latency held at 0 (measure's default, as
cyclictest), the same CPUs.

Usage: benches/idle_vs_loaded.py   Environment: LATENCYD
(target/release/latencyd), PAIRS (6), DURATION (20 s), INTERVAL_US (200),
PRIORITY (95), PROFILE (rteval), MARKDOWN (0; 1 prints the table as
Markdown). Needs root, stress-ng and rt-tests.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

LATENCYD = os.environ.get("LATENCYD", "target/release/latencyd")
PAIRS = int(os.environ.get("PAIRS", "6"))
DURATION = int(os.environ.get("DURATION", "20"))
INTERVAL_US = int(os.environ.get("INTERVAL_US", "200"))
PRIORITY = int(os.environ.get("PRIORITY", "95"))
PROFILE = os.environ.get("PROFILE", "rteval")
MARKDOWN = os.environ.get("MARKDOWN", "0") == "1"


def run(loaded, work, index):
    path = os.path.join(work, f"run{index}.json")
    cmd = [LATENCYD, "measure", "-q", "-m", f"-p{PRIORITY}", f"-i{INTERVAL_US}",
           f"-D{DURATION}", "--json", path]
    if loaded:
        cmd += ["--load", PROFILE]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr}")
    with open(path) as f:
        doc = json.load(f)
    threads = list(doc["thread"].values())
    cycles = sum(t["cycles"] for t in threads)
    row = {
        "max": max(t["max"] for t in threads),
        "p99": max(t["p99"] for t in threads),
        "p999": max(t["p999"] for t in threads),
        "avg": sum(t["avg"] * t["cycles"] for t in threads) / max(cycles, 1),
        "samples": cycles,
        "load": "",
    }
    load = doc["latencyd"].get("load")
    if load:
        rates = [f"{g['name']} " + ", ".join(f"{t['what']} {t['rate']:.0f} {t['unit']}"
                                               for t in g["throughput"])
                 for g in load["generators"]]
        row["load"] = "; ".join(rates)
        if not load["clean"]:
            sys.exit(f"the load did not run as asked: {load}")
    return row


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: SCHED_FIFO and /dev/cpu_dma_latency")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for pair in range(PAIRS):
            order = [False, True] if pair % 2 == 0 else [True, False]
            got = {}
            for loaded in order:
                got[loaded] = run(loaded, work, len(rows) * 2 + int(loaded))
            rows.append(got)
    stats = ["max", "p99", "p999", "avg"]
    if MARKDOWN:
        print("| pair | run | max µs | p99 µs | p99.9 µs | avg µs | load's throughput |")
        print("|---|---|---|---|---|---|---|")
    for i, got in enumerate(rows):
        for loaded in (False, True):
            r = got[loaded]
            label = f"--load {PROFILE}" if loaded else "idle"
            if MARKDOWN:
                print(f"| {i + 1} | {label} | {r['max']} | {r['p99']} | {r['p999']} | "
                      f"{r['avg']:.1f} | {r['load'] or '-'} |")
            else:
                print(f"pair {i + 1} {label:<16} max {r['max']:>6} p99 {r['p99']:>5} "
                      f"p99.9 {r['p999']:>5} avg {r['avg']:>6.1f} us  {r['load']}")
    print()
    print(f"loaded / idle, {PAIRS} pairs of {DURATION} s at {INTERVAL_US} us, "
          f"priority {PRIORITY}, profile {PROFILE}:")
    for s in stats:
        ratios = [got[True][s] / got[False][s] for got in rows if got[False][s] > 0]
        print(f"  {s:<5} median {statistics.median(ratios):.2f} "
              f"(range {min(ratios):.2f}-{max(ratios):.2f}; "
              f"{sum(r > 1 for r in ratios)} of {len(ratios)} pairs higher loaded)")


if __name__ == "__main__":
    main()
