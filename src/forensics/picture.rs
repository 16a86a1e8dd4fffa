//! One capture as a picture: the CPU around the late wake-up, one lane
//! per source (`forensics::timeline`), the deadline, the wake-up and the
//! latency marked, and the main cause with its share written above.
//! Plain SVG written here (no font is needed to draw it: the viewer's
//! sans-serif sets the text); every name in it is escaped, since task
//! names are chosen by whoever starts a task.

use std::fmt::Write as _;

use super::Capture;
use super::timeline::{self, LaneKind, Timeline};
use super::verdict::human;
use crate::markup::escape;

/// The picture's width and the label column's.
const WIDTH: f64 = 1100.0;
const LABELS: f64 = 330.0;
const RIGHT: f64 = 70.0;
const LANE: f64 = 22.0;
const TOP: f64 = 118.0;
/// Lanes drawn at most; the rest are counted under the picture.
pub const MAX_LANES: usize = 40;
/// Label characters shown before the name is cut (the whole name is the
/// lane's tooltip).
const LABEL_CHARS: usize = 44;

fn color(kind: LaneKind) -> &'static str {
    match kind {
        LaneKind::Late => "#2ca02c",
        LaneKind::Irq => "#d62728",
        LaneKind::Softirq => "#ff7f0e",
        LaneKind::Task => "#1f77b4",
        LaneKind::Idle => "#b0b0b0",
    }
}

/// The main cause and its share of the latency, in words.
pub fn main_cause(capture: &Capture) -> String {
    let s = &capture.summary;
    match s.causes.first() {
        Some(c) => {
            let who = match c.pid {
                Some(pid) => format!("{} {} (pid {pid})", c.kind, c.name),
                None => format!("{} {}", c.kind, c.name),
            };
            format!(
                "Main cause: {who}: {}, {:.0}% of the {} latency",
                human(c.duration_ns),
                c.duration_ns as f64 * 100.0 / s.latency_ns.max(1) as f64,
                human(s.latency_ns)
            )
        }
        None => format!(
            "No cause could be named for the {} latency",
            human(s.latency_ns)
        ),
    }
}

