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
# ratio latencyd / cyclictest (lower is better; 1.00 means equal).
#
# Why the average comes from the histograms and not from each tool's own
# `avg`: cyclictest cuts every sample to whole µs before it averages, so
# its `avg` is the mean of the histogram's bin numbers; latencyd's `avg`
# (and the daemon's avg_ns) is the exact mean, about 0.5 µs higher for the
# same wake-ups. Compared field to field, that arithmetic alone reads as
# latencyd being ~0.5 µs later (2-5 % at this VM's 10-25 µs averages);
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
# CONTROL (0; 1: cyclictest on both sides).
# Needs root, cyclictest (rt-tests), stress-ng and python3.
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
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

out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${stress_pid:-}" ] && kill "$stress_pid" 2>/dev/null; true' EXIT
common=(-q -m -S -p "$priority" -i "$interval_us" -D "$duration" -h "$hist_us" --latency 0)

# The daemon for its warm-up and DURATION, its histograms written as
# cyclictest's JSON.
#
# The reader is a Python process started, its modules imported, before
# the daemon: starting Python (exec, page faults, imports) while the
# daemon samples would put that load inside the daemon's measurement and
# nothing like it inside cyclictest's (docs/benchmarks.md has the runs
# before and after). It says when it is ready, waits for the word that
# the daemon is started, waits until the daemon answers (its samplers run
# by then), sleeps through the daemon's warm-up, DURATION and 0.1 s (the
# documents move in 200 ms steps), fetches the documents, writes them as
# cyclictest's JSON and exits; then the daemon is stopped. So each tool
# samples about DURATION: cyclictest from its start, the daemon after
# discarding its first WARMUP (measure.warmup, 1 s by default).
read -r -d '' reader_py <<'PY' || true
import http.client, json, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2]) + float(sys.argv[3])
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
# The documents hold what the samplers handed over, every 200 ms (the
# daemon's publish period): 0.1 s behind on average.
time.sleep(seconds + 0.1)
def get(path):
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        sys.exit(f"GET {path}: HTTP {response.status}")
    return json.loads(body)
# Every document first, then the conversion: its counts are the samples
# up to the moment the documents were fetched.
docs = [get(f"/api/v1/latency/{c['cpu']}") for c in get("/api/v1/latency")["cpus"]]
threads = {}
for i, one in enumerate(docs):
    hist = {}
    for b in one["buckets"]:
        us = (b["lowest_ns"] + b["highest_ns"]) // 2 // 1000
        if us < hist_us:
            hist[str(us)] = hist.get(str(us), 0) + b["count"]
    # Counts from the same document as the buckets: CPUs sample on
    # between one document and the next.
    threads[str(i)] = {"cpu": one["cpu"], "histogram": hist, "cycles": one["count"],
                       "avg": one["avg_ns"] / 1000, "min": one["min_ns"] // 1000,
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
        LATENCYD_MEASURE__WARMUP="$warmup" LATENCYD_MEASURE__PM_QOS=true "$bin" run --web.listen-address "127.0.0.1:$port" >/dev/null 2>&1 &
    pid=$!
    echo go >&"${READER[1]}"
    if ! wait "$reader"; then
        kill "$pid" 2>/dev/null || true
        echo "reading the daemon on port $port failed" >&2
        exit 1
    fi
    kill "$pid" && wait "$pid" 2>/dev/null || true
}

run_cyclictest() {
    cyclictest "${common[@]}" -d 0 --json="$out/$1-cyclictest-$2.json" >/dev/null
}

