//! Which threads run where, at what priority and interval: cyclictest's
//! rules for `-a`, `-t`, `-S`, `-d`, `--priospread`, and `measure`'s own
//! default of one pinned thread per CPU.
//!
//! cyclictest pins thread N to the N-th CPU of the mask, round-robin
//! (`-a 3-5,0 -t 5`: CPUs 0, 3, 4, 5, 0), gives thread N the interval
//! `interval + N·distance` (distance 500 µs unless `-d`, 0 with a
//! histogram), and with `--priospread` the priority `priority − N`.

use super::values::{Notes, UsageError, integer_in, usage};
use crate::cli::MeasureArgs;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;
use crate::rt::sys::Policy;
use crate::sampling::{check_priority, default_priority};
use crate::units::NS_PER_US;

/// One sampler thread of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPlan {
    pub cpu: usize,
    pub priority: i32,
    pub interval_ns: u64,
}

/// The affinity options as typed (`-a`, `-t`, `-S`).
pub struct Placement<'a> {
    /// `-a`: `Some(None)` without a list.
    pub cpus: Option<Option<&'a str>>,
    /// `-t`: `Some(None)` without a number.
    pub threads: Option<Option<i64>>,
    pub smp: bool,
}

/// The CPUs threads are placed on, in order, and how many threads.
pub fn place(
    placement: &Placement<'_>,
    host: &HostInfo,
    notes: &mut Notes,
) -> Result<(Vec<usize>, usize), UsageError> {
    let usable = &host.usable_cpus;
    if usable.is_empty() {
        return Err(usage(
            "--cpus",
            "no usable CPU found (none is both online and in this process's affinity mask)",
        ));
    }
    let mask = match placement.cpus {
        Some(_) if placement.smp => {
            notes.add(
                "-a",
                "ignored with -S (-S runs a thread on every usable CPU)",
            );
            usable.clone()
        }
        Some(Some(list)) => cpu_mask(list.trim(), usable)?,
        Some(None) | None => usable.clone(),
    };
    let count = match placement.threads {
        Some(_) if placement.smp => {
            notes.add(
                "-t",
                "ignored with -S (-S runs a thread on every usable CPU)",
            );
            mask.len()
        }
        Some(Some(n)) if n < 1 => {
            return Err(usage("--threads", format!("{n}: run at least one thread")));
        }
        Some(Some(n)) => usize::try_from(n).map_err(|_| usage("--threads", "too many"))?,
        // `-t` alone: one per CPU; without -t, `measure` runs one per CPU
        // too, and says so where cyclictest would run one thread.
        Some(None) => mask.len(),
        // With -S cyclictest runs one thread per CPU too: nothing to say.
        None => {
            if mask.len() > 1 && !placement.smp {
                notes.add(
                    "-t",
                    format!(
                        "not given: one thread on each of the {} CPUs, each pinned (cyclictest \
                         runs one thread; give -t 1 for one)",
                        mask.len()
                    ),
                );
            }
            mask.len()
        }
    };
    if count > 4 * usable.len().max(1024) {
        return Err(usage(
            "--threads",
            format!("{count} threads is more than this host can sample"),
        ));
    }
    Ok((mask, count))
}

/// `-a LIST`: a CPU list, `all`, or `!LIST` (every usable CPU but those),
/// each CPU usable.
fn cpu_mask(text: &str, usable: &[usize]) -> Result<Vec<usize>, UsageError> {
    if text == "all" {
        return Ok(usable.to_vec());
    }
    let (inverted, list) = match text.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let listed = parse_cpu_list(list).map_err(|e| {
        usage(
            "--cpus",
            format!("{e} (write a list such as 0-3,8, \"all\", or !LIST for all but LIST)"),
        )
    })?;
    let cpus: Vec<usize> = if inverted {
        usable
            .iter()
            .copied()
            .filter(|c| !listed.contains(c))
            .collect()
    } else {
        if let Some(bad) = listed.iter().find(|c| !usable.contains(c)) {
            return Err(usage(
                "--cpus",
                format!(
                    "CPU {bad} is offline, absent or outside this process's affinity; usable \
                     CPUs are {}",
                    format_cpu_list(usable)
                ),
            ));
        }
        listed
    };
    if cpus.is_empty() {
        return Err(usage(
            "--cpus",
            format!("'{text}' leaves no CPU to measure"),
        ));
    }
    Ok(cpus)
}

/// How thread N's priority and interval follow from the first thread's.
#[derive(Debug, Clone, Copy)]
pub struct Spacing {
    pub priority: i32,
    /// `--priospread`: each thread one priority lower than the one before.
    pub priospread: bool,
    pub interval_ns: u64,
    /// `-d`: each thread's interval this much longer than the one before.
    pub distance_ns: i64,
    pub max_interval_ns: u64,
}

