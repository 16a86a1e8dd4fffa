#!/usr/bin/env python3
"""What observing a CPU costs: the daemon sampling CPU 0 without [observe]
(A) and with [observe] on CPU 1 (B), alternating A B, B A, ..., under the
same load on CPU 1 in both arms.

LOAD chooses what runs on the observed CPU:
  idle   nothing;
  rt1k   a 1 kHz real-time task (cyclictest -t1 -a1 -p50 -i1000 -q);
  irq    interrupt load: a SCHED_OTHER timer storm (stress-ng --timer 1
         --timer-freq 20000 pinned to CPU 1), each expiry a local timer
         interrupt, an hrtimer and a wake-up there.

Per run, after WARMUP seconds, every thread's /proc/PID/task/TID/schedstat
is read, again DURATION seconds later (exact CPU time, not tick-sampled):
the daemon's whole process, its observer thread (latencyd-observe) and,
with rt1k, the workload's CPU time per wake-up (the kernel's tracing of
its events is spent in its own context, on the observed CPU). The
samplers' latency on CPU 0 is the daemon's /api/v1/latency at the end;
the events per second the observed CPU produced come from
/api/v1/observe's counters over the same stretch, with events lost.

Prints each run, then the medians of the pair ratios B/A with their range
and the observer's own CPU per second and per thousand events.

Usage: LOAD=rt1k benches/observe_cost.py   Environment: LATENCYD
(target/release/latencyd), PAIRS (5), WARMUP (3 s), DURATION (15 s).
Needs root (real-time samplers, tracefs) and two CPUs.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import daemon
from schedstat import thread, threads


def env(name, default):
    return os.environ.get(name, default)


LATENCYD = env("LATENCYD", "target/release/latencyd")
PAIRS = int(env("PAIRS", "5"))
WARMUP = float(env("WARMUP", "3"))
DURATION = float(env("DURATION", "15"))
LOAD = env("LOAD", "idle")


def schedstat(pid):
    """{comm/tid: (ns_on_cpu, times_run)} of every thread of pid."""
    return {f"{comm}/{tid}": (ns, runs) for tid, (comm, ns, runs) in threads(pid).items()}


def total(stats, prefix=""):
    return sum(ns for name, (ns, _) in stats.items() if name.startswith(prefix))


def start_load():
    if LOAD == "rt1k":
        return subprocess.Popen(
            ["cyclictest", "-q", "-t1", "-a1", "-p50", "-i1000", "-m"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if LOAD == "irq":
        return subprocess.Popen(
            ["taskset", "-c", "1", "stress-ng", "--timer", "1", "--timer-freq", "20000", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return None


def workload_thread(load):
    """(pid, tid) of cyclictest's measuring thread."""
    if load is None or LOAD != "rt1k":
        return None
    for tid in os.listdir(f"/proc/{load.pid}/task"):
        if int(tid) != load.pid:
            return load.pid, int(tid)
    return None


def thread_ns(pid_tid):
    return thread(*pid_tid)


