//! Stage two of `latencyd oslat`'s command line: oslat's options read as
//! oslat 2.x reads them (a duration with m, h or d; a size with K, M or
//! G; `-W` in ns switching the output to ns when it is not whole µs), each
//! error naming the option, what was wrong and what it takes.

use std::path::PathBuf;

use crate::cli::OslatArgs;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;
use crate::rt::poll::{BucketLayout, DEFAULT_BUCKETS};

/// oslat's memmove size per thread when `-m` is not given (16 KiB).
const DEFAULT_WORKLOAD_BYTES: u64 = 16 << 10;

#[derive(Debug, Clone, PartialEq)]
pub struct OslatOptions {
    pub cpus: Vec<usize>,
    /// How the CPU list was given ("all" when it was not), for the header.
    pub cpu_list_text: String,
    pub main_cpu: usize,
    pub duration_secs: u64,
    pub json: Option<PathBuf>,
    pub rtprio: Option<i32>,
    /// "no" or "memmove".
    pub workload: &'static str,
    /// Bytes the workload moves (0 without a workload).
    pub workload_bytes: u64,
    pub layout: BucketLayout,
    /// Digits after the point in the output: 0 (µs), or 3 (ns units).
    pub precision: usize,
    pub bias: bool,
    pub quiet: bool,
    pub single_preheat: bool,
    /// In µs.
    pub trace_threshold_us: Option<u64>,
    pub zero_omit: bool,
}

impl OslatOptions {
    /// Units per µs (1, or 1,000 in ns units).
    pub fn per_us(&self) -> u64 {
        1_000 / self.layout.unit_ns
    }

    pub fn from_args(args: &OslatArgs, host: &HostInfo) -> Result<OslatOptions, String> {
        let mut layout = BucketLayout::oslat_default();
        let mut precision = 0;
        if let Some(text) = &args.bucket_width {
            let width = number(text)
                .filter(|&w| w > 0)
                .ok_or_else(|| format!("-W/--bucket-width {text:?}: give a width in ns above 0"))?;
            if width % 1_000 == 0 {
                layout.width = width / 1_000;
            } else {
                layout.width = width;
                layout.unit_ns = 1;
                precision = 3;
            }
        }
        match &args.bucket_size {
            Some(text) => {
                layout.count = number(text)
                    .filter(|n| (4..=1024).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "-b/--bucket-size {text:?}: give a number of buckets from 4 to 1024"
                        )
                    })? as usize;
            }
            // Narrow ns buckets cover oslat's 32 µs unless told otherwise.
            None if layout.unit_ns == 1 && layout.width < 1_000 => {
                layout.count = (DEFAULT_BUCKETS as u64 * 1_000 / layout.width) as usize;
            }
            None => {}
        }
        let (cpus, cpu_list_text) = match &args.cpu_list {
            None => (host.usable_cpus.clone(), "all".to_string()),
            Some(text) => (cpus_of(text, host)?, text.clone()),
        };
        let main_cpu = match &args.cpu_main_thread {
            None => 0,
            Some(text) => number(text).map(|c| c as usize).ok_or_else(|| {
                format!("-C/--cpu-main-thread {text:?}: give a CPU number, such as 0")
            })?,
        };
        let duration_secs = match &args.duration {
            None => 1,
            Some(text) => duration_secs(text).ok_or_else(|| {
                format!(
                    "-D/--duration {text:?}: give a time above 0 in seconds, or with m, h or d \
                     (60, 20m, 2h)"
                )
            })?,
        };
        let rtprio = match &args.rtprio {
            None => None,
            Some(text) => Some(
                number(text)
                    .filter(|p| (1..=99).contains(p))
                    .ok_or_else(|| format!("-f/--rtprio {text:?}: give a priority from 1 to 99"))?
                    as i32,
            ),
        };
        let workload = match args.workload.as_deref() {
            None | Some("no") => "no",
            Some("memmove") => "memmove",
            Some(other) => {
                return Err(format!(
                    "-w/--workload {other:?}: unknown workload; choose from 'no', 'memmove'"
                ));
            }
        };
        let workload_bytes = match &args.workload_mem {
            None => DEFAULT_WORKLOAD_BYTES,
            Some(text) => size_bytes(text).filter(|&b| b > 0).ok_or_else(|| {
                format!("-m/--workload-mem {text:?}: give a size above 0, such as 4K or 1M")
            })?,
        };
        let trace_threshold_us = match &args.trace_threshold {
            None => None,
            Some(text) => Some(number(text).filter(|&t| t > 0).ok_or_else(|| {
                format!("-T/--trace-threshold {text:?}: give a number of µs above 0")
            })?),
        };
        Ok(OslatOptions {
            cpus,
            cpu_list_text,
            main_cpu,
            duration_secs,
            json: args.json.clone(),
            rtprio,
            workload,
            workload_bytes: if workload == "no" { 0 } else { workload_bytes },
            layout,
            precision,
            bias: args.bias,
            quiet: args.quiet,
            single_preheat: args.single_preheat,
            trace_threshold_us,
            zero_omit: args.zero_omit,
        })
    }
}

