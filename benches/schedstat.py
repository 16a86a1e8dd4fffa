"""Per-thread CPU time from /proc/PID/task/TID/schedstat, for the Python benches.

schedstat's first field is the thread's time on CPU in nanoseconds, exact
(utime and stime are sampled at the tick and skew with where wake-ups
fall); its third is the number of times it ran. cpu_cost.py,
host_reread.py and observe_cost.py read their threads through this.
"""

import os


def thread(pid, tid):
    """(ns_on_cpu, times_run) of one thread."""
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        ns, _wait, runs = (int(v) for v in f.read().split())
    return ns, runs


def threads(pid):
    """{tid: (comm, ns_on_cpu, times_run)} of a running process; threads
    that end while it is read are left out."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            ns, runs = thread(pid, tid)
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (comm, ns, runs)
    return out
