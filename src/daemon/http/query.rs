//! Query strings: `?window=` of `/plot.svg` and `/`, `?from=&to=` of
//! `/api/v1/latency` and `/plot.svg`.

use crate::calendar::parse_time_ns;
use crate::record::Range;
use crate::units::{NS_PER_SEC, format_duration_ns, parse_duration_ns};

/// Parses `?from=&to=`: a range of the on-disk record. Each is an RFC 3339
/// time or a negative duration from now (`-7d`); a missing `from` is the
/// beginning of the record, a missing `to` now. `None` when neither is
/// given. Other parameters are left to the caller (`others`).
pub fn parse_range(
    pairs: &[(String, String)],
    now_unix_ns: u64,
    others: &[&str],
) -> Result<Option<Range>, String> {
    let (mut from, mut to) = (None, None);
    for (key, value) in pairs {
        let slot = match key.as_str() {
            "from" => &mut from,
            "to" => &mut to,
            other if others.contains(&other) => continue,
            other => {
                let mut known = vec!["from", "to"];
                known.extend_from_slice(others);
                return Err(format!(
                    "unknown query parameter '{other}': the parameters are {}, e.g. \
                     ?from=-7d or ?from=2026-11-22T00:00:00Z&to=2026-11-23T00:00:00Z",
                    known.join(", ")
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("{key} is given more than once"));
        }
        *slot = Some(
            parse_time_ns(value, now_unix_ns).map_err(|e| format!("query parameter {key}: {e}"))?,
        );
    }
    if from.is_none() && to.is_none() {
        return Ok(None);
    }
    let range = Range {
        from_ns: from.unwrap_or(0),
        to_ns: to.unwrap_or(now_unix_ns),
    };
    if range.from_ns >= range.to_ns {
        return Err(format!(
            "from ({}) must be before to ({})",
            crate::calendar::format_rfc3339_ms(range.from_ns),
            crate::calendar::format_rfc3339_ms(range.to_ns)
        ));
    }
    Ok(Some(range))
}

/// Parses `?window=` of `/plot.svg` and `/`: a duration with its unit, of
/// whole seconds, from 1 s to `export.max_window`. `None` (no parameter)
/// means the lifetime histograms. The error names the parameter and says
/// what would be accepted.
pub fn parse_window(pairs: &[(String, String)], max_window_ns: u64) -> Result<Option<u64>, String> {
    let mut window = None;
    for (key, value) in pairs {
        if key == "from" || key == "to" {
            continue;
        }
        if key != "window" {
            return Err(format!(
                "unknown query parameter '{key}': the parameters are window (e.g. ?window=30s) \
                 or from and to (e.g. ?from=-7d)"
            ));
        }
        if window.is_some() {
            return Err("window is given more than once".to_string());
        }
        let ns =
            parse_duration_ns(value, None).map_err(|e| format!("query parameter window: {e}"))?;
        if ns < NS_PER_SEC || ns % NS_PER_SEC != 0 {
            return Err(format!(
                "window '{value}' must be whole seconds, at least 1s"
            ));
        }
        if ns > max_window_ns {
            return Err(format!(
                "window '{value}' is longer than the {} kept (export.max_window); ask for at \
                 most that, or leave window out for the lifetime histograms",
                format_duration_ns(max_window_ns)
            ));
        }
        window = Some(ns);
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn window_parameter_is_checked() {
        let max = 60 * NS_PER_SEC;
        assert_eq!(parse_window(&[], max), Ok(None));
        assert_eq!(
            parse_window(&pairs(&[("window", "30s")]), max),
            Ok(Some(30 * NS_PER_SEC))
        );
        assert_eq!(
            parse_window(&pairs(&[("window", "1m")]), max),
            Ok(Some(max))
        );
        for (query, needle) in [
            (vec![("window", "61s")], "longer than the 1m kept"),
            (vec![("window", "30")], "'30' has no unit"),
            (vec![("window", "")], "query parameter window"),
            (vec![("window", "1500ms")], "whole seconds"),
            (vec![("window", "0s")], "at least 1s"),
            (vec![("window", "-1s")], "query parameter window"),
            (
                vec![("window", "99999999999999999999s")],
                "query parameter window",
            ),
            (vec![("window", "1s"), ("window", "2s")], "more than once"),
            (vec![("span", "1s")], "unknown query parameter 'span'"),
        ] {
            let err = parse_window(&pairs(&query), max).expect_err(needle);
            assert!(err.contains(needle), "{query:?}: {err}");
        }
    }

    #[test]
    fn range_parameters_are_checked() {
        let now = 1_795_315_538 * NS_PER_SEC;
        assert_eq!(parse_range(&[], now, &[]), Ok(None));
        assert_eq!(
            parse_range(&pairs(&[("from", "-90m")]), now, &[]),
            Ok(Some(Range {
                from_ns: now - 5_400 * NS_PER_SEC,
                to_ns: now
            }))
        );
        assert_eq!(
            parse_range(&pairs(&[("to", "2026-11-22T00:00:00Z")]), now, &[]),
            Ok(Some(Range {
                from_ns: 0,
                to_ns: 1_795_305_600 * NS_PER_SEC
            }))
        );
        for (query, needle) in [
            (vec![("from", "yesterday")], "RFC 3339"),
            (vec![("from", "-7")], "-90m"),
            (vec![("from", "-1d"), ("to", "-2d")], "must be before to"),
            (vec![("from", "-1d"), ("from", "-2d")], "more than once"),
            (vec![("since", "-1d")], "the parameters are from, to"),
        ] {
            let err = parse_range(&pairs(&query), now, &[]).expect_err(needle);
            assert!(err.contains(needle), "{query:?}: {err}");
        }
        assert!(parse_range(&pairs(&[("window", "1s")]), now, &["window"]).is_ok());
    }
}
