//! Reading the merged tree: where each value came from (file, environment
//! variable, flag, built-in default), how it is shown back to the user,
//! and the typed readers whose errors name the key, the value, its source
//! and what is allowed.

use std::collections::BTreeMap;

use config::{Map, Value, ValueKind};

use super::{ConfigError, ENV_PREFIX, Effective};
use crate::sampling::CpuSelection;
use crate::units::parse_duration_ns;

pub(super) const FLAG_ORIGIN: &str = "command-line flag ";
pub(super) const DEFAULT_ORIGIN: &str = "built-in default";

/// Says where a value came from, for an error message: the environment
/// variable, the flag, or the file as the user named it (the config crate
/// records files by a path relative to the working directory).
pub(super) fn describe_source(value: &Value, key: &str, file_label: Option<&str>) -> String {
    match origin_of(value) {
        None => DEFAULT_ORIGIN.to_string(),
        Some("the environment") => {
            format!(
                "environment variable {ENV_PREFIX}_{}",
                key.replace('.', "__").to_uppercase()
            )
        }
        Some(origin) if origin.starts_with(FLAG_ORIGIN) => origin.to_string(),
        Some(origin) => file_label.unwrap_or(origin).to_string(),
    }
}

/// A table has no origin of its own; it comes from where its first value
/// does.
pub(super) fn origin_of(value: &Value) -> Option<&str> {
    match (&value.kind, value.origin()) {
        (_, Some(origin)) => Some(origin),
        (ValueKind::Table(table), None) => table.values().find_map(origin_of),
        _ => None,
    }
}

/// Shows a value as the user wrote it (strings quoted, as in TOML).
pub(super) fn show(value: &Value) -> String {
    match &value.kind {
        ValueKind::String(s) => format!("{s:?}"),
        ValueKind::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(show).collect::<Vec<_>>().join(", ")
            )
        }
        ValueKind::Table(_) => "a table".to_string(),
        other => other.to_string(),
    }
}

/// Reads the keys of one section, applying defaults, recording each key's
/// effective value and source, and refusing keys it does not know.
pub(crate) struct SectionReader<'a> {
    name: &'static str,
    table: Option<&'a Map<String, Value>>,
    file_label: Option<&'a str>,
    effective: Option<&'a mut BTreeMap<String, Effective>>,
}