/// A tick step of 1, 2 or 5 times a power of ten, in ns, giving about
/// eight ticks over `span_ns`.
fn tick_step(span_ns: u64) -> u64 {
    let rough = (span_ns / 8).max(1);
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            if step * m >= rough {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// A time relative to the deadline, as the axis labels it.
fn relative(ns: i128) -> String {
    let sign = if ns < 0 {
        "-"
    } else if ns > 0 {
        "+"
    } else {
        ""
    };
    let abs = ns.unsigned_abs() as u64;
    if abs == 0 {
        "deadline".to_string()
    } else if abs.is_multiple_of(1_000_000) {
        format!("{sign}{} ms", abs / 1_000_000)
    } else if abs.is_multiple_of(1_000) {
        format!("{sign}{} µs", abs / 1_000)
    } else {
        format!("{sign}{:.1} µs", abs as f64 / 1e3)
    }
}

/// The capture in `text`: a capture's JSON (the capture directory's
/// files, `/api/v1/spikes/{id}`), or `measure --json` output holding
/// `latencyd.captures`, of which the one named `id` or else the latest
/// of the largest latency.
pub fn read(text: &str, id: Option<&str>) -> Result<Capture, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list = match value.pointer("/latencyd/captures") {
        Some(list) => list.clone(),
        None if value.pointer("/latencyd").is_some() => {
            return Err(
                "a measure --json file without captures: measure records them with -b or \
                 --forensics (as root, with tracefs)"
                    .to_string(),
            );
        }
        None => serde_json::Value::Array(vec![value]),
    };
    let captures: Vec<Capture> = serde_json::from_value(list)
        .map_err(|e| format!("not a capture (GET /api/v1/spikes/ID gives one): {e}"))?;
    match id {
        Some(id) => captures
            .iter()
            .find(|c| c.summary.id == id)
            .cloned()
            .ok_or_else(|| {
                let ids: Vec<&str> = captures.iter().map(|c| c.summary.id.as_str()).collect();
                format!("no capture {id} here; it holds {}", ids.join(", "))
            }),
        None => captures
            .iter()
            .rev()
            .max_by_key(|c| c.summary.latency_ns)
            .cloned()
            .ok_or_else(|| "no capture in it".to_string()),
    }
}

/// The height of the three lines of text a standalone picture has above
/// its lanes.
const TITLES: f64 = 60.0;

/// `capture`'s picture as a standalone SVG document: its verdict and main
/// cause written above the timeline.
pub fn render(capture: &Capture) -> String {
    draw(capture, &timeline::of(capture), true)
}

/// `capture`'s picture for its page, which says the verdict once above it:
/// the timeline alone.
pub fn render_untitled(capture: &Capture) -> String {
    draw(capture, &timeline::of(capture), false)
}

fn draw(capture: &Capture, t: &Timeline, titled: bool) -> String {
    let shown = t.lanes.len().min(MAX_LANES);
    let top = if titled { TOP } else { TOP - TITLES };
    let picture = Picture {
        t,
        top,
        titled,
        height: top + LANE * shown.max(1) as f64 + 70.0,
        lanes_bottom: top + LANE * shown.max(1) as f64,
        span: (t.to_ns - t.from_ns).max(1) as f64,
    };
    let mut svg = String::with_capacity(16 * 1024);
    picture.head(&mut svg, capture);
    picture.latency(&mut svg, capture.summary.latency_ns);
    picture.axis(&mut svg);
    picture.lanes(&mut svg);
    picture.marks(&mut svg);
    picture.legend(&mut svg, capture);
    svg.push_str("</svg>\n");
    svg
}

/// A capture's timeline laid out: its height, where the lanes end, and
/// the time it spans.
struct Picture<'a> {
    t: &'a Timeline,
    /// Where the lanes start: below the titles when there are any.
    top: f64,
    titled: bool,
    height: f64,
    lanes_bottom: f64,
    span: f64,
}

