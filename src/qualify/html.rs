//! The verdict as one self-contained HTML page, opened from a file with
//! no network: the verdict table, a plot per phase as OSADL draws them
//! (log-scale samples over µs, a line per CPU, the maximum marked), each
//! phase's statistics, the judged facts and every fact of the host, and
//! the captures behind failures drawn inline. Built from the `--json`
//! document alone, so that the page and the JSON cannot disagree.

use std::fmt::Write as _;

use super::json::{Document, PhaseJson};
use super::verdict::us;
use crate::forensics::picture::render_untitled;
use crate::host::json::FactJson;
use crate::markup::escape;
use crate::plot::{CpuSeries, PlotData, render_svg};

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .5em;\
text-align:right}th{background:#f0f0f0}td.text,th.text{text-align:left}\
.passed{color:#1a7f37}.failed{color:#c62828;font-weight:bold}\
.could-not-measure,.error{color:#b26a00;font-weight:bold}.skipped{color:#777}\
.banner{font-size:1.4em;padding:.4em .8em;border-radius:4px;display:inline-block}\
.banner.passed{background:#e6f4ea}.banner.failed{background:#fdecea}\
.banner.could-not-measure{background:#fff4e5}svg{max-width:100%;height:auto}\
details{margin:.5em 0}";

pub fn render(doc: &Document) -> String {
    let mut out = String::new();
    let title = format!("latencyd qualify: {} on {}", doc.verdict, doc.host.hostname);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(
        out,
        "<p class=\"banner {0}\">{0} (exit {1})</p>\n<p>Profile <b>{2}</b> ({3}); CPUs {4} \
         ({5}); kernel {6}; fingerprint {7}; {8} to {9}.</p>",
        escape(&doc.verdict),
        doc.exit_code,
        escape(&doc.profile),
        escape(&doc.description),
        escape(&doc.cpus),
        escape(&doc.cpus_from),
        escape(&doc.host.kernel),
        escape(&doc.host.fingerprint),
        escape(&doc.started),
        escape(&doc.ended)
    );
    verdict_table(&mut out, doc);
    for phase in &doc.phases {
        phase_section(&mut out, doc, phase);
    }
    facts(&mut out, doc);
    if !doc.notes.is_empty() {
        out.push_str("<h2>Notes</h2><ul>");
        for note in &doc.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
    let _ = writeln!(
        out,
        "<p><small>latencyd {}</small></p></body></html>",
        escape(&doc.latencyd_version)
    );
    out
}

fn verdict_table(out: &mut String, doc: &Document) {
    out.push_str(
        "<h2>Verdict</h2><table id=\"verdict\"><tr><th class=\"text\">phase</th>\
         <th class=\"text\">case</th><th class=\"text\">verdict</th><th>max µs</th>\
         <th>maximum µs</th><th>p99.99 µs</th><th>samples</th><th class=\"text\">why</th></tr>\n",
    );
    for check in &doc.checks {
        let (class, word) = match (check.passed, check.level.as_str()) {
            (true, _) => ("passed", "passed"),
            (false, "fail") => ("failed", "failed"),
            (false, _) => ("skipped", "warning"),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">facts</td><td class=\"text\">{}</td><td class=\"text {class}\">\
             {word}</td><td></td><td></td><td></td><td></td><td class=\"text\">{}</td></tr>",
            escape(&check.name),
            escape(&check.detail)
        );
    }
    for phase in &doc.phases {
        let maximum = phase
            .maximum_us
            .map_or_else(|| "none".to_string(), |m| m.to_string());
        if phase.cpus.is_empty() {
            let _ = writeln!(
                out,
                "<tr><td class=\"text\">{0}</td><td class=\"text\">{0}</td><td class=\"text {1}\">\
                 {1}</td><td></td><td>{maximum}</td><td></td><td></td><td class=\"text\">{2}</td></tr>",
                escape(&phase.name),
                escape(&phase.status),
                escape(phase.reason.as_deref().unwrap_or(""))
            );
        }
        for cpu in &phase.cpus {
            let s = &cpu.stats;
            let _ = writeln!(
                out,
                "<tr id=\"{0}-cpu{1}\"><td class=\"text\">{0}</td><td class=\"text\">cpu{1}</td>\
                 <td class=\"text {2}\">{2}</td><td>{3}</td><td>{maximum}</td><td>{4}</td>\
                 <td>{5}</td><td class=\"text\">{6}</td></tr>",
                escape(&phase.name),
                cpu.cpu,
                escape(&cpu.verdict),
                us(s.max),
                s.p99_99.map_or_else(String::new, us),
                s.samples,
                escape(cpu.reason.as_deref().unwrap_or(""))
            );
        }
    }
    out.push_str("</table>\n");
}

fn phase_section(out: &mut String, doc: &Document, phase: &PhaseJson) {
    let _ = writeln!(
        out,
        "<h2 id=\"{0}\">{0}</h2>\n<p>{1}, {2} s asked, {3:.1} s run; maximum {4}; <span \
         class=\"{5}\">{5}</span>{6}.</p>",
        escape(&phase.name),
        escape(&phase.tool),
        phase.runtime_s,
        phase.seconds,
        match (&phase.maximum_us, &phase.maximum_from) {
            (Some(m), Some(from)) => format!("{m} µs ({})", escape(from)),
            _ => "none set".to_string(),
        },
        escape(&phase.status),
        phase
            .reason
            .as_deref()
            .map_or_else(String::new, |r| format!(": {}", escape(r)))
    );
    let series: Vec<CpuSeries> = (phase.cpus.iter())
        .filter(|c| !c.histogram_us.is_empty())
        .map(|c| CpuSeries {
            label: format!("CPU {}", c.cpu),
            bins_us: c.histogram_us.iter().map(|(&v, &n)| (v, n)).collect(),
            max_us: c.stats.max,
        })
        .collect();
    if !series.is_empty() {
        let data = PlotData {
            title: format!("{} ({})", phase.name, phase.tool),
            subtitle: format!("{}, Linux {}", doc.host.hostname, doc.host.kernel),
            series,
        };
        match render_svg(&data) {
            Ok(svg) => out.push_str(svg.trim_start_matches(|c| c != '<')),
            Err(e) => {
                let _ = write!(out, "<p>No plot: {}</p>", escape(&e.to_string()));
            }
        }
    }
    stats_table(out, phase);
    for cpu in phase.cpus.iter().filter(|c| !c.timerlat_max_us.is_empty()) {
        let split: Vec<String> = (cpu.timerlat_max_us.iter())
            .map(|(context, max)| format!("{} {}", escape(context), us(*max)))
            .collect();
        let _ = writeln!(
            out,
            "<p>CPU {}: largest latency by context, µs: {}</p>",
            cpu.cpu,
            split.join(", ")
        );
    }
    for note in &phase.notes {
        let _ = writeln!(out, "<p><small>{}</small></p>", escape(note));
    }
    for capture in &phase.captures {
        let _ = writeln!(
            out,
            "<details open><summary>capture {} on CPU {}: {}</summary>{}</details>",
            escape(&capture.summary.id),
            capture.summary.cpu,
            escape(&capture.summary.verdict),
            render_untitled(capture)
        );
    }
}

fn stats_table(out: &mut String, phase: &PhaseJson) {
    if phase.cpus.is_empty() {
        return;
    }
    out.push_str(
        "<table><tr><th>CPU</th><th>samples</th><th>min</th><th>mean</th><th>median</th>\
         <th>mode</th><th>max</th><th>range</th><th>mean abs. dev.</th><th>std. dev.</th>\
         <th>p99</th><th>p99.9</th><th>p99.99</th><th>missed</th><th>overflows</th></tr>\n",
    );
    let f = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.2}"));
    for cpu in &phase.cpus {
        let s = &cpu.stats;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            cpu.cpu,
            s.samples,
            f(s.min),
            f(s.mean),
            f(s.median),
            f(s.mode),
            us(s.max),
            f(s.range),
            f(s.mean_absolute_deviation),
            f(s.standard_deviation),
            f(s.p99),
            f(s.p99_9),
            f(s.p99_99),
            s.missed.map_or_else(String::new, |m| m.to_string()),
            s.overflows
        );
    }
    out.push_str(
        "</table><p><small>µs; median, mode and the deviations from the 1 µs \
                  histogram as rteval computes them</small></p>\n",
    );
}

fn facts(out: &mut String, doc: &Document) {
    out.push_str(
        "<h2>Host facts</h2><details><summary>every fact of the fingerprint</summary>\
                  <table id=\"facts\"><tr><th class=\"text\">fact</th><th class=\"text\">value\
                  </th></tr>\n",
    );
    for (name, fact) in &doc.host.facts {
        let value = match fact {
            FactJson::Value(v) => escape(v),
            FactJson::Absent(why) => format!("<i>absent: {}</i>", escape(why)),
            FactJson::Unknown(why) => format!("<i>unknown: {}</i>", escape(why)),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{value}</td></tr>",
            escape(name)
        );
    }
    out.push_str("</table></details>\n");
}
