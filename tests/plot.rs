//! `latencyd plot` and `measure --plot`: the three input formats (real
//! cyclictest and jitterdebugger output, captured and, as root, produced
//! here), and the structure of the SVG: a series per CPU, axis labels,
//! each maximum marked.

mod common;

use std::path::Path;

use common::plot::*;
use common::*;

#[test]
fn plots_cyclictest_latencyd_and_jitterdebugger_files() {
    if !font_or_skip("plots_cyclictest_latencyd_and_jitterdebugger_files") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (input, cpus) in [
        (data_path("cyclictest/run.json"), vec!["CPU 0", "CPU 1"]),
        (
            data_path("jitterdebugger/results.json"),
            vec!["CPU 0", "CPU 1"],
        ),
    ] {
        let svg = dir.path().join("out.svg");
        let output = plot(&input, &svg);
        assert!(
            output.status.success(),
            "{}: {}",
            input.display(),
            stderr_of(&output)
        );
        check_plot_svg(&std::fs::read_to_string(&svg).unwrap(), &cpus);
        let png = dir.path().join("out.png");
        let output = plot(&input, &png);
        assert!(output.status.success(), "{}", stderr_of(&output));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG file");
    }

    // latencyd's own --json, and --plot at the end of a run.
    let json = dir.path().join("run.json");
    let direct = dir.path().join("direct.svg");
    run_ok(
        latencyd()
            .args(["measure", "-q", "-l", "300", "-h", "100", "--json"])
            .arg(&json)
            .arg("--plot")
            .arg(&direct)
            .args(run_flags()),
    );
    let labels: Vec<String> = (0..usable_cpus()).map(|c| format!("CPU {c}")).collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    check_plot_svg(&std::fs::read_to_string(&direct).unwrap(), &labels);
    let from_file = dir.path().join("from-file.svg");
    let output = plot(&json, &from_file);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&from_file).unwrap();
    check_plot_svg(&svg, &labels);
    assert!(svg.contains("(latencyd)"), "the title names the tool");
}

/// A cyclictest `--json` file: on CPUs 0 and 1 a body of samples from 8 to
/// 150 µs, and on CPU 1 one sample `outlier_us` late.
fn body_and_outlier(outlier_us: u64) -> serde_json::Value {
    let mut threads = serde_json::Map::new();
    for cpu in 0..2u64 {
        let mut histogram = serde_json::Map::new();
        for us in 8..=150u64 {
            let centre = (20.0 + 5.0 * cpu as f64).ln();
            let count = (200_000.0 * (-((us as f64).ln() - centre).powi(2) / 0.18).exp()) as u64;
            histogram.insert(us.to_string(), count.max(1).into());
        }
        let max = if cpu == 1 {
            histogram.insert(outlier_us.to_string(), 1.into());
            outlier_us
        } else {
            150
        };
        threads.insert(
            cpu.to_string(),
            serde_json::json!({"histogram": histogram, "cycles": 1, "min": 8, "max": max,
                               "avg": 20.0, "cpu": cpu, "node": 0}),
        );
    }
    serde_json::json!({"resolution_in_ns": 0, "num_threads": 2, "thread": threads})
}

/// The x of each point of the series' outlines (polylines of more than two
/// points) above the floor, and the x extent of the plotting area (its
/// grid's vertical lines).
fn outline_xs(svg: &str) -> (Vec<f64>, f64, f64) {
    let mut xs = Vec::new();
    let (mut left, mut right) = (f64::MAX, f64::MIN);
    for polyline in svg.split("<polyline").skip(1) {
        let Some(points) = polyline
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
        else {
            continue;
        };
        let points: Vec<(f64, f64)> = points
            .split_whitespace()
            .filter_map(|p| {
                let (x, y) = p.split_once(',')?;
                Some((x.parse().ok()?, y.parse().ok()?))
            })
            .collect();
        if points.len() == 2 && points[0].0 == points[1].0 {
            left = left.min(points[0].0);
            right = right.max(points[0].0);
        }
        if points.len() > 2 {
            let floor = points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
            xs.extend(points.iter().filter(|p| p.1 < floor - 1.0).map(|p| p.0));
        }
    }
    (xs, left, right)
}

