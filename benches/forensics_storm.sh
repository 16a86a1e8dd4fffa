#!/usr/bin/env bash
# Sampler latency and daemon CPU under a spike storm, forensics off vs on.
#
# Each run starts `latencyd run`, makes a storm on the last CPU (a
# SCHED_FIFO 90 thread spinning 2 ms out of every 5 ms) for DURATION
# seconds, then reads /api/v1/latency and the daemon's CPU time. Three
# arms, in turn, ROUNDS times:
#   off      forensics off;
#   tracing  forensics on with a 10 s threshold: the flight recorder
#            records, nothing is captured (the cost of the events alone);
#   capture  forensics on with a 1 ms threshold: every storm spike is a
#            candidate, the rate limits decide (the cost of capturing).
# Prints, per round, the other CPUs' average and p99 latency and the
# daemon's CPU seconds, then median ratios with their ranges: tracing/off
# and capture/off (what forensics costs) and capture/tracing (what the
# storm's captures add). The storm CPU's own latency is the storm's.
#
# Usage: benches/forensics_storm.sh   Environment: LATENCYD, ROUNDS (5),
# DURATION (10). Needs root and tracefs (mounted here if it is not).
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
rounds=${ROUNDS:-${PAIRS:-5}}
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
    local forensics=$1 threshold=$2 port=$((20000 + RANDOM % 20000)) pid
    cat > "$work/c.toml" <<TOML
[measure]
warmup = "0s"
[export]
listen = "127.0.0.1:$port"
[forensics]
enabled = $forensics
threshold = "$threshold"
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

echo "round  off: avg_ns p99_ns cpu_s | tracing: ... | capture: ..."
: > "$work/rows"
for i in $(seq "$rounds"); do
    read -r a_avg a_p99 a_cpu < <(run_one false 1ms)
    read -r t_avg t_p99 t_cpu < <(run_one true 10s)
    read -r c_avg c_p99 c_cpu < <(run_one true 1ms)
    echo "$i  off: $a_avg $a_p99 $a_cpu | tracing: $t_avg $t_p99 $t_cpu | capture: $c_avg $c_p99 $c_cpu"
    echo "$a_avg $a_p99 $a_cpu $t_avg $t_p99 $t_cpu $c_avg $c_p99 $c_cpu" >> "$work/rows"
done
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
arms = {"off": 0, "tracing": 3, "capture": 6}
for top, bottom in (("tracing", "off"), ("capture", "off"), ("capture", "tracing")):
    for name, k in (("avg", 0), ("p99", 1), ("daemon CPU", 2)):
        r = sorted(row[arms[top] + k] / row[arms[bottom] + k]
                   for row in rows if row[arms[bottom] + k] > 0)
        print(f"{top}/{bottom} {name}: median {statistics.median(r):.3f} "
              f"(range {r[0]:.3f}..{r[-1]:.3f}, {len(r)} rounds)")
PY
