//! The HdrHistogram interval log format (`.hlog`), as latencyd writes and
//! reads it.
//!
//! A file starts with comment lines (the format version, `StartTime`,
//! `BaseTime: 0`, so every timestamp is absolute, seconds since the
//! epoch) and the legend; then each interval gives, per CPU, one entry
//! line `Tag=cpuN,start,length,max,payload`: start and length in seconds,
//! the maximum in milliseconds with six decimals (so the exact
//! nanosecond), and the histogram as base64 of HdrHistogram's compressed
//! V2 encoding, in nanoseconds. HdrHistogram's own readers (Java, Python,
//! Go, Rust) read these lines and skip comments.
//!
//! Before each entry latencyd writes one comment line of its own,
//! `#[latencyd cpuN count=… sum=… min=… max=… missed=… overflows=…
//! spikes=… threshold=… fingerprint=…]`: the exact numbers a histogram
//! cannot give back, and the identifier of the host's facts it was
//! measured under. An entry without it (a log from another tool, or one
//! whose comment was lost) is read from its histogram alone.
//!
//! The facts themselves are one comment line, `#[latencyd host ID
//! at=SECONDS<TAB>name=value<TAB>…]`, at the top of each file and before
//! the first interval measured under different ones, so a record read
//! years later says under which configuration each interval was measured.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

pub use super::gap::{Gap, GapReason};
pub use super::hwnoise::{HwnoiseLine, HwnoiseOutcome};
use super::seconds::{decimal_ns, seconds};
use crate::calendar::format_rfc3339_ms;
use crate::host::Fingerprint;
use crate::stats::{Exact, LatencyStats};
use crate::units::NS_PER_SEC;

/// What was measured: written once at the top of each file, so reports
/// and plots of a record name the host and the sampling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub host: String,
    pub kernel: String,
    pub preempt_rt: bool,
    pub interval_ns: u64,
    pub policy: String,
    pub priority: i32,
}

impl Context {
    /// What a sampler set of this host and these settings measures.
    pub fn of(
        host: &crate::host::HostInfo,
        interval_ns: u64,
        policy: &str,
        priority: i32,
    ) -> Context {
        Context {
            host: host.uname.nodename.clone(),
            kernel: host.uname.release.clone(),
            preempt_rt: host.preempt_rt,
            interval_ns,
            policy: policy.to_string(),
            priority,
        }
    }

