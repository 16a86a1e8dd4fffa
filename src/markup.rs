//! Text made safe for the markup latencyd writes: HTML pages, SVG
//! pictures and JUnit XML. Names in them come from outside (task names
//! are chosen by whoever starts a task), so every one is escaped.

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
