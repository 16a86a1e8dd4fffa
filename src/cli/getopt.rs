//! `measure`'s command line read the way cyclictest reads its own (and
//! `oslat`'s the way oslat does): GNU `getopt_long` with the tool's option
//! table, so that every command line written for it means the same here.
//!
//! What getopt allows and clap alone does not: joined short options with
//! a value at the end (`-qmu`, `-Sp90`, `-t4`), a value glued to its
//! letter even with a space inside (`"-h 3500"`, as rteval passes it),
//! unambiguous abbreviations of long names (`--dist=0`), and arguments
//! that are not options anywhere on the line, which cyclictest ignores.
//! cyclictest's optional arguments (`-a`, `-t`, `-A`, `--secaligned`) also
//! take the *next* word when it looks like their value (`-a 2-5`, `-t 4`),
//! a check cyclictest makes itself after getopt; `lookahead` repeats it.
//!
//! The table is read from clap's own definition of `measure`'s flags, so
//! help, man page, completions and this parser cannot disagree. The
//! output is the same options as `--name=value` words, which clap parses.

use std::fmt;

use clap::{ArgAction, Command};

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Value,
    /// An optional value: glued on (`-t4`, `--threads=4`), or the next word
    /// when `lookahead` accepts it.
    OptionalValue,
}

#[derive(Debug, Clone)]
struct OptionSpec {
    /// The name clap knows it by, written out as `--name[=value]`.
    canonical: String,
    shorts: Vec<char>,
    longs: Vec<String>,
    takes: Takes,
}

/// The command line as clap should see it, and the words that were not
/// options (which cyclictest ignores, and so does `measure`, saying so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    pub args: Vec<String>,
    pub ignored: Vec<String>,
}

/// A command line getopt_long would refuse, in getopt's own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetoptError(String);

impl fmt::Display for GetoptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GetoptError {}

/// The options of `command` (clap's definition of `measure`).
fn table(command: &Command) -> Vec<OptionSpec> {
    command
        .get_arguments()
        .filter(|arg| !arg.is_positional())
        .filter_map(|arg| {
            let canonical = arg.get_long()?.to_string();
            let mut longs = vec![canonical.clone()];
            longs.extend(
                arg.get_all_aliases()
                    .unwrap_or_default()
                    .into_iter()
                    .map(String::from),
            );
            let mut shorts: Vec<char> = arg.get_short().into_iter().collect();
            shorts.extend(arg.get_all_short_aliases().unwrap_or_default());
            let takes = match arg.get_action() {
                ArgAction::Set | ArgAction::Append => {
                    if arg.get_num_args().is_some_and(|n| n.min_values() == 0) {
                        Takes::OptionalValue
                    } else {
                        Takes::Value
                    }
                }
                _ => Takes::Nothing,
            };
            Some(OptionSpec {
                canonical,
                shorts,
                longs,
                takes,
            })
        })
        .collect()
}

/// C's `atoi`: leading blanks, a sign, digits; 0 when there are none.
pub fn atoi(text: &str) -> i64 {
    let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |acc, d| {
            acc.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    if negative { -value } else { value }
}

/// Whether cyclictest takes `next` as the value of an optional-argument
/// option given without one (it checks this itself after getopt).
fn lookahead(canonical: &str, next: &str) -> bool {
    match canonical {
        // -a: a CPU list, "all", or a list with ! or +.
        "cpus" => atoi(next) != 0 || next.starts_with(['0', '!', '+', 'a']),
        // -t, -A, --secaligned: a number other than 0.
        _ => atoi(next) != 0,
    }
}

/// Reads `args` (what follows `measure` or `oslat`) as getopt_long reads
/// the tool's own.
pub fn normalize(command: &Command, args: &[String]) -> Result<Normalized, GetoptError> {
    let table = table(command);
    let mut out = Normalized {
        args: Vec::new(),
        ignored: Vec::new(),
    };
    let mut words = args.iter().peekable();
    while let Some(word) = words.next() {
        if word == "--" {
            out.ignored.extend(words.by_ref().cloned());
            break;
        }
        if let Some(body) = word.strip_prefix("--") {
            let (name, glued) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (body, None),
            };
            let spec = find_long(&table, name)?;
            let value = match (spec.takes, glued) {
                (Takes::Nothing, Some(_)) => {
                    return Err(GetoptError(format!(
                        "option '--{name}' doesn't allow an argument"
                    )));
                }
                (Takes::Nothing, None) => None,
                (_, Some(value)) => Some(value),
                (Takes::Value, None) => Some(words.next().cloned().ok_or_else(|| {
                    GetoptError(format!("option '--{name}' requires an argument"))
                })?),
                (Takes::OptionalValue, None) => words
                    .next_if(|next| lookahead(&spec.canonical, next))
                    .cloned(),
            };
            push(&mut out.args, spec, value);
        } else if word.len() > 1 && word.starts_with('-') {
            let cluster: Vec<char> = word[1..].chars().collect();
            let mut at = 0;
            while at < cluster.len() {
                let letter = cluster[at];
                at += 1;
                if letter == '?' {
                    out.args.push("--help".to_string());
                    continue;
                }
                let spec = table
                    .iter()
                    .find(|spec| spec.shorts.contains(&letter))
                    .ok_or_else(|| GetoptError(format!("invalid option -- '{letter}'")))?;
                let rest: String = cluster[at..].iter().collect();
                let value = match spec.takes {
                    Takes::Nothing => None,
                    _ if !rest.is_empty() => {
                        at = cluster.len();
                        Some(rest)
                    }
                    Takes::Value => Some(words.next().cloned().ok_or_else(|| {
                        GetoptError(format!("option requires an argument -- '{letter}'"))
                    })?),
                    Takes::OptionalValue => words
                        .next_if(|next| lookahead(&spec.canonical, next))
                        .cloned(),
                };
                push(&mut out.args, spec, value);
            }
        } else {
            out.ignored.push(word.clone());
        }
    }
    Ok(out)
}

