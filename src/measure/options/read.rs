//! Each group of `measure`'s options read from the flags as cyclictest
//! reads them: the run's length, what triggers an action (`-b`,
//! `--forensics`, `--log`), the histogram, the threads, `-v`, the way of
//! waiting (clock, sleep, alignment), `--spike`, the host's idle tuning
//! and `--load`. Each refusal names its option; what is taken otherwise
//! than typed is a note.

use std::path::PathBuf;

use super::threads::{Placement, Spacing, place, plan_threads, policy_and_priority};
use super::values::{Notes, UsageError, duration, integer, integer_in, signed_duration, usage};
use super::{
    Alignment, DEFAULT_SPIKE_NODES, HistogramOption, HwlatOption, MAX_HISTOGRAM_BINS,
    MAX_INTERVAL_NS, SpikeList, ThreadPlan, TimerlatOption,
};
use crate::cli::MeasureArgs;
use crate::cpulist::parse_cpu_list;
use crate::host::HostInfo;
use crate::load::Profile;
use crate::rt::clock::{ClockSource, SleepMode};
use crate::rt::sys::Policy;
use crate::units::{NS_PER_SEC, NS_PER_US, format_duration_ns};

/// How long the run lasts: `-i`, `-D`, `-l`, `--warmup`.
pub(super) struct RunLength {
    pub interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    pub warmup_ns: u64,
}

pub(super) fn run_length(args: &MeasureArgs, notes: &mut Notes) -> Result<RunLength, UsageError> {
    let interval_ns = duration("--interval", &args.interval, NS_PER_US)?;
    if !(NS_PER_US..=MAX_INTERVAL_NS).contains(&interval_ns) {
        return Err(usage(
            "--interval",
            format!(
                "'{}' is outside 1us..=1h; write e.g. 100us or 1ms",
                args.interval
            ),
        ));
    }
    let duration_ns = args
        .duration
        .as_deref()
        .map(|d| duration("--duration", d, NS_PER_SEC))
        .transpose()?
        // cyclictest's -D 0 means "no limit".
        .filter(|&ns| ns > 0);
    if let Some(ns) = duration_ns
        && ns < interval_ns
    {
        return Err(usage(
            "--duration",
            format!(
                "'{}' is shorter than one interval ({}): nothing would be measured",
                args.duration.as_deref().unwrap_or_default(),
                format_duration_ns(interval_ns)
            ),
        ));
    }
    let loops = args
        .loops
        .as_deref()
        .map(|l| integer_in("--loops", l, 0..=i64::MAX, notes))
        .transpose()?
        // cyclictest's -l 0 means "endless".
        .filter(|&n| n > 0)
        .map(|n| n as u64);
    let warmup_ns = match &args.warmup {
        Some(w) => duration("--warmup", w, NS_PER_SEC)?,
        None => 0,
    };
    Ok(RunLength {
        interval_ns,
        duration_ns,
        loops,
        warmup_ns,
    })
}

/// What a late wake-up or the passing time sets off.
pub(super) struct Triggers {
    pub spike_threshold_ns: u64,
    pub breaktrace_ns: Option<u64>,
    pub forensics_ns: Option<u64>,
    pub log: Option<(PathBuf, u64)>,
}

