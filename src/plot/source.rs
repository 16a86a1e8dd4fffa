//! What a latency plot draws: the `clock_nanosleep` samplers' wake-ups
//! (the default), or the kernel's timerlat ([timerlat], `measure
//! --timerlat`), all of its contexts or some, one line per CPU and
//! context.

use std::collections::BTreeMap;

use super::{CpuSeries, series_from_stats};
use crate::instruments::event::Context;
use crate::stats::LatencyStats;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Samplers,
    /// timerlat's contexts, each once, in the order IRQ, thread, user.
    Timerlat(Vec<Context>),
}

/// What `source=` / `--source` accepts, for errors.
const SOURCES: &str = "samplers (the clock_nanosleep samplers, the default) or timerlat (the \
                       kernel's timerlat: [timerlat], measure --timerlat)";

impl Source {
    /// `source` and `context` as a person gave them (`None`: not given).
    pub fn parse(source: Option<&str>, context: Option<&str>) -> Result<Source, String> {
        match source.unwrap_or("samplers") {
            "samplers" => match context {
                Some(list) => Err(format!(
                    "a context ('{list}') chooses among timerlat's contexts: ask for the \
                     timerlat source with it"
                )),
                None => Ok(Source::Samplers),
            },
            "timerlat" => {
                let Some(list) = context else {
                    return Ok(Source::Timerlat(Context::ALL.to_vec()));
                };
                let mut chosen = Vec::new();
                for name in list.split(',').map(str::trim) {
                    let context = Context::from_name(name).ok_or_else(|| {
                        format!(
                            "'{name}' is not one of timerlat's contexts: irq, thread or \
                                 user, or a list of them (irq,thread)"
                        )
                    })?;
                    if !chosen.contains(&context) {
                        chosen.push(context);
                    }
                }
                chosen.sort();
                Ok(Source::Timerlat(chosen))
            }
            other => Err(format!("'{other}' is not a source: {SOURCES}")),
        }
    }

    /// Whether timerlat's `context` (by name) is drawn.
    pub fn wants(&self, context: &str) -> bool {
        self.drawn(context).is_some()
    }

    /// timerlat's context named `name`, when it is drawn.
    pub fn drawn(&self, name: &str) -> Option<Context> {
        match self {
            Source::Samplers => None,
            Source::Timerlat(contexts) => Context::from_name(name).filter(|c| contexts.contains(c)),
        }
    }

    /// Its name as `source=` takes it, and the daemon's instrument that
    /// measures it (`timerlat`; `samplers` for the samplers).
    pub fn name(&self) -> &'static str {
        match self {
            Source::Samplers => "samplers",
            Source::Timerlat(_) => "timerlat",
        }
    }

    /// A plot's caption on the status page, its `scope` ("since start")
    /// said.
    pub fn caption(&self, scope: &str) -> String {
        match self {
            Source::Samplers => format!("Histogram {scope}"),
            Source::Timerlat(_) => {
                format!("The kernel's timerlat {scope}, a line per CPU and context")
            }
        }
    }

    /// The first words of the title: `Wake-up latency`, `timerlat
    /// latency (irq, thread, user)`.
    pub fn title(&self) -> String {
        match self {
            Source::Samplers => "Wake-up latency".to_string(),
            Source::Timerlat(contexts) => format!(
                "timerlat latency ({})",
                contexts
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// timerlat's series among `stats` (by CPU and context name), one
    /// per CPU and context drawn, in that order.
    pub fn timerlat_series<'a>(
        &self,
        stats: impl IntoIterator<Item = (usize, &'a str, &'a LatencyStats)>,
    ) -> Vec<CpuSeries> {
        let mut chosen: BTreeMap<(usize, Context), CpuSeries> = BTreeMap::new();
        for (cpu, context, stats) in stats {
            if let Some(drawn) = self.drawn(context) {
                chosen.insert((cpu, drawn), series_from_stats(label(cpu, context), stats));
            }
        }
        chosen.into_values().collect()
    }
}

/// A timerlat series' name: `CPU 0 thread`.
pub fn label(cpu: usize, context: &str) -> String {
    format!("CPU {cpu} {context}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_contexts_are_read_or_refused_by_name() {
        assert_eq!(Source::parse(None, None), Ok(Source::Samplers));
        assert_eq!(
            Source::parse(Some("timerlat"), None),
            Ok(Source::Timerlat(Context::ALL.to_vec()))
        );
        assert_eq!(
            Source::parse(Some("timerlat"), Some("user, irq,user")),
            Ok(Source::Timerlat(vec![Context::Irq, Context::User]))
        );
        let refused = [
            (Some("cyclictest"), None, "'cyclictest' is not a source"),
            (None, Some("irq"), "ask for the timerlat source"),
            (Some("timerlat"), Some("softirq"), "'softirq' is not one"),
            (Some("timerlat"), Some(""), "'' is not one"),
        ];
        for (source, context, said) in refused {
            let err = Source::parse(source, context).unwrap_err();
            assert!(err.contains(said), "{source:?} {context:?}: {err}");
        }
    }

    #[test]
    fn timerlat_series_come_by_cpu_then_context_and_only_those_asked() {
        let mut stats = LatencyStats::new(100_000, None);
        stats.record(7_000, 0);
        let given = [
            (1, "irq", &stats),
            (0, "user", &stats),
            (0, "irq", &stats),
            (0, "thread", &stats),
            (0, "bogus", &stats),
        ];
        let all = Source::parse(Some("timerlat"), None).unwrap();
        let labels: Vec<String> = all
            .timerlat_series(given)
            .into_iter()
            .map(|s| s.label)
            .collect();
        assert_eq!(
            labels,
            ["CPU 0 irq", "CPU 0 thread", "CPU 0 user", "CPU 1 irq"]
        );
        let thread = Source::parse(Some("timerlat"), Some("thread")).unwrap();
        let series = thread.timerlat_series(given);
        assert_eq!(series.len(), 1);
        assert_eq!(
            (series[0].max_us, &series[0].bins_us[..]),
            (7.0, &[(7, 1)][..])
        );
        assert!(Source::Samplers.timerlat_series(given).is_empty());
        assert_eq!(thread.title(), "timerlat latency (thread)");
    }
}
