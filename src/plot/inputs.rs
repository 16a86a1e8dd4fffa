//! Reading the plot's inputs: latencyd's and cyclictest's `--json` files
//! and jitterdebugger's results, told apart by their shape.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CpuSeries, PlotData, PlotError, Source, input, subtitle};

/// Reads a latencyd or cyclictest `--json` file, or a jitterdebugger
/// results file, telling them apart by their shape; with
/// `Source::Timerlat`, the timerlat results of a latencyd `measure
/// --timerlat --json` file.
pub fn read_input(text: &str, source: &Source) -> Result<PlotData, PlotError> {
    let json: Value = serde_json::from_str(text)
        .map_err(|e| input(format!("not JSON ({e}): expected a latencyd or cyclictest --json file or a jitterdebugger results file")))?;
    if let Source::Timerlat(_) = source {
        from_timerlat_json(&json, source)
    } else if json.get("thread").is_some() {
        from_cyclictest_json(&json)
    } else if json.get("cpu").is_some() {
        from_jitterdebugger(&json)
    } else {
        Err(input(
            "neither a cyclictest/latencyd --json file (no \"thread\") nor a jitterdebugger results file (no \"cpu\")",
        ))
    }
}

/// The longest latency a plot takes, in µs: an hour. A larger one (or a
/// bin count past 2^53, where counts stop being exact) is no measurement
/// but a broken or forged file: an error, not a plot that never ends
/// (a maximum of 1.5e308 once made one spin for ever).
pub const MAX_LATENCY_US: f64 = 3_600e6;

fn number(value: &Value, what: &str) -> Result<f64, PlotError> {
    value
        .as_f64()
        .ok_or_else(|| input(format!("{what} is not a number")))
}

/// A latency of `what`, in µs, within what a plot takes.
fn latency_us(value: f64, what: &str) -> Result<f64, PlotError> {
    if value.is_finite() && (0.0..=MAX_LATENCY_US).contains(&value) {
        Ok(value)
    } else {
        Err(input(format!(
            "{what} is {value} µs: not a latency latencyd plots (0 to an hour)"
        )))
    }
}

/// Histogram bins keyed by latency ("3": 220, …) in `unit_ns`, as µs bins.
fn bins(json: &Value, key: &str, unit_ns: f64, what: &str) -> Result<Vec<(u64, u64)>, PlotError> {
    let histogram = &json[key];
    let map = histogram
        .as_object()
        .ok_or_else(|| input(format!("{what}.{key} is not an object")))?;
    let mut out = BTreeMap::new();
    for (bin_key, count) in map {
        let latency: u64 = bin_key.parse().map_err(|_| {
            input(format!(
                "{what}.{key} has a bin '{bin_key}' that is not a number"
            ))
        })?;
        let count = count
            .as_u64()
            .filter(|&n| n < 1 << 53)
            .ok_or_else(|| input(format!("{what}.{key}[{bin_key}] is not a count")))?;
        let us = latency_us(
            latency as f64 * unit_ns / 1_000.0,
            &format!("{what}'s bin {bin_key}"),
        )?;
        let bin = out.entry(us as u64).or_insert(0u64);
        *bin = bin
            .checked_add(count)
            .filter(|&n| n < 1 << 53)
            .ok_or_else(|| {
                input(format!(
                    "{what}.{key} holds more samples than a plot counts"
                ))
            })?;
    }
    Ok(out.into_iter().collect())
}