/// Each thread's CPU, priority and interval.
pub fn plan_threads(
    mask: &[usize],
    count: usize,
    policy: Policy,
    spacing: Spacing,
) -> Result<Vec<ThreadPlan>, UsageError> {
    let Spacing {
        priority,
        priospread,
        interval_ns,
        distance_ns,
        max_interval_ns,
    } = spacing;
    (0..count)
        .map(|idx| {
            let step = i64::try_from(idx).unwrap_or(i64::MAX);
            let thread_priority = if priospread {
                i64::from(priority) - step
            } else {
                i64::from(priority)
            };
            let thread_priority = check_priority(policy, thread_priority).map_err(|e| {
                usage(
                    if priospread {
                        "--priospread"
                    } else {
                        "--priority"
                    },
                    format!("thread {idx}: {e}"),
                )
            })?;
            let interval = i128::from(interval_ns) + i128::from(distance_ns) * i128::from(step);
            if interval < i128::from(NS_PER_US) || interval > i128::from(max_interval_ns) {
                return Err(usage(
                    "--distance",
                    format!(
                        "thread {idx}'s interval would be {}us; keep every thread's interval \
                         between 1us and 1h",
                        interval / i128::from(NS_PER_US)
                    ),
                ));
            }
            Ok(ThreadPlan {
                cpu: mask[idx % mask.len()],
                priority: thread_priority,
                interval_ns: interval as u64,
            })
        })
        .collect()
}