impl Picture<'_> {
    /// The x of a time.
    fn x(&self, ns: u64) -> f64 {
        let plot_width = WIDTH - LABELS - RIGHT;
        LABELS + (ns.saturating_sub(self.t.from_ns)) as f64 / self.span * plot_width
    }

    /// The document's start and the three lines of text above the lanes.
    fn head(&self, svg: &mut String, capture: &Capture) {
        let s = &capture.summary;
        let height = self.height;
        let _ = writeln!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
             viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\" \
             role=\"img\" aria-label=\"{}\">",
            escape(&format!(
                "CPU {} around the late wake-up of capture {}",
                s.cpu, s.id
            ))
        );
        svg.push_str("<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
        if !self.titled {
            return;
        }
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{}</text>\n\
             <text x=\"10\" y=\"44\" font-size=\"14\" id=\"main-cause\">{}</text>\n\
             <text x=\"10\" y=\"64\" fill=\"#444\">{}</text>",
            escape(&format!(
                "CPU {}: woke {} late at {} (capture {})",
                s.cpu,
                human(s.latency_ns),
                s.at,
                s.id
            )),
            escape(&main_cause(capture)),
            escape(&s.verdict),
        );
    }

    /// The latency: from the deadline to the wake-up, over every lane.
    fn latency(&self, svg: &mut String, latency_ns: u64) {
        let (dx, wx) = (self.x(self.t.deadline_ns), self.x(self.t.wakeup_ns));
        let _ = writeln!(
            svg,
            "<rect x=\"{dx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#d62728\" \
             fill-opacity=\"0.10\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#a00\" \
             font-weight=\"bold\">latency {}</text>",
            self.top - 8.0,
            (wx - dx).max(1.0),
            self.lanes_bottom - self.top + 8.0,
            (dx + wx) / 2.0,
            self.top - 30.0,
            escape(&human(latency_ns)),
        );
    }

    /// The axis: ticks relative to the deadline.
    fn axis(&self, svg: &mut String) {
        let t = self.t;
        let step = tick_step(t.to_ns - t.from_ns);
        let before = (t.deadline_ns - t.from_ns) / step;
        let after = (t.to_ns - t.deadline_ns) / step;
        let ticks = (0..=before)
            .rev()
            .map(|k| (t.deadline_ns - k * step, -i128::from(k)))
            .chain((1..=after).map(|k| (t.deadline_ns + k * step, i128::from(k))));
        let lanes_bottom = self.lanes_bottom;
        for (tick, k) in ticks {
            let tx = self.x(tick);
            let _ = writeln!(
                svg,
                "<line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{lanes_bottom:.1}\" \
                 stroke=\"#e4e4e4\"/>\n<text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
                 fill=\"#666\" font-size=\"10\">{}</text>",
                self.top - 4.0,
                lanes_bottom + 14.0,
                escape(&relative(k * i128::from(step))),
            );
        }
    }

    /// A lane per interrupt, softirq and task, the late thread first.
    fn lanes(&self, svg: &mut String) {
        for (i, lane) in self.t.lanes.iter().take(MAX_LANES).enumerate() {
            let y = self.top + LANE * i as f64;
            let mut label: String = lane.name.chars().take(LABEL_CHARS).collect();
            if lane.name.chars().count() > LABEL_CHARS {
                label.push('…');
            }
            let share = if lane.in_latency_ns > 0 {
                format!(" {}", human(lane.in_latency_ns))
            } else {
                String::new()
            };
            let _ = writeln!(
                svg,
                "<g class=\"lane {kind}\"><title>{title}</title>\
                 <rect x=\"0\" y=\"{y:.1}\" width=\"{WIDTH}\" height=\"{LANE}\" fill=\"{band}\"/>\
                 <text x=\"{lx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\">{label}\
                 <tspan fill=\"#a00\">{share}</tspan></text>",
                kind = lane.kind.name(),
                title = escape(&format!(
                    "{} ({}): {} within the latency",
                    lane.name,
                    lane.kind.name(),
                    human(lane.in_latency_ns)
                )),
                band = if i % 2 == 0 { "#fafafa" } else { "#ffffff" },
                lx = LABELS - 8.0,
                ty = y + 15.0,
                label = escape(&label),
                share = escape(&share),
            );
            for &(from, to) in &lane.spans {
                let (x1, x2) = (self.x(from), self.x(to));
                let _ = write!(
                    svg,
                    "<rect x=\"{x1:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                    y + 4.0,
                    (x2 - x1).max(1.0),
                    LANE - 8.0,
                    color(lane.kind),
                );
            }
            svg.push_str("</g>\n");
        }
        if self.t.lanes.is_empty() {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#a00\">No events of this CPU were kept: \
                 nothing to draw.</text>",
                LABELS,
                self.top + 15.0
            );
        }
    }

    /// Deadline, wake-up of the thread, and its return to running.
    fn marks(&self, svg: &mut String) {
        let lanes_bottom = self.lanes_bottom;
        let mut mark = |at: u64, label: &str, dash: &str, anchor: &str, row: f64| {
            let mx = self.x(at);
            let _ = writeln!(
                svg,
                "<line x1=\"{mx:.1}\" y1=\"{:.1}\" x2=\"{mx:.1}\" y2=\"{lanes_bottom:.1}\" \
                 stroke=\"#000\" stroke-width=\"1.5\"{dash}/>\n<text x=\"{mx:.1}\" y=\"{:.1}\" \
                 text-anchor=\"{anchor}\" font-size=\"11\">{}</text>",
                self.top - 12.0,
                self.top - 14.0 - row,
                escape(label),
            );
        };
        mark(
            self.t.deadline_ns,
            "deadline",
            " stroke-dasharray=\"4 3\"",
            "end",
            0.0,
        );
        if let Some(woken) = self.t.woken_ns {
            mark(woken, "woken", " stroke-dasharray=\"1 2\"", "middle", 12.0);
        }
        mark(self.t.wakeup_ns, "wake-up", "", "start", 0.0);
    }

    /// The legend, and what the picture lacks.
    fn legend(&self, svg: &mut String, capture: &Capture) {
        let s = &capture.summary;
        let mut lx = LABELS;
        let ly = self.lanes_bottom + 34.0;
        for kind in [
            LaneKind::Late,
            LaneKind::Irq,
            LaneKind::Softirq,
            LaneKind::Task,
            LaneKind::Idle,
        ] {
            let _ = writeln!(
                svg,
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
                ly - 10.0,
                color(kind),
                lx + 16.0,
                match kind {
                    LaneKind::Late => "the late thread",
                    LaneKind::Irq => "interrupt",
                    LaneKind::Softirq => "softirq",
                    LaneKind::Task => "other task",
                    LaneKind::Idle => "idle",
                }
            );
            lx += 120.0;
        }
        let mut notes = Vec::new();
        if self.t.lanes.len() > MAX_LANES {
            notes.push(format!(
                "{} more lanes not drawn",
                self.t.lanes.len() - MAX_LANES
            ));
        }
        if !s.complete {
            notes.push(format!("incomplete trace: {}", s.gaps.join("; ")));
        }
        if s.events_omitted > 0 {
            notes.push(format!("{} events omitted", s.events_omitted));
        }
        if !notes.is_empty() {
            let _ = writeln!(
                svg,
                "<text x=\"10\" y=\"{:.1}\" fill=\"#a00\">{}</text>",
                ly + 22.0,
                escape(&notes.join("; "))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'\u{7}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\u{fffd}"
        );
    }

    #[test]
    fn a_malformed_capture_is_drawn_without_panicking() {
        let text = |deadline: u64, wakeup: u64, ts: &[u64]| {
            let events: Vec<String> = ts
                .iter()
                .map(|t| {
                    format!(
                        r#"{{"ts_ns":{t},"task":"x","pid":5,"cpu":0,"event":"irq_handler_exit","fields":""}}"#
                    )
                })
                .collect();
            format!(
                r#"{{"id":"1795315538123-cpu0","cpu":0,"at":"","latency_ns":0,
                   "deadline_mono_ns":{deadline},"wakeup_mono_ns":{wakeup},"sampler_tid":0,
                   "verdict":"","causes":[],"timer_late_ns":null,"complete":false,"gaps":[],
                   "steal_ns":null,"smi_count":null,"events_omitted":0,"events":[{}]}}"#,
                events.join(",")
            )
        };
        for (deadline, wakeup, ts) in [
            (1_000u64, 0u64, vec![]),
            (u64::MAX, u64::MAX, vec![0, u64::MAX]),
            (0, u64::MAX, vec![u64::MAX, 0, 7]),
            (500, 400, vec![450, 300, 900]),
        ] {
            let capture = read(&text(deadline, wakeup, &ts), None).unwrap();
            let svg = render(&capture);
            assert!(
                svg.trim_end().ends_with("</svg>"),
                "{deadline} {wakeup} {ts:?}"
            );
        }
    }

    #[test]
    fn ticks_are_round_and_relative_to_the_deadline() {
        assert_eq!(tick_step(400_000), 50_000);
        assert_eq!(tick_step(8), 1);
        assert_eq!(tick_step(9_000_000), 2_000_000);
        assert_eq!(relative(0), "deadline");
        assert_eq!(relative(-50_000), "-50 µs");
        assert_eq!(relative(2_000_000), "+2 ms");
        assert_eq!(relative(1_500), "+1.5 µs");
    }
}
