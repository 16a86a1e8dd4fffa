//! The verdict as JUnit XML, in the form CI systems read (Jenkins,
//! GitLab, GitHub's test reporters): a suite per phase, a test case per
//! CPU (or per fact), `<failure>` with the measured maximum and the
//! maximum it was held to and the captures that explain it, `<error>`
//! for what could not be measured, `<skipped>` for what the kernel lacks.

use std::fmt::Write as _;

use super::verdict::{Case, Status, Verdict};
use crate::markup::escape;

/// What the suites' properties say.
pub struct Header<'a> {
    pub profile: &'a str,
    pub hostname: &'a str,
    pub timestamp: &'a str,
    pub fingerprint: &'a str,
    /// Where each capture was written, by id.
    pub capture_file: &'a dyn Fn(&str) -> Option<String>,
}

pub fn render(verdict: &Verdict, header: &Header) -> String {
    let cases = &verdict.cases;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"latencyd qualify\" {}>",
        counts(cases.iter())
    );
    let mut phases: Vec<&str> = Vec::new();
    for case in cases {
        if !phases.contains(&case.phase.as_str()) {
            phases.push(&case.phase);
        }
    }
    for phase in phases {
        let members: Vec<&Case> = cases.iter().filter(|c| c.phase == phase).collect();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" {} timestamp=\"{}\" hostname=\"{}\">",
            xml(phase),
            counts(members.iter().copied()),
            xml(header.timestamp),
            xml(header.hostname)
        );
        let _ = writeln!(
            out,
            "    <properties>\n      <property name=\"profile\" value=\"{}\"/>\n      \
             <property name=\"fingerprint\" value=\"{}\"/>\n    </properties>",
            xml(header.profile),
            xml(header.fingerprint)
        );
        for case in members {
            testcase(&mut out, case, header);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn testcase(out: &mut String, case: &Case, header: &Header) {
    let _ = write!(
        out,
        "    <testcase classname=\"latencyd.qualify.{}\" name=\"{}\" time=\"{:.3}\"",
        xml(&case.phase),
        xml(&case.name),
        case.seconds
    );
    let body = match &case.status {
        Status::Passed => String::new(),
        Status::Failed(why) => {
            let mut text = why.clone();
            for capture in &case.captures {
                let s = &capture.summary;
                let _ = write!(
                    text,
                    "\ncapture {} on CPU {}: {} µs late, {}",
                    s.id,
                    s.cpu,
                    s.latency_ns / 1_000,
                    s.verdict
                );
                if let Some(file) = (header.capture_file)(&s.id) {
                    let _ = write!(
                        text,
                        "\n  file: {file}\n  draw: latencyd plot --capture {file} -o {}.svg",
                        s.id
                    );
                }
            }
            format!(
                "      <failure message=\"{}\" type=\"maximum\">{}</failure>\n",
                xml(why),
                xml(&text)
            )
        }
        Status::Error(why) => format!(
            "      <error message=\"{}\" type=\"could-not-measure\">{}</error>\n",
            xml(why),
            xml(why)
        ),
        Status::Skipped(why) => format!("      <skipped message=\"{}\"/>\n", xml(why)),
    };
    let system_out = if case.notes.is_empty() {
        String::new()
    } else {
        format!(
            "      <system-out>{}</system-out>\n",
            xml(&case.notes.join("\n"))
        )
    };
    if body.is_empty() && system_out.is_empty() {
        out.push_str("/>\n");
    } else {
        let _ = write!(out, ">\n{body}{system_out}    </testcase>\n");
    }
}

fn counts<'a>(cases: impl Iterator<Item = &'a Case>) -> String {
    let (mut tests, mut failures, mut errors, mut skipped, mut time) = (0, 0, 0, 0, 0.0);
    for case in cases {
        tests += 1;
        time += case.seconds;
        match case.status {
            Status::Passed => {}
            Status::Failed(_) => failures += 1,
            Status::Error(_) => errors += 1,
            Status::Skipped(_) => skipped += 1,
        }
    }
    format!(
        "tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" \
         time=\"{time:.3}\""
    )
}

/// Text made safe for XML, attribute or element, as the plots' text is
/// (`markup::escape`), its line breaks kept.
pub fn xml(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(phase: &str, name: &str, status: Status) -> Case {
        Case {
            phase: phase.into(),
            name: name.into(),
            status,
            seconds: 1.5,
            notes: Vec::new(),
            captures: Vec::new(),
        }
    }

    fn header<'a>(lookup: &'a dyn Fn(&str) -> Option<String>) -> Header<'a> {
        Header {
            profile: "smoke",
            hostname: "rt-01",
            timestamp: "2026-11-28T00:00:00.000Z",
            fingerprint: "abc",
            capture_file: lookup,
        }
    }

    #[test]
    fn suites_count_their_cases_and_the_exit_code_prefers_a_failure() {
        let mut verdict = Verdict {
            cases: vec![
                case("idle", "cpu0", Status::Passed),
                case(
                    "idle",
                    "cpu1",
                    Status::Failed("max 90 µs over 50 µs <\"&\">".into()),
                ),
                case("hwlat", "hwlat", Status::Skipped("no tracer".into())),
                case("busypoll", "busypoll", Status::Error("no CPU".into())),
            ],
        };
        let none = |_: &str| None;
        let xml = render(&verdict, &header(&none));
        assert!(xml.contains(
            "<testsuites name=\"latencyd qualify\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""
        ));
        assert!(xml.contains("<testsuite name=\"idle\" tests=\"2\" failures=\"1\" errors=\"0\""));
        assert!(xml.contains("message=\"max 90 µs over 50 µs &lt;&quot;&amp;&quot;&gt;\""));
        assert!(xml.contains("<skipped message=\"no tracer\"/>"));
        assert!(xml.contains("type=\"could-not-measure\""));
        assert_eq!((verdict.exit_code(), verdict.word()), (1, "failed"));
        verdict.cases.remove(1);
        assert_eq!(
            (verdict.exit_code(), verdict.word()),
            (2, "could-not-measure")
        );
        verdict.cases.pop();
        assert_eq!((verdict.exit_code(), verdict.word()), (0, "passed"));
    }

    #[test]
    fn control_characters_cannot_break_the_document() {
        assert_eq!(xml("a\u{1}b\nc'<"), "a\u{fffd}b\nc&#39;&lt;");
    }
}
