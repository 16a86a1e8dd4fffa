#!/usr/bin/env python3
"""What bursts leave behind in a locked daemon: resident memory after
repeated bursts of work, for two builds of latencyd run alternately
(A B A B ...), each a fresh `latencyd run` with the chaos soak's
configuration (TLS, basic auth, the record every second, forensics, the
observer on every CPU; benches/chaos_soak.py).

Each run waits WARM_SECS, then CYCLES times: 300 idle connections held
for 5 s, 40 record range reads at once (half the clients gone at
300 ms), 200 requests with a wrong password at once, then 11 s of quiet
(the daemon's 10 s status tick gives freed memory back); VmRSS is read at
the end of each cycle. Prints each run's RSS after the first and the
last cycle, and per pair B's last over A's last; the median of those
ratios with their range. Writes the same as JSON to BURST_OUT
(target/burst-memory.json).

Run as root (SCHED_FIFO, mlockall, tracefs), after building both:
    BURST_A=old/latencyd BURST_B=target/release/latencyd \\
        benches/burst_memory.py
Environment: BURST_A, BURST_B, PAIRS (5), CYCLES (6), WARM_SECS
(20), BURST_OUT.
"""

import importlib.util
import json
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("chaos_soak", os.path.join(HERE, "chaos_soak.py"))
soak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(soak)

BINARIES = {"A": os.environ.get("BURST_A"), "B": os.environ.get("BURST_B")}
PAIRS = int(os.environ.get("PAIRS", "5"))
CYCLES = int(os.environ.get("CYCLES", "6"))
WARM_SECS = int(os.environ.get("WARM_SECS", "20"))
OUT = os.environ.get("BURST_OUT", "target/burst-memory.json")


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def idle_burst(addr):
    sockets = []
    for _ in range(300):
        try:
            sockets.append(socket.create_connection(addr, timeout=5,
                                                    source_address=(soak.FLOODER, 0)))
        except OSError:
            break
    time.sleep(5)
    for s in sockets:
        s.close()


def one_run(binary):
    """RSS (KiB) at the end of each cycle of one fresh daemon."""
    soak.LATENCYD = os.path.abspath(binary)
    dir = tempfile.mkdtemp(prefix="latencyd-burst-")
    os.chmod(dir, 0o750)
    config = soak.setup(dir)
    proc, addr = soak.start_daemon(config, f"{dir}/latencyd.log")
    ctx = {"addr": addr}
    try:
        time.sleep(WARM_SECS)
        series = []
        for _ in range(CYCLES):
            idle_burst(addr)
            soak.range_flood(ctx)
            soak.password_flood(ctx)
            time.sleep(11)
            series.append(rss_kib(proc.pid))
        return series
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    if os.geteuid() != 0:
        sys.exit("burst_memory runs as root (SCHED_FIFO, mlockall, tracefs)")
    if not all(BINARIES.values()):
        sys.exit("set BURST_A and BURST_B to the two binaries to compare")
    runs = []
    for pair in range(PAIRS):
        for label in ("A", "B"):
            series = one_run(BINARIES[label])
            runs.append({"pair": pair, "build": label, "rss_kib": series})
            print(f"pair {pair} {label}: RSS after cycle 1 {series[0]} KiB, "
                  f"after cycle {CYCLES} {series[-1]} KiB", flush=True)
    ratios = []
    for pair in range(PAIRS):
        a, b = (next(r["rss_kib"][-1] for r in runs if r["pair"] == pair and r["build"] == x)
                for x in ("A", "B"))
        ratios.append(b / a)
    summary = {"binaries": BINARIES, "cycles": CYCLES, "runs": runs,
               "last_rss_ratio_b_over_a": {"median": round(statistics.median(ratios), 3),
                                           "min": round(min(ratios), 3),
                                           "max": round(max(ratios), 3)}}
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary["last_rss_ratio_b_over_a"]))


if __name__ == "__main__":
    main()
