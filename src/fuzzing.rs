//! The fuzz targets: one function per kind of outside input, each taking
//! any bytes and driving every parser of that input the way latencyd
//! does, checking what a parser promises (a round trip, a bound) besides
//! not panicking. `fuzz/` runs them under libFuzzer (cargo-fuzz);
//! `tests/fuzz_corpus.rs` replays the checked-in corpus and every crasher
//! found on the stable toolchain, so a regression fails the suite.
//!
//! A target returns normally for any input; a panic is a bug found.

use std::path::Path;

/// A target: any bytes in, a panic when a parser broke a promise.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory (`fuzz/corpus/NAME`).
pub const TARGETS: &[(&str, Target)] = &[
    ("query", query),
    ("accept", accept),
    ("web_config", web_config),
    ("config_toml", config_toml),
    ("times", times),
    ("cpu_lists", cpu_lists),
    ("hlog", hlog),
    ("tracefs_page", tracefs_page),
    ("event_format", event_format),
    ("trace_text", trace_text),
    ("host_files", host_files),
    ("capture_json", capture_json),
    ("plot_input", plot_input),
];

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// The parts of `data` cut at NUL bytes, at least `n` of them.
fn parts(data: &[u8], n: usize) -> Vec<String> {
    let mut parts: Vec<String> = data
        .split(|&b| b == 0)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    parts.resize(parts.len().max(n), String::new());
    parts
}

/// A query string as the daemon takes it: parsed as a request's URI
/// (what hyper lets through), decoded by axum's `Query` extractor as the
/// handlers decode it, then read as `?from=&to=`, `?window=` and the CPU
/// list parameter.
pub fn query(data: &[u8]) {
    use crate::daemon::http::{parse_range, parse_window};
    use axum::extract::Query;
    let Ok(uri) = format!("/plot.svg?{}", text(data)).parse::<axum::http::Uri>() else {
        return;
    };
    let Ok(Query(pairs)) = Query::<Vec<(String, String)>>::try_from_uri(&uri) else {
        return;
    };
    let now = 1_795_315_538_000_000_000;
    if let Ok(Some(range)) = parse_range(&pairs, now, &["window"]) {
        assert!(range.from_ns <= range.to_ns, "{range:?}");
    }
    let _ = parse_window(&pairs, 60_000_000_000);
}

/// `Accept` and `Accept-Encoding` headers.
pub fn accept(data: &[u8]) {
    let header = text(data);
    let _ = crate::daemon::render::exposition::chosen(Some(&header));
    let _ = crate::daemon::http::encoding::accepts_gzip(Some(&header));
}

/// A web configuration file (TLS, basic auth).
pub fn web_config(data: &[u8]) {
    let _ = crate::daemon::http::webconfig::parse::parse(&text(data), Path::new("/etc/latencyd"));
}

/// A configuration file, loaded and checked as `check-config` does
/// (against a host of two CPUs, so the result does not depend on the
/// machine), with the same rules for the metrics' path.
pub fn config_toml(data: &[u8]) {
    use crate::config::{Config, Sources};
    let path = std::env::temp_dir().join(format!(
        "latencyd-fuzz-{}-{:x}.toml",
        std::process::id(),
        crate::rt::sys::random_u64()
    ));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let sources = Sources {
        file: Some(path.clone()),
        flags: vec![],
    };
    let no_env = config::Environment::with_prefix("LATENCYD_FUZZ_NONE");
    let loaded = Config::load_with_env(
        &sources,
        no_env,
        crate::instruments::registry::config_sections(),
    );
    let _ = std::fs::remove_file(&path);
    if let Ok(config) = loaded {
        let _ = config.to_annotated_toml();
        let _ = crate::config::check_telemetry_path(&config.export.telemetry_path);
    }
}

/// Durations, RFC 3339 times and range points, with their round trips.
pub fn times(data: &[u8]) {
    use crate::calendar::{format_rfc3339_ms, parse_rfc3339_ns, parse_time_ns};
    use crate::units::{format_duration_ns, parse_duration_ns};
    let input = text(data);
    if let Ok(ns) = parse_duration_ns(&input, None) {
        assert_eq!(parse_duration_ns(&format_duration_ns(ns), None), Ok(ns));
    }
    let _ = parse_duration_ns(&input, Some(1_000));
    if let Ok(ns) = parse_rfc3339_ns(&input) {
        let back = parse_rfc3339_ns(&format_rfc3339_ms(ns)).expect("its own format parses");
        assert_eq!(back, ns / 1_000_000 * 1_000_000, "{input}");
    }
    let _ = parse_time_ns(&input, 1_795_315_538_000_000_000);
}