/// A whole number, nothing else.
fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The CPUs of `text` that this process may use; any other is an error
/// (oslat leaves such CPUs out without a word).
fn cpus_of(text: &str, host: &HostInfo) -> Result<Vec<usize>, String> {
    let cpus = if text == "all" {
        host.usable_cpus.clone()
    } else {
        parse_cpu_list(text).map_err(|e| format!("-c/--cpu-list {text:?}: {e}"))?
    };
    let unusable: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !host.usable_cpus.contains(c))
        .collect();
    if !unusable.is_empty() {
        return Err(format!(
            "-c/--cpu-list {text:?}: CPU {} is not one this process may use (it may use {}); \
             give CPUs from that list",
            format_cpu_list(&unusable),
            format_cpu_list(&host.usable_cpus)
        ));
    }
    Ok(cpus)
}

/// oslat's durations: seconds, or a number with m, h or d (either case).
fn duration_secs(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().ok()?;
    let scale = match unit {
        "" | "s" | "S" => 1,
        "m" | "M" => 60,
        "h" | "H" => 3_600,
        "d" | "D" => 86_400,
        _ => return None,
    };
    value.checked_mul(scale).filter(|&s| s > 0)
}

/// Sizes: bytes, or with K, M or G (powers of 1,024), a B after allowed.
fn size_bytes(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().ok()?;
    let unit = unit.strip_suffix(['b', 'B']).unwrap_or(unit);
    let scale: u64 = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostInfo {
        let mut host = HostInfo::detect();
        host.usable_cpus = vec![0, 1, 2, 3];
        host
    }

    fn read(line: &[&str]) -> Result<OslatOptions, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: OslatArgs,
        }
        let wrap = Wrap::try_parse_from(std::iter::once("oslat").chain(line.iter().copied()))
            .map_err(|e| e.to_string())?;
        OslatOptions::from_args(&wrap.args, &host())
    }

    #[test]
    fn defaults_are_oslats() {
        let o = read(&[]).unwrap();
        assert_eq!(o.cpus, vec![0, 1, 2, 3]);
        assert_eq!(
            (o.cpu_list_text.as_str(), o.main_cpu, o.duration_secs),
            ("all", 0, 1)
        );
        assert_eq!((o.workload, o.workload_bytes, o.rtprio), ("no", 0, None));
        assert_eq!(o.layout, BucketLayout::oslat_default());
        assert_eq!(o.precision, 0);
    }

    #[test]
    fn the_cnf_tests_command_line_reads() {
        let o = read(&[
            "--duration",
            "20m",
            "--rtprio",
            "1",
            "--cpu-list",
            "1-3",
            "-w",
            "memmove",
            "-m",
            "4K",
        ])
        .unwrap();
        assert_eq!((o.duration_secs, o.rtprio), (1_200, Some(1)));
        assert_eq!(o.cpus, vec![1, 2, 3]);
        assert_eq!((o.workload, o.workload_bytes), ("memmove", 4_096));
    }

    #[test]
    fn a_width_in_ns_switches_to_ns_units_and_more_buckets() {
        let o = read(&["-W", "500"]).unwrap();
        assert_eq!(
            (o.layout.unit_ns, o.layout.width, o.layout.count),
            (1, 500, 64)
        );
        assert_eq!((o.precision, o.per_us()), (3, 1_000));
        let o = read(&["-W", "2000", "-b", "8"]).unwrap();
        assert_eq!(
            (o.layout.unit_ns, o.layout.width, o.layout.count),
            (1_000, 2, 8)
        );
    }

    #[test]
    fn durations_and_sizes_read_as_oslat_reads_them() {
        assert_eq!(duration_secs("60"), Some(60));
        assert_eq!(duration_secs("2H"), Some(7_200));
        assert_eq!(duration_secs("1d"), Some(86_400));
        assert_eq!(duration_secs("0"), None);
        assert_eq!(duration_secs("5x"), None);
        assert_eq!(size_bytes("1M"), Some(1 << 20));
        assert_eq!(size_bytes("16kb"), Some(16 << 10));
        assert_eq!(size_bytes("1T"), None);
    }

    #[test]
    fn bad_values_name_the_option_and_the_fix() {
        for (line, says) in [
            (
                &["-b", "3"][..],
                "-b/--bucket-size \"3\": give a number of buckets from 4 to 1024",
            ),
            (
                &["-f", "100"][..],
                "-f/--rtprio \"100\": give a priority from 1 to 99",
            ),
            (&["-D", "0"][..], "-D/--duration \"0\""),
            (&["-w", "stress"][..], "choose from 'no', 'memmove'"),
            (
                &["-c", "7"][..],
                "CPU 7 is not one this process may use (it may use 0-3)",
            ),
            (&["-T", "0"][..], "-T/--trace-threshold \"0\""),
            (&["-W", "0"][..], "-W/--bucket-width \"0\""),
        ] {
            let err = read(line).expect_err(&format!("{line:?}"));
            assert!(err.contains(says), "{line:?}: {err}");
        }
    }
}