pub(super) fn triggers(args: &MeasureArgs, notes: &mut Notes) -> Result<Triggers, UsageError> {
    let spike_threshold_ns = duration("--spike-threshold", &args.spike_threshold, NS_PER_US)?;
    // A threshold of 0 switches -b off, as in cyclictest.
    let breaktrace_ns = args
        .breaktrace
        .as_deref()
        .map(|text| duration("--breaktrace", text, NS_PER_US))
        .transpose()?
        .filter(|&ns| ns > 0);
    if args.tracemark && breaktrace_ns.is_none() {
        notes.add("--tracemark", "has no effect without -b, as in cyclictest");
    }
    let forensics_ns = if args.forensics {
        match duration(
            "--forensics-threshold",
            &args.forensics_threshold,
            NS_PER_US,
        )? {
            0 => return Err(usage("--forensics-threshold", "must be more than 0")),
            ns => Some(ns),
        }
    } else {
        None
    };
    let log = match &args.log {
        None => None,
        Some(path) => {
            let ns = duration("--log-interval", &args.log_interval, NS_PER_SEC)?;
            if !(NS_PER_SEC..=3_600 * NS_PER_SEC).contains(&ns) || ns % NS_PER_SEC != 0 {
                return Err(usage(
                    "--log-interval",
                    "must be whole seconds between 1s and 1h",
                ));
            }
            Some((path.clone(), ns))
        }
    };
    Ok(Triggers {
        spike_threshold_ns,
        breaktrace_ns,
        forensics_ns,
        log,
    })
}

/// `--timerlat` and its settings.
pub(super) fn timerlat(args: &MeasureArgs) -> Result<Option<TimerlatOption>, UsageError> {
    if !args.timerlat {
        return Ok(None);
    }
    let period_ns = duration("--timerlat-period", &args.timerlat_period, NS_PER_US)?;
    if !(100 * NS_PER_US..=NS_PER_SEC).contains(&period_ns) || period_ns % NS_PER_US != 0 {
        return Err(usage(
            "--timerlat-period",
            "must be whole microseconds from 100us to 1s (the kernel's bounds)",
        ));
    }
    if !(1..=99).contains(&args.timerlat_priority) {
        return Err(usage(
            "--timerlat-priority",
            "must be a SCHED_FIFO priority, 1 to 99",
        ));
    }
    Ok(Some(TimerlatOption {
        period_us: period_ns / NS_PER_US,
        priority: args.timerlat_priority,
        user_threads: !args.timerlat_kernel_threads,
    }))
}

/// `--hwlat` and its knobs.
pub(super) fn hwlat(args: &MeasureArgs) -> Result<Option<HwlatOption>, UsageError> {
    if !args.hwlat {
        return Ok(None);
    }
    if args.timerlat {
        return Err(usage(
            "--hwlat",
            "runs alone: it spins the CPUs with interrupts off, which --timerlat would measure",
        ));
    }
    let micros = |option: &'static str, text: &str| -> Result<u64, UsageError> {
        let ns = duration(option, text, NS_PER_US)?;
        if ns == 0 || ns % NS_PER_US != 0 {
            return Err(usage(option, "must be whole microseconds, more than 0"));
        }
        Ok(ns / NS_PER_US)
    };
    let threshold_us = micros("--hwlat-threshold", &args.hwlat_threshold)?;
    let width_us = micros("--hwlat-width", &args.hwlat_width)?;
    let window_us = micros("--hwlat-window", &args.hwlat_window)?;
    if width_us >= window_us {
        return Err(usage(
            "--hwlat-width",
            format!("must be less than --hwlat-window ({window_us}us)"),
        ));
    }
    Ok(Some(HwlatOption {
        threshold_us,
        width_us,
        window_us,
    }))
}

/// `-h`/`-H`: bins, cut to cyclictest's maximum (said in a note).
pub(super) fn histogram_option(
    args: &MeasureArgs,
    notes: &mut Notes,
) -> Result<Option<HistogramOption>, UsageError> {
    let (text, all_column, option) = match (&args.histogram, &args.histofall) {
        (Some(text), _) => (text, false, "--histogram"),
        (None, Some(text)) => (text, true, "--histofall"),
        (None, None) => return Ok(None),
    };
    if args.histogram.is_some() && args.histofall.is_some() {
        notes.add(
            "--histofall",
            "given with -h: the all-threads column is added",
        );
    }
    let bins = integer(option, text, notes)?;
    if bins < 1 {
        return Err(usage(option, format!("{bins} bins: choose 1 or more")));
    }
    let bins = if bins > MAX_HISTOGRAM_BINS {
        notes.add(
            option,
            format!("{bins} bins cut to {MAX_HISTOGRAM_BINS}, cyclictest's maximum"),
        );
        MAX_HISTOGRAM_BINS
    } else {
        bins
    };
    Ok(Some(HistogramOption {
        bins: bins as usize,
        all_column: all_column || args.histofall.is_some(),
    }))
}

