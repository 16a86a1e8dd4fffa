//! The captures for people: `/spikes` lists those kept, each linked to
//! `/spikes/{id}`, one capture with its picture (`forensics::picture`), its
//! causes and what the trace lacked. Self-contained HTML (the picture is
//! inline SVG, the style inline), every shown name escaped.

use std::fmt::Write as _;

use crate::forensics::picture;
use crate::forensics::verdict::{human, scheduling};
use crate::forensics::{Capture, Summary};
use crate::markup::{escape, page_foot, page_head};

/// Who woke late: the CPU's sampler, or an observed task.
fn who(summary: &Summary) -> String {
    match &summary.task {
        Some(task) => format!("task {} (pid {})", task.name, task.pid),
        None => format!("sampler (tid {})", summary.sampler_tid),
    }
}

/// `/spikes`: the captures kept, newest first; or why there are none.
pub fn list_page(nodename: &str, summaries: &[Summary], why_none: Option<&str>) -> String {
    let mut html = String::with_capacity(8 * 1024);
    page_head(&mut html, &format!("Captures — latencyd on {nodename}"));
    let _ = writeln!(
        html,
        "<h1>Captures on {}</h1>\n<p class=\"sub\">What delayed each late wake-up forensics \
         captured, newest first. Open one to see its CPU around the wake-up.</p>",
        escape(nodename)
    );
    if summaries.is_empty() {
        let _ = writeln!(
            html,
            "<p id=\"captures\" class=\"sub\">{}</p>",
            escape(why_none.unwrap_or("No wake-up over the forensics threshold captured yet."))
        );
        page_foot(&mut html);
        return html;
    }
    html.push_str(
        "<table id=\"captures\"><thead><tr><th class=\"l\">When (UTC)</th><th>CPU</th>\
         <th class=\"l\">Late thread</th><th>Latency</th><th class=\"l\">Main cause</th>\
         <th>Share</th><th class=\"l\">Trace</th></tr></thead><tbody>\n",
    );
    for s in summaries {
        let (cause, share) = match s.causes.first() {
            Some(c) => (
                format!("{}: {}", c.kind, c.name),
                format!(
                    "{:.0}%",
                    c.duration_ns as f64 * 100.0 / s.latency_ns.max(1) as f64
                ),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = writeln!(
            html,
            "<tr><td class=\"l\"><a href=\"/spikes/{id}\">{at}</a></td><td>{}</td>\
             <td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{share}</td>\
             <td class=\"l\">{}</td></tr>",
            s.cpu,
            escape(&who(s)),
            escape(&human(s.latency_ns)),
            escape(&cause),
            if s.complete { "complete" } else { "incomplete" },
            id = escape(&s.id),
            at = escape(&s.at),
        );
    }
    html.push_str("</tbody></table>\n");
    page_foot(&mut html);
    html
}

/// `/spikes/{id}`: the capture's picture, causes and facts.
pub fn capture_page(nodename: &str, capture: &Capture) -> String {
    let s = &capture.summary;
    let mut html = String::with_capacity(32 * 1024);
    page_head(
        &mut html,
        &format!("Capture {} — latencyd on {nodename}", s.id),
    );
    // The verdict is said once: the heading says where and when, the
    // picture is drawn without its own titles.
    let _ = writeln!(
        html,
        "<h1>Late wake-up on CPU {}</h1>\n<p class=\"sub\">{} · {} · {} · capture <code>{}</code> \
         (<a href=\"/api/v1/spikes/{}\">JSON</a>)</p>\n<p id=\"verdict\"><b>{}</b></p>",
        s.cpu,
        escape(&who(s)),
        escape(&s.at),
        escape(nodename),
        escape(&s.id),
        escape(&s.id),
        escape(&s.verdict),
    );
    let _ = writeln!(
        html,
        "<div class=\"picture\" id=\"timeline\">{}</div>",
        picture::render_untitled(capture)
    );
    causes_table(&mut html, s);
    facts_list(&mut html, capture);
    page_foot(&mut html);
    html
}

/// The capture's causes, largest first, each with its share of the
/// latency.
fn causes_table(html: &mut String, s: &Summary) {
    html.push_str(
        "<h2>Causes</h2>\n<table id=\"causes\"><thead><tr><th class=\"l\">Kind</th>\
         <th class=\"l\">Name</th><th>PID</th><th class=\"l\">Scheduling</th>\
         <th>Time</th><th>Share</th></tr></thead><tbody>\n",
    );
    for c in &s.causes {
        let _ = writeln!(
            html,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td>\
             <td>{}</td><td>{:.1}%</td></tr>",
            escape(&c.kind),
            escape(&c.name),
            c.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
            escape(&scheduling(c.policy.as_deref(), c.priority).unwrap_or_else(|| "-".into())),
            escape(&human(c.duration_ns)),
            c.duration_ns as f64 * 100.0 / s.latency_ns.max(1) as f64,
        );
    }
    html.push_str("</tbody></table>\n");
}

/// What else the capture knows: its trigger, timerlat's split, the timer
/// interrupt, steal, SMIs, and how complete its trace is.
fn facts_list(html: &mut String, capture: &Capture) {
    let s = &capture.summary;
    html.push_str("<h2>Facts</h2>\n<ul id=\"facts\">\n");
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(html, "<li>{}: {}</li>", escape(name), escape(&value));
    };
    fact("Trigger", crate::forensics::verdict::trigger(s));
    if let Some((name, split)) = crate::forensics::verdict::split(s) {
        fact(name, split);
    }
    fact(
        "Timer interrupt late by",
        s.timer_late_ns.map_or("not traced".to_string(), human),
    );
    fact(
        "Hypervisor steal around it",
        s.steal_ns.map_or("not reported".to_string(), human),
    );
    fact(
        "SMIs since the reading before it",
        s.smi_count
            .map_or("not readable".to_string(), |n| n.to_string()),
    );
    fact(
        "Trace",
        if s.complete {
            "complete: every nanosecond of the latency is attributed".to_string()
        } else {
            format!("incomplete: {}", s.gaps.join("; "))
        },
    );
    fact(
        "Events kept",
        format!("{} ({} omitted)", capture.events.len(), s.events_omitted),
    );
    html.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forensics::{Cause, TaskRef};

    fn hostile_capture() -> Capture {
        let evil = "<script>alert('x')</script>&\"";
        Capture {
            summary: Summary {
                id: "1795315538123-cpu1".to_string(),
                cpu: 1,
                task: Some(TaskRef {
                    name: evil.to_string(),
                    pid: 77,
                    container: evil.to_string(),
                }),
                trigger: "threshold".to_string(),
                at: "2026-11-26T06:00:00.000Z".to_string(),
                latency_ns: 300_000,
                deadline_mono_ns: 1_000_000,
                wakeup_mono_ns: 1_300_000,
                sampler_tid: 77,
                verdict: evil.to_string(),
                causes: vec![Cause {
                    kind: "task".to_string(),
                    name: evil.to_string(),
                    pid: Some(4242),
                    policy: Some(evil.to_string()),
                    priority: Some(0),
                    duration_ns: 270_000,
                }],
                timer_late_ns: None,
                complete: false,
                gaps: vec![evil.to_string()],
                steal_ns: None,
                smi_count: None,
                events_omitted: 0,
                timerlat: None,
                no_sampler_capture: None,
            },
            events: vec![crate::forensics::events::Event {
                ts_ns: 900_000,
                task: evil.to_string(),
                pid: 4242,
                cpu: 1,
                event: "sched_switch".to_string(),
                fields: format!(
                    "prev_comm=a prev_pid=1 prev_prio=120 prev_state=R ==> next_comm={evil} \
                     next_pid=4242 next_prio=120"
                ),
            }],
        }
    }

    #[test]
    fn every_name_is_escaped() {
        let capture = hostile_capture();
        for html in [
            capture_page("<host>", &capture),
            list_page("<host>", std::slice::from_ref(&capture.summary), None),
        ] {
            assert!(!html.contains("<script>"), "{html}");
            assert!(!html.contains("<host>"), "{html}");
        }
        let page = capture_page("h", &capture);
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(page.contains("<svg"), "the picture is inline");
        assert!(
            page.contains("<td>90.0%</td>"),
            "the main cause's share: {page}"
        );
    }

    #[test]
    fn a_capture_with_timerlat_shows_its_split() {
        let mut capture = hostile_capture();
        let html = capture_page("h", &capture);
        assert!(!html.contains("timerlat's split"), "none without timerlat");
        capture.summary.timerlat = Some(crate::forensics::TimerlatSplit {
            irq_ns: Some(12_000),
            thread_ns: 500_300_000,
            user_ns: None,
            thread_mono_ns: 1_300_000,
        });
        let html = capture_page("h", &capture);
        assert!(
            html.contains(
                "timerlat&#39;s split of its period: IRQ 12us, thread 500.30ms, return to user \
                 not read"
            ),
            "{html}"
        );
    }

    #[test]
    fn timerlats_own_capture_says_why_no_samplers_covers_it() {
        let mut capture = hostile_capture();
        capture.summary.trigger = "timerlat".to_string();
        // Written before the reason was kept: all three.
        let html = capture_page("h", &capture);
        assert!(
            html.contains("the samplers were on time, their capture"),
            "{html}"
        );
        capture.summary.no_sampler_capture = Some(crate::forensics::NoSamplerCapture::RateLimited);
        let html = capture_page("h", &capture);
        assert!(
            html.contains(
                "(the sampler&#39;s capture of the same period was over the rate limits)"
            ),
            "{html}"
        );
        assert!(!html.contains("were on time"), "{html}");
    }

    #[test]
    fn the_list_links_each_capture_and_says_why_it_is_empty() {
        let capture = hostile_capture();
        let html = list_page("h", std::slice::from_ref(&capture.summary), None);
        assert!(html.contains("<a href=\"/spikes/1795315538123-cpu1\">"));
        let empty = list_page("h", &[], Some("forensics is off"));
        assert!(empty.contains("forensics is off"));
        assert!(!empty.contains("<table"));
    }
}
