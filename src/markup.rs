//! The markup latencyd writes: HTML pages, SVG pictures and JUnit XML.
//! Names in them come from outside (task names are chosen by whoever
//! starts a task), so every one is escaped; the daemon's pages (the
//! status page, the capture pages) share one style sheet, inlined into
//! each so that a page loads nothing.

use std::fmt::Write as _;

/// Text safe inside HTML, SVG or XML, in element content and quoted
/// attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Nanoseconds as microseconds with one decimal, as the daemon's pages
/// tables show them.
pub fn micros(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1_000.0)
}

/// The style sheet of the daemon's pages.
pub const STYLE: &str = "\
body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.4em;margin:0 0 .2em}\
.sub{color:#555;margin:0 0 1em}\
.ok{color:#17692b;font-weight:bold}.bad{color:#b00020;font-weight:bold}\
.warn{color:#8a5a00;font-weight:bold}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
th{background:#f0f0f0}td.l,th.l{text-align:left}\
tr.problem td{background:#fde8ea}\
.plot svg{max-width:100%;height:auto;border:1px solid #ddd}\
footer{color:#666;font-size:.85em;margin-top:1em}";

/// The head of a capture or error page, up to its body: `title` escaped,
/// the style sheet inlined.
pub fn page_head(html: &mut String, title: &str) {
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}.picture svg{{max-width:100%;height:auto;\
         border:1px solid #ddd}}</style></head><body>\n",
        escape(title)
    );
}

/// The footer of a capture or error page: links to the status page, the
/// captures, the runbooks and the captures' JSON.
pub fn page_foot(html: &mut String) {
    html.push_str(
        "<footer><a href=\"/\">Status</a> · <a href=\"/spikes\">Captures</a> · \
         <a href=\"/runbooks\">Runbooks</a> · <a href=\"/api/v1/spikes\">JSON</a></footer>\n\
         </body></html>\n",
    );
}