/// Kernel CPU lists and CPU selections, with their round trip.
pub fn cpu_lists(data: &[u8]) {
    use crate::cpulist::{format_cpu_list, parse_cpu_list};
    let input = text(data);
    if let Ok(cpus) = parse_cpu_list(&input) {
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)), Ok(cpus));
    }
    let _ = crate::sampling::CpuSelection::parse(&input);
    let _ = crate::tracefs::cpumask(&[]);
}

/// An `.hlog` file of the record, written as a record file into a
/// directory and read there by the record's own readers: a range read of
/// everything (the API's and `report`'s) and the host facts start-up reads
/// (`last_host_facts`), both through the bounded line reader.
pub fn hlog(data: &[u8]) {
    let Ok(dir) = tempfile_dir() else {
        return;
    };
    let file = dir.join("latencyd-20261122T024538.123Z.hlog");
    if std::fs::write(&file, data).is_ok() {
        let mut visited = 0;
        let read = crate::record::reader::read(
            std::slice::from_ref(&file),
            crate::record::reader::Range::ALL,
            |entry| {
                visited += 1;
                let stats = &entry.stats;
                assert!(stats.min_ns() <= stats.max_ns || stats.count == 0);
                let _ = stats.quantile_ns(crate::stats::P99);
            },
        );
        let report = read.expect("a record file that exists is read");
        assert_eq!(report.entries, visited, "every entry counted is given");
        let _ = crate::record::reader::last_host_facts(&dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A new private directory under the temporary one, for a target that
/// reads through real files.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "latencyd-fuzz-{}-{:x}",
        std::process::id(),
        crate::rt::sys::random_u64()
    ));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// A ring-buffer page (`trace_pipe_raw`) of a 64-bit kernel, its records
/// decoded as the observer decodes them.
pub fn tracefs_page(data: &[u8]) {
    use crate::instruments::observe::events::Decoder;
    use crate::tracefs::ring::PageLayout;
    let header = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    let layout = PageLayout::parse(header).expect("the 64-bit header page");
    let mut decoder = Decoder::default();
    for (system, name, format) in test_formats() {
        decoder.add(system, name, &format).expect("a known format");
    }
    let timerlat = crate::instruments::event::TimerlatLayout::parse(TIMERLAT_FORMAT)
        .expect("the timerlat format of 6.12");
    let _ = layout.records(data, |_, record| {
        let _ = decoder.decode(record);
        let _ = timerlat.decode(record);
    });
}

/// The `timerlat` event's format as 6.12 writes it (ID 17).
const TIMERLAT_FORMAT: &str = "name: timerlat\nID: 17\nformat:\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
    \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    \tfield:unsigned int seqnum;\toffset:8;\tsize:4;\tsigned:0;\n\
    \tfield:int context;\toffset:12;\tsize:4;\tsigned:1;\n\
    \tfield:u64 timer_latency;\toffset:16;\tsize:8;\tsigned:0;\n";

/// The format files of the events the observer decodes, as a 64-bit
/// kernel writes them (IDs 1 to 3).
fn test_formats() -> Vec<(&'static str, &'static str, String)> {
    let common = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";
    let format = |id: u16, fields: &str| {
        format!("name: x\nID: {id}\nformat:\n{common}{fields}\nprint fmt: \"\"\n")
    };
    vec![
        (
            "sched",
            "sched_switch",
            format(
                1,
                "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
                 \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
                 \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
                 \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n",
            ),
        ),
        (
            "sched",
            "sched_wakeup",
            format(
                2,
                "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\
                 \tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n",
            ),
        ),
        (
            "irq",
            "irq_handler_entry",
            format(
                3,
                "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\
                 \tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n",
            ),
        ),
    ]
}

/// An event's `format` file, read and used on a record (the observer's
/// events, the kernel's timerlat and hwlat), and `osnoise/options`.
pub fn event_format(data: &[u8]) {
    use crate::instruments::observe::events::Decoder;
    use crate::tracefs::format::Format;
    let parts = parts(data, 2);
    if let Ok(format) = Format::parse(&parts[0]) {
        let _ = format.id;
    }
    // The kernel's instruments: timerlat and hwlat records, and the flags
    // of osnoise/options.
    use crate::instruments::event::{HwlatLayout, TimerlatLayout};
    if let Ok(layout) = TimerlatLayout::parse(&parts[0]) {
        let _ = layout.decode(parts[1].as_bytes());
    }
    if let Ok(layout) = HwlatLayout::parse(&parts[0])
        && let Some(sample) = layout.decode(parts[1].as_bytes())
    {
        let _ = sample.gap_us();
    }
    let options = [("options".to_string(), parts[1].clone())]
        .into_iter()
        .collect();
    let _ = crate::instruments::osnoise::Settings(options).option("OSNOISE_WORKLOAD");
    for (system, name) in [
        ("sched", "sched_switch"),
        ("sched", "sched_wakeup"),
        ("irq", "irq_handler_entry"),
        ("timer", "hrtimer_expire_entry"),
        ("irq_vectors", "local_timer_entry"),
    ] {
        let mut decoder = Decoder::default();
        if decoder.add(system, name, &parts[0]).is_ok() {
            let _ = decoder.decode(parts[1].as_bytes());
        }
    }
}

/// A capture's trace text (`per_cpu/cpuN/trace`), attributed as a
/// capture attributes it, the causes adding up to the latency.
pub fn trace_text(data: &[u8]) {
    use crate::forensics::attribution::Attributor;
    use crate::forensics::events::{Line, parse_line};
    let mut attributor = Attributor::new(1_000_000_000, 1_003_000_000, 42);
    for line in text(data).lines() {
        match parse_line(line) {
            Line::Event(event) => attributor.feed(&event),
            Line::Lost(count) => attributor.lost(count),
            Line::Other => {}
        }
        if attributor.done() {
            break;
        }
    }
    let found = attributor.finish(Some(1_000));
    let sum: u64 = found.causes.iter().map(|c| c.duration_ns).sum();
    assert_eq!(sum, 3_000_000, "the causes add up to the latency");
    let _ = crate::forensics::verdict::verdict(1, 3_000_000, &found.causes);
}

/// The `/proc` and `/sys` files the host's facts and the daemon read,
/// written under a directory standing for `/` and read back.
pub fn host_files(data: &[u8]) {
    const FILES: &[&str] = &[
        "proc/cpuinfo",
        "proc/cmdline",
        "proc/version",
        "proc/interrupts",
        "proc/stat",
        "proc/sys/kernel/sched_rt_runtime_us",
        "sys/devices/system/cpu/online",
        "sys/devices/system/cpu/isolated",
        "sys/devices/system/cpu/cpu0/topology/core_id",
        "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "sys/devices/system/cpu/cpuidle/current_driver",
        "sys/kernel/realtime",
    ];
    let parts = parts(data, FILES.len());
    // Pure parsers of the same files, first.
    let _ = crate::forensics::noise::parse_steal(&parts[4]);
    let _ = crate::forensics::noise::smi_counter_expected(&parts[0]);
    let _ = crate::host::facts::arm::core_names(&parts[0]);
    let _ = crate::host::facts::kernel::cmdline_parameter(&parts[1], "isolcpus");
    let _ = crate::host::cpuset_of(&parts[2], |_| Some(parts[6].clone()));
    let _ = crate::host::allowed_of(&parts[3]);
    let _ = crate::tasks::runnable::parse_runnable(&parts[2], 0);
    let _ = crate::tasks::container_of(&parts[3]);
    let _ = crate::instruments::observe::tracer::sleep_timer_filter_by_address(&parts[5]);
    // The whole reader over a tree.
    let root = std::env::temp_dir().join(format!(
        "latencyd-fuzz-{}-{:x}",
        std::process::id(),
        crate::rt::sys::random_u64()
    ));
    for (file, content) in FILES.iter().zip(&parts) {
        let path = root.join(file);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(path, content);
    }
    let _ = crate::host::FactReader::new(&root, &[0]).read();
    let _ = crate::host::topology::read(&root, &[0]);
    let _ = std::fs::remove_dir_all(&root);
}

/// A capture file, drawn as its page and its picture.
pub fn capture_json(data: &[u8]) {
    let input = text(data);
    if let Ok(capture) = crate::forensics::picture::read(&input, None) {
        let _ = crate::forensics::picture::render(&capture);
        let _ = crate::instruments::forensics::pages::capture_page("host", &capture);
    }
}

/// A results file `latencyd plot` takes: latencyd's or cyclictest's
/// `--json`, or jitterdebugger's; drawn when it reads.
pub fn plot_input(data: &[u8]) {
    let input = text(data);
    let timerlat = crate::plot::Source::parse(Some("timerlat"), None).expect("a source");
    for source in [crate::plot::Source::Samplers, timerlat] {
        if let Ok(plot) = crate::plot::read_input(&input, &source) {
            for series in &plot.series {
                assert!(series.max_us.is_finite());
            }
            // Drawing needs a font; without one it is an error, not a bug.
            let _ = crate::plot::render_svg(&plot);
        }
    }
}
