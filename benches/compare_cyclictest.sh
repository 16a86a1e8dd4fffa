#!/usr/bin/env bash
# latencyd measure vs cyclictest, same settings, alternating runs.
#
# For each scenario (idle, then under stress-ng) it runs cyclictest and
# latencyd in turn, A B A B ..., PAIRS times each, with one SCHED_FIFO
# thread per CPU at the same priority and interval, memory locked and
# /dev/cpu_dma_latency held at 0 by both. Each run writes cyclictest's
# JSON with a 1 µs histogram; percentiles and the average are computed
# from those histograms by the same code for both tools, pooled over the
# runs. Prints per CPU: min, p50, p99, avg, max for each tool and the
# ratio latencyd / cyclictest (lower is better; 1.00 means equal), then
# the median over pairs of each pair's ratio, the geometric mean of its
# per-CPU ratios (benches/compare_cyclictest.py, which does the analysis,
# says why not the arithmetic mean).
#
# Why the average comes from the histograms and not from each tool's own
# `avg`: cyclictest cuts every sample to whole µs before it averages, so
# its `avg` is the mean of the histogram's bin numbers; latencyd's `avg`
# (and the daemon's avg_ns) is the exact mean, about 0.5 µs higher for the
# same wake-ups. Compared field to field, that arithmetic alone reads as
# latencyd being ~0.5 µs later (2-5 % at a VM's 10-25 µs averages);
# "own-avg" in the per-pair lines shows that ratio beside the fair one.
# Samples past the histogram (HIST_US) have no bin; their count is printed
# and they are left out of the histogram average.
#
# With MODE=daemon the latencyd side is the daemon (`latencyd run` on
# built-in defaults but for interval, priority and measure.pm_qos, which
# holds /dev/cpu_dma_latency at 0 as cyclictest's --latency 0 does: off,
# the idle host's C-states made the daemon 1.7-1.8x cyclictest's average,
# old build and new alike), sampling DURATION after its warm-up (WARMUP,
# passed as measure.warmup), whose per-CPU HDR buckets from
# /api/v1/latency/{cpu} are put in 1 µs bins by their midpoint (HDR
# buckets are narrower than 1 µs below 131 µs). The samples per CPU and
# run that each tool took are printed, to show they sampled alike long.
#
# Pairs run in alternating order (ORDER=alternate: cyclictest first in odd
# pairs, latencyd first in even ones), so that whatever favours the first
# or the second run of a pair (measured with CONTROL=1 ORDER=fixed, which
# runs cyclictest against itself) falls on both tools equally.
#
# Usage: benches/compare_cyclictest.sh
# Environment: LATENCYD (binary), MODE (measure), PAIRS (3), DURATION
# (10s), WARMUP (1s, MODE=daemon only), INTERVAL_US (1000), PRIORITY
# (80), HIST_US (20000), SCENARIOS ("idle stress"), STRESS (stress-ng's
# load options; default every CPU, two 256 MB memory hogs and context
# switches), ORDER (alternate, or fixed: cyclictest first in every pair),
# CONTROL (0; 1: cyclictest on both sides), DEFAULTS (0; 1: no --latency
# on either side, each tool on its own PM QoS default, which for both is
# holding 0; MODE=measure only), KEEP (a directory to keep the
# runs' JSON files in, for benches/compare_cyclictest.py to read again;
# by default they go to a temporary directory that is removed).
# Needs root, cyclictest (rt-tests), stress-ng and python3.
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
case "$("$bin" --version 2>/dev/null)" in
*fault-injection*) echo "warning: $bin is a fault-injection test build (its samplers' clock is wrapped): fine for a smoke test, not for numbers" >&2 ;;
esac
pairs=${PAIRS:-3}
duration=${DURATION:-10s}
mode=${MODE:-measure}
warmup=${WARMUP:-1s}
interval_us=${INTERVAL_US:-1000}
priority=${PRIORITY:-80}
hist_us=${HIST_US:-20000}
scenarios=${SCENARIOS:-idle stress}
order=${ORDER:-alternate}
control=${CONTROL:-0}
defaults=${DEFAULTS:-0}