#[test]
fn an_outlier_leaves_the_body_of_the_distribution_readable() {
    if !font_or_skip("an_outlier_leaves_the_body_of_the_distribution_readable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (outlier_us, label) in [(31_000, "max 31 ms"), (600_000_000, "max 600 s")] {
        let input = dir.path().join("run.json");
        std::fs::write(&input, body_and_outlier(outlier_us).to_string()).unwrap();
        let out = dir.path().join("out.svg");
        let output = plot(&input, &out);
        assert!(output.status.success(), "{}", stderr_of(&output));
        let svg = std::fs::read_to_string(&out).unwrap();
        check_plot_svg(&svg, &["CPU 0", "CPU 1"]);
        // The body (8 to 150 µs, every bin above the floor) spans a tenth
        // of the plotting area at least; on a linear axis to the outlier
        // it was one pixel column.
        let (xs, left, right) = outline_xs(&svg);
        let body = xs.iter().cloned().fold(f64::MIN, f64::max)
            - xs.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            body >= 0.1 * (right - left),
            "{outlier_us} µs outlier: the body spans {body:.0} of {:.0} px",
            right - left
        );
        // The outlier is named in the unit that reads, beside its marker;
        // no number of four digits or more goes without separators.
        let texts = svg_texts(&svg);
        assert!(texts.iter().any(|t| t == label), "{label} in {texts:?}");
        for text in &texts {
            let digits = text
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max();
            assert!(
                digits.unwrap_or(0) < 4,
                "a number without separators: {text:?}"
            );
        }
        assert!(
            texts.iter().any(|t| t.ends_with(" µs")) && texts.iter().any(|t| t.ends_with(" ms"))
        );
    }
}

#[test]
fn bad_inputs_and_outputs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "T: 0 ( 1) P:80").unwrap();
    let cases = [
        (not_json.clone(), "out.svg", "not JSON"),
        (
            data_path("cyclictest/run-no-histogram.json"),
            "out.svg",
            "-h",
        ),
        (data_path("cyclictest/run.json"), "out.gif", ".svg or .png"),
        (dir.path().join("absent.json"), "out.svg", "cannot read"),
    ];
    for (input, output, message) in cases {
        let result = plot(&input, &dir.path().join(output));
        let stderr = stderr_of(&result);
        assert_eq!(result.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(message), "{}: {stderr}", input.display());
    }
    let output = latencyd()
        .args(["measure", "--plot", "x.jpg"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("--plot"));
}

/// A capture as the store writes it: a thread spinning through the
/// sampler's deadline, its name chosen to break markup.
fn capture_json(id: &str, latency_ns: u64) -> serde_json::Value {
    let switch = |from: &str, from_pid: i32, to: &str, to_pid: i32| {
        format!(
            "prev_comm={from} prev_pid={from_pid} prev_prio=120 prev_state=R ==> \
             next_comm={to} next_pid={to_pid} next_prio=9"
        )
    };
    let event = |ts_ns: u64, task: &str, pid: i32, event: &str, fields: String| {
        serde_json::json!({"ts_ns": ts_ns, "task": task, "pid": pid, "cpu": 1,
                           "event": event, "fields": fields})
    };
    let deadline = 5_000_000_000u64;
    serde_json::json!({
        "id": id, "cpu": 1, "task": null, "trigger": "threshold",
        "at": "2026-11-26T06:00:00.000Z", "latency_ns": latency_ns,
        "deadline_mono_ns": deadline, "wakeup_mono_ns": deadline + latency_ns,
        "sampler_tid": 77, "verdict": "CPU 1 woke late",
        "causes": [{"kind": "task", "name": "<spin>", "pid": 4242, "duration_ns": latency_ns}],
        "timer_late_ns": 0, "complete": true, "gaps": [], "steal_ns": null,
        "smi_count": null, "events_omitted": 0,
        "events": [
            event(deadline - 100_000, "<idle>", 0, "sched_switch", switch("swapper/1", 0, "<spin>", 4242)),
            event(deadline + 1_000, "<spin>", 4242, "sched_wakeup", "comm=s pid=77 prio=19 target_cpu=001".to_string()),
            event(deadline + latency_ns - 5_000, "<spin>", 4242, "sched_switch", switch("<spin>", 4242, "s", 77)),
            event(deadline + latency_ns, "s", 77, "sys_exit", "NR 230 = 0".to_string()),
        ],
    })
}

