//! `latencyd oslat`'s flags: oslat's (rt-tests 2.x) with their letters
//! and long names, so that a command line written for oslat means the
//! same here. Values stay text; `oslat::options` reads them as oslat does
//! and names what is wrong. `getopt` turns the command line as typed into
//! the `--name=value` form these are parsed from.

use std::path::PathBuf;

use clap::Args;

// getopt lets an option be given again, the last value winning; so do we.
#[derive(Debug, Default, Args)]
#[command(args_override_self = true)]
pub struct OslatArgs {
    /// Number of histogram buckets, 4 to 1024 [default: 32].
    #[arg(short = 'b', long, value_name = "NUM")]
    pub bucket_size: Option<String>,
    /// Width of a bucket in ns; not a multiple of 1000 prints ns
    /// [default: 1000].
    #[arg(short = 'W', long, value_name = "NS")]
    pub bucket_width: Option<String>,
    /// Take the smallest gap of the 1-second pre-heat off every bucket.
    #[arg(short = 'B', long)]
    pub bias: bool,
    /// Poll on these CPUs (a list such as 1,3,5,7-15) [default: every CPU
    /// this process may use].
    #[arg(short = 'c', long, value_name = "LIST")]
    pub cpu_list: Option<String>,
    /// The CPU the main thread waits on [default: 0].
    #[arg(short = 'C', long, value_name = "CPU")]
    pub cpu_main_thread: Option<String>,
    /// How long to poll: seconds, or with m, h or d [default: 1].
    #[arg(short = 'D', long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Write the results as oslat's JSON into FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Poll under SCHED_FIFO at this priority, 1 to 99 [default: the
    /// caller's policy].
    #[arg(short = 'f', long, value_name = "PRIO")]
    pub rtprio: Option<String>,
    /// Bytes the memmove workload moves per read (K, M, G suffixes)
    /// [default: 16K].
    #[arg(short = 'm', long, value_name = "SIZE")]
    pub workload_mem: Option<String>,
    /// Print the summary only.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Pre-heat on one CPU only (the bias is then that CPU's minimum).
    #[arg(short = 's', long)]
    pub single_preheat: bool,
    /// Stop at the first gap of at least this many µs, mark it in the
    /// kernel's trace and stop tracing; exit status 1.
    #[arg(short = 'T', long, value_name = "US")]
    pub trace_threshold: Option<String>,
    /// Print the version line and exit.
    #[arg(short = 'v', long)]
    pub version: bool,
    /// Work between two reads: no, or memmove [default: no].
    #[arg(short = 'w', long, value_name = "NAME")]
    pub workload: Option<String>,
    /// Leave out buckets that are empty on every CPU (but the last).
    #[arg(short = 'z', long)]
    pub zero_omit: bool,
}
