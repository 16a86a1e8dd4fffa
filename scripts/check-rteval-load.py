#!/usr/bin/python3
"""Loaded latency beside rteval's own loaded run: rteval's loads with its
cyclictest module on real cyclictest, against the same cyclictest module
reading `latencyd measure --load rteval` (latencyd's own load), in
alternating runs; rteval's parser reads both, so the statistics are
computed the same way.

rteval (https://git.kernel.org/pub/scm/utils/rteval/rteval.git) is not part
of this project: point this script at your own checkout. Its loads are
driven as rteval drives them — each load module's own thread, started,
released and stopped — with rteval's defaults: hackbench (-P, three groups
per CPU of the largest node, 1000 loops of 1000 bytes, restarted as it
ends) and stress-ng through its stressng module (`--cpu N` on every CPU,
standing in for rteval's kernel compile, whose kernel tarball is not in
its repository). latencyd's `rteval` profile runs hackbench the same way
and stress-ng `--cpu N --vm N --vm-bytes 64M`. The measurement is rteval's
cyclictest line (interval 100 us, priority 95, one thread per CPU, a
histogram BUCKETS wide, default 20000, as check-rteval-cyclictest.py
explains).

PAIRS pairs (default 3), each rteval then latencyd, SECONDS each (default
30). Fails unless every run has statistics and latencyd's median and mean
of the system fall within the spread of rteval's runs (their range,
widened by a quarter of the larger value and 1 us, as the unloaded
comparison widens it); maxima and p99 are printed, not judged.

Usage: scripts/check-rteval-load.py RTEVAL_DIR [SECONDS] [PAIRS]
Environment: LATENCYD (binary; default target/release/latencyd), BUCKETS.
Needs root, cyclictest and hackbench (rt-tests), stress-ng, and Python's
lxml and libxml2 bindings (python3-lxml python3-libxml2).
"""

import importlib.util
import os
import shutil
import statistics as stats
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def sibling(name):
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"),
                                                  os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_rteval_loads(rteval_dir, log, rtevalConfig, cpus):
    """rteval's hackbench and stressng load modules, set up and released as
    rteval's load container does; returns them running."""
    sys.path.insert(0, rteval_dir)
    from rteval.modules.loads import hackbench, stressng
    import rteval.cpulist_utils as cpulist_utils
    modules = []
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    for name, module, extra in [
        ("hackbench", hackbench, {}),
        ("stressng", stressng, {"option": "cpu", "arg": str(len(cpus)), "timeout": None}),
    ]:
        cfg = rtevalConfig({}, logger=log)
        params = {k: p.get("default") for k, p in module.ModuleParameters().items()}
        params.update(extra)
        params.update({
            "numcores": len(cpus),
            "memsize": (mem_gb, "GB"),
            "cpulist": "",
            "logging": False,
            "builddir": tempfile.mkdtemp(prefix="rteval-build-"),
            "srcdir": "/nonexistent",
            "reportdir": tempfile.gettempdir(),
        })
        cfg.AppendConfig(name, params)
        load = module.create(cfg.GetSection(name), log)
        load.start()
        modules.append(load)
    deadline = time.time() + 30
    while not all(m.isReady() or not m.WorkloadWillRun() for m in modules):
        if time.time() > deadline:
            sys.exit("rteval's loads did not get ready within 30 s")
        time.sleep(0.2)
    for load in modules:
        load.setStart()
    # rteval lets its loads run up before it measures.
    time.sleep(2)
    del cpulist_utils
    return modules


def stop_rteval_loads(modules):
    for load in modules:
        load.setStop()
    for load in modules:
        load.join(30)


def summary(report):
    return report.get("system", {})