/// `-d`: how much longer each thread's interval is than the one before
/// (0 with a histogram, as cyclictest sets it).
pub(super) fn distance(
    args: &MeasureArgs,
    histogram: bool,
    notes: &mut Notes,
) -> Result<i64, UsageError> {
    Ok(match (&args.distance, histogram) {
        (Some(text), true) => {
            signed_duration("--distance", text, NS_PER_US)?;
            notes.add(
                "--distance",
                "ignored and set to 0 with a histogram, as cyclictest does",
            );
            0
        }
        (None, true) => 0,
        (Some(text), false) => signed_duration("--distance", text, NS_PER_US)?,
        (None, false) => 500 * NS_PER_US as i64,
    })
}

/// `-a`, `-t`, `-S`, the policy and priorities: the threads and where
/// they run.
pub(super) fn threads(
    args: &MeasureArgs,
    host: &HostInfo,
    interval_ns: u64,
    distance_ns: i64,
    notes: &mut Notes,
) -> Result<(Policy, Vec<ThreadPlan>), UsageError> {
    let threads_arg = match &args.threads {
        Some(Some(text)) => Some(Some(integer("--threads", text, notes)?)),
        Some(None) => Some(None),
        None => None,
    };
    let placement = Placement {
        cpus: args.cpus.as_ref().map(|c| c.as_deref()),
        threads: threads_arg,
        smp: args.smp,
    };
    let (mask, n_threads) = place(&placement, host, notes)?;
    let (policy, priority) = policy_and_priority(args, n_threads, notes)?;
    let threads = plan_threads(
        &mask,
        n_threads,
        policy,
        Spacing {
            priority,
            priospread: args.priospread,
            interval_ns,
            distance_ns,
            max_interval_ns: MAX_INTERVAL_NS,
        },
    )?;
    Ok((policy, threads))
}

/// `-v` and `-o`: every how many samples a sample line is printed.
pub(super) fn verbose(args: &MeasureArgs, notes: &mut Notes) -> Result<Option<u64>, UsageError> {
    Ok(match (&args.oscope, args.verbose) {
        (Some(_), false) => {
            return Err(usage(
                "--oscope",
                "-o only means something with -v (verbose), as in cyclictest",
            ));
        }
        (Some(text), true) => Some(integer_in("--oscope", text, 1..=i64::MAX, notes)? as u64),
        (None, true) => Some(1),
        (None, false) => None,
    })
}

/// `-c`, `-x`, `-r`/`-s`, `-A`/`--secaligned`: the clock, the way of
/// waiting, and where the threads' grids start.
pub(super) fn waiting(
    args: &MeasureArgs,
    notes: &mut Notes,
) -> Result<(ClockSource, SleepMode, Alignment), UsageError> {
    let clock = match integer_in("--clock", &args.clock, 0..=1, notes)? {
        0 => ClockSource::Monotonic,
        _ => ClockSource::Realtime,
    };
    let sleep = match (args.posix_timers, args.relative || args.system) {
        (true, true) => {
            notes.add(
                "-x",
                "with -r or -s: the timer is armed relative to each wake-up",
            );
            SleepMode::Relative
        }
        (true, false) => SleepMode::PosixTimer,
        (false, true) => SleepMode::Relative,
        (false, false) => SleepMode::Absolute,
    };
    let offset = |option: &'static str, value: &Option<String>, notes: &mut Notes| {
        value
            .as_deref()
            .map(|text| {
                integer_in(option, text, 0..=i64::MAX, notes).map(|us| us as u64 * NS_PER_US)
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let alignment = match (&args.aligned, &args.secaligned) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "--aligned",
                "-A and --secaligned exclude each other, as in cyclictest",
            ));
        }
        (Some(value), None) => Alignment::Aligned {
            offset_ns: offset("--aligned", value, notes)?,
        },
        (None, Some(value)) => Alignment::SecondAligned {
            offset_ns: offset("--secaligned", value, notes)?,
        },
        (None, None) => Alignment::None,
    };
    Ok((clock, sleep, alignment))
}

