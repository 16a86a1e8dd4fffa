//! `latencyd oslat`: a one-shot busy-poll measurement with oslat's
//! command line and output (rt-tests 2.x), so that scripts written for
//! oslat (cnf-tests' latency suite, jq over its JSON) keep working by
//! changing the command. A separate command rather than `measure
//! --oslat`: oslat's letters mean other things to cyclictest (`-b`,
//! `-B`, `-m`, `-T`, `-w`, `-z`), so one command line cannot speak both.
//!
//! The loop is the real-time crate's `poll`; this room reads the options
//! (`options`), runs the 1-second pre-heat and the test, and prints
//! (`output`).
//!
//! Exit status: 0 measured; 1 the trace threshold was reached (the
//! summary is still printed) or a poller could not run; 2 bad usage.

mod options;
mod output;

pub use options::OslatOptions;
pub use output::{OSLAT_VERSION, header, json, summary, version_line};

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use crate::cli::OslatArgs;
use crate::host::HostInfo;
use crate::rt::poll::{self, PollSpec, Tally, Tripped};
use crate::rt::sys::{self, Counter};
use crate::tracefs::TraceMark;

const WHO: &str = "latencyd oslat";

pub fn main(args: &OslatArgs) -> ExitCode {
    println!("{}", version_line());
    if args.version {
        return ExitCode::SUCCESS;
    }
    let host = HostInfo::detect();
    let options = match OslatOptions::from_args(args, &host) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{WHO}: {err}");
            return ExitCode::from(2);
        }
    };
    match run(&options, &host) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("{WHO}: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(o: &OslatOptions, host: &HostInfo) -> Result<ExitCode, String> {
    let stop = crate::signals::stop_flag()
        .map_err(|e| format!("cannot install the signal handlers: {e}"))?;
    if let Err(err) = sys::lock_all_memory() {
        eprintln!("{WHO}: warning: cannot lock memory ({err}); page faults may add gaps");
    }
    sys::pin_current_thread(o.main_cpu)
        .map_err(|e| format!("-C/--cpu-main-thread {}: cannot run there: {e}", o.main_cpu))?;
    if o.rtprio.is_some() && o.cpus.contains(&0) {
        println!("WARNING: Running SCHED_FIFO workload on CPU 0 may hang the thread");
    }
    let mut trace_mark = o
        .trace_threshold_us
        .map(|_| TraceMark::open(WHO, "-T/--trace-threshold"));
    let counter = Counter::native();
    let mhz = poll::counter_mhz(counter);
    let preheat_cpus = if o.single_preheat { 1 } else { o.cpus.len() };
    let mut out = std::io::stdout().lock();
    if !o.quiet {
        let _ = write!(out, "{}", header(o, preheat_cpus));
        let _ = writeln!(out, "Pre-heat for 1 seconds...");
    }
    let _ = out.flush();
    let mut specs = specs(o);
    preheat(o, &mut specs, counter, mhz, &stop, &mut out)?;
    for spec in &mut specs {
        spec.stop_at_units = o.trace_threshold_us.map(|t| t.saturating_mul(o.per_us()));
    }
    if !o.quiet {
        let _ = writeln!(out, "Test starts...");
    }
    let _ = out.flush();
    let start = SystemTime::now();
    let duration = Duration::from_secs(o.duration_secs);
    let (tallies, tripped) =
        poll::run(&specs, counter, mhz, duration, &stop).map_err(|e| e.to_string())?;
    let end = SystemTime::now();
    if let Some(t) = tripped {
        let line = tripped_line(o, t);
        if let Some(mark) = &mut trace_mark {
            mark.hit(&line);
        }
        eprint!("{line}");
    }
    for t in tallies.iter().filter(|t| t.moved) {
        eprintln!(
            "{WHO}: warning: CPU {}: the poller ended off its CPU (the CPU went offline, or \
             something moved it); its figures are partly another CPU's",
            t.cpu
        );
    }
    if !o.quiet {
        let _ = writeln!(out, "Test completed.\n");
    }
    let _ = write!(out, "{}", summary(o, &tallies));
    let _ = out.flush();
    let return_code = i32::from(tripped.is_some());
    if let Some(path) = &o.json {
        write_json(
            o,
            &tallies,
            tripped,
            path,
            host,
            start,
            end,
            return_code,
            counter,
        )?;
    }
    Ok(ExitCode::from(return_code as u8))
}

/// One poller per CPU, as the options say (no bias or threshold yet).
fn specs(o: &OslatOptions) -> Vec<PollSpec> {
    o.cpus
        .iter()
        .map(|&cpu| PollSpec {
            cpu,
            fifo_priority: o.rtprio,
            workload_bytes: o.workload_bytes as usize,
            layout: o.layout,
            stop_at_units: None,
        })
        .collect()
}

/// oslat's 1-second pre-heat (on one CPU with `-s`): the CPUs reach their
/// working frequency, and with `-B` the smallest gap seen becomes every
/// bucket's bias.
fn preheat(
    o: &OslatOptions,
    specs: &mut [PollSpec],
    counter: Counter,
    mhz: u64,
    stop: &AtomicBool,
    out: &mut impl Write,
) -> Result<(), String> {
    let cpus = if o.single_preheat { 1 } else { specs.len() };
    let (tallies, _) = poll::run(&specs[..cpus], counter, mhz, Duration::from_secs(1), stop)
        .map_err(|e| e.to_string())?;
    if o.bias {
        let bias = tallies
            .iter()
            .map(|t| t.min)
            .min()
            .filter(|&m| m != u64::MAX)
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "Global bias set to {:.*} (us)",
            o.precision,
            bias as f64 / o.per_us() as f64
        );
        for spec in specs {
            spec.layout.bias = bias;
        }
    }
    Ok(())
}

/// oslat's words when `-T` stops the run.
fn tripped_line(o: &OslatOptions, t: Tripped) -> String {
    format!(
        "{WHO}: Trace threshold ({} us) triggered on cpu {} with {:.*} us!\n",
        o.trace_threshold_us.unwrap_or(0),
        t.cpu,
        o.precision,
        t.units as f64 / o.per_us() as f64
    )
}

#[allow(clippy::too_many_arguments)]
fn write_json(
    o: &OslatOptions,
    tallies: &[Tally],
    tripped: Option<Tripped>,
    path: &std::path::Path,
    host: &HostInfo,
    start: SystemTime,
    end: SystemTime,
    return_code: i32,
    counter: Counter,
) -> Result<(), String> {
    let cmdline = std::env::args().collect::<Vec<_>>().join(" ");
    let facts = output::RunFacts {
        cmdline: &cmdline,
        start,
        end,
        return_code,
        host,
        counter: counter.name(),
        tripped: tripped.map(|t| output::TrippedJson {
            cpu: t.cpu,
            us: t.units as f64 / o.per_us() as f64,
        }),
    };
    std::fs::write(path, json(o, tallies, facts))
        .map_err(|e| format!("--json {}: cannot write it: {e}", path.display()))
}
