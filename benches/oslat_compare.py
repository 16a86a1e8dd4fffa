#!/usr/bin/env python3
"""`latencyd oslat` beside the real oslat (rt-tests) on the same CPU with
the same command line, run alternately (latencyd, oslat, latencyd,
oslat ...), PAIRS pairs of RUN_SECS each, both in their defaults (no PM
QoS request from either: this is a comparison of defaults).

Per run, from each tool's --json: the maximum gap (µs), the gaps of at
least 5 µs per second (interruptions a polling thread loses time to:
ticks, interrupts, a preemption), and the loop's turns per second (its
sensitivity: a faster loop splits time more finely).

Prints per pair latencyd over oslat for each figure, and the median
ratio with its range; beside it, the noise of oslat against itself: the
ratio of each oslat run to the next one, median and range. Agreement
means latencyd's ratios fall within the range oslat has against itself.
Writes all of it as JSON to OSLAT_OUT (target/oslat-compare.json).

Run as root (mlockall; -f needs SCHED_FIFO) after
`cargo build --release`:
    benches/oslat_compare.py
Environment: LATENCYD (target/release/latencyd), PAIRS (5), RUN_SECS
(20), CPU (the last online CPU), EXTRA (more options for both, e.g.
"-f 1" or "-w memmove -m 4K"), OSLAT_OUT.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

LATENCYD = os.path.abspath(os.environ.get("LATENCYD", "target/release/latencyd"))
PAIRS = int(os.environ.get("PAIRS", "5"))
RUN_SECS = int(os.environ.get("RUN_SECS", "20"))
EXTRA = os.environ.get("EXTRA", "").split()
OUT = os.environ.get("OSLAT_OUT", "target/oslat-compare.json")


def last_cpu():
    with open("/sys/devices/system/cpu/online") as f:
        text = f.read().strip()
    return text.split(",")[-1].split("-")[-1]


CPU = os.environ.get("CPU", last_cpu())


def run(tool, workdir, index):
    path = os.path.join(workdir, f"{tool}-{index}.json")
    command = [LATENCYD, "oslat"] if tool == "latencyd" else ["oslat"]
    command += ["-c", CPU, "-D", str(RUN_SECS), "-q", f"--json={path}"] + EXTRA
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr or done.stdout}")
    with open(path) as f:
        document = json.load(f)
    thread = document["thread"]["0"]
    gaps = sum(n for label, n in thread["histogram"].items() if float(label) >= 5)
    turns = sum(thread["histogram"].values())
    return {
        "max_us": thread["max"],
        "gaps_5us_per_s": gaps / thread["duration"],
        "turns_per_s": turns / thread["duration"],
    }


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: oslat locks its memory")
    runs = {"latencyd": [], "oslat": []}
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(PAIRS):
            for tool in ("latencyd", "oslat"):
                runs[tool].append(run(tool, workdir, i))
                r = runs[tool][-1]
                print(f"pair {i + 1} {tool:8} max {r['max_us']:6} us  "
                      f"gaps>=5us {r['gaps_5us_per_s']:8.1f}/s  turns {r['turns_per_s'] / 1e6:6.1f} M/s",
                      flush=True)
    figures = ["max_us", "gaps_5us_per_s", "turns_per_s"]
    result = {"cpu": CPU, "run_secs": RUN_SECS, "pairs": PAIRS, "extra": EXTRA, "runs": runs}
    for figure in figures:
        ours = [a[figure] / b[figure] for a, b in zip(runs["latencyd"], runs["oslat"]) if b[figure]]
        theirs = [a[figure] / b[figure] for a, b in zip(runs["oslat"], runs["oslat"][1:]) if b[figure]]
        result[figure] = {"latencyd_over_oslat": spread(ours), "oslat_over_oslat": spread(theirs)}
        o, t = result[figure]["latencyd_over_oslat"], result[figure]["oslat_over_oslat"]
        print(f"{figure:15} latencyd/oslat median {o['median']:.3f} ({o['min']:.3f}-{o['max']:.3f}); "
              f"oslat/oslat median {t['median']:.3f} ({t['min']:.3f}-{t['max']:.3f})")
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