def run(observe, workdir):
    config = os.path.join(workdir, "latencyd.toml")
    with open(config, "w") as f:
        f.write(
            '[measure]\ncpus = "0"\nwarmup = "0s"\n'
            '[export]\nlisten = "127.0.0.1:0"\n[record]\nenabled = false\n'
            f'[observe]\nenabled = {"true" if observe else "false"}\ncpus = "1"\n'
        )
    load = start_load()
    proc, addr = daemon.start(LATENCYD, config)
    time.sleep(WARMUP)
    work = workload_thread(load)
    before = schedstat(proc.pid)
    work_before = thread_ns(work) if work else None
    obs_before = json.loads(daemon.get(addr, "/api/v1/observe"))
    time.sleep(DURATION)
    after = schedstat(proc.pid)
    work_after = thread_ns(work) if work else None
    obs_after = json.loads(daemon.get(addr, "/api/v1/observe"))
    latency = json.loads(daemon.get(addr, "/api/v1/latency"))["cpus"][0]
    proc.terminate()
    proc.wait(timeout=10)
    if load is not None:
        load.terminate()
        load.wait(timeout=10)
    if observe and not obs_after["available"]:
        sys.exit(f"the observer is unavailable: {obs_after['reason']}")
    row = {
        "cpu_ms": (total(after) - total(before)) / 1e6,
        "observer_ms": (total(after, "latencyd-observ") - total(before, "latencyd-observ")) / 1e6,
        "events": obs_after["observer"]["events"] - obs_before["observer"]["events"],
        "lost": sum(c["lost_events"] for c in obs_after["cpus"])
        - sum(c["lost_events"] for c in obs_before["cpus"]),
        "avg_ns": latency["avg_ns"],
        "p99_ns": latency["p99_ns"],
        "max_ns": latency["max_ns"],
    }
    if work_before:
        runs = work_after[1] - work_before[1]
        row["work_ns_per_wakeup"] = (work_after[0] - work_before[0]) / max(runs, 1)
    return row


def main():
    if not os.path.exists(LATENCYD):
        sys.exit(f"{LATENCYD} not found: cargo build --release first")
    if "fault-injection" in subprocess.run(
        [LATENCYD, "--version"], capture_output=True, text=True
    ).stdout:
        sys.exit("a fault-injection build: rebuild with plain `cargo build --release`")
    if os.geteuid() != 0:
        sys.exit("needs root: real-time samplers and tracefs")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(PAIRS):
            order = [(False, "A"), (True, "B")]
            if i % 2:
                order.reverse()
            pair = {}
            for observe, arm in order:
                pair[arm] = r = run(observe, workdir)
                work = (
                    f", workload {r['work_ns_per_wakeup'] / 1e3:.2f} us CPU per wake-up"
                    if "work_ns_per_wakeup" in r
                    else ""
                )
                print(
                    f"pair {i + 1} {arm} (observe {'on' if observe else 'off'}, load {LOAD}): "
                    f"CPU {r['cpu_ms']:.1f} ms / {DURATION:.0f} s (observer {r['observer_ms']:.1f} ms), "
                    f"{r['events'] / DURATION:.0f} events/s ({r['lost']} lost), sampler CPU 0 avg "
                    f"{r['avg_ns'] / 1e3:.2f} us, p99 {r['p99_ns'] / 1e3:.1f} us, max "
                    f"{r['max_ns'] / 1e3:.1f} us{work}",
                    flush=True,
                )
            rows.append(pair)

    def ratio(key):
        values = [p["B"][key] / p["A"][key] for p in rows]
        return f"median {statistics.median(values):.3f} (range {min(values):.3f} to {max(values):.3f})"

    events = statistics.median(p["B"]["events"] / DURATION for p in rows)
    observer_ms = statistics.median(p["B"]["observer_ms"] / DURATION for p in rows)
    extra_ms = statistics.median((p["B"]["cpu_ms"] - p["A"]["cpu_ms"]) / DURATION for p in rows)
    print(f"\nload {LOAD}, {PAIRS} pairs:")
    print(f"events per second on the observed CPU: median {events:.0f}")
    print(
        f"observer thread: {observer_ms:.2f} ms of CPU per second, "
        f"{observer_ms * 1e6 / max(events, 1):.0f} ns per event"
    )
    print(f"daemon CPU B - A: median {extra_ms:.2f} ms per second; B/A {ratio('cpu_ms')}")
    for key in ("avg_ns", "p99_ns", "max_ns"):
        print(f"sampler CPU 0 {key[:-3]} latency B/A: {ratio(key)}")
    if all("work_ns_per_wakeup" in p[a] for p in rows for a in "AB"):
        print(f"workload CPU per wake-up B/A: {ratio('work_ns_per_wakeup')}")


if __name__ == "__main__":
    main()
