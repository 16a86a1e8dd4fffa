#!/usr/bin/env bash
# Sampler latency and daemon CPU under a spike storm, forensics off vs on.
#
# Each run starts `latencyd run` (forensics off, or on with the defaults
# and a 1 ms threshold), makes a storm on the last CPU (a SCHED_FIFO 90
# thread spinning 2 ms out of every 5 ms) for DURATION seconds, then
# reads /api/v1/latency and the daemon's CPU time. Runs alternate
# off/on for PAIRS pairs. Prints, per pair, the other CPUs' average and
# p99 latency and the daemon's CPU seconds, then the median ratio on/off
# with its range. The storm CPU's own latency is the storm's, not ours.
#
# Usage: benches/forensics_storm.sh   Environment: LATENCYD, PAIRS (5),
# DURATION (10). Needs root and tracefs (mounted here if it is not).
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
pairs=${PAIRS:-5}
duration=${DURATION:-10}
[ "$(id -u)" = 0 ] || { echo "run as root: SCHED_FIFO, mlockall and tracefs" >&2; exit 2; }
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }
[ -d /sys/kernel/tracing/instances ] || mount -t tracefs nodev /sys/kernel/tracing
tick=$(getconf CLK_TCK)
last_cpu=$(( $(nproc) - 1 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/storm.py" <<'PY'
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002:
        pass
    time.sleep(0.003)
PY

run_one() {
    local forensics=$1 port=$((20000 + RANDOM % 20000)) pid
    cat > "$work/c.toml" <<TOML
[measure]
warmup = "0s"
[export]
listen = "127.0.0.1:$port"
[forensics]
enabled = $forensics
threshold = "1ms"
dir = "$work/spikes"
TOML
    "$bin" run --config "$work/c.toml" 2>/dev/null &
    pid=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    local before
    before=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    chrt -f 90 taskset -c "$last_cpu" python3 "$work/storm.py" "$duration"
    sleep 0.5
    local after
    after=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    curl -sf "http://127.0.0.1:$port/api/v1/latency" | python3 -c '
import json, sys
cpus = [c for c in json.load(sys.stdin)["cpus"] if c["cpu"] != int(sys.argv[1])]
print(sum(c["avg_ns"] for c in cpus) / len(cpus), max(c["p99_ns"] for c in cpus), end=" ")
' "$last_cpu"
    echo "$(( after - before ))" | awk -v hz="$tick" '{ printf "%.2f\n", $1 / hz }'
    kill -TERM "$pid"; wait "$pid" || true
}

echo "pair  off: avg_ns p99_ns cpu_s   on: avg_ns p99_ns cpu_s"
: > "$work/ratios"
for i in $(seq "$pairs"); do
    read -r a_avg a_p99 a_cpu < <(run_one false)
    read -r b_avg b_p99 b_cpu < <(run_one true)
    echo "$i  off: $a_avg $a_p99 $a_cpu   on: $b_avg $b_p99 $b_cpu"
    echo "$b_avg $a_avg $b_p99 $a_p99 $b_cpu $a_cpu" >> "$work/ratios"
done
python3 - "$work/ratios" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
for name, i in (("avg", 0), ("p99", 2), ("daemon CPU", 4)):
    r = sorted(row[i] / row[i + 1] for row in rows if row[i + 1] > 0)
    print(f"{name} on/off: median {statistics.median(r):.3f} (range {r[0]:.3f}..{r[-1]:.3f}, {len(r)} pairs)")
PY
