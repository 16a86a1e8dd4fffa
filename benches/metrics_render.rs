//! Rendering `/metrics` from a synthetic state of 2, 64, 256 and 512
//! CPUs, through the same registry the handler uses (latencyd's collector
//! and the process collector), and gzipping it as the handler does for
//! scrapers that accept gzip. Prints series and bytes (raw and gzipped).
//! Targets: ≤ 1 ms at 2 CPUs, ≤ 10 ms at 256, ≤ 5 ms at 512. Also the
//! protobuf exposition (native buckets, an exemplar
//! per CPU) and OpenMetrics text, with how long each holds the state's
//! lock (at most as long as the text format), and what counting
//! native buckets costs the collector per interval.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/synthetic.rs"]
mod synthetic;
use latencyd::daemon::http::encoding;
use latencyd::daemon::render::{exposition, metrics};
use latencyd::daemon::state::MonitorState;
use latencyd::forensics::Summary;
use latencyd::host::HostInfo;
use latencyd::instruments::forensics::ForensicsPart;
use latencyd::rt::sys;
use latencyd::stats::LatencyStats;

/// A state whose CPUs each hold a minute of 1 ms samples spread like real
/// latencies (a few µs, a tail to milliseconds), on this host's facts.
fn synthetic_state(n_cpus: usize) -> MonitorState {
    let now = sys::monotonic_now_ns();
    let facts = latencyd::host::FactReader::live(&[0]).read();
    let mut state = synthetic::state(
        latencyd::instruments::registry::builtin_config(),
        HostInfo::detect(),
        facts,
        n_cpus,
        now,
    );
    for view in &mut state.cpus {
        let mut interval = LatencyStats::new(state.config.measure.spike_threshold_ns, None);
        let mut x = 0x2545_f491_4f6c_dd1du64 ^ view.cpu as u64;
        for i in 0..60_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let latency = match x % 1000 {
                0 => 200_000 + x % 3_000_000,
                1..=30 => 20_000 + x % 100_000,
                _ => 1_500 + x % 15_000,
            };
            interval.record_at(latency, i, now);
        }
        view.absorb(&interval).unwrap();
    }
    state
}

/// A capture on every CPU, as forensics would list them, so that the
/// expositions carry an exemplar per CPU.
fn with_captures(state: &MonitorState) {
    let now_unix = latencyd::units::unix_now_ns();
    let forensics = state.parts.of::<ForensicsPart>();
    let mut journal = forensics.expect("forensics is registered").journal.lock();
    for view in &state.cpus {
        let (latency_ns, _) = view.window.max_and_time(sys::monotonic_now_ns()).unwrap();
        journal.recent.push_front(Summary {
            id: latencyd::forensics::store::make_id(now_unix, view.cpu),
            cpu: view.cpu,
            task: None,
            trigger: "threshold".to_string(),
            at: latencyd::calendar::format_rfc3339_ms(now_unix),
            latency_ns,
            deadline_mono_ns: 0,
            wakeup_mono_ns: latency_ns,
            sampler_tid: view.sampler.tid,
            verdict: "CPU woke late".to_string(),
            causes: vec![],
            timer_late_ns: None,
            complete: true,
            gaps: vec![],
            steal_ns: None,
            smi_count: None,
            events_omitted: 0,
            timerlat: None,
            no_sampler_capture: None,
        });
    }
}

/// The median of 21 timings of `f`, in µs.
fn median_us(mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[10]
}

/// How long each exposition holds the state's lock: the text format
/// once (the families), the protobuf exposition twice (the families,
/// then the histograms with native buckets and exemplars).
fn lock_holds(n_cpus: usize, state: &Mutex<MonitorState>) {
    let clocks = metrics::SYSTEM_CLOCKS;
    let families = median_us(|| {
        let s = state.lock().unwrap();
        black_box(metrics::families(&s, clocks.read()));
    });
    let histograms = median_us(|| {
        let s = state.lock().unwrap();
        black_box(exposition::histogram_copies(&s, clocks.read()));
    });
    eprintln!(
        "metrics_render: {n_cpus} CPUs lock held: text {families:.0} µs; protobuf \
         {families:.0} µs then {histograms:.0} µs"
    );
}

fn render(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics_render");
    for n_cpus in [2, 64, 256, 512] {
        // Series per host (latencyd's own, without the process metrics),
        // with and without per-CPU histograms.
        for per_cpu in [true, false] {
            let mut state = synthetic_state(n_cpus);
            state.config.export.per_cpu_histograms = per_cpu;
            let registry =
                metrics::registry(Arc::new(Mutex::new(state)), false, metrics::SYSTEM_CLOCKS);
            let text = metrics::render(&registry).unwrap();
            let series = text.lines().filter(|l| !l.starts_with('#')).count();
            eprintln!(
                "metrics_render: {n_cpus} CPUs, per_cpu_histograms = {per_cpu}: {series} series"
            );
        }
        // The text format from the state it has always been timed on; the
        // protobuf exposition (native buckets and exemplars, as the handler
        // builds it) and OpenMetrics text from the same with a capture per
        // CPU, and the lock holds of all three from that one.
        let state = Arc::new(Mutex::new(synthetic_state(n_cpus)));
        let registry = metrics::registry(Arc::clone(&state), true, metrics::SYSTEM_CLOCKS);
        let captured = Arc::new(Mutex::new(synthetic_state(n_cpus)));
        with_captures(&captured.lock().unwrap());
        let others = metrics::process_registry(true);
        let proto = || exposition::protobuf(&others, &captured, metrics::SYSTEM_CLOCKS);
        eprintln!(
            "metrics_render: {n_cpus} CPUs protobuf with native buckets {} bytes",
            proto().len()
        );
        group.bench_function(format!("{n_cpus}_cpus_protobuf"), |b| b.iter(proto));
        group.bench_function(format!("{n_cpus}_cpus_openmetrics"), |b| {
            b.iter(|| exposition::openmetrics(&others, &captured, metrics::SYSTEM_CLOCKS))
        });
        lock_holds(n_cpus, &captured);
        let text = metrics::render(&registry).unwrap();
        let packed = encoding::gzip(text.as_bytes()).unwrap();
        eprintln!(
            "metrics_render: {n_cpus} CPUs render {} bytes, {} gzipped ({:.1}x)",
            text.len(),
            packed.len(),
            text.len() as f64 / packed.len() as f64
        );
        group.bench_function(format!("{n_cpus}_cpus"), |b| {
            b.iter(|| metrics::render(&registry).unwrap())
        });
        group.bench_function(format!("{n_cpus}_cpus_gzip"), |b| {
            b.iter(|| encoding::gzip(metrics::render(&registry).unwrap().as_bytes()).unwrap())
        });
    }
    // What counting native buckets costs the collector: one interval of
    // 100 samples (100 ms at 1 kHz) spread like the synthetic state's.
    let config = latencyd::instruments::registry::builtin_config();
    let mut interval = LatencyStats::new(config.measure.spike_threshold_ns, None);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        interval.record(
            1_500 + x % 15_000 + u64::from(x.is_multiple_of(100)) * 200_000,
            i,
        );
    }
    let mut counts = latencyd::daemon::state::NativeCounts::default();
    group.bench_function("native_counts_add_interval", |b| {
        b.iter(|| counts.add(black_box(&interval)))
    });
    group.finish();
}

criterion_group!(benches, render);
criterion_main!(benches);