[ "$(id -u)" = 0 ] || { echo "run as root: both tools need SCHED_FIFO and mlockall" >&2; exit 2; }
for tool in cyclictest stress-ng python3; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 2; }
done
if [ "$mode" = daemon ]; then
    for value in "$duration" "$warmup"; do
        [[ "$value" =~ ^[0-9]+(\.[0-9]+)?s$ ]] ||
            { echo "MODE=daemon takes DURATION and WARMUP in seconds, like 2s or 0.5s (got '$value')" >&2; exit 2; }
    done
fi
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }

if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" || { echo "KEEP=$KEEP: cannot create that directory" >&2; exit 2; }
    out=$KEEP
    trap '[ -n "${stress_pid:-}" ] && kill "$stress_pid" 2>/dev/null; true' EXIT
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"; [ -n "${stress_pid:-}" ] && kill "$stress_pid" 2>/dev/null; true' EXIT
fi
common=(-q -m -S -p "$priority" -i "$interval_us" -D "$duration" -h "$hist_us")
[ "$defaults" = 1 ] || common+=(--latency 0)

# The daemon for its warm-up and DURATION, its histograms written as
# cyclictest's JSON.
#
# The reader is a Python process started, its modules imported, before
# the daemon: starting Python (exec, page faults, imports) while the
# daemon samples would put that load inside the daemon's measurement and
# nothing like it inside cyclictest's (docs/benchmarks.md has the runs
# before and after). It says when it is ready, waits for the word that
# the daemon is started, waits until the daemon answers (its samplers run
# by then) and sleeps through the daemon's warm-up. Then it cuts a window
# of DURATION out of the daemon's cumulative documents: the samplers hand
# over at every multiple of 200 ms of CLOCK_MONOTONIC (Python's
# time.monotonic) and the collector takes them 5 ms later, so documents
# fetched 50 ms after two boundaries DURATION apart hold exactly the
# periods between those boundaries, and the second minus the first is
# the window (buckets, samples and missed periods; min and max are the
# daemon's since its warm-up). It writes that as cyclictest's JSON, with
# the missed periods, and exits; then the daemon is stopped.
read -r -d '' reader_py <<'PY' || true
import http.client, json, sys, time
port, seconds, warmup = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
hist_us, out = int(sys.argv[4]), sys.argv[5]
print("ready", flush=True)
sys.stdin.readline()
# The daemon's start-up before its warm-up is not sampled time: wait
# until it answers, which it does once its samplers run.
started = time.monotonic()
while True:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/v1/status")
        conn.getresponse().read()
        break
    except OSError:
        if time.monotonic() - started > 30:
            sys.exit(f"the daemon on port {port} did not answer within 30 s")
        time.sleep(0.01)
time.sleep(warmup)
def get(path):
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        sys.exit(f"GET {path}: HTTP {response.status}")
    return json.loads(body)
def sleep_until(t):
    while time.monotonic() < t:
        time.sleep(t - time.monotonic())
def documents():
    return {c["cpu"]: get(f"/api/v1/latency/{c['cpu']}") for c in get("/api/v1/latency")["cpus"]}
