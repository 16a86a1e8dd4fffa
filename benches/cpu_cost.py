#!/usr/bin/env python3
"""CPU time per wake-up of the daemon's samplers next to cyclictest's threads.

Runs `cyclictest -q -m -S -d0` and `latencyd run` on the same CPUs, interval
and priority, alternating (A B, B A, ...). Each run is left WARMUP seconds to
settle; then every thread's /proc/PID/task/TID/schedstat is read, again
DURATION seconds later, and the run is stopped. Only that steady-state
stretch counts: start-up (mlockall, histogram allocation, the HTTP server)
is a one-time cost and not what a 24/7 service spends.

schedstat's first field is the thread's time on CPU in nanoseconds, exact
(utime and stime are sampled at the tick and skew with where wake-ups
fall); its third is the number of times it ran, one per wake-up for a
sleeping measurement thread. Per run this prints the process's CPU time,
the measurement threads' (cyclictest's children; latencyd's sampler-cpuN)
with their wake-ups and CPU time per wake-up, and everything else (the
main thread; the daemon's runtime and exporter). Then the median of the
pair ratios latencyd / cyclictest and their range, for the process and for
the time per wake-up.

Idle conditions: both hold /dev/cpu_dma_latency at 0 (cyclictest's default,
`measure.pm_qos = true` for the daemon); PM_QOS=0 runs both without it
(`--laptop`, the daemon's default). Either way both run alike.

Usage: benches/cpu_cost.py    Environment: LATENCYD (target/release/latencyd),
PAIRS (10), WARMUP (3 s), DURATION (15 s), INTERVAL_US (1000),
PRIORITY (80), PM_QOS (1), CYCLICTEST (cyclictest), CONTROL (0; 1 runs
cyclictest in latencyd's place too: the A/A spread the ratios are read
against, and the bias of running second). Needs root.
"""

import os
import random
import signal
import statistics
import subprocess
import sys
import time

from schedstat import threads


def env(name, default):
    return os.environ.get(name, default)


def is_measurement_thread(tool, pid, tid, comm):
    if tool != "latencyd":
        return tid != pid
    return comm.startswith("sampler-cpu")


def run_one(tool, cfg):
    if tool != "latencyd":
        cmd = [cfg["cyclictest"], "-q", "-m", "-S", "-d0", "-p", str(cfg["priority"]),
               "-i", str(cfg["interval_us"])]
        if not cfg["pm_qos"]:
            cmd.append("--laptop")
        environ = os.environ
    else:
        cmd = [cfg["latencyd"], "run", "--listen", f"127.0.0.1:{cfg['port']}"]
        environ = dict(os.environ,
                       LATENCYD_MEASURE__PRIORITY=str(cfg["priority"]),
                       LATENCYD_MEASURE__INTERVAL=f"{cfg['interval_us']}us",
                       LATENCYD_MEASURE__PM_QOS="true" if cfg["pm_qos"] else "false")
    proc = subprocess.Popen(cmd, env=environ, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(cfg["warmup"])
        before = threads(proc.pid)
        t0 = time.monotonic()
        time.sleep(cfg["duration"])
        after = threads(proc.pid)
        elapsed = time.monotonic() - t0
        if proc.poll() is not None:
            sys.exit(f"{tool} exited early with status {proc.returncode}: {' '.join(cmd)}")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    total = other = meas_ns = meas_runs = 0
    meas_threads = 0
    for tid, (comm, ns, runs) in after.items():
        if tid not in before:
            sys.exit(f"{tool}: thread {tid} ({comm}) started during the measured stretch")
        d_ns, d_runs = ns - before[tid][1], runs - before[tid][2]
        total += d_ns
        if is_measurement_thread(tool, proc.pid, tid, comm):
            meas_ns += d_ns
            meas_runs += d_runs
            meas_threads += 1
        else:
            other += d_ns
    if meas_threads == 0 or meas_runs == 0:
        sys.exit(f"{tool}: no measurement thread ran in the measured stretch")
    return {
        "tool": tool,
        "elapsed": elapsed,
        "total_ms": total / 1e6,
        "threads": meas_threads,
        "wakeups": meas_runs,
        "per_wakeup_us": meas_ns / meas_runs / 1e3,
        "other_ms": other / 1e6,
    }


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: both tools need SCHED_FIFO and mlockall")
    cfg = {
        "latencyd": env("LATENCYD", "target/release/latencyd"),
        "cyclictest": env("CYCLICTEST", "cyclictest"),
        "pairs": max(1, int(env("PAIRS", "10"))),
        "warmup": float(env("WARMUP", "3")),
        "duration": float(env("DURATION", "15")),
        "interval_us": int(env("INTERVAL_US", "1000")),
        "priority": int(env("PRIORITY", "80")),
        "pm_qos": env("PM_QOS", "1") == "1",
        "port": 20000 + random.randrange(20000),
        "control": env("CONTROL", "0") == "1",
    }
    if not os.access(cfg["latencyd"], os.X_OK):
        sys.exit(f"no latencyd binary at {cfg['latencyd']} (cargo build --release)")
    version = subprocess.run([cfg["latencyd"], "--version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    if "fault-injection" in version:
        sys.exit(f"{cfg['latencyd']} is {version}: its samplers' clock is wrapped for the "
                 "tests; measure a plain `cargo build --release`")
    print(f"# {os.uname().release}, {os.cpu_count()} CPUs, interval {cfg['interval_us']} us, "
          f"priority {cfg['priority']}, {cfg['warmup']:g} s settling + {cfg['duration']:g} s "
          f"measured per run, cpu_dma_latency 0: {cfg['pm_qos']}")
    print(f"{'tool':<14}{'process ms':>11}{'threads':>8}{'wake-ups':>10}{'us/wake-up':>11}"
          f"{'rest ms':>9}")
    pairs = []
    second = "cyclictest(2)" if cfg["control"] else "latencyd"
    for i in range(cfg["pairs"]):
        # A B, then B A: whatever favours the first or the second run of a
        # pair (the page cache, the host's other guests) falls on both.
        order = ("cyclictest", second) if i % 2 == 0 else (second, "cyclictest")
        pair = {}
        for tool in order:
            r = run_one(tool, cfg)
            print(f"{r['tool']:<14}{r['total_ms']:>11.1f}{r['threads']:>8}{r['wakeups']:>10}"
                  f"{r['per_wakeup_us']:>11.2f}{r['other_ms']:>9.1f}", flush=True)
            pair[tool] = r
        pairs.append((pair["cyclictest"], pair[second]))

    def summary(label, key):
        ratios = sorted(b[key] / a[key] for a, b in pairs)
        print(f"{label}: median {statistics.median(ratios):.3f} "
              f"(range {ratios[0]:.3f} to {ratios[-1]:.3f}, {len(ratios)} pairs)")

    print(f"\n{second} / cyclictest, pair ratios")
    # Per unit of work: a run's CPU time scaled by its wake-ups, so a
    # stretch a few wake-ups longer does not count as cost.
    for p in pairs:
        for r in p:
            r["process_per_wakeup_us"] = r["total_ms"] * 1e3 / r["wakeups"]
    summary("process CPU time per wake-up", "process_per_wakeup_us")
    summary("measurement thread CPU time per wake-up", "per_wakeup_us")
    summary("process CPU time", "total_ms")


if __name__ == "__main__":
    main()
