#!/usr/bin/env python3
"""What re-reading the host's facts costs: the daemon with the facts read
once (host.reread_interval = "0s", A) against read every second (B, 30
times the default of 30 s), alternating A B, B A, ...

Per run, after WARMUP seconds, every thread's /proc/PID/task/TID/schedstat
is read, again DURATION seconds later: the process's CPU time over that
stretch, exact, for the whole process and for its threads other than the
samplers, where the reads run (tokio keeps a blocking thread 10 s after its last job, so
at one read a second the thread that reads is alive at both ends). The
samplers' latency is the daemon's own /api/v1/latency at the end (all
CPUs: count, avg, p99, max), and latencyd_host_facts_read_duration_seconds
the wall time of the last read.

Prints each run, then: the extra CPU time of B per read and per minute at
the default interval; the medians of the pair ratios B/A of avg, p99 and
max latency with their range (a ratio near 1 within the A/A noise of this
machine means no effect on the measurement).

Usage: benches/host_reread.py   Environment: LATENCYD
(target/release/latencyd), PAIRS (6), WARMUP (3 s), DURATION (20 s),
INTERVAL (1ms), CPUS (all). Needs root for real-time samplers (without it
the daemon runs degraded and the latency numbers mean little).
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import daemon
from schedstat import threads


def env(name, default):
    return os.environ.get(name, default)


LATENCYD = env("LATENCYD", "target/release/latencyd")
PAIRS = int(env("PAIRS", "6"))
WARMUP = float(env("WARMUP", "3"))
DURATION = float(env("DURATION", "20"))
INTERVAL = env("INTERVAL", "1ms")
CPUS = env("CPUS", "all")


def cpu_ns(pid):
    """(all threads, all but the samplers) CPU time in ns."""
    total = other = 0
    for comm, ns, _runs in threads(pid).values():
        total += ns
        if not comm.startswith("sampler-cpu"):
            other += ns
    return total, other


def run(reread, workdir):
    config = os.path.join(workdir, "latencyd.toml")
    realtime = "" if os.geteuid() == 0 else "[realtime]\nrequired = false\n"
    with open(config, "w") as f:
        f.write(
            f'[measure]\ncpus = "{CPUS}"\ninterval = "{INTERVAL}"\nwarmup = "0s"\n'
            f'[export]\nlisten = "127.0.0.1:0"\n[record]\nenabled = false\n'
            f'[host]\nreread_interval = "{reread}"\n{realtime}'
        )
    proc, addr = daemon.start(LATENCYD, config)
    time.sleep(WARMUP)
    before = cpu_ns(proc.pid)
    time.sleep(DURATION)
    after = cpu_ns(proc.pid)
    latency = json.loads(daemon.get(addr, "/api/v1/latency"))["cpus"]
    metrics = daemon.get(addr, "/metrics")
    read_s = float(
        re.search(r"^latencyd_host_facts_read_duration_seconds (\S+)$", metrics, re.M).group(1)
    )
    proc.terminate()
    proc.wait(timeout=10)
    count = sum(c["count"] for c in latency)
    return {
        "cpu_ms": (after[0] - before[0]) / 1e6,
        "other_ms": (after[1] - before[1]) / 1e6,
        "avg_ns": sum(c["avg_ns"] * c["count"] for c in latency) / count,
        "p99_ns": max(c["p99_ns"] for c in latency),
        "max_ns": max(c["max_ns"] for c in latency),
        "read_us": read_s * 1e6,
    }


def main():
    if not os.path.exists(LATENCYD):
        sys.exit(f"{LATENCYD} not found: cargo build --release first")
    if "fault-injection" in subprocess.run(
        [LATENCYD, "--version"], capture_output=True, text=True
    ).stdout:
        sys.exit("a fault-injection build: rebuild with plain `cargo build --release`")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(PAIRS):
            order = [("0s", "A"), ("1s", "B")]
            if i % 2:
                order.reverse()
            pair = {}
            for reread, arm in order:
                pair[arm] = run(reread, workdir)
                r = pair[arm]
                print(
                    f"pair {i + 1} {arm} (reread {reread}): CPU {r['cpu_ms']:.2f} ms / "
                    f"{DURATION:.0f} s ({r['other_ms']:.2f} ms not samplers), avg {r['avg_ns'] / 1e3:.2f} us, p99 "
                    f"{r['p99_ns'] / 1e3:.1f} us, max {r['max_ns'] / 1e3:.1f} us, last read "
                    f"{r['read_us']:.0f} us",
                    flush=True,
                )
            rows.append(pair)
    # The samplers' own CPU varies by more than a read costs: the extra is
    # taken from the other threads (runtime, blocking pool), where the
    # reads run.
    extra = [p["B"]["other_ms"] - p["A"]["other_ms"] for p in rows]
    process = [p["B"]["cpu_ms"] / p["A"]["cpu_ms"] for p in rows]
    per_read_ms = statistics.median(extra) / DURATION
    print(
        f"\nextra CPU of one read a second: median {statistics.median(extra):.2f} ms per "
        f"{DURATION:.0f} s (range {min(extra):.2f} to {max(extra):.2f}), so "
        f"{per_read_ms * 1e3:.0f} us per read, {per_read_ms * 2:.2f} ms per minute at the "
        f"default 30 s"
    )
    print(
        f"process CPU B/A: median {statistics.median(process):.3f} (range "
        f"{min(process):.3f} to {max(process):.3f})"
    )
    print(
        f"one read's wall time (the metric): median "
        f"{statistics.median(p[a]['read_us'] for p in rows for a in 'AB'):.0f} us"
    )
    for key in ("avg_ns", "p99_ns", "max_ns"):
        ratios = [p["B"][key] / p["A"][key] for p in rows]
        print(
            f"{key[:-3]} latency B/A: median {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f} to {max(ratios):.3f}, {len(ratios)} pairs)"
        )


if __name__ == "__main__":
    main()