def main():
    if len(sys.argv) not in (2, 3, 4):
        sys.exit("usage: scripts/check-rteval-load.py RTEVAL_DIR [SECONDS] [PAIRS]")
    rteval_dir = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) >= 3 else 30.0
    pairs = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    if os.geteuid() != 0:
        sys.exit("run as root: both tools need SCHED_FIFO")
    for tool, package in [("cyclictest", "rt-tests"), ("hackbench", "rt-tests"),
                          ("stress-ng", "stress-ng")]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing (apt-get install {package})")
    latencyd = os.path.realpath(os.environ.get("LATENCYD", "target/release/latencyd"))
    if not os.access(latencyd, os.X_OK):
        sys.exit(f"no latencyd binary at {latencyd} (cargo build --release)")
    base = sibling("check-rteval-cyclictest")
    mods = base.load_module(rteval_dir)
    Log, rtevalConfig, _, SysTopology, _ = mods
    log = Log()
    log.SetLogVerbosity(Log.ERR)
    cpus = SysTopology().online_cpus()

    runs = []
    with tempfile.TemporaryDirectory() as work:
        real_dir = os.path.join(work, "real")
        shim_dir = os.path.join(work, "latencyd")
        os.mkdir(real_dir)
        os.mkdir(shim_dir)
        os.symlink(shutil.which("cyclictest"), os.path.join(real_dir, "cyclictest"))
        with open(os.path.join(shim_dir, "cyclictest"), "w") as shim:
            shim.write(f'#!/bin/sh\nexec {latencyd} measure --load rteval "$@"\n')
        os.chmod(os.path.join(shim_dir, "cyclictest"), 0o755)
        for pair in range(pairs):
            loads = start_rteval_loads(rteval_dir, log, rtevalConfig, cpus)
            try:
                rteval_run = base.run_with_statistics(mods, real_dir, seconds,
                                                      "rteval's loads + cyclictest")
            finally:
                stop_rteval_loads(loads)
            runs.append(("rteval", pair, rteval_run))
            ours = base.run_with_statistics(mods, shim_dir, seconds,
                                            "latencyd measure --load rteval")
            runs.append(("latencyd", pair, ours))

    fields = ["samples", "minimum", "median", "mean", "maximum", "standard_deviation"]
    print(f"loaded runs, {seconds:g} s each, system node of rteval's report (us)")
    print(f"{'run':<12}{'pair':>5}" + "".join(f"{f[:8]:>10}" for f in fields))
    for label, pair, report in runs:
        row = summary(report)
        print(f"{label:<12}{pair + 1:>5}"
              + "".join(f"{row.get(f, float('nan')):>10.1f}" for f in fields))
    print("load of rteval's runs: rteval's hackbench module (hackbench -P -g "
          f"{3 * len(cpus)} -l 1000 -s 1000, restarted) and stressng module (stress-ng "
          f"--cpu {len(cpus)})")
    print(f"load of latencyd's runs: measure --load rteval (hackbench -P -g {3 * len(cpus)} "
          f"-l 1000 -s 1000, restarted; stress-ng --cpu {len(cpus)} --vm {len(cpus)} "
          "--vm-bytes 64M)")

    failures = []
    theirs = [summary(r) for label, _, r in runs if label == "rteval"]
    ours = [summary(r) for label, _, r in runs if label == "latencyd"]
    if any(not r for r in theirs + ours):
        failures.append("a run has no statistics")
    for field in ("median", "mean"):
        values = [r[field] for r in theirs if field in r]
        if not values:
            continue
        low, high = min(values), max(values)
        spread = 0.25 * high + 1.0
        for r in ours:
            if field in r and not low - spread <= r[field] <= high + spread:
                failures.append(f"latencyd's {field} {r[field]:.1f} is outside rteval's "
                                f"{low:.1f}..{high:.1f} widened by {spread:.1f}")
    for field in ("median", "mean", "maximum"):
        a = [r[field] for r in theirs if field in r]
        b = [r[field] for r in ours if field in r]
        if a and b:
            print(f"{field}: rteval median {stats.median(a):.1f}, latencyd median "
                  f"{stats.median(b):.1f}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("\nlatencyd's loaded medians and means fall within rteval's loaded runs' spread")


if __name__ == "__main__":
    main()