publish = 0.2
first_at = (time.monotonic() // publish + 1) * publish + 0.05
sleep_until(first_at)
first = documents()
sleep_until(first_at + round(seconds / publish) * publish)
last = documents()
threads = {}
for i, (cpu, one) in enumerate(sorted(last.items())):
    before = {(b["lowest_ns"], b["highest_ns"]): b["count"] for b in first[cpu]["buckets"]}
    hist = {}
    for b in one["buckets"]:
        count = b["count"] - before.get((b["lowest_ns"], b["highest_ns"]), 0)
        us = (b["lowest_ns"] + b["highest_ns"]) // 2 // 1000
        if us < hist_us and count > 0:
            hist[str(us)] = hist.get(str(us), 0) + count
    cycles = one["count"] - first[cpu]["count"]
    total_ns = one["avg_ns"] * one["count"] - first[cpu]["avg_ns"] * first[cpu]["count"]
    threads[str(i)] = {"cpu": cpu, "histogram": hist, "cycles": cycles,
                       "missed": one["missed"] - first[cpu]["missed"],
                       "avg": total_ns / max(cycles, 1) / 1000, "min": one["min_ns"] // 1000,
                       "max": one["max_ns"] // 1000}
with open(out, "w") as f:
    json.dump({"thread": threads}, f)
PY

run_daemon() {
    local port=$((20000 + RANDOM % 20000)) pid reader line
    coproc READER { python3 -c "$reader_py" "$port" "${duration%s}" "${warmup%s}" "$hist_us" "$1"; }
    reader=$READER_PID
    read -r -t 30 -u "${READER[0]}" line || { echo "the daemon's reader did not start" >&2; exit 1; }
    LATENCYD_MEASURE__INTERVAL="${interval_us}us" LATENCYD_MEASURE__PRIORITY="$priority" \
        LATENCYD_MEASURE__WARMUP="$warmup" LATENCYD_MEASURE__PM_QOS=true "$bin" run --web.listen-address "127.0.0.1:$port" >/dev/null 2>"$1.daemon.log" &
    pid=$!
    echo go >&"${READER[1]}"
    if ! wait "$reader"; then
        kill "$pid" 2>/dev/null || true
        echo "reading the daemon on port $port failed; the daemon said:" >&2
        tail -n 20 "$1.daemon.log" >&2
        exit 1
    fi
    kill "$pid" && wait "$pid" 2>/dev/null || true
}

run_cyclictest() {
    cyclictest "${common[@]}" --json="$out/$1-cyclictest-$2.json" >/dev/null
}

# The "latencyd" side of a pair; CONTROL=1 runs cyclictest there too.
run_latencyd() {
    local json="$out/$1-latencyd-$2.json"
    if [ "$control" = 1 ]; then
        cyclictest "${common[@]}" --json="$json" >/dev/null
    elif [ "$mode" = daemon ]; then
        run_daemon "$json"
    else
        "$bin" measure "${common[@]}" --json="$json" >/dev/null
    fi
}

[ "$control" = 1 ] && echo "# CONTROL: cyclictest against itself; the 'latencyd' column is a second cyclictest"
echo "# $(uname -r), $(nproc) CPUs, interval ${interval_us}us, priority $priority, $duration per run, $pairs pairs ($order order), latencyd $mode"
for scenario in $scenarios; do
    stress_pid=
    if [ "$scenario" = stress ]; then
        # CPU, memory and context-switch load on every CPU, bounded in time.
        # shellcheck disable=SC2086
        stress-ng ${STRESS:---cpu "$(nproc)" --vm 2 --vm-bytes 256M --switch 1} \
            --timeout $((pairs * 2 * 60 + 60))s >/dev/null 2>&1 &
        stress_pid=$!
        sleep 2
    fi
    for pair in $(seq 1 "$pairs"); do
        if [ "$order" = alternate ] && [ $((pair % 2)) = 0 ]; then
            run_latencyd "$scenario" "$pair"
            run_cyclictest "$scenario" "$pair"
        else
            run_cyclictest "$scenario" "$pair"
            run_latencyd "$scenario" "$pair"
        fi
    done
    if [ -n "$stress_pid" ]; then
        kill "$stress_pid" 2>/dev/null || true
        wait "$stress_pid" 2>/dev/null || true
        stress_pid=
    fi
done

# The periods a cyclictest run lasts, -D over -i (-D as cyclictest reads
# it: a number with an optional s, m, h or d).
periods=$(python3 - "$duration" "$interval_us" <<'PY'
import sys
text, interval_us = sys.argv[1], int(sys.argv[2])
scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}
unit = scale.get(text[-1:], None)
seconds = float(text[:-1]) * unit if unit else float(text)
print(round(seconds * 1e6 / interval_us))
PY
)
PERIODS=$periods python3 "$(dirname "$0")/compare_cyclictest.py" "$out" "$pairs" $scenarios
