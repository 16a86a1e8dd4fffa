//! `/runbooks`: docs/runbooks.md as a page, built into the binary, so that
//! every alert's `runbook_url` resolves on the daemon it is about, wherever
//! it is installed, with the anchors a Markdown viewer gives the headings.

use std::sync::OnceLock;

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// The runbooks, as written in the repository.
pub const SOURCE: &str = include_str!("../../../docs/runbooks.md");

/// The anchor a heading gets on GitHub and here: lower case, blanks to
/// hyphens, other punctuation dropped (`## LatencydMaxLatencyHigh` is
/// `#latencydmaxlatencyhigh`).
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The whole page: self-contained HTML, every heading with its anchor.
/// Rendered once; the text cannot change while the binary runs.
pub fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(SOURCE))
}

fn render(markdown: &str) -> String {
    let mut events: Vec<Event> = Parser::new_ext(markdown, Options::ENABLE_TABLES).collect();
    for start in 0..events.len() {
        if !matches!(events[start], Event::Start(Tag::Heading { id: None, .. })) {
            continue;
        }
        let text: String = events[start + 1..]
            .iter()
            .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
            .filter_map(|e| match e {
                Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                _ => None,
            })
            .collect();
        if let Event::Start(Tag::Heading { id, .. }) = &mut events[start] {
            *id = Some(CowStr::from(anchor(&text)));
        }
    }
    let mut body = String::with_capacity(markdown.len() * 2);
    html::push_html(&mut body, events.into_iter());
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>latencyd runbooks</title><style>\
         body{{font-family:sans-serif;max-width:50em;margin:1em auto;padding:0 1em;line-height:1.45}}\
         code,pre{{background:#f4f4f4}}pre{{padding:.5em;overflow-x:auto}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .4em}}\
         h2{{border-top:1px solid #ccc;padding-top:.6em}}</style></head><body>\n\
         <p><a href=\"/\">latencyd status</a></p>\n{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_heading_gets_its_anchor_and_text_stays_text() {
        let page = render("# Title\n\n## LatencydMaxLatencyHigh\n\nA <b> tag & `code`.\n");
        assert!(page.contains("<h2 id=\"latencydmaxlatencyhigh\">LatencydMaxLatencyHigh</h2>"));
        assert!(page.contains("<h1 id=\"title\">Title</h1>"));
        assert!(page.contains("<code>code</code>"));
        assert!(page.starts_with("<!DOCTYPE html>"));
    }

    #[test]
    fn the_shipped_runbooks_render_with_every_section() {
        let sections = SOURCE.lines().filter(|l| l.starts_with("## ")).count();
        assert!(sections >= 9, "{sections} sections");
        assert_eq!(page().matches("<h2 id=\"").count(), sections);
    }
}