# The "latencyd" side of a pair; CONTROL=1 runs cyclictest there too.
run_latencyd() {
    local json="$out/$1-latencyd-$2.json"
    if [ "$control" = 1 ]; then
        cyclictest "${common[@]}" -d 0 --json="$json" >/dev/null
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

python3 - "$out" "$pairs" $scenarios <<'PY'
import json, math, sys

out, pairs, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def load(path):
    with open(path) as f:
        return json.load(f)["thread"]

def pooled(runs):
    """Per CPU: histogram, count, overflows, sum, min, max over the runs."""
    cpus = {}
    for threads in runs:
        for t in threads.values():
            c = cpus.setdefault(t["cpu"], {"hist": {}, "n": 0, "over": 0, "own_sum": 0.0,
                                           "bin_sum": 0, "in_bins": 0, "min": None, "max": 0})
            in_bins = 0
            for b, k in t["histogram"].items():
                c["hist"][int(b)] = c["hist"].get(int(b), 0) + k
                c["bin_sum"] += int(b) * k
                in_bins += k
            c["in_bins"] += in_bins
            c["over"] += t["cycles"] - in_bins
            c["n"] += t["cycles"]
            c["own_sum"] += t["avg"] * t["cycles"]
            c["min"] = t["min"] if c["min"] is None else min(c["min"], t["min"])
            c["max"] = max(c["max"], t["max"])
    return cpus

def quantile(c, q):
    """Nearest rank over the 1 us bins; overflowed samples rank last."""
    rank = max(1, math.ceil(q * c["n"]))
    seen = 0
    for b in sorted(c["hist"]):
        seen += c["hist"][b]
        if seen >= rank:
            return b
    return c["max"]

def stats(c):
    """The average is over the 1 us bins (each sample cut to whole us, as
    cyclictest's own avg is); own_avg is the tool's own avg field."""
    return {"min": c["min"], "p50": quantile(c, 0.5), "p99": quantile(c, 0.99),
            "avg": c["bin_sum"] / max(c["in_bins"], 1), "max": c["max"],
            "own_avg": c["own_sum"] / c["n"]}

for scenario in scenarios:
    tools = {tool: pooled([load(f"{out}/{scenario}-{tool}-{i}.json") for i in range(1, pairs + 1)])
             for tool in ("cyclictest", "latencyd")}
    print(f"\n## {scenario}: latency in us, {pairs} runs of each tool pooled")
    print(f"| CPU | metric | cyclictest | latencyd | ratio |")
    print(f"|---|---|---:|---:|---:|")
    for cpu in sorted(tools["cyclictest"]):
        a, b = stats(tools["cyclictest"][cpu]), stats(tools["latencyd"][cpu])
        for m in ("min", "p50", "p99", "avg", "max"):
            ratio = b[m] / a[m] if a[m] else float("nan")
            fa = f"{a[m]:.2f}" if m == "avg" else str(a[m])
            fb = f"{b[m]:.2f}" if m == "avg" else str(b[m])
            print(f"| {cpu} | {m} | {fa} | {fb} | {ratio:.2f} |")
    # The spread between pairs shows how much of a ratio is noise.
    per_pair, pair_ratios = [], []
    for i in range(1, pairs + 1):
        a = pooled([load(f"{out}/{scenario}-cyclictest-{i}.json")])
        b = pooled([load(f"{out}/{scenario}-latencyd-{i}.json")])
        r_avg = [stats(b[c])["avg"] / stats(a[c])["avg"] for c in a]
        r_p99 = [stats(b[c])["p99"] / max(stats(a[c])["p99"], 1) for c in a]
        r_own = [stats(b[c])["own_avg"] / stats(a[c])["own_avg"] for c in a]
        pair_ratios.append((sum(r_avg) / len(r_avg), sum(r_p99) / len(r_p99), sum(r_own) / len(r_own)))
        per_pair.append(f"pair {i}: avg {pair_ratios[-1][0]:.2f}, p99 {pair_ratios[-1][1]:.2f}, "
                        f"own-avg {pair_ratios[-1][2]:.2f}")
    overflows = {tool: sum(c["over"] for c in tools[tool].values()) for tool in tools}
    print(f"\nsamples past the histogram (left out of avg): "
          f"cyclictest {overflows['cyclictest']}, latencyd {overflows['latencyd']}")
    # Samples per CPU and run: the tools should have sampled alike long.
    runs = {tool: sorted(t["cycles"] for i in range(1, pairs + 1)
                         for t in load(f"{out}/{scenario}-{tool}-{i}.json").values())
            for tool in ("cyclictest", "latencyd")}
    print("samples per CPU and run (median): "
          f"cyclictest {runs['cyclictest'][len(runs['cyclictest']) // 2]}, "
          f"latencyd {runs['latencyd'][len(runs['latencyd']) // 2]}")
    print("ratios per pair (mean over CPUs): " + "; ".join(per_pair))
    med = lambda xs: sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
    def median_ci(xs):
        """A distribution-free 95 % interval for the median: order statistics
        k and n-k+1, k the largest with P(Binomial(n, 1/2) < k) <= 2.5 %."""
        n, xs = len(xs), sorted(xs)
        k, below = 0, 0.0
        while k < n // 2 and below + math.comb(n, k) / 2**n <= 0.025:
            below += math.comb(n, k) / 2**n
            k += 1
        return (xs[k - 1], xs[n - k]) if k >= 1 else None
    for k, name in ((0, "avg"), (1, "p99"), (2, "own-avg (fields, not like for like)")):
        xs = [r[k] for r in pair_ratios]
        ci = median_ci(xs)
        ci_text = f", 95% interval of the median {ci[0]:.2f} to {ci[1]:.2f}" if ci else ""
        print(f"median pair ratio {name}: {med(xs):.2f} (range {min(xs):.2f} to {max(xs):.2f}{ci_text})")
PY
