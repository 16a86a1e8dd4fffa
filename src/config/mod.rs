//! The daemon's configuration: built-in defaults, then a TOML file, then
//! the environment (`LATENCYD_<SECTION>__<KEY>`), then command-line flags,
//! from low to high precedence.
//!
//! The `config` crate does the layering and remembers where each value
//! came from; this module reads the merged tree key by key, so that every
//! error names the source (the file, the environment variable or the flag),
//! the key, the value and what is allowed. Unknown keys are errors. One
//! file per TOML section defines its keys, defaults and checks.

mod export;
mod forensics;
mod log;
mod measure;
mod realtime;
mod record;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use config::{Environment, File, FileFormat, Map, Source, Value, ValueKind};

pub use export::ExportConfig;
pub use forensics::ForensicsConfig;
pub use log::{LogConfig, LogFormat, LogLevel};
pub use measure::MeasureConfig;
pub use realtime::RealtimeConfig;
pub use record::{RecordConfig, Switch as RecordSwitch};

use crate::host::HostInfo;
use crate::sampling::CpuSelection;
use crate::units::parse_duration_ns;

/// sysexits.h's EX_CONFIG: systemd units name it in
/// `RestartPreventExitStatus=` so that a bad file does not restart-loop.
pub const EX_CONFIG: u8 = 78;

/// The prefix of configuration environment variables.
pub const ENV_PREFIX: &str = "LATENCYD";

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where it came from: a file path, `environment variable NAME`,
    /// `command-line flag --x` or `built-in default`.
    pub source: String,
    /// The key, as `section.key`, or what was being read.
    pub key: String,
    /// The offending value as written, when there is one.
    pub value: Option<String>,
    /// What is wrong and what is allowed.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(
                f,
                "{}: {} = {}: {}",
                self.source, self.key, value, self.reason
            ),
            None => write!(f, "{}: {}: {}", self.source, self.key, self.reason),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub measure: MeasureConfig,
    pub realtime: RealtimeConfig,
    pub export: ExportConfig,
    pub log: LogConfig,
    pub forensics: ForensicsConfig,
    pub record: RecordConfig,
    /// Each key's effective value (as TOML) and where it came from.
    pub effective: BTreeMap<String, Effective>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub toml_value: String,
    pub source: String,
}

/// Where configuration comes from besides the environment.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub file: Option<PathBuf>,
    /// Command-line overrides: (key as `section.key`, value, flag name).
    pub flags: Vec<(&'static str, String, &'static str)>,
}

const SECTIONS: [&str; 6] = [
    "measure",
    "realtime",
    "export",
    "log",
    "forensics",
    "record",
];

impl Config {
    /// Loads and validates the configuration from `sources` and the
    /// process environment. Nothing host-specific is checked here; see
    /// `check_against`.
    pub fn load(sources: &Sources) -> Result<Config, ConfigError> {
        check_env_is_text()?;
        Config::load_with_env(sources, Environment::with_prefix(ENV_PREFIX))
    }

    /// The built-in defaults alone: no file, no environment, no flags.
    pub fn builtin() -> Config {
        let no_env = Environment::with_prefix(ENV_PREFIX).source(Some(Map::new()));
        Config::load_with_env(&Sources::default(), no_env).expect("the built-in defaults are valid")
    }