    fn line(&self) -> String {
        let word = |s: &str| -> String {
            let w: String = s
                .chars()
                .map(|c| {
                    if c.is_whitespace() || c == ']' {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            if w.is_empty() { "-".to_string() } else { w }
        };
        format!(
            "#[latencyd context host={} kernel={} preempt_rt={} interval_ns={} policy={} priority={}]\n",
            word(&self.host),
            word(&self.kernel),
            self.preempt_rt,
            self.interval_ns,
            word(&self.policy),
            self.priority
        )
    }

    fn parse(rest: &str) -> Option<Context> {
        let mut c = Context::default();
        for pair in rest.strip_suffix(']')?.split(' ') {
            let (key, value) = pair.split_once('=')?;
            match key {
                "host" => c.host = value.to_string(),
                "kernel" => c.kernel = value.to_string(),
                "preempt_rt" => c.preempt_rt = value == "true",
                "interval_ns" => c.interval_ns = value.parse().ok()?,
                "policy" => c.policy = value.to_string(),
                "priority" => c.priority = value.parse().ok()?,
                _ => {}
            }
        }
        Some(c)
    }
}

/// The first lines of every file.
pub fn header(start_unix_ns: u64, context: Option<&Context>) -> String {
    let mut text = format!(
        "#[latencyd wake-up latency record: one tag per CPU (cpuN), values in nanoseconds, \
         Interval_Max in milliseconds]\n\
         #[Histogram log format version 1.3]\n\
         #[StartTime: {} (seconds since epoch), {}]\n\
         #[BaseTime: 0.000 (seconds since epoch)]\n\
         \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
        seconds(start_unix_ns),
        format_rfc3339_ms(start_unix_ns)
    );
    if let Some(context) = context {
        text.push_str(&context.line());
    }
    text
}

/// One CPU's interval.
#[derive(Debug, Clone)]
pub struct Entry {
    pub cpu: usize,
    /// When the interval began, nanoseconds since the epoch.
    pub start_ns: u64,
    pub length_ns: u64,
    pub stats: LatencyStats,
    /// The identifier of the host's facts (`host::Fingerprint::id`) it was
    /// measured under, where the record says.
    pub fingerprint: Option<String>,
    /// The load running while it was measured (a profile's name, from the
    /// daemon's `[load]` windows or `measure --load`); None: no load.
    pub load: Option<String>,
    /// Measured while a `[hwnoise]` window spun the CPU with interrupts
    /// off: latencyd's own disturbance, kept out of reports.
    pub hwnoise: bool,
    /// The kernel's timerlat rather than a sampler: its context (`irq`,
    /// `thread`, `user`), tagged `timerlat-CONTEXT-cpuN`.
    pub timerlat: Option<String>,
}

impl Entry {
    pub fn end_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.length_ns)
    }
}

/// Appends one entry (its comment line and its entry line) to `out`.
pub fn encode_entry(entry: &Entry, out: &mut String) {
    let s = &entry.stats;
    let e = s.exact();
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&s.hdr().to_hdrhistogram(), &mut bytes)
        .expect("serializing into memory does not fail");
    let fingerprint = entry
        .fingerprint
        .as_ref()
        .map_or(String::new(), |id| format!(" fingerprint={id}"));
    let load = entry
        .load
        .as_ref()
        .map_or(String::new(), |name| format!(" load={name}"));
    let hwnoise = if entry.hwnoise { " hwnoise" } else { "" };
    let source = entry
        .timerlat
        .as_ref()
        .map_or(String::new(), |context| format!("timerlat {context} "));
    out.push_str(&format!(
        "#[latencyd {source}cpu{} count={} sum={} min={} max={} missed={} overflows={} \
         spikes={} threshold={}{fingerprint}{load}{hwnoise}]\n",
        entry.cpu,
        e.count,
        e.sum_ns,
        e.min_ns,
        e.max_ns,
        e.missed,
        e.hdr_overflows,
        e.spikes,
        s.spike_threshold_ns()
    ));
    let tag = entry
        .timerlat
        .as_ref()
        .map_or(String::new(), |context| format!("timerlat-{context}-"));
    out.push_str(&format!(
        "Tag={tag}cpu{},{},{}.{:03},{}.{:06},{}\n",
        entry.cpu,
        seconds(entry.start_ns),
        entry.length_ns / NS_PER_SEC,
        entry.length_ns % NS_PER_SEC / 1_000_000,
        e.max_ns / 1_000_000,
        e.max_ns % 1_000_000,
        STANDARD.encode(&bytes)
    ));
}

/// The host facts line: the facts in force from the interval starting at
/// `at_unix_ns` on.
pub fn host_line(fingerprint: &Fingerprint, at_unix_ns: u64) -> String {
    format!(
        "#[latencyd host {} at={}\t{}]\n",
        fingerprint.id(),
        seconds(at_unix_ns),
        fingerprint.to_line()
    )
}

/// A host facts line read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// The identifier as written (a later version may hash differently).
    pub id: String,
    pub at_unix_ns: u64,
    pub fingerprint: Fingerprint,
}

impl HostFacts {
    fn parse(rest: &str) -> Option<HostFacts> {
        let rest = rest.strip_suffix(']')?;
        let (head, facts) = rest.split_once('\t').unwrap_or((rest, ""));
        let (id, at) = head.split_once(' ')?;
        let at_unix_ns = decimal_ns(at.strip_prefix("at=")?, NS_PER_SEC)?;
        Some(HostFacts {
            id: id.to_string(),
            at_unix_ns,
            fingerprint: Fingerprint::from_line(facts),
        })
    }
}

/// What one line was.
#[derive(Debug)]
pub enum Line {
    Entry(Box<Entry>),
    /// latencyd's context line.
    Context(Context),
    /// The host's facts from here on.
    Host(Box<HostFacts>),
    /// A stretch without samples on one CPU.
    Gap(Gap),
    /// A `[hwnoise]` window.
    Hwnoise(Box<HwnoiseLine>),
    /// A header, comment, legend or blank line, or an entry of another
    /// tag than `cpuN`.
    Other,
    /// A line that should be an entry and cannot be read, and why.
    Corrupt(String),
}