#[test]
fn plots_a_capture_and_refuses_what_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("1795315538123-cpu1.json");
    std::fs::write(
        &one,
        capture_json("1795315538123-cpu1", 300_000).to_string(),
    )
    .unwrap();
    let run = dir.path().join("run.json");
    let doc = serde_json::json!({"thread": {}, "latencyd": {"captures": [
        capture_json("1795315538000-cpu1", 900_000),
        capture_json("1795315538500-cpu1", 200_000),
    ]}});
    std::fs::write(&run, doc.to_string()).unwrap();
    let svg_of = |args: &[&str]| {
        let out = dir.path().join("capture.svg");
        let output = latencyd()
            .arg("plot")
            .args(args)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr_of(&output));
        std::fs::read_to_string(&out).unwrap()
    };
    let svg = svg_of(&["--capture", one.to_str().unwrap()]);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains("&lt;spin&gt; (pid 4242)") && !svg.contains("<spin>"),
        "{svg}"
    );
    assert!(svg.contains("sampler (tid 77)") && svg.contains("deadline"));
    assert!(
        svg.contains("Main cause: task &lt;spin&gt; (pid 4242): 300us, 100% of the 300us latency")
    );
    // A measure --json file: the largest capture, or the one named.
    assert!(svg_of(&["--capture", run.to_str().unwrap()]).contains("1795315538000-cpu1"));
    let named = svg_of(&[
        "--capture",
        run.to_str().unwrap(),
        "--capture-id",
        "1795315538500-cpu1",
    ]);
    assert!(named.contains("(capture 1795315538500-cpu1)"));

    let no_captures = dir.path().join("plain.json");
    std::fs::write(
        &no_captures,
        r#"{"thread": {}, "latencyd": {"load": null}}"#,
    )
    .unwrap();
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "cycles 1000").unwrap();
    let out = dir.path().join("o.svg");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (
            vec![
                "--capture",
                run.to_str().unwrap(),
                "--capture-id",
                "1-cpu1",
                "-o",
                out,
            ],
            "no capture 1-cpu1 here; it holds 1795315538000-cpu1, 1795315538500-cpu1",
        ),
        (
            vec!["--capture", no_captures.to_str().unwrap(), "-o", out],
            "measure records them with -b or --forensics",
        ),
        (
            vec!["--capture", not_json.to_str().unwrap(), "-o", out],
            "not JSON",
        ),
        (
            vec!["--capture", one.to_str().unwrap(), "-o", "x.png"],
            "--capture draws SVG",
        ),
        (
            vec![
                "--capture",
                one.to_str().unwrap(),
                "--from",
                "-1h",
                "-o",
                out,
            ],
            "--capture draws one capture",
        ),
        (vec!["--capture-id", "1-cpu1", "-o", out], "--capture"),
    ] {
        let output = latencyd().arg("plot").args(&args).output().unwrap();
        assert!(!output.status.success(), "{args:?}");
        assert!(
            stderr_of(&output).contains(says),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
}

/// A record of three 60 s intervals: CPU 0's samplers and timerlat's IRQ
/// and thread on CPU 0 (the thread 30 µs late in the second), and CPU 0
/// offline, then stalled, between the second and the third.
fn record_with_timerlat(dir: &Path) {
    use latencyd::record::{Batch, Gap, GapReason, LogWriter, Settings, Target};
    use latencyd::stats::LatencyStats;
    const S: u64 = 1_000_000_000;
    let now = latencyd::units::unix_now_ns();
    let mut writer = LogWriter::new(Target::Dir(Settings {
        dir: dir.to_path_buf(),
        interval_ns: 60 * S,
        retention_ns: 1 << 62,
        max_bytes: 1 << 30,
    }));
    for k in 0..3u64 {
        let start = now - (30 - 10 * k) * 60 * S;
        let entry = |timerlat: Option<&str>, ns: u64| {
            let mut stats = LatencyStats::new(100_000, None);
            for i in 0..50 {
                stats.record(ns + i * 10, i);
            }
            record_entry(0, start, 60 * S, stats, timerlat)
        };
        let thread_ns = if k == 1 { 30_000 } else { 6_000 };
        let gaps = match k {
            1 => [GapReason::Offline, GapReason::Stalled]
                .into_iter()
                .zip(1..)
                .map(|(reason, n)| Gap {
                    cpu: 0,
                    start_ns: start + 60 * S + n * 60 * S,
                    end_ns: start + 60 * S + n * 60 * S + 30 * S,
                    reason,
                })
                .collect(),
            _ => Vec::new(),
        };
        let batch = Batch {
            gaps,
            hwnoise: Vec::new(),
            entries: vec![
                entry(None, 4_000),
                entry(Some("irq"), 1_000),
                entry(Some("thread"), thread_ns),
            ],
            fingerprint: None,
        };
        writer.write(&batch, start + 60 * S).unwrap();
    }
}

#[test]
fn plots_timerlat_from_a_measure_json_and_from_the_record() {
    if !font_or_skip("plots_timerlat_from_a_measure_json_and_from_the_record") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.svg");
    let draw = |args: &[&str], input: &Path| {
        latencyd()
            .arg("plot")
            .arg(input)
            .args(args)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    };
    // What `measure --timerlat -h --json` wrote on Debian's 6.12 RT
    // kernel (amd64, in the kernel matrix): a spinner held the thread.
    let measured = data_path("kernels/6.12-rt-amd64/measure-timerlat.json");
    let output = draw(&["--source", "timerlat"], &measured);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&out).unwrap();
    check_plot_svg(&svg, &["CPU 0 irq", "CPU 0 thread", "CPU 0 user"]);
    assert!(svg.contains("timerlat latency (irq, thread, user) (latencyd)"));
    assert!(
        svg.contains("CPU 0 thread (max 110 ms)"),
        "the spinner's 110 ms"
    );
    assert!(svg.contains("6.12.117+deb13-rt-amd64 PREEMPT_RT"));
    let output = draw(&["--source", "timerlat", "--context", "irq"], &measured);
    assert!(output.status.success(), "{}", stderr_of(&output));
    check_plot_svg(&std::fs::read_to_string(&out).unwrap(), &["CPU 0 irq"]);
    // The same file's samplers, as without --source.
    let output = draw(&["--source", "samplers"], &measured);
    assert!(output.status.success(), "{}", stderr_of(&output));
    check_plot_svg(&std::fs::read_to_string(&out).unwrap(), &["CPU 0"]);

    // The record: timerlat's lines apart from the samplers'.
    let record = dir.path().join("record");
    std::fs::create_dir(&record).unwrap();
    record_with_timerlat(&record);
    let output = draw(&["--source", "timerlat"], &record);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&out).unwrap();
    check_plot_svg(&svg, &["CPU 0 irq", "CPU 0 thread"]);
    assert!(svg.contains("CPU 0 thread (max 30.5 µs)"), "{svg}");
    let output = draw(&[], &record);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&out).unwrap();
    check_plot_svg(&svg, &["CPU 0"]);
    assert!(svg.contains("CPU 0 (max 4.49 µs)"), "the samplers alone");
    // Over time: a line per context, cut where the CPU was offline.
    let output = draw(
        &["--over-time", "--source", "timerlat", "--context", "thread"],
        &record,
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&out).unwrap();
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t == "CPU 0 thread max (peak 30.5 µs)"),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("CPU 0 irq")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t == "no samples: offline"),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t == "no samples: stalled"),
        "a stall stops no timerlat"
    );
    let output = draw(&["--over-time"], &record);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let texts = svg_texts(&std::fs::read_to_string(&out).unwrap());
    assert!(
        texts.iter().any(|t| t == "CPU 0 max (peak 4.49 µs)"),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t == "no samples: stalled"),
        "{texts:?}"
    );

    // What cannot be drawn is said.
    let cyclictest = data_path("cyclictest/run.json");
    for (args, input, said) in [
        (
            vec!["--source", "timerlat"],
            &cyclictest,
            "no timerlat results",
        ),
        (
            vec!["--source", "rtla"],
            &cyclictest,
            "--source/--context: 'rtla' is not a source",
        ),
        (
            vec!["--source", "timerlat", "--context", "nmi"],
            &record,
            "'nmi' is not one",
        ),
        (
            vec!["--source", "timerlat", "--cpus", "1"],
            &record,
            "no timerlat interval",
        ),
        (vec!["--context", "irq"], &record, "--source"),
        (
            vec!["--by-load", "--source", "timerlat"],
            &record,
            "cannot be used with",
        ),
    ] {
        let output = draw(&args, input);
        assert!(!output.status.success(), "{args:?}");
        let err = stderr_of(&output);
        assert!(err.contains(said), "{args:?}: {err}");
    }
}