/// The policy and the first thread's priority, as cyclictest settles
/// them; `measure`'s default (neither -p nor --policy) is SCHED_FIFO at 80
/// where cyclictest's is SCHED_OTHER.
pub fn policy_and_priority(
    args: &MeasureArgs,
    n_threads: usize,
    notes: &mut Notes,
) -> Result<(Policy, i32), UsageError> {
    let named = match args.policy.as_deref().map(str::trim) {
        None => None,
        Some("fifo") => Some(Policy::Fifo),
        Some("rr") => Some(Policy::RoundRobin),
        Some("other" | "normal") => Some(Policy::Other),
        Some("batch") => Some(Policy::Batch),
        Some("idle") => Some(Policy::Idle),
        Some(other) => {
            notes.add(
                "--policy",
                format!("'{other}' is not a policy; SCHED_OTHER, as cyclictest falls back"),
            );
            Some(Policy::Other)
        }
    };
    let priority = args
        .priority
        .as_deref()
        .map(|text| integer_in("--priority", text, 0..=99, notes))
        .transpose()?
        .map(|p| p as i32);
    let fallback = (n_threads + 1).min(99) as i32;
    Ok(match (named, priority) {
        // Said, since cyclictest would print `P: 0` here.
        (None, None) => {
            let p = default_priority(Policy::Fifo);
            notes.add(
                "--priority",
                format!(
                    "none given: SCHED_FIFO at {p}, latencyd's default (cyclictest runs \
                     SCHED_OTHER, P: 0; --policy other for that)"
                ),
            );
            (Policy::Fifo, p)
        }
        // cyclictest's -p always means SCHED_FIFO, and priority 0 there
        // becomes the number of threads + 1.
        (None, Some(0)) => {
            notes.add(
                "--priority",
                format!("0: SCHED_FIFO at {fallback}, as cyclictest defaults it (--policy other for SCHED_OTHER)"),
            );
            (Policy::Fifo, fallback)
        }
        (None, Some(p)) => (Policy::Fifo, p),
        (Some(policy), None) if policy.is_realtime() => {
            notes.add(
                "--policy",
                format!(
                    "{} without -p: priority {fallback}, as cyclictest defaults it",
                    policy.name()
                ),
            );
            (policy, fallback)
        }
        (Some(policy), None) => (policy, default_priority(policy)),
        (Some(policy), Some(p)) if p > 0 && !policy.is_realtime() => {
            notes.add(
                "--policy",
                format!(
                    "{} takes no priority; SCHED_FIFO at {p}, as cyclictest does",
                    policy.name()
                ),
            );
            (Policy::Fifo, p)
        }
        (Some(policy), Some(0)) if policy.is_realtime() => {
            notes.add(
                "--priority",
                format!(
                    "0 with {}: defaulting to {fallback}, as cyclictest does",
                    policy.name()
                ),
            );
            (policy, fallback)
        }
        (Some(policy), Some(p)) => (policy, p),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spacing(priority: i32, priospread: bool, interval_ns: u64, distance_ns: i64) -> Spacing {
        Spacing {
            priority,
            priospread,
            interval_ns,
            distance_ns,
            max_interval_ns: u64::MAX,
        }
    }

    fn host(cpus: &[usize]) -> HostInfo {
        let mut host = HostInfo::detect();
        host.usable_cpus = cpus.to_vec();
        host
    }

    fn placed(
        cpus: Option<Option<&str>>,
        threads: Option<Option<i64>>,
        smp: bool,
    ) -> (Vec<usize>, usize) {
        let mut notes = Notes::default();
        place(
            &Placement { cpus, threads, smp },
            &host(&[0, 1, 2, 3, 4, 5]),
            &mut notes,
        )
        .unwrap()
    }

    #[test]
    fn threads_go_round_robin_over_the_mask_as_cyclictest_places_them() {
        let (mask, count) = placed(Some(Some("3-5,0")), Some(Some(5)), false);
        let threads =
            plan_threads(&mask, count, Policy::Fifo, spacing(80, false, 1_000_000, 0)).unwrap();
        let cpus: Vec<usize> = threads.iter().map(|t| t.cpu).collect();
        assert_eq!(cpus, [0, 3, 4, 5, 0], "the mask is in CPU order");
        assert_eq!(
            placed(Some(None), Some(None), false),
            (vec![0, 1, 2, 3, 4, 5], 6)
        );
        assert_eq!(
            placed(None, None, false).1,
            6,
            "measure's default: one per CPU"
        );
        assert_eq!(placed(Some(Some("!0-3")), None, false).0, [4, 5]);
        assert_eq!(placed(Some(Some("1")), Some(Some(2)), true).1, 6, "-S wins");
    }

    #[test]
    fn a_note_that_cyclictest_runs_one_thread_only_where_it_does() {
        let said = |threads: Option<Option<i64>>, smp: bool| {
            let mut notes = Notes::default();
            let placement = Placement {
                cpus: None,
                threads,
                smp,
            };
            place(&placement, &host(&[0, 1, 2, 3]), &mut notes).unwrap();
            notes
                .0
                .iter()
                .map(|n| n.message.clone())
                .collect::<Vec<_>>()
        };
        assert!(said(None, false)[0].contains("cyclictest runs one thread"));
        // `-S` (and `-m -S -p 90`): cyclictest runs one per CPU as well.
        assert!(said(None, true).is_empty(), "{:?}", said(None, true));
        assert!(said(Some(None), false).is_empty());
    }

    #[test]
    fn without_p_or_policy_fifo_80_is_taken_and_said_where_cyclictest_runs_other() {
        let run = |priority: Option<&str>, policy: Option<&str>| {
            let args = MeasureArgs {
                priority: priority.map(str::to_string),
                policy: policy.map(str::to_string),
                ..MeasureArgs::default()
            };
            let mut notes = Notes::default();
            let chosen = policy_and_priority(&args, 1, &mut notes).unwrap();
            let said: Vec<String> = notes.0.iter().map(|n| n.message.clone()).collect();
            (chosen, said)
        };
        let (chosen, said) = run(None, None);
        assert_eq!(chosen, (Policy::Fifo, 80));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("cyclictest runs SCHED_OTHER, P: 0"),
            "{said:?}"
        );
        assert_eq!(run(Some("90"), None), ((Policy::Fifo, 90), Vec::new()));
        assert_eq!(run(None, Some("other")), ((Policy::Other, 0), Vec::new()));
    }

    #[test]
    fn intervals_step_by_the_distance_and_priorities_by_priospread() {
        let threads = plan_threads(
            &[0, 1],
            3,
            Policy::Fifo,
            spacing(80, true, 1_000_000, 500_000),
        )
        .unwrap();
        let shape: Vec<(i32, u64)> = threads
            .iter()
            .map(|t| (t.priority, t.interval_ns))
            .collect();
        assert_eq!(shape, [(80, 1_000_000), (79, 1_500_000), (78, 2_000_000)]);
        let err = plan_threads(&[0], 3, Policy::Fifo, spacing(2, true, 1_000, 0)).unwrap_err();
        assert!(err.to_string().contains("thread 2"), "{err}");
        let err =
            plan_threads(&[0], 2, Policy::Fifo, spacing(80, false, 1_000, -5_000)).unwrap_err();
        assert!(err.to_string().contains("thread 1's interval"), "{err}");
    }

    #[test]
    fn a_mask_outside_the_usable_cpus_is_refused_by_name() {
        let mut notes = Notes::default();
        let err = place(
            &Placement {
                cpus: Some(Some("7")),
                threads: None,
                smp: false,
            },
            &host(&[0, 1]),
            &mut notes,
        )
        .unwrap_err();
        assert!(err.to_string().contains("CPU 7"), "{err}");
        assert!(
            place(
                &Placement {
                    cpus: None,
                    threads: Some(Some(0)),
                    smp: false
                },
                &host(&[0, 1]),
                &mut notes
            )
            .is_err()
        );
    }

    #[test]
    fn without_t_each_cpu_gets_a_thread_and_it_is_said() {
        let run = |threads: Option<Option<i64>>, cpus: &[usize]| {
            let mut notes = Notes::default();
            let (mask, count) = place(
                &Placement {
                    cpus: None,
                    threads,
                    smp: false,
                },
                &host(cpus),
                &mut notes,
            )
            .unwrap();
            (
                mask.len(),
                count,
                notes.0.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
        };
        let (_, count, notes) = run(None, &[0, 1]);
        assert_eq!(count, 2);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("-t: not given") && notes[0].contains("-t 1"),
            "{notes:?}"
        );
        // Asked for, or one CPU anyway: nothing to say.
        for (threads, cpus) in [
            (Some(None), &[0, 1][..]),
            (Some(Some(1)), &[0, 1]),
            (None, &[0]),
        ] {
            assert!(run(threads, cpus).2.is_empty());
        }
    }
}
