#!/usr/bin/env bash
# CPU time and resident memory of the daemon next to cyclictest.
#
# Runs `cyclictest -q -m -S -d0` and `latencyd run` with the same CPUs,
# interval and priority, alternating (A B A B ...), each for DURATION,
# and reads the process's CPU time and its resident and locked memory
# (VmRSS, VmHWM, VmLck) from /proc just before stopping it. CPU time is
# the sum of the threads' time on CPU from /proc/PID/task/*/schedstat,
# in nanoseconds: utime + stime are sampled at the tick (250 Hz here) and
# skew with where wake-ups fall relative to it.
#
# Both hold /dev/cpu_dma_latency at 0: cyclictest does unless told
# --laptop, latencyd when measure.pm_qos is on (off by default, so the
# daemon measures the host's own power management). Measured on a 2-vCPU VM,
# the setting alone moves a sampler's CPU time by 1.5x (idle vCPUs halt
# and exit to the host). PM_QOS=0 runs both without it.
# Prints both and the ratios latencyd / cyclictest (targets:
# CPU <= 1.05x, RSS <= 1.5x).
#
# Usage: benches/footprint.sh    Environment: LATENCYD, PAIRS (5),
# DURATION (30 s), INTERVAL_US (1000), PRIORITY (80), PM_QOS (1).
# Prints each run, then the median pair ratio latencyd / cyclictest and
# its range. Needs root.
set -euo pipefail

bin=${LATENCYD:-target/release/latencyd}
case "$("$bin" --version 2>/dev/null)" in
*fault-injection*) echo "$bin is a fault-injection test build (its samplers' clock is wrapped); measure a plain cargo build --release" >&2; exit 2 ;;
esac
pairs=${PAIRS:-5}
duration=${DURATION:-30}
pm_qos=${PM_QOS:-1}
interval_us=${INTERVAL_US:-1000}
priority=${PRIORITY:-80}
[ "$(id -u)" = 0 ] || { echo "run as root: both tools need SCHED_FIFO and mlockall" >&2; exit 2; }
command -v cyclictest >/dev/null || { echo "cyclictest is not installed (rt-tests)" >&2; exit 2; }
[ -x "$bin" ] || { echo "no latencyd binary at $bin (cargo build --release)" >&2; exit 2; }
port=$((20000 + RANDOM % 20000))
if [ "$pm_qos" = 1 ]; then laptop=(); qos=true; else laptop=(--laptop); qos=false; fi

# Prints "cpu_seconds rss_kib hwm_kib lck_kib" of a process still running.
sample() {
    local pid=$1
    cat "/proc/$pid"/task/*/schedstat | awk '{ ns += $1 } END { printf "%.3f ", ns / 1e9 }'
    awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } /^VmLck/ { l = $2 } END { print r, h, l }' \
        "/proc/$pid/status"
}

run_one() {
    local tool=$1 pid
    case $tool in
        cyclictest)
            cyclictest -q -m -S -d0 -p "$priority" -i "$interval_us" "${laptop[@]}" >/dev/null 2>&1 &
            pid=$! ;;
        latencyd)
            LATENCYD_MEASURE__PRIORITY=$priority \
            LATENCYD_MEASURE__INTERVAL=${interval_us}us \
            LATENCYD_MEASURE__PM_QOS=$qos \
                "$bin" run --listen "127.0.0.1:$port" >/dev/null 2>&1 &
            pid=$! ;;
    esac
    sleep "$duration"
    echo "$tool $(sample "$pid")"
    kill -INT "$pid"
    wait "$pid" 2>/dev/null || true
}

echo "# $(uname -r), $(nproc) CPUs, interval ${interval_us}us, priority $priority, ${duration}s per run, cpu_dma_latency 0: $qos"
results=$(for _ in $(seq 1 "$pairs"); do run_one cyclictest; run_one latencyd; done)
echo "$results" | awk '
    { cpu[$1] += $2; rss[$1] += $3; hwm[$1] += $4; lck[$1] += $5; n[$1]++
      if ($1 == "cyclictest") last = $2; else ratio[n[$1]] = $2 / last
      printf "%-10s cpu %7.3f s  rss %6d KiB  peak %6d KiB  locked %7d KiB\n", $1, $2, $3, $4, $5 }
    END {
        c = "cyclictest"; l = "latencyd"
        printf "\n| | cyclictest | latencyd | ratio |\n|---|---:|---:|---:|\n"
        printf "| CPU time per run (s) | %.3f | %.3f | %.2f |\n", cpu[c]/n[c], cpu[l]/n[l], (cpu[l]/n[l])/(cpu[c]/n[c])
        printf "| resident memory (KiB) | %d | %d | %.2f |\n", rss[c]/n[c], rss[l]/n[l], (rss[l]/n[l])/(rss[c]/n[c])
        printf "| peak resident memory (KiB) | %d | %d | %.2f |\n", hwm[c]/n[c], hwm[l]/n[l], (hwm[l]/n[l])/(hwm[c]/n[c])
        printf "| locked memory (KiB) | %d | %d | %.2f |\n", lck[c]/n[c], lck[l]/n[l], (lck[l]/n[l])/(lck[c]/n[c])
        # Median and range of the pair ratios of CPU time.
        k = n[l]
        for (i = 1; i <= k; i++) sorted[i] = ratio[i]
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
        med = (k % 2) ? sorted[(k + 1) / 2] : (sorted[k / 2] + sorted[k / 2 + 1]) / 2
        printf "\nCPU time, median pair ratio latencyd/cyclictest: %.2f (range %.2f to %.2f, %d pairs)\n", med, sorted[1], sorted[k], k
    }'