/// Reads lines in order, pairing each entry with latencyd's comment line
/// before it.
#[derive(Debug, Default)]
pub struct LineParser {
    pending: Option<Pending>,
}

/// latencyd's comment line, waiting for its entry.
#[derive(Debug)]
struct Pending {
    cpu: usize,
    exact: Exact,
    threshold: u64,
    fingerprint: Option<String>,
    load: Option<String>,
    hwnoise: bool,
    timerlat: Option<String>,
}

impl LineParser {
    pub fn line(&mut self, line: &str) -> Line {
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = line.strip_prefix("#[latencyd context ") {
            return Context::parse(rest).map_or(Line::Other, Line::Context);
        }
        if let Some(rest) = line.strip_prefix("#[latencyd host ") {
            return HostFacts::parse(rest).map_or_else(
                || Line::Corrupt("a host facts line that cannot be read".to_string()),
                |h| Line::Host(Box::new(h)),
            );
        }
        if let Some(rest) = line.strip_prefix("#[latencyd gap cpu") {
            return Gap::parse(rest).map_or_else(
                || Line::Corrupt("a gap line that cannot be read".to_string()),
                Line::Gap,
            );
        }
        if let Some(rest) = line.strip_prefix("#[latencyd hwnoise ") {
            return HwnoiseLine::parse(rest).map_or_else(
                || Line::Corrupt("a hwnoise line that cannot be read".to_string()),
                |h| Line::Hwnoise(Box::new(h)),
            );
        }
        if let Some(rest) = line.strip_prefix("#[latencyd timerlat ") {
            let (context, rest) = rest.split_once(' ').unwrap_or_default();
            self.pending = rest
                .strip_prefix("cpu")
                .filter(|_| timerlat_context(context))
                .and_then(parse_exact)
                .map(|p| Pending {
                    timerlat: Some(context.to_string()),
                    ..p
                });
            return if self.pending.is_some() {
                Line::Other
            } else {
                Line::Corrupt("a latencyd timerlat comment line that cannot be read".to_string())
            };
        }
        if let Some(rest) = line.strip_prefix("#[latencyd cpu") {
            self.pending = parse_exact(rest);
            return if self.pending.is_some() {
                Line::Other
            } else {
                Line::Corrupt("a latencyd comment line that cannot be read".to_string())
            };
        }
        let pending = self.pending.take();
        let Some(rest) = line.strip_prefix("Tag=") else {
            // Headers, comments, the legend; untagged entries are not ours.
            return Line::Other;
        };
        // timerlat's entries: `Tag=timerlat-CONTEXT-cpuN`.
        let (timerlat, tagged) = match rest.strip_prefix("timerlat-") {
            Some(r) => match r.split_once('-') {
                Some((context, r)) if timerlat_context(context) => (Some(context), r),
                _ => return Line::Other,
            },
            None => (None, rest),
        };
        let Some(cpu) = tagged
            .strip_prefix("cpu")
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return Line::Other;
        };
        // A comment line of the other source is not this entry's.
        let pending = pending.filter(|p| p.timerlat.as_deref() == timerlat);
        let parsed = parse_entry(cpu, rest, pending).map(|mut entry| {
            entry.timerlat = timerlat.map(str::to_string);
            entry
        });
        match parsed {
            Ok(entry) => Line::Entry(Box::new(entry)),
            Err(why) => Line::Corrupt(why),
        }
    }
}

/// The contexts of timerlat's entries.
fn timerlat_context(word: &str) -> bool {
    matches!(word, "irq" | "thread" | "user")
}

