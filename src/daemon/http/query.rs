//! Query strings: `?window=` of `/plot.svg` and `/`.

use crate::units::{NS_PER_SEC, format_duration_ns, parse_duration_ns};

/// Parses `?window=` of `/plot.svg` and `/`: a duration with its unit, of
/// whole seconds, from 1 s to `export.max_window`. `None` (no parameter)
/// means the lifetime histograms. The error names the parameter and says
/// what would be accepted.
pub fn parse_window(pairs: &[(String, String)], max_window_ns: u64) -> Result<Option<u64>, String> {
    let mut window = None;
    for (key, value) in pairs {
        if key != "window" {
            return Err(format!(
                "unknown query parameter '{key}': the only one is window, e.g. ?window=30s"
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
}