/// The entries of the object `json[key]`, whose keys are numbers (thread
/// or CPU numbers), in numeric order.
fn numbered<'a>(json: &'a Value, key: &str) -> Result<Vec<(u64, &'a Value)>, PlotError> {
    let object = json[key]
        .as_object()
        .ok_or_else(|| input(format!("\"{key}\" is not an object")))?;
    let mut ordered = object
        .iter()
        .map(|(k, v)| {
            k.parse()
                .map(|n| (n, v))
                .map_err(|_| input(format!("{key} '{k}' is not a number")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ordered.sort_by_key(|(n, _)| *n);
    Ok(ordered)
}

fn from_cyclictest_json(json: &Value) -> Result<PlotData, PlotError> {
    let unit_ns = if json["resolution_in_ns"].as_u64() == Some(1) {
        1.0
    } else {
        1_000.0
    };
    let ordered = numbered(json, "thread")?;
    let mut series = Vec::new();
    for (n, thread) in ordered {
        let what = format!("thread.{n}");
        let cpu = thread["cpu"].as_i64().unwrap_or(n as i64);
        let bins_us = bins(thread, "histogram", unit_ns, &what)?;
        if bins_us.is_empty() && thread["cycles"].as_u64().unwrap_or(0) > 0 {
            return Err(input(format!(
                "{what} has samples but no histogram: record one with -h (cyclictest or latencyd measure)"
            )));
        }
        let max_us = latency_us(
            number(&thread["max"], &format!("{what}.max"))? * unit_ns / 1_000.0,
            &format!("{what}.max"),
        )?;
        series.push(CpuSeries {
            label: format!("CPU {cpu}"),
            bins_us,
            max_us,
        });
    }
    let tool = if json.get("latencyd").is_some() {
        "latencyd"
    } else {
        "cyclictest"
    };
    Ok(PlotData {
        title: format!("Wake-up latency ({tool})"),
        subtitle: sysinfo_subtitle(json),
        series,
    })
}

/// The subtitle of a cyclictest-style file: host, kernel, PREEMPT_RT.
fn sysinfo_subtitle(json: &Value) -> String {
    let sysinfo = &json["sysinfo"];
    subtitle(
        sysinfo["nodename"].as_str(),
        sysinfo["release"].as_str(),
        sysinfo["realtime"].as_u64() == Some(1),
    )
}

/// `measure --timerlat --json`'s `latencyd.timerlat`: by CPU, then
/// context, a count, `max_ns` and (with `-h`) `histogram_us`.
fn from_timerlat_json(json: &Value, source: &Source) -> Result<PlotData, PlotError> {
    let timerlat = &json["latencyd"]["timerlat"];
    if !timerlat.is_object() {
        return Err(input(
            "no timerlat results (latencyd.timerlat) in this file: they come from latencyd              measure --timerlat -h --json",
        ));
    }
    let mut series = Vec::new();
    for (cpu, contexts) in numbered(timerlat, "cpus")? {
        let Some(contexts) = contexts.as_object() else {
            return Err(input(format!("timerlat.cpus.{cpu} is not an object")));
        };
        for context in crate::instruments::event::Context::ALL {
            let (name, Some(data)) = (context.name(), contexts.get(context.name())) else {
                continue;
            };
            if !source.wants(name) {
                continue;
            }
            let what = format!("timerlat.cpus.{cpu}.{name}");
            let count = data["count"].as_u64().unwrap_or(0);
            if data.get("histogram_us").is_none() && count > 0 {
                return Err(input(format!(
                    "{what} has samples but no histogram: record one with -h (latencyd measure                      --timerlat -h)"
                )));
            }
            let bins_us = match data.get("histogram_us") {
                Some(_) => bins(data, "histogram_us", 1_000.0, &what)?,
                None => Vec::new(),
            };
            let max_ns = number(&data["max_ns"], &format!("{what}.max_ns"))?;
            series.push(CpuSeries {
                label: super::source::label(cpu as usize, name),
                bins_us,
                max_us: latency_us(max_ns / 1_000.0, &format!("{what}.max_ns"))?,
            });
        }
    }
    Ok(PlotData {
        title: format!("{} (latencyd)", source.title()),
        subtitle: sysinfo_subtitle(json),
        series,
    })
}

fn from_jitterdebugger(json: &Value) -> Result<PlotData, PlotError> {
    let ordered = numbered(json, "cpu")?;
    // Results files since version 3 say their unit; older ones are in µs.
    let sysinfo = &json["sysinfo"];
    let unit_ns = sysinfo["resolution_in_ns"].as_f64().unwrap_or(1_000.0);
    if !(unit_ns.is_finite() && unit_ns > 0.0 && unit_ns <= 1e9) {
        return Err(input(format!(
            "sysinfo.resolution_in_ns is {unit_ns}: not a unit (1 ns to 1 s)"
        )));
    }
    let mut series = Vec::new();
    for (cpu, data) in ordered {
        let what = format!("cpu.{cpu}");
        series.push(CpuSeries {
            label: format!("CPU {cpu}"),
            bins_us: bins(data, "histogram", unit_ns, &what)?,
            max_us: latency_us(
                number(&data["max"], &format!("{what}.max"))? * unit_ns / 1_000.0,
                &format!("{what}.max"),
            )?,
        });
    }
    Ok(PlotData {
        title: "Wake-up latency (jitterdebugger)".to_string(),
        subtitle: subtitle(
            sysinfo["nodename"].as_str(),
            sysinfo["release"].as_str(),
            false,
        ),
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(max: &str, bin: &str, count: &str) -> String {
        format!(
            "{{\"thread\": {{\"0\": {{\"histogram\": {{\"{bin}\": {count}}}, \"cycles\": 5, \
             \"min\": 10, \"max\": {max}, \"avg\": 10.0, \"cpu\": 0}}}}}}"
        )
    }

    #[test]
    fn absurd_latencies_and_counts_are_errors_not_endless_plots() {
        assert!(read_input(&thread("20", "10", "5"), &Source::Samplers).is_ok());
        for (max, bin, count, said) in [
            ("1.5e308", "10", "5", "thread.0.max"),
            ("-1", "10", "5", "thread.0.max"),
            (
                "20",
                "18446744073709551615",
                "5",
                "bin 18446744073709551615",
            ),
            ("20", "10", "18446744073709551615", "not a count"),
        ] {
            let err = match read_input(&thread(max, bin, count), &Source::Samplers) {
                Err(PlotError::Input(err)) => err,
                other => panic!("{max} {bin} {count}: {other:?}"),
            };
            assert!(err.contains(said), "{err}");
        }
        let jd = "{\"cpu\": {\"0\": {\"histogram\": {\"3\": 1}, \"max\": 3}}, \
                  \"sysinfo\": {\"resolution_in_ns\": 0}}";
        assert!(read_input(jd, &Source::Samplers).is_err(), "a zero unit");
    }
}
