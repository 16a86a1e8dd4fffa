#!/usr/bin/env bash
# CPU time and resident memory of the daemon next to cyclictest.
#
# Runs `cyclictest -q -m -S -d0` and `latencyd run` with the same CPUs,
# interval and priority, alternating (A B A B ...), each for DURATION,
# and reads the process's CPU time (utime + stime over all threads) and
# its resident set (VmRSS, VmHWM) from /proc just before stopping it.
# Prints both and the ratios latencyd / cyclictest (targets in issue 3:
# CPU <= 1.05x, RSS <= 1.5x).
#
# Usage: benches/footprint.sh    Environment: LATENCYD, PAIRS (2),
# DURATION (60 s), INTERVAL_US (1000), PRIORITY (80). Needs root.
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
pairs=${PAIRS:-2}
duration=${DURATION:-60}
interval_us=${INTERVAL_US:-1000}
priority=${PRIORITY:-80}
[ "$(id -u)" = 0 ] || { echo "run as root: both tools need SCHED_FIFO and mlockall" >&2; exit 2; }
command -v cyclictest >/dev/null || { echo "cyclictest is not installed (rt-tests)" >&2; exit 2; }
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }
tick=$(getconf CLK_TCK)
port=$((20000 + RANDOM % 20000))

# Prints "cpu_seconds rss_kib hwm_kib" of a process still running.
sample() {
    local pid=$1
    awk -v hz="$tick" '{ printf "%.2f ", ($14 + $15) / hz }' "/proc/$pid/stat"
    awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } END { print r, h }' "/proc/$pid/status"
}

run_one() {
    local tool=$1 pid
    case $tool in
        cyclictest)
            cyclictest -q -m -S -d0 -p "$priority" -i "$interval_us" >/dev/null 2>&1 &
            pid=$! ;;
        latencyd)
            LATENCYD_MEASURE__PRIORITY=$priority \
            LATENCYD_MEASURE__INTERVAL=${interval_us}us \
                "$bin" run --listen "127.0.0.1:$port" >/dev/null 2>&1 &
            pid=$! ;;
    esac
    sleep "$duration"
    echo "$tool $(sample "$pid")"
    kill -INT "$pid"
    wait "$pid" 2>/dev/null || true
}

echo "# $(uname -r), $(nproc) CPUs, interval ${interval_us}us, priority $priority, ${duration}s per run"
results=$(for _ in $(seq 1 "$pairs"); do run_one cyclictest; run_one latencyd; done)
echo "$results" | awk '
    { cpu[$1] += $2; rss[$1] += $3; hwm[$1] += $4; n[$1]++
      printf "%-10s cpu %6.2f s  rss %6d KiB  peak %6d KiB\n", $1, $2, $3, $4 }
    END {
        c = "cyclictest"; l = "latencyd"
        printf "\n| | cyclictest | latencyd | ratio |\n|---|---:|---:|---:|\n"
        printf "| CPU time per run (s) | %.2f | %.2f | %.2f |\n", cpu[c]/n[c], cpu[l]/n[l], (cpu[l]/n[l])/(cpu[c]/n[c])
        printf "| resident memory (KiB) | %d | %d | %.2f |\n", rss[c]/n[c], rss[l]/n[l], (rss[l]/n[l])/(rss[c]/n[c])
        printf "| peak resident memory (KiB) | %d | %d | %.2f |\n", hwm[c]/n[c], hwm[l]/n[l], (hwm[l]/n[l])/(hwm[c]/n[c])
    }'