    /// As `load`, with the environment given (tests pass their own).
    pub fn load_with_env(sources: &Sources, env: Environment) -> Result<Config, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = &sources.file {
            let file_error = |reason: String| ConfigError {
                source: path.display().to_string(),
                key: "the file".to_string(),
                value: None,
                reason,
            };
            let bytes =
                std::fs::read(path).map_err(|err| file_error(format!("cannot be read: {err}")))?;
            // The config crate would read it lossily.
            if let Err(err) = std::str::from_utf8(&bytes) {
                return Err(file_error(format!(
                    "is not UTF-8 text (byte {} is not): TOML files must be UTF-8",
                    err.valid_up_to()
                )));
            }
            // Read again by the config crate, which records the file as
            // the origin of its values.
            builder = builder.add_source(
                File::from(path.as_path())
                    .format(FileFormat::Toml)
                    .required(true),
            );
        }
        let builder = builder
            .add_source(env.prefix_separator("_").separator("__"))
            .add_source(FlagSource(sources.flags.clone()));
        let merged = builder.build().map_err(|err| ConfigError {
            source: sources.file.as_ref().map_or_else(
                || "the configuration".to_string(),
                |p| p.display().to_string(),
            ),
            key: "the file".to_string(),
            value: None,
            reason: err.to_string(),
        })?;
        let file_label = sources.file.as_ref().map(|p| p.display().to_string());
        Config::from_tree(&merged.cache, file_label.as_deref())
    }

    fn from_tree(root: &Value, file_label: Option<&str>) -> Result<Config, ConfigError> {
        let empty = Map::new();
        let root_table = match &root.kind {
            ValueKind::Table(table) => table,
            ValueKind::Nil => &empty,
            _ => unreachable!("the config crate's root is a table"),
        };
        for (name, value) in root_table {
            if !SECTIONS.contains(&name.as_str()) {
                return Err(ConfigError {
                    source: describe_source(value, name, file_label),
                    key: name.clone(),
                    value: None,
                    reason: format!(
                        "unknown key; the sections are [{}] (environment variables are named \
                         {ENV_PREFIX}_<SECTION>__<KEY>)",
                        SECTIONS.join("], [")
                    ),
                });
            }
        }
        let mut effective = BTreeMap::new();
        let table = |name: &str| root_table.get(name);
        let reader = |name: &'static str| SectionReader::new(name, table(name), file_label);
        let measure = MeasureConfig::read(&mut reader("measure")?.with(&mut effective))?;
        let realtime = RealtimeConfig::read(&mut reader("realtime")?.with(&mut effective))?;
        let export = ExportConfig::read(&mut reader("export")?.with(&mut effective))?;
        let log = LogConfig::read(&mut reader("log")?.with(&mut effective))?;
        let forensics = ForensicsConfig::read(&mut reader("forensics")?.with(&mut effective))?;
        let record = RecordConfig::read(&mut reader("record")?.with(&mut effective))?;
        Ok(Config {
            measure,
            realtime,
            export,
            log,
            forensics,
            record,
            effective,
        })
    }

    /// The checks that need the host: the CPUs exist and may be used, and
    /// the priority is allowed to this process.
    pub fn check_against(&self, host: &HostInfo) -> Result<(), ConfigError> {
        self.measure
            .check_against(host, &self.realtime, &self.effective)?;
        self.export.check_against(host, &self.effective)
    }

    /// The effective configuration as TOML, each key commented with where
    /// its value came from (what `latencyd check-config` prints).
    pub fn to_annotated_toml(&self) -> String {
        let mut out = String::new();
        for section in SECTIONS {
            out.push_str(&format!("[{section}]\n"));
            let prefix = format!("{section}.");
            let rows: Vec<(String, &Effective)> = self
                .effective
                .iter()
                .filter_map(|(key, e)| {
                    key.strip_prefix(&prefix)
                        .map(|k| (format!("{k} = {}", e.toml_value), e))
                })
                .collect();
            let width = rows.iter().map(|(line, _)| line.len()).max().unwrap_or(0);
            for (line, e) in rows {
                out.push_str(&format!("{line:width$}  # {}\n", e.source));
            }
            out.push('\n');
        }
        out
    }

    /// Keys whose effective value differs between two configurations.
    pub fn changed_keys(&self, newer: &Config) -> Vec<String> {
        newer
            .effective
            .iter()
            .filter(|(key, e)| {
                self.effective.get(*key).map(|old| &old.toml_value) != Some(&e.toml_value)
            })
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// Command-line overrides as a `config` source whose values remember the
/// flag they came from.
#[derive(Debug, Clone)]
struct FlagSource(Vec<(&'static str, String, &'static str)>);

impl Source for FlagSource {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<Map<String, Value>, config::ConfigError> {
        Ok(self
            .0
            .iter()
            .map(|(key, value, flag)| {
                let origin = format!("{FLAG_ORIGIN}{flag}");
                (key.to_string(), Value::new(Some(&origin), value.clone()))
            })
            .collect())
    }
}

const FLAG_ORIGIN: &str = "command-line flag ";
const DEFAULT_ORIGIN: &str = "built-in default";

/// Says where a value came from, for an error message: the environment
/// variable, the flag, or the file as the user named it (the config crate
/// records files by a path relative to the working directory).
fn describe_source(value: &Value, key: &str, file_label: Option<&str>) -> String {
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
fn origin_of(value: &Value) -> Option<&str> {
    match (&value.kind, value.origin()) {
        (_, Some(origin)) => Some(origin),
        (ValueKind::Table(table), None) => table.values().find_map(origin_of),
        _ => None,
    }
}

/// Shows a value as the user wrote it (strings quoted, as in TOML).
fn show(value: &Value) -> String {
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
    fn new(
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
    fn with<'b>(self, effective: &'b mut BTreeMap<String, Effective>) -> SectionReader<'b>
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
fn check_env_is_text() -> Result<(), ConfigError> {
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

#[cfg(test)]
mod tests;