/// `--spike` and `--spike-nodes`.
pub(super) fn spike_list(
    args: &MeasureArgs,
    notes: &mut Notes,
) -> Result<Option<SpikeList>, UsageError> {
    let spike_list = args
        .spike
        .as_deref()
        .map(|text| -> Result<SpikeList, UsageError> {
            let trigger = integer_in("--spike", text, 0..=i64::MAX, notes)?;
            let nodes = match &args.spike_nodes {
                Some(n) => integer_in("--spike-nodes", n, 1..=1_000_000, notes)? as usize,
                None => DEFAULT_SPIKE_NODES,
            };
            Ok(SpikeList {
                trigger: trigger as u64,
                nodes,
            })
        })
        .transpose()?
        // --spike 0 records nothing in cyclictest.
        .filter(|s| s.trigger > 0);
    if args.spike_nodes.is_some() && spike_list.is_none() {
        notes.add("--spike-nodes", "has no effect without --spike");
    }
    Ok(spike_list)
}

/// `--deepest-idle-state` and `--mainaffinity`.
pub(super) fn idle_and_affinity(
    args: &MeasureArgs,
    notes: &mut Notes,
) -> Result<(Option<i32>, Option<Vec<usize>>), UsageError> {
    let deepest_idle_state = args
        .deepest_idle_state
        .as_deref()
        .map(|text| integer_in("--deepest-idle-state", text, -1..=64, notes).map(|n| n as i32))
        .transpose()?;
    let main_affinity = args
        .mainaffinity
        .as_deref()
        .map(|text| parse_cpu_list(text.trim()).map_err(|e| usage("--mainaffinity", e.to_string())))
        .transpose()?;
    Ok((deepest_idle_state, main_affinity))
}

/// `--load` on `--load-cpus` (every usable CPU by default).
pub(super) fn load(
    args: &MeasureArgs,
    host: &HostInfo,
) -> Result<Option<(Profile, Vec<usize>)>, UsageError> {
    let (name, cpus) = match (&args.load, &args.load_cpus) {
        (None, None) => return Ok(None),
        (None, Some(_)) => {
            return Err(usage(
                "--load-cpus",
                "says where a load runs; add --load PROFILE to start one",
            ));
        }
        (Some(name), cpus) => (name, cpus),
    };
    let profile = Profile::parse(name).map_err(|e| usage("--load", e))?;
    let cpus = match cpus {
        None => host.usable_cpus.clone(),
        Some(text) => {
            let cpus =
                parse_cpu_list(text.trim()).map_err(|e| usage("--load-cpus", e.to_string()))?;
            if let Some(cpu) = cpus.iter().find(|c| !host.usable_cpus.contains(c)) {
                return Err(usage(
                    "--load-cpus",
                    format!(
                        "CPU {cpu} is not usable here (usable: {})",
                        crate::cpulist::format_cpu_list(&host.usable_cpus)
                    ),
                ));
            }
            cpus
        }
    };
    Ok(Some((profile, cpus)))
}

/// Options of older cyclictests, taken and said to mean nothing more.
pub(super) fn accepted_from_older_versions(args: &MeasureArgs, notes: &mut Notes) {
    if args.nanosleep {
        notes.add(
            "-n",
            "accepted from cyclictest 1.x; clock_nanosleep is always used",
        );
    }
    if args.numa {
        notes.add(
            "--numa",
            "accepted from cyclictest 1.x; each sampler's memory is first touched by \
             its own pinned thread, so it is on that CPU's node already",
        );
    }
    if args.smp && args.priospread {
        notes.add("--priospread", "spreads priorities with -S too");
    }
}
