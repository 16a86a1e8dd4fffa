#!/usr/bin/env python3
"""What timerlat costs in CPU time: latencyd's timerlat against Debian's
rtla timerlat of the same kernel's release, and against latencyd's own
clock_nanosleep sampler, in the kernel matrix's PREEMPT_RT guests.

    benches/timerlat_cost.py [--kernels 6.12-rt-amd64,6.1-rt-amd64] [--pairs 5]
                             [--sampler-interval 1000]

Each guest runs, on CPU 0 at a 1 ms period and alternating A B A B,
`latencyd measure --timerlat -a 0` (A) and `rtla timerlat top -c 0 -q
-P f:95 --dma-latency 0` (B; with -u where the kernel has timerlat_fd,
as latencyd then uses its own threads too), each for 10 s, and reads its
threads' schedstat (ns on the CPU) 1 s after its timerlat thread of
CPU 0 appears and 3 s after that. Both hold
/dev/cpu_dma_latency at 0 (latencyd measure does by default, as
cyclictest). Per period (the 3 s between the two reads / 1 ms):

- the timerlat thread of CPU 0 (latencyd's `timerlat-cpu0` or the
  kernel's `timerlat/0`; rtla's `timerlatu/0` or `timerlat/0`);
- the reader: every other thread of the tool (latencyd's main and drain
  threads and its workload child's main thread; rtla's process);
- latencyd's sampler, which wakes every 1 ms too (`measure` always
  samples); `--sampler-interval 1000000` wakes it once a second instead,
  so that latencyd's timerlat thread runs nearly alone on the CPU as
  rtla's does.

Printed: each pair's figures and the median ratio with its range. The
guests are emulated (QEMU TCG): the ratios compare two programs under
the same emulation, the absolute figures mean nothing for hardware.
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "scripts/kernel-matrix"

SCENARIO = r"""
T=/sys/kernel/tracing
case $(uname -r) in 6.1.*) RTLA=rtla-bookworm;; *) RTLA=rtla-trixie;; esac
u=; [ -e $T/osnoise/per_cpu/cpu0/timerlat_fd ] && u=-u
echo "$u" > /tmp/u; put user /tmp/u
for f in $T/osnoise/*; do [ -f $f ] && echo "${f##*/}=$(cat $f)"; done > /tmp/osnoise.before
# A tool's threads: its own, its children's (latencyd's workload
# process, rtla's user threads) and the kernel's timerlat/0; found once,
# so that a reading is quick.
threads_of() {
    for t in /proc/$1/task/*; do echo $t; done
    for c in $(grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null); do
        for t in ${c%/status}/task/*; do echo $t; done
    done
    k=$(grep -l '^timerlat/0$' /proc/[0-9]*/comm 2>/dev/null | head -n 1)
    [ -n "$k" ] && k=${k%/comm} && echo $k/task/${k#/proc/}
}
# Until the tool's timerlat thread of CPU 0 runs (rtla's user thread can
# take more than 2 s to start under emulation), at most 5 s.
ready() {
    n=0
    until threads_of $1 | while read t; do cat $t/comm; done | grep -Eq '^timerlat(u?/0|-cpu0)$'; do
        n=$((n+1)); [ $n -ge 50 ] && return; sleep 0.1
    done
}
snap() {
    tag=$1; shift
    up=$(cut -d' ' -f1 /proc/uptime)
    for t in "$@"; do echo "$tag $up ${t#/proc/} $(cat $t/comm) $(cat $t/schedstat)"; done
}
i=0
while [ $i -lt PAIRS ]; do
    i=$((i+1))
    latencyd measure --timerlat --timerlat-period 1ms -a 0 -p 80 -i INTERVAL -D 10 -q \
        > /dev/null 2> /tmp/err.a &
    p=$!; echo "A$i pid $p"; ready $p; sleep 1; list=$(threads_of $p)
    snap A$i.start $list; sleep 3; snap A$i.end $list; wait $p; echo "A$i rc $?"
    $RTLA timerlat top -c 0 -p 1000 -d 10s -q $u -P f:95 --dma-latency 0 > /tmp/out.b 2> /tmp/err.b &
    p=$!; echo "B$i pid $p"; ready $p; sleep 1; list=$(threads_of $p)
    snap B$i.start $list; sleep 3; snap B$i.end $list; wait $p; echo "B$i rc $?"
    grep -v '^options=' /tmp/osnoise.before | while IFS== read k v; do echo "$v" > $T/osnoise/$k; done
    echo DEFAULTS > $T/osnoise/options
done > /tmp/cost 2>&1
put cost /tmp/cost; put a.err /tmp/err.a; put b.out /tmp/out.b; put b.err /tmp/err.b
send
echo "@@DONE"
poweroff -f
"""


def guest_script(pairs, interval_us):
    """The matrix's guest preamble (mounts, put, send), then the runs."""
    text = MATRIX.read_text()
    body = text.split('GUEST_SCRIPT = r"""', 1)[1]
    preamble = body.split('echo "@@BEGIN"', 1)[0] + 'echo "@@BEGIN"\n'
    return preamble + SCENARIO.replace("PAIRS", str(pairs)).replace("INTERVAL", str(interval_us))