fn push(args: &mut Vec<String>, spec: &OptionSpec, value: Option<String>) {
    args.push(match value {
        Some(value) => format!("--{}={value}", spec.canonical),
        None => format!("--{}", spec.canonical),
    });
}

/// A long option by its name or an abbreviation of it: an exact name wins;
/// an abbreviation must lead to one option only, as getopt_long requires.
fn find_long<'t>(table: &'t [OptionSpec], name: &str) -> Result<&'t OptionSpec, GetoptError> {
    if let Some(spec) = table.iter().find(|s| s.longs.iter().any(|l| l == name)) {
        return Ok(spec);
    }
    let mut candidates: Vec<&OptionSpec> = Vec::new();
    let mut spelled: Vec<String> = Vec::new();
    for spec in table {
        for long in spec
            .longs
            .iter()
            .filter(|l| !name.is_empty() && l.starts_with(name))
        {
            spelled.push(format!("'--{long}'"));
            if !candidates.iter().any(|c| c.canonical == spec.canonical) {
                candidates.push(spec);
            }
        }
    }
    match candidates.as_slice() {
        [one] => Ok(one),
        [] => Err(GetoptError(format!("unrecognized option '--{name}'"))),
        _ => Err(GetoptError(format!(
            "option '--{name}' is ambiguous; possibilities: {}",
            spelled.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use clap::Args;

    use super::*;
    use crate::cli::MeasureArgs;

    fn measure() -> Command {
        MeasureArgs::augment_args(Command::new("measure"))
    }

    fn read(line: &str) -> Result<Normalized, GetoptError> {
        let words = shell_words::split(line).unwrap();
        normalize(&measure(), &words)
    }

    fn args(line: &str) -> Vec<String> {
        read(line).unwrap().args
    }

    #[test]
    fn the_harnesses_command_lines_read_as_cyclictest_reads_them() {
        // rteval: the histogram's value glued on with a space inside.
        assert_eq!(
            args(r#"-i100 -qmu "-h 3500" -p95 -t2 -a0-1"#),
            [
                "--interval=100",
                "--quiet",
                "--mlockall",
                "--unbuffered",
                "--histogram= 3500",
                "--priority=95",
                "--threads=2",
                "--cpus=0-1"
            ]
        );
        // The how-to's long options, one with a separate value.
        assert_eq!(
            args("--mlockall --smp --priority=80 --interval=200 --distance 0"),
            [
                "--mlockall",
                "--smp",
                "--priority=80",
                "--interval=200",
                "--distance=0"
            ]
        );
        // A container harness: optional arguments as separate words.
        assert_eq!(
            args("-q -D 24h -p 1 -t 2 -a 0-1 -h 30 -i 1000 --mainaffinity 0 -m"),
            [
                "--quiet",
                "--duration=24h",
                "--priority=1",
                "--threads=2",
                "--cpus=0-1",
                "--histogram=30",
                "--interval=1000",
                "--mainaffinity=0",
                "--mlockall"
            ]
        );
        assert_eq!(args("-Sp90"), ["--smp", "--priority=90"]);
    }

    #[test]
    fn optional_arguments_take_the_next_word_only_when_it_looks_like_theirs() {
        assert_eq!(args("-t -p 80"), ["--threads", "--priority=80"]);
        assert_eq!(args("-t 4"), ["--threads=4"]);
        assert_eq!(args("-t4"), ["--threads=4"]);
        assert_eq!(args("--threads=4"), ["--threads=4"]);
        assert_eq!(args("-a"), ["--cpus"]);
        assert_eq!(args("-a 0"), ["--cpus=0"]);
        assert_eq!(args("-a all"), ["--cpus=all"]);
        assert_eq!(args("-a !1"), ["--cpus=!1"]);
        assert_eq!(args("-a -q"), ["--cpus", "--quiet"]);
        assert_eq!(args("--affinity 2-5"), ["--cpus=2-5"]);
        assert_eq!(args("-A 0 -q"), ["--aligned", "--quiet"]);
        assert_eq!(args("--secaligned 250"), ["--secaligned=250"]);
        // A word that is not their value stays an ignored argument.
        let read = read("-t foo").unwrap();
        assert_eq!(read.args, ["--threads"]);
        assert_eq!(read.ignored, ["foo"]);
    }

    #[test]
    fn abbreviations_and_their_ambiguities_are_getopts() {
        assert_eq!(args("--dist=0 --dur 5"), ["--distance=0", "--duration=5"]);
        assert_eq!(args("--aff=1"), ["--cpus=1"]);
        assert_eq!(
            read("--prio=5").unwrap_err().to_string(),
            "option '--prio' is ambiguous; possibilities: '--priority' '--priospread'"
        );
        assert!(
            read("--hist=5")
                .unwrap_err()
                .to_string()
                .contains("ambiguous")
        );
        assert_eq!(
            read("--bogus").unwrap_err().to_string(),
            "unrecognized option '--bogus'"
        );
        assert_eq!(read("-e").unwrap_err().to_string(), "invalid option -- 'e'");
        assert_eq!(
            read("-p").unwrap_err().to_string(),
            "option requires an argument -- 'p'"
        );
        assert_eq!(
            read("--quiet=1").unwrap_err().to_string(),
            "option '--quiet' doesn't allow an argument"
        );
    }

    #[test]
    fn words_that_are_not_options_are_set_aside_and_double_dash_ends_options() {
        let read = read("-q foo -m -- -p 5").unwrap();
        assert_eq!(read.args, ["--quiet", "--mlockall"]);
        assert_eq!(read.ignored, ["foo", "-p", "5"]);
        // A required value is the next word whatever it looks like.
        assert_eq!(args("-d -5"), ["--distance=-5"]);
        assert_eq!(args("-?"), ["--help"]);
    }

    #[test]
    fn every_cyclictest_option_is_in_the_table() {
        let table = table(&measure());
        let short = |c: char| table.iter().find(|s| s.shorts.contains(&c));
        // cyclictest 2.x's getopt string, letter by letter.
        for (letter, takes) in [
            ('a', Takes::OptionalValue),
            ('A', Takes::OptionalValue),
            ('b', Takes::Value),
            ('c', Takes::Value),
            ('d', Takes::Value),
            ('D', Takes::Value),
            ('F', Takes::Value),
            ('h', Takes::Value),
            ('H', Takes::Value),
            ('i', Takes::Value),
            ('l', Takes::Value),
            ('M', Takes::Nothing),
            ('N', Takes::Nothing),
            ('o', Takes::Value),
            ('p', Takes::Value),
            ('m', Takes::Nothing),
            ('n', Takes::Nothing),
            ('q', Takes::Nothing),
            ('r', Takes::Nothing),
            ('R', Takes::Nothing),
            ('s', Takes::Nothing),
            ('S', Takes::Nothing),
            ('t', Takes::OptionalValue),
            ('u', Takes::Nothing),
            ('v', Takes::Nothing),
            ('x', Takes::Nothing),
        ] {
            let spec = short(letter).unwrap_or_else(|| panic!("-{letter} is missing"));
            assert_eq!(spec.takes, takes, "-{letter}");
        }
        for long in [
            "affinity",
            "aligned",
            "breaktrace",
            "clock",
            "default-system",
            "distance",
            "duration",
            "latency",
            "fifo",
            "histogram",
            "histofall",
            "histfile",
            "interval",
            "json",
            "laptop",
            "loops",
            "mainaffinity",
            "mlockall",
            "refresh_on_max",
            "nsecs",
            "oscope",
            "priority",
            "quiet",
            "priospread",
            "relative",
            "resolution",
            "secaligned",
            "system",
            "smi",
            "smp",
            "spike",
            "spike-nodes",
            "threads",
            "tracemark",
            "unbuffered",
            "verbose",
            "dbg_cyclictest",
            "policy",
            "help",
            "posix_timers",
            "deepest-idle-state",
        ] {
            assert!(
                table.iter().any(|s| s.longs.iter().any(|l| l == long)),
                "--{long} is missing"
            );
        }
    }

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(" 3500"), 3500);
        assert_eq!(atoi("2-5"), 2);
        assert_eq!(atoi("-5"), -5);
        assert_eq!(atoi("+7x"), 7);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi(""), 0);
    }
}
