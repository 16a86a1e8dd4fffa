//! `latencyd qualify`'s flags. Values stay text here; `qualify::plan`
//! reads them, with the profile and cnf-tests' environment variables, and
//! names what is wrong.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Default, Clone, Args)]
pub struct QualifyArgs {
    /// The profile: a ready one by name (cnf-tests, smoke,
    /// certification-24h) or a TOML file [default: cnf-tests].
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,
    /// Each measuring phase's length (a bare number is seconds; s, m, h,
    /// d), over the profile and LATENCY_TEST_RUNTIME.
    #[arg(long, value_name = "TIME")]
    pub runtime: Option<String>,
    /// The CPUs measured (a list such as 2-5), over the profile and
    /// LATENCY_TEST_CPUS [default: the isolated CPUs, else every online
    /// CPU].
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// The CPUs the busy-poll phase polls [default: the measured CPUs but
    /// the one oslat's main thread waits on].
    #[arg(long = "poll-cpus", value_name = "LIST")]
    pub poll_cpus: Option<String>,
    /// The maximum of every phase, in µs, over MAXIMUM_LATENCY and the
    /// profile; a phase's own maximum wins over it.
    #[arg(long = "maximum-latency", value_name = "US")]
    pub maximum_latency: Option<String>,
    /// The hardware-noise phase's maximum gap in µs (as
    /// HWLATDETECT_MAXIMUM_LATENCY).
    #[arg(long = "hwlat-maximum", value_name = "US")]
    pub hwlat_maximum: Option<String>,
    /// The wake-up phases' maximum in µs, idle and loaded (as
    /// CYCLICTEST_MAXIMUM_LATENCY).
    #[arg(long = "cyclictest-maximum", value_name = "US")]
    pub cyclictest_maximum: Option<String>,
    /// The busy-poll phase's maximum gap in µs (as
    /// OSLAT_MAXIMUM_LATENCY).
    #[arg(long = "oslat-maximum", value_name = "US")]
    pub oslat_maximum: Option<String>,
    /// The timerlat phase's maximum thread latency in µs.
    #[arg(long = "timerlat-maximum", value_name = "US")]
    pub timerlat_maximum: Option<String>,
    /// The load profiles of the loaded phases, one phase each (a
    /// comma-separated list of measure --load's profiles; "none" for
    /// none), over the profile.
    #[arg(long, value_name = "LIST")]
    pub load: Option<String>,
    /// Write the verdict as JUnit XML: one test case per phase and CPU.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the verdict, each phase's statistics per CPU and the host's
    /// facts as JSON (`qualify --baseline` reads it).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one self-contained HTML report (opens from a file, no
    /// network): the verdict table, a plot per phase, the statistics, the
    /// facts and the captures.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write the --json document into the daemon's record (the
    /// directory of record.dir, /var/lib/latencyd/record for the packaged
    /// service): the daemon then exports the qualified maxima and its
    /// regression alert starts from them.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Compare with an earlier --json of this host or its class: a CPU's
    /// maximum beyond --regression-factor times the baseline's fails.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// How many times the baseline's maximum a phase may reach before it
    /// counts as a regression [default: 1.5].
    #[arg(
        long = "regression-factor",
        value_name = "FACTOR",
        requires = "baseline"
    )]
    pub regression_factor: Option<String>,
    /// Print the plan (phases, CPUs, lengths, thresholds and where each
    /// came from) and exit without measuring.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
}