impl<'a> SectionReader<'a> {
    pub(super) fn new(
        name: &'static str,
        value: Option<&'a Value>,
        file_label: Option<&'a str>,
    ) -> Result<SectionReader<'a>, ConfigError> {
        let table = match value.map(|v| (&v.kind, v)) {
            None => None,
            Some((ValueKind::Table(table), _)) => Some(table),
            Some((_, value)) => {
                return Err(ConfigError {
                    source: describe_source(value, name, file_label),
                    key: name.to_string(),
                    value: Some(show(value)),
                    reason: format!("[{name}] must be a section (a table), not a value"),
                });
            }
        };
        Ok(SectionReader {
            name,
            table,
            file_label,
            effective: None,
        })
    }

    /// Where the effective values of this section are recorded.
    pub(super) fn with<'b>(
        self,
        effective: &'b mut BTreeMap<String, Effective>,
    ) -> SectionReader<'b>
    where
        'a: 'b,
    {
        SectionReader {
            effective: Some(effective),
            ..self
        }
    }

    /// Refuses any key of the section not in `known`.
    pub(crate) fn only(&self, known: &[&str]) -> Result<(), ConfigError> {
        let Some(table) = self.table else {
            return Ok(());
        };
        for (key, value) in table {
            if !known.contains(&key.as_str()) {
                let full = format!("{}.{key}", self.name);
                return Err(ConfigError {
                    source: describe_source(value, &full, self.file_label),
                    key: full,
                    value: None,
                    reason: format!(
                        "unknown key; the keys of [{}] are {}",
                        self.name,
                        known.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Reads `key` with `parse`, or takes `default` (already valid) when no
    /// source sets it. `render` gives the effective value as TOML.
    pub(crate) fn read<T>(
        &mut self,
        key: &'static str,
        default: impl FnOnce() -> T,
        parse: impl FnOnce(&Value) -> Result<T, String>,
        render: impl FnOnce(&T) -> String,
    ) -> Result<T, ConfigError> {
        let full = format!("{}.{key}", self.name);
        let (value, source) = match self.table.and_then(|t| t.get(key)) {
            None => (default(), DEFAULT_ORIGIN.to_string()),
            Some(raw) => {
                let source = describe_source(raw, &full, self.file_label);
                match parse(raw) {
                    Ok(value) => (value, source),
                    Err(reason) => {
                        return Err(ConfigError {
                            source,
                            key: full,
                            value: Some(show(raw)),
                            reason,
                        });
                    }
                }
            }
        };
        self.effective.as_mut().expect("set by `with`").insert(
            full,
            Effective {
                toml_value: render(&value),
                source,
            },
        );
        Ok(value)
    }
}

/// An error about a key already read, naming where its value came from.
/// The config crate reads the environment lossily; a variable of ours
/// that is not UTF-8 is refused here, named, before it could be misread.
pub(super) fn check_env_is_text() -> Result<(), ConfigError> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = format!("{ENV_PREFIX}_");
    for (name, value) in std::env::vars_os() {
        if !name.as_bytes().starts_with(prefix.as_bytes()) {
            continue;
        }
        if name.to_str().is_none() || value.to_str().is_none() {
            let shown = name.to_string_lossy().into_owned();
            return Err(ConfigError {
                source: format!("environment variable {shown}"),
                key: shown
                    .strip_prefix(&prefix)
                    .unwrap_or(&shown)
                    .to_lowercase()
                    .replacen("__", ".", 1),
                value: None,
                reason: "is not valid UTF-8: configuration values must be text".to_string(),
            });
        }
    }
    Ok(())
}

pub(crate) fn key_error(
    effective: &BTreeMap<String, Effective>,
    key: &str,
    reason: String,
) -> ConfigError {
    let entry = effective.get(key);
    ConfigError {
        source: entry.map_or_else(|| DEFAULT_ORIGIN.to_string(), |e| e.source.clone()),
        value: entry.map(|e| e.toml_value.clone()),
        key: key.to_string(),
        reason,
    }
}

/// A string as a TOML value.
pub(crate) fn quoted(text: &str) -> String {
    format!("{text:?}")
}

// Readers for the value types the sections use. Environment variables and
// flags always arrive as strings, so numbers and booleans are also
// accepted in that form.

pub(crate) fn as_string(value: &Value) -> Result<String, String> {
    match &value.kind {
        ValueKind::String(s) => Ok(s.clone()),
        _ => Err("expected a string (in quotes)".to_string()),
    }
}

pub(crate) fn as_bool(value: &Value) -> Result<bool, String> {
    match &value.kind {
        ValueKind::Boolean(b) => Ok(*b),
        ValueKind::String(s) if s == "true" => Ok(true),
        ValueKind::String(s) if s == "false" => Ok(false),
        _ => Err("expected true or false".to_string()),
    }
}

pub(crate) fn as_integer(value: &Value) -> Result<i64, String> {
    const EXPECTED: &str = "expected a whole number";
    match &value.kind {
        ValueKind::I64(n) => Ok(*n),
        ValueKind::U64(n) => i64::try_from(*n).map_err(|_| format!("{EXPECTED} below 2^63")),
        ValueKind::I128(n) => i64::try_from(*n).map_err(|_| format!("{EXPECTED} below 2^63")),
        ValueKind::U128(n) => i64::try_from(*n).map_err(|_| format!("{EXPECTED} below 2^63")),
        ValueKind::String(s) => s.trim().parse().map_err(|_| EXPECTED.to_string()),
        _ => Err(EXPECTED.to_string()),
    }
}

/// A reader of a whole number from 1 to `max`.
pub(crate) fn count_up_to(max: i64) -> impl Fn(&Value) -> Result<usize, String> {
    move |value| {
        let n = as_integer(value)?;
        if !(1..=max).contains(&n) {
            return Err(format!("must be between 1 and {max}"));
        }
        Ok(n as usize)
    }
}

/// A per-CPU tracefs ring buffer's size in KiB (`buffer_size_kb` of
/// `[forensics]` and `[observe]`): 64 KiB to 1 GiB.
pub(crate) fn as_ring_buffer_kb(value: &Value) -> Result<u64, String> {
    const MIN_KB: i64 = 64;
    const MAX_KB: i64 = 1024 * 1024;
    let n = as_integer(value)?;
    if !(MIN_KB..=MAX_KB).contains(&n) {
        return Err(format!("must be between {MIN_KB} and {MAX_KB} KiB per CPU"));
    }
    Ok(n as u64)
}

/// `"all"` or a CPU list such as `"0-3,8"`.
pub(crate) fn as_cpu_selection(value: &Value) -> Result<CpuSelection, String> {
    CpuSelection::parse(&as_string(value)?)
}

/// A duration string with a unit; a bare number is refused (is `1000`
/// microseconds or milliseconds?).
pub(crate) fn as_duration_ns(value: &Value) -> Result<u64, String> {
    match &value.kind {
        ValueKind::String(s) => parse_duration_ns(s, None).map_err(|e| e.to_string()),
        ValueKind::I64(_) | ValueKind::U64(_) | ValueKind::Float(_) => {
            Err("expected a duration string with a unit, such as \"1ms\" or \"100us\"".to_string())
        }
        _ => Err("expected a duration string such as \"1ms\"".to_string()),
    }
}

/// A list of durations: a TOML array of strings, or (from the environment
/// or a flag) one comma-separated string.
pub(crate) fn as_duration_list_ns(value: &Value) -> Result<Vec<u64>, String> {
    match &value.kind {
        ValueKind::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| as_duration_ns(item).map_err(|e| format!("item {}: {e}", i + 1)))
            .collect(),
        ValueKind::String(s) => s
            .split(',')
            .enumerate()
            .map(|(i, item)| {
                parse_duration_ns(item, None).map_err(|e| format!("item {}: {e}", i + 1))
            })
            .collect(),
        _ => Err("expected a list of durations such as [\"1us\", \"10us\"]".to_string()),
    }
}
