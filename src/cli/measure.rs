//! `latencyd measure`'s flags: every option of cyclictest 2.x with its
//! letter and long name, then our own. Values stay text here: stage two
//! (`measure::options`) reads them as cyclictest does (numbers as `atoi`
//! reads them, durations with or without a unit) and says what it did
//! with each one. `getopt` turns the command line as typed into the
//! `--name=value` form these are parsed from.

use std::path::PathBuf;

use clap::{ArgAction, Args};

// getopt lets an option be given again, the last value winning; so do we.
#[derive(Debug, Default, Args)]
#[command(disable_help_flag = true, args_override_self = true)]
pub struct MeasureArgs {
    /// Pin the threads to these CPUs, round-robin (a list such as 0-3,8,
    /// "all", or with ! and + as cyclictest takes them); without a list,
    /// thread N runs on the N-th CPU this process may use [default: one
    /// thread on each CPU this process may use].
    #[arg(
        short = 'a',
        long = "cpus",
        visible_alias = "affinity",
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true
    )]
    pub cpus: Option<Option<String>>,

    /// Number of threads; without a number, one per CPU [default: one per
    /// selected CPU]. With more threads than CPUs, several share a CPU.
    #[arg(short = 't', long, value_name = "NUM", num_args = 0..=1, require_equals = true)]
    pub threads: Option<Option<String>>,

    /// One thread per CPU this process may use, all at the same priority
    /// (what latencyd does anyway).
    #[arg(short = 'S', long)]
    pub smp: bool,

    /// Sampling interval of the first thread (a bare number is
    /// microseconds; units ns, us, ms, s).
    #[arg(short = 'i', long, value_name = "INTV", default_value = "1000")]
    pub interval: String,

    /// Each further thread's interval is this much longer than the one
    /// before, in microseconds, as cyclictest spaces them [default: 500;
    /// 0 with a histogram].
    #[arg(short = 'd', long, value_name = "DIST")]
    pub distance: Option<String>,

    /// Real-time priority of the first thread, SCHED_FIFO (0: the number of
    /// threads + 1, as cyclictest picks it) [default: 80].
    #[arg(short = 'p', long, value_name = "PRIO")]
    pub priority: Option<String>,

    /// Scheduling policy: fifo, rr, other (or normal), batch, idle
    /// [default: fifo].
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,

    /// Give each further thread a priority one lower than the one before.
    #[arg(long)]
    pub priospread: bool,

    /// Run for this long, then stop (a bare number is seconds; units ns,
    /// us, ms, s, m, h, d). Default: until Ctrl-C or --loops.
    #[arg(short = 'D', long, value_name = "TIME")]
    pub duration: Option<String>,

    /// Stop each thread after this many samples (0: endless).
    #[arg(short = 'l', long, value_name = "LOOPS")]
    pub loops: Option<String>,

    /// Print cyclictest's latency histogram with this many 1 µs bins (1 ns
    /// with -N) after the run.
    #[arg(short = 'h', long = "histogram", value_name = "US")]
    pub histogram: Option<String>,

    /// Like --histogram, with an extra column summing all threads.
    #[arg(short = 'H', long = "histofall", value_name = "US")]
    pub histofall: Option<String>,

    /// Write the histogram to this file instead of standard output.
    #[arg(long, value_name = "PATH")]
    pub histfile: Option<PathBuf>,

    /// Report in nanoseconds instead of microseconds.
    #[arg(short = 'N', long)]
    pub nsecs: bool,

    /// Print only the summary at exit, no live lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Print every sample as `thread:cycle:latency` while running
    /// (cyclictest's verbose output), then the summary.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// With --verbose, print only the largest of every RED samples.
    #[arg(short = 'o', long, value_name = "RED")]
    pub oscope: Option<String>,

    /// Flush standard output after every line, for live processing.
    #[arg(short = 'u', long)]
    pub unbuffered: bool,

    /// Refresh the live lines only when a thread's maximum grows.
    #[arg(short = 'M', long = "refresh_on_max")]
    pub refresh_on_max: bool,

    /// Write the results as cyclictest-compatible JSON to FILE ("-" for
    /// standard output, which then carries only the JSON).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<PathBuf>,

    /// Create a named pipe here; whoever reads it gets the summary lines
    /// of the run so far.
    #[arg(short = 'F', long, value_name = "PATH")]
    pub fifo: Option<PathBuf>,

    /// Clock to sleep on and read: 0 = CLOCK_MONOTONIC, 1 = CLOCK_REALTIME.
    #[arg(short = 'c', long, value_name = "CLOCK", default_value = "0")]
    pub clock: String,

    /// Sleep for one interval at a time (relative) instead of to absolute
    /// deadlines; latency is then counted from each sleep's start.
    #[arg(short = 'r', long)]
    pub relative: bool,

    /// Sleep with nanosleep (relative), as cyclictest's -s does.
    #[arg(short = 's', long)]
    pub system: bool,

    /// Wake up by a POSIX interval timer's signal instead of
    /// clock_nanosleep.
    #[arg(short = 'x', long = "posix_timers")]
    pub posix_timers: bool,

    /// Start all threads on one common time grid; each further thread this
    /// many microseconds later than the one before.
    #[arg(short = 'A', long, value_name = "USEC", num_args = 0..=1, require_equals = true)]
    pub aligned: Option<Option<String>>,

    /// Start all threads at the next full second, plus this many
    /// microseconds.
    #[arg(long, value_name = "USEC", num_args = 0..=1, require_equals = true)]
    pub secaligned: Option<Option<String>>,

    /// Check the clock's resolution before the run and warn when it is
    /// coarser than the kernel says.
    #[arg(short = 'R', long)]
    pub resolution: bool,

    /// Stop at the first wake-up more than this late (a bare number is
    /// microseconds), as cyclictest -b does, and print what delayed it
    /// (from tracefs, when it can be used).
    #[arg(short = 'b', long = "breaktrace", value_name = "USEC")]
    pub breaktrace: Option<String>,

    /// With -b: write a mark into the kernel trace and stop tracing when
    /// the break hits.
    #[arg(long)]
    pub tracemark: bool,

    /// List every wake-up later than this many microseconds at the end
    /// (cyclictest's trigger).
    #[arg(long = "spike", value_name = "TRIGGER")]
    pub spike: Option<String>,

    /// How many --spike wake-ups to keep [default: 1024].
    #[arg(long = "spike-nodes", value_name = "NUM")]
    pub spike_nodes: Option<String>,

    /// Count SMIs (System Management Interrupts) per thread from the CPU's
    /// SMI counter (Intel only; needs /dev/cpu/N/msr).
    #[arg(long)]
    pub smi: bool,

    /// Hold /dev/cpu_dma_latency at this many microseconds while running
    /// [default: 0, as cyclictest holds it].
    #[arg(long, value_name = "PM_QOS")]
    pub latency: Option<String>,

    /// Leave power management as it is: hold nothing on
    /// /dev/cpu_dma_latency.
    #[arg(long)]
    pub default_system: bool,

    /// Like --default-system: save battery, hold no PM QoS request.
    #[arg(long)]
    pub laptop: bool,

    /// Disable the measured CPUs' idle states deeper than this one while
    /// running (-1: all of them), and restore them at the end.
    #[arg(long = "deepest-idle-state", value_name = "N")]
    pub deepest_idle_state: Option<String>,

    /// Run the main thread on these CPUs (the samplers keep theirs).
    #[arg(long, value_name = "CPUSET")]
    pub mainaffinity: Option<String>,

    /// Accepted for cyclictest compatibility: memory is always locked.
    #[arg(short = 'm', long)]
    pub mlockall: bool,

    /// Accepted for cyclictest 1.x command lines: latencyd always sleeps
    /// with clock_nanosleep.
    #[arg(short = 'n', long)]
    pub nanosleep: bool,

    /// Accepted for cyclictest 1.x command lines: each sampler's memory is
    /// on its own CPU's node already (first touch from its pinned thread).
    #[arg(long)]
    pub numa: bool,

    /// Print the options as read, thread by thread, before the run.
    #[arg(long = "dbg_cyclictest")]
    pub dbg_cyclictest: bool,

    /// Run even if real-time scheduling or memory locking is refused; every
    /// result is then marked as not real-time.
    #[arg(long)]
    pub allow_non_rt: bool,

    /// Discard the samples of this first stretch of the run (e.g. 1s).
    #[arg(long, value_name = "TIME")]
    pub warmup: Option<String>,

    /// Count samples above this latency as spikes in the JSON (a bare
    /// number is microseconds).
    #[arg(long = "spike-threshold", value_name = "TIME", default_value = "100us")]
    pub spike_threshold: String,

    /// Capture what delayed every wake-up at least --forensics-threshold
    /// late (rate-limited) and go on measuring; the captures are printed
    /// at the end. Needs root or write access to tracefs.
    #[arg(long)]
    pub forensics: bool,

    /// The lateness --forensics captures (a bare number is microseconds).
    #[arg(
        long = "forensics-threshold",
        value_name = "TIME",
        default_value = "500us"
    )]
    pub forensics_threshold: String,

    /// Also run the kernel's timerlat tracer on the measured CPUs (its
    /// IRQ, thread and, where the kernel has timerlat_fd, return-to-user
    /// latency of every period) and print its results after the
    /// cyclictest-style ones, as rtla timerlat top does (and hist does
    /// with -h). Needs root or write access to tracefs, and a kernel
    /// with the tracer.
    #[arg(long)]
    pub timerlat: bool,

    /// --timerlat's period (a bare number is microseconds; 100us to 1s).
    #[arg(long = "timerlat-period", value_name = "TIME", default_value = "1ms")]
    pub timerlat_period: String,

    /// The SCHED_FIFO priority of latencyd's timerlat threads (rtla's -P
    /// f:95); the kernel's own threads, used where it has no timerlat_fd,
    /// keep its FIFO 95.
    #[arg(long = "timerlat-priority", value_name = "PRIO", default_value_t = 95)]
    pub timerlat_priority: i32,

    /// Let the kernel's timerlat threads be the workload even where
    /// latencyd's own could be (no return-to-user latency).
    #[arg(long = "timerlat-kernel-threads")]
    pub timerlat_kernel_threads: bool,

    /// Measure hardware noise instead of wake-up latency, as rt-tests'
    /// hwlatdetect does: the kernel's hwlat tracer spins the measured CPUs
    /// (-a; in turn) with interrupts off for --hwlat-width of every
    /// --hwlat-window and reports each gap over --hwlat-threshold, for -D
    /// (or until Ctrl-C). The CPU it spins on does nothing else meanwhile.
    /// Needs root or write access to tracefs and a kernel with the tracer.
    #[arg(long)]
    pub hwlat: bool,

    /// --hwlat: report gaps over this (a bare number is microseconds).
    #[arg(long = "hwlat-threshold", value_name = "TIME", default_value = "10us")]
    pub hwlat_threshold: String,

    /// --hwlat: spin this long in every window.
    #[arg(long = "hwlat-width", value_name = "TIME", default_value = "500ms")]
    pub hwlat_width: String,

    /// --hwlat: the window.
    #[arg(long = "hwlat-window", value_name = "TIME", default_value = "1s")]
    pub hwlat_window: String,

    /// Also write every CPU's histogram of every --log-interval to FILE in
    /// HdrHistogram's interval log format (.hlog), as the daemon's record
    /// does; `latencyd report` and `latencyd plot` read it.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// The --log interval: whole seconds, 1s to 1h (a bare number is
    /// seconds).
    #[arg(long = "log-interval", value_name = "TIME", default_value = "1s")]
    pub log_interval: String,

    /// Run a background load while measuring, started once the samplers
    /// run and stopped at the end (also if latencyd dies): rteval, cpu,
    /// memory, io, network, irq or all. Needs stress-ng, and rt-tests'
    /// hackbench for rteval and all; docs/measure.md lists what each runs.
    #[arg(long, value_name = "PROFILE")]
    pub load: Option<String>,

    /// The CPUs --load runs on [default: every online CPU, as rteval].
    #[arg(long = "load-cpus", value_name = "CPUSET")]
    pub load_cpus: Option<String>,

    /// Draw the OSADL-style latency plot of the run into this .svg or .png.
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    pub plot: Option<PathBuf>,

    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}