fn parse_exact(rest: &str) -> Option<Pending> {
    let rest = rest.strip_suffix(']')?;
    let mut words = rest.split(' ');
    let cpu = words.next()?.parse().ok()?;
    let mut get = |name: &str| -> Option<u128> {
        words
            .next()?
            .strip_prefix(name)?
            .strip_prefix('=')?
            .parse()
            .ok()
    };
    let count = u64::try_from(get("count")?).ok()?;
    let sum_ns = get("sum")?;
    let min_ns = u64::try_from(get("min")?).ok()?;
    let max_ns = u64::try_from(get("max")?).ok()?;
    let missed = u64::try_from(get("missed")?).ok()?;
    let hdr_overflows = u64::try_from(get("overflows")?).ok()?;
    let spikes = u64::try_from(get("spikes")?).ok()?;
    let threshold = u64::try_from(get("threshold")?).ok()?;
    // Written since the record carries host facts (fingerprint) and load
    // windows (load); other words are skipped.
    let rest: Vec<&str> = words.collect();
    let word = |name: &str| {
        rest.iter()
            .find_map(|w| w.strip_prefix(name))
            .map(str::to_string)
    };
    let fingerprint = word("fingerprint=");
    let load = word("load=");
    let hwnoise = rest.contains(&"hwnoise");
    let exact = Exact {
        count,
        sum_ns,
        min_ns,
        max_ns,
        missed,
        hdr_overflows,
        spikes,
    };
    Some(Pending {
        cpu,
        exact,
        threshold,
        fingerprint,
        load,
        hwnoise,
        timerlat: None,
    })
}

fn parse_entry(cpu: usize, rest: &str, pending: Option<Pending>) -> Result<Entry, String> {
    let fields: Vec<&str> = rest.splitn(5, ',').collect();
    let [_, start, length, max, payload] = fields[..] else {
        return Err("an entry needs Tag,start,length,max,histogram".to_string());
    };
    let start_ns =
        decimal_ns(start, NS_PER_SEC).ok_or_else(|| format!("bad start time '{start}'"))?;
    let length_ns =
        decimal_ns(length, NS_PER_SEC).ok_or_else(|| format!("bad interval length '{length}'"))?;
    let max_ns = decimal_ns(max, 1_000_000).ok_or_else(|| format!("bad maximum '{max}'"))?;
    let hdr = super::payload::decode(payload)?;
    let pending = pending.filter(|p| p.cpu == cpu);
    let fingerprint = pending.as_ref().and_then(|p| p.fingerprint.clone());
    let load = pending.as_ref().and_then(|p| p.load.clone());
    let hwnoise = pending.as_ref().is_some_and(|p| p.hwnoise);
    let stats = match pending {
        Some(Pending {
            exact, threshold, ..
        }) if exact.count == hdr.len() + exact.hdr_overflows && plausible(&exact) => {
            LatencyStats::from_parts(threshold, &hdr, exact)
        }
        _ => {
            let count = hdr.len();
            let exact = Exact {
                count,
                sum_ns: (hdr.mean() * count as f64).round() as u128,
                min_ns: hdr.min(),
                max_ns: if count > 0 { max_ns.max(hdr.min()) } else { 0 },
                missed: 0,
                hdr_overflows: 0,
                spikes: 0,
            };
            LatencyStats::from_parts(u64::MAX, &hdr, exact)
        }
    };
    Ok(Entry {
        cpu,
        start_ns,
        length_ns,
        stats,
        fingerprint,
        load,
        hwnoise,
        timerlat: None,
    })
}