def parse(cost):
    """{run: {"pid": pid, "start"/"end": (uptime, [(pid, tid, comm, ns)])}}"""
    runs = {}
    for line in cost.splitlines():
        words = line.split()
        if len(words) == 3 and words[1] == "pid":
            runs.setdefault(words[0], {})["pid"] = words[2]
        elif len(words) == 3 and words[1] == "rc":
            runs.setdefault(words[0], {})["rc"] = int(words[2])
        elif len(words) >= 5 and "." in words[0] and "/task/" in words[2]:
            run, when = words[0].split(".")
            pid, tid = words[2].split("/task/")
            snap = runs.setdefault(run, {}).setdefault(when, (float(words[1]), {}))
            snap[1][tid] = (pid, words[3], int(words[4]))
    return runs


def complete(run):
    """The run exited 0 and both readings found its timerlat thread."""
    if not run or run.get("rc") != 0 or "end" not in run or "start" not in run:
        return False
    names = [comm for (_, comm, _) in run["end"][1].values()]
    return any(re.fullmatch(r"timerlat(u?/0|-cpu0)", n) for n in names)


def per_period(run):
    """ns of CPU per 1 ms period: (timerlat thread, reader, sampler)."""
    (t0, start), (t1, end) = run["start"], run["end"]
    periods = (t1 - t0) * 1000.0
    parts = {"timerlat": 0, "reader": 0, "sampler": 0}
    for tid, (pid, comm, ns) in end.items():
        if tid not in start:
            continue
        delta = ns - start[tid][2]
        if re.fullmatch(r"timerlat(u?/0|-cpu0)", comm):
            parts["timerlat"] += delta
        elif comm.startswith("sampler-"):
            parts["sampler"] += delta
        elif comm.startswith("timerlat"):
            continue  # another CPU's thread
        elif pid == run["pid"] or comm in ("latencyd",) or comm.startswith("ld-linux"):
            parts["reader"] += delta
    return {k: v / periods for k, v in parts.items()}


def ratios(runs, pairs, what, a_part, b_part):
    values = []
    for i in range(1, pairs + 1):
        a, b = runs.get(f"A{i}"), runs.get(f"B{i}")
        if not complete(a) or not complete(b):
            continue
        pa, pb = per_period(a)[a_part], per_period(b)[b_part]
        if pb > 0:
            values.append(pa / pb)
    if not values:
        return f"{what}: no complete pair"
    return (f"{what}: median {statistics.median(values):.2f} "
            f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} pairs)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="6.12-rt-amd64,6.1-rt-amd64")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--capture", type=Path, help="keep the guests' files here")
    parser.add_argument("--sampler-interval", type=int, default=1000, metavar="US",
                        help="latencyd's sampler interval in the A runs (timerlat's period stays 1 ms)")
    args = parser.parse_args()
    if args.sampler_interval < 100:
        parser.error(f"--sampler-interval {args.sampler_interval}: at least 100 us")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "cost.sh"
        script.write_text(guest_script(args.pairs, args.sampler_interval))
        capture = args.capture or Path(tmp) / "capture"
        # The checks fail on a probe script: only the captured files count.
        subprocess.run([str(MATRIX), "--kernels", args.kernels, "--script", str(script),
                        "--capture", str(capture), "--timeout", "1800"],
                       stdout=subprocess.DEVNULL)
        for kernel in args.kernels.split(","):
            path = capture / kernel / "cost"
            if not path.exists():
                print(f"{kernel}: no results (see the matrix's output)")
                continue
            runs = parse(path.read_text())
            user = (capture / kernel / "user").read_text().strip() == "-u"
            print(f"{kernel} ({'user-space' if user else 'kernel'} timerlat threads, emulated):")
            for i in range(1, args.pairs + 1):
                for tag in (f"A{i}", f"B{i}"):
                    run = runs.get(tag, {})
                    if not complete(run):
                        print(f"  {tag}: incomplete (exit {run.get('rc')}), left out with its pair")
                        continue
                    parts = per_period(run)
                    print(f"  {tag}: " + ", ".join(f"{k} {v / 1000:.1f} us" for k, v in parts.items()))
            print("  " + ratios(runs, args.pairs, "timerlat thread, latencyd/rtla", "timerlat", "timerlat"))
            print("  " + ratios(runs, args.pairs, "reader, latencyd/rtla", "reader", "reader"))
            same = {f"A{i}": runs.get(f"A{i}") for i in range(1, args.pairs + 1)}
            vs = [per_period(r)["timerlat"] / per_period(r)["sampler"]
                  for r in same.values() if complete(r) and per_period(r)["sampler"] > 0]
            if vs:
                print(f"  latencyd's timerlat thread / its sampler: median {statistics.median(vs):.2f} "
                      f"(range {min(vs):.2f}-{max(vs):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