/// Whether a comment's exact figures can be those of one set of samples:
/// the minimum at most the maximum, the sum between count × minimum and
/// count × maximum. A forged or torn comment that fails is not trusted;
/// the histogram's own figures stand instead.
fn plausible(exact: &Exact) -> bool {
    let count = u128::from(exact.count);
    exact.count == 0
        || exact.min_ns <= exact.max_ns
            && exact.sum_ns >= count * u128::from(exact.min_ns)
            && exact.sum_ns <= count * u128::from(exact.max_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_whose_figures_contradict_themselves_is_not_trusted() {
        // What the fuzzer found: count=1 min=5 max=0 made min above max.
        let mut text = header(1_795_315_538_000_000_000, None);
        encode_entry(&sample_entry(), &mut text);
        let forged = text.replacen(" min=12345 ", " min=99999999 ", 1);
        assert_ne!(text, forged, "the comment was forged: {text}");
        let mut parser = LineParser::default();
        let read: Vec<Entry> = forged
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(*e),
                _ => None,
            })
            .collect();
        let stats = &read[0].stats;
        assert!(stats.min_ns() <= stats.max_ns, "{stats:?}");
        assert_eq!(stats.count, 4);
        assert!(plausible(&Exact {
            count: 0,
            sum_ns: 7,
            min_ns: 9,
            max_ns: 1,
            missed: 0,
            hdr_overflows: 0,
            spikes: 0
        }));
    }

    fn sample_entry() -> Entry {
        let mut stats = LatencyStats::new(100_000, None);
        for (i, v) in [12_345, 20_001, 1_759_231, 15_000].iter().enumerate() {
            stats.record(*v, i as u64);
        }
        stats.missed = 2;
        Entry {
            cpu: 3,
            start_ns: 1_795_315_538_000_000_000,
            length_ns: 300 * NS_PER_SEC,
            stats,
            fingerprint: Some("0123456789ab".to_string()),
            load: Some("rteval".to_string()),
            hwnoise: false,
            timerlat: None,
        }
    }

    #[test]
    fn an_entry_reads_back_exactly() {
        let context = Context {
            host: "rt box".to_string(),
            kernel: "6.18.0-rt".to_string(),
            preempt_rt: true,
            interval_ns: 200_000,
            policy: "fifo".to_string(),
            priority: 95,
        };
        let mut text = header(1_795_315_538_000_000_000, Some(&context));
        encode_entry(&sample_entry(), &mut text);
        let mut parser = LineParser::default();
        let read: Vec<Context> = text
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Context(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(
            read,
            vec![Context {
                host: "rt_box".to_string(),
                ..context
            }]
        );
        assert!(text.contains("#[StartTime: 1795315538.000 (seconds since epoch), 2026-11-22T"));
        assert!(
            text.contains("\nTag=cpu3,1795315538.000,300.000,1.759231,HISTF"),
            "{text}"
        );
        let mut parser = LineParser::default();
        let entries: Vec<Entry> = text
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(*e),
                Line::Other
                | Line::Context(_)
                | Line::Host(_)
                | Line::Gap(_)
                | Line::Hwnoise(_) => None,
                Line::Corrupt(why) => panic!("{why}: {l}"),
            })
            .collect();
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!(e.fingerprint.as_deref(), Some("0123456789ab"));
        assert_eq!(e.load.as_deref(), Some("rteval"));
        assert_eq!(
            (e.cpu, e.start_ns, e.length_ns),
            (3, 1_795_315_538 * NS_PER_SEC, 300 * NS_PER_SEC)
        );
        assert_eq!(e.stats.exact(), sample_entry().stats.exact());
        assert_eq!(e.stats.spikes, 1);
        assert_eq!(e.stats.spike_threshold_ns(), 100_000);
    }

    #[test]
    fn the_load_is_read_with_or_without_a_fingerprint_and_absent_means_idle() {
        let mut entry = sample_entry();
        entry.fingerprint = None;
        let mut text = String::new();
        encode_entry(&entry, &mut text);
        assert!(text.contains(" load=rteval]\n"), "{text}");
        entry.load = None;
        encode_entry(&entry, &mut text);
        assert!(!text.lines().nth(2).unwrap().contains("load="));
        let mut parser = LineParser::default();
        let loads: Vec<Option<String>> = text
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(e.load),
                _ => None,
            })
            .collect();
        assert_eq!(loads, vec![Some("rteval".to_string()), None]);
    }

    #[test]
    fn a_timerlat_entry_reads_back_under_its_tag_and_context() {
        let mut entry = sample_entry();
        entry.timerlat = Some("thread".to_string());
        let mut text = String::new();
        encode_entry(&entry, &mut text);
        assert!(
            text.starts_with("#[latencyd timerlat thread cpu3 count=4 "),
            "{text}"
        );
        assert!(text.contains("\nTag=timerlat-thread-cpu3,"), "{text}");
        let mut parser = LineParser::default();
        let read: Vec<Entry> = text
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(*e),
                _ => None,
            })
            .collect();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].timerlat.as_deref(), Some("thread"));
        assert_eq!(
            read[0].stats.exact(),
            entry.stats.exact(),
            "the comment applies"
        );
        // A sampler's comment is not taken for a timerlat entry's, and an
        // unknown context is not ours.
        let sampler = text.replacen("#[latencyd timerlat thread cpu3", "#[latencyd cpu3", 1);
        let read: Vec<Entry> = sampler
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(*e),
                _ => None,
            })
            .collect();
        assert_eq!(read[0].stats.exact().missed, 0, "histogram figures only");
        assert!(matches!(
            parser.line("Tag=timerlat-softirq-cpu3,1,1,0.1,x"),
            Line::Other
        ));
        assert!(matches!(
            parser.line("#[latencyd timerlat softirq cpu3 count=1]"),
            Line::Corrupt(_)
        ));
    }

    #[test]
    fn an_interval_measured_in_a_hwnoise_window_says_so() {
        let mut entry = sample_entry();
        let mut text = String::new();
        encode_entry(&entry, &mut text);
        entry.hwnoise = true;
        encode_entry(&entry, &mut text);
        assert!(text.contains(" load=rteval hwnoise]\n"), "{text}");
        let mut parser = LineParser::default();
        let spun: Vec<bool> = text
            .lines()
            .filter_map(|l| match parser.line(l) {
                Line::Entry(e) => Some(e.hwnoise),
                _ => None,
            })
            .collect();
        assert_eq!(spun, vec![false, true]);
    }

    #[test]
    fn the_host_facts_line_reads_back_and_a_bad_one_is_named() {
        use crate::host::Fact;
        let mut fp = Fingerprint::default();
        fp.insert("kernel.release", Fact::known("6.12.0"));
        fp.insert("dmi.bios_version", Fact::absent("not present"));
        fp.insert("kernel.cmdline", Fact::known("quiet isolcpus=1 ]x"));
        let line = host_line(&fp, 1_795_315_538_250_000_000);
        assert!(line.starts_with(&format!("#[latencyd host {} at=1795315538.250\t", fp.id())));
        let Line::Host(read) = LineParser::default().line(&line) else {
            panic!("not read: {line}");
        };
        assert_eq!(read.id, fp.id());
        assert_eq!(read.at_unix_ns, 1_795_315_538_250_000_000);
        assert_eq!(read.fingerprint, fp);
        assert!(matches!(
            LineParser::default().line("#[latencyd host zz]"),
            Line::Corrupt(_)
        ));
        // Older entries have no identifier; they still read.
        let mut text = String::new();
        let mut old = sample_entry();
        old.fingerprint = None;
        encode_entry(&old, &mut text);
        assert!(!text.contains("fingerprint="));
        let mut parser = LineParser::default();
        let entry = text.lines().find_map(|l| match parser.line(l) {
            Line::Entry(e) => Some(e),
            _ => None,
        });
        assert_eq!(entry.unwrap().fingerprint, None);
    }

    #[test]
    fn an_entry_without_our_comment_is_read_from_its_histogram() {
        let mut text = String::new();
        encode_entry(&sample_entry(), &mut text);
        let tag_line = text.lines().nth(1).unwrap();
        let Line::Entry(e) = LineParser::default().line(tag_line) else {
            panic!("not read");
        };
        assert_eq!(e.stats.count, 4);
        assert_eq!(e.stats.max_ns, 1_759_231, "the maximum column is exact");
        assert_eq!((e.stats.missed, e.stats.spikes), (0, 0));
        let min = e.stats.min_ns();
        assert!(min.abs_diff(12_345) <= 12_345 / 128, "{min}");
    }

    #[test]
    fn damaged_lines_are_named_and_other_lines_ignored() {
        let mut parser = LineParser::default();
        for line in [
            "",
            "#[Histogram log format version 1.3]",
            "\"StartTimestamp\",\"x\"",
            "Tag=other,1.0,1.0,1.0,HISTFAAA",
            "1.0,1.0,1.0,HISTFAAA",
        ] {
            assert!(matches!(parser.line(line), Line::Other), "{line}");
        }
        for line in [
            "Tag=cpu0,1.0,1.0",
            "Tag=cpu0,x,1.0,1.0,HISTFAAA",
            "Tag=cpu0,1.0,1.0,1.0,@@@",
            "Tag=cpu0,1.0,1.0,1.0,HISTFAAAAEV42pNpmSzM",
            "#[latencyd cpu0 count=x]",
        ] {
            assert!(matches!(parser.line(line), Line::Corrupt(_)), "{line}");
        }
        assert_eq!(decimal_ns("1.5", NS_PER_SEC), Some(1_500_000_000));
        assert_eq!(decimal_ns("0.000001", 1_000_000), Some(1));
        assert_eq!(decimal_ns("-1", 1), None);
    }
}
