//! The daemon's configuration: built-in defaults, then a TOML file, then
//! the environment (`LATENCYD_<SECTION>__<KEY>`), then command-line flags,
//! from low to high precedence.
//!
//! The `config` crate does the layering and remembers where each value
//! came from; this module reads the merged tree key by key, so that every
//! error names the source (the file, the environment variable or the flag),
//! the key, the value and what is allowed. Unknown keys are errors. One
//! file per TOML section defines its keys, defaults and checks: the
//! daemon's own sections here, each instrument's in its own folder
//! (`section`: how the configuration holds them); `schedule` reads the
//! windows of the sections that have them.

mod export;
mod log;
mod measure;
mod realtime;
mod record;
mod schedule;
mod section;
mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use config::{Environment, FileFormat, Map, Source, Value, ValueKind};

use crate::files::Links;

pub use export::{ExportConfig, check_telemetry_path};
pub use log::{LogConfig, LogFormat, LogLevel};
pub use measure::MeasureConfig;
pub use realtime::RealtimeConfig;
pub use record::{RecordConfig, Switch as RecordSwitch};
pub(crate) use schedule::{read_schedule, show as show_duration};
pub use section::{Section, SectionSpec, SectionValue, Sections};
use values::*;
pub(crate) use values::{
    SectionReader, as_bool, as_cpu_selection, as_duration_list_ns, as_duration_ns, as_integer,
    as_ring_buffer_kb, as_string, count_up_to, key_error, quoted,
};

use crate::host::HostInfo;

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
    pub record: RecordConfig,
    /// The instruments' sections, in registry order ([`Config::section`]).
    pub sections: Sections,
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

/// The daemon's own sections, read before the instruments'.
const OWN_SECTIONS: [&str; 5] = ["measure", "realtime", "export", "log", "record"];

/// The instruments' sections a configuration is read with (the registry's
/// `instruments::registry::config_sections`).
pub type Specs = [&'static SectionSpec];

impl Config {
    /// The built-in defaults alone: no file, no environment, no flags.
    pub fn builtin(specs: &Specs) -> Config {
        let no_env = Environment::with_prefix(ENV_PREFIX).source(Some(Map::new()));
        Config::load_with_env(&Sources::default(), no_env, specs)
            .expect("the built-in defaults are valid")
    }

    /// Loads and validates the configuration from `sources` and the
    /// process environment, with the instruments' sections `specs`; on a
    /// mistake reads on without the key it named, so that one run reports
    /// every mistake (`check-config`, the daemon's start, a reload): each
    /// error in the order found, at most `MAX_REPORTED`. Nothing
    /// host-specific is checked here; see `check_against`.
    pub fn load_reporting_all(
        sources: &Sources,
        specs: &Specs,
    ) -> Result<Config, Vec<ConfigError>> {
        check_env_is_text().map_err(|e| vec![e])?;
        let env = Environment::with_prefix(ENV_PREFIX);
        let (mut tree, label) = Config::merged(sources, env).map_err(|e| vec![e])?;
        let mut errors = Vec::new();
        loop {
            match Config::from_tree(&tree, label.as_deref(), specs) {
                Ok(config) if errors.is_empty() => return Ok(config),
                Ok(_) => return Err(errors),
                Err(err) => {
                    let removed = without_key(&mut tree, &err.key);
                    errors.push(err);
                    if !removed || errors.len() == MAX_REPORTED {
                        return Err(errors);
                    }
                }
            }
        }
    }

    /// Loads the configuration with the environment given (tests and the
    /// fuzzer pass their own), stopping at the first mistake.
    pub fn load_with_env(
        sources: &Sources,
        env: Environment,
        specs: &Specs,
    ) -> Result<Config, ConfigError> {
        let (tree, label) = Config::merged(sources, env)?;
        Config::from_tree(&tree, label.as_deref(), specs)
    }

    /// Every section's name: the daemon's own, then the instruments'.
    fn section_names(specs: &Specs) -> Vec<&'static str> {
        (OWN_SECTIONS.iter().copied())
            .chain(specs.iter().map(|spec| spec.name))
            .collect()
    }

    /// Every source merged into one tree (its values remember where they
    /// came from), and the file's name as errors give it.
    fn merged(sources: &Sources, env: Environment) -> Result<(Value, Option<String>), ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = &sources.file {
            let file_error = |reason: String| ConfigError {
                source: path.display().to_string(),
                key: "the file".to_string(),
                value: None,
                reason,
            };
            // Opened as every other input: a regular file (a FIFO put in
            // its place must not hang a reload), read up to a bound, once.
            // `--config /dev/null`: the built-in defaults, as people write it.
            let bytes = if path.as_path() == std::path::Path::new("/dev/null") {
                Vec::new()
            } else {
                crate::files::read_bounded(path, Links::Follow, MAX_FILE_BYTES)
                    .map_err(|err| file_error(format!("cannot be read: {err}")))?
            };
            // The config crate would read it lossily.
            let text = String::from_utf8(bytes).map_err(|err| {
                file_error(format!(
                    "is not UTF-8 text (byte {} is not): TOML files must be UTF-8",
                    err.utf8_error().valid_up_to()
                ))
            })?;
            builder = builder.add_source(TomlText {
                uri: path.display().to_string(),
                text,
            });
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
        Ok((merged.cache, file_label))
    }

    fn from_tree(
        root: &Value,
        file_label: Option<&str>,
        specs: &Specs,
    ) -> Result<Config, ConfigError> {
        let empty = Map::new();
        let root_table = match &root.kind {
            ValueKind::Table(table) => table,
            ValueKind::Nil => &empty,
            _ => unreachable!("the config crate's root is a table"),
        };
        let names = Config::section_names(specs);
        for (name, value) in root_table {
            if !names.contains(&name.as_str()) {
                return Err(ConfigError {
                    source: describe_source(value, name, file_label),
                    key: name.clone(),
                    value: None,
                    reason: format!(
                        "unknown key; the sections are [{}] (environment variables are named \
                         {ENV_PREFIX}_<SECTION>__<KEY>)",
                        names.join("], [")
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
        let record = RecordConfig::read(&mut reader("record")?.with(&mut effective))?;
        let mut config = Config {
            measure,
            realtime,
            export,
            log,
            record,
            sections: Sections::default(),
            effective,
        };
        for spec in specs {
            let section = (spec.read)(
                &mut SectionReader::new(spec.name, table(spec.name), file_label)?
                    .with(&mut config.effective),
            )?;
            section.check_with(&config)?;
            config.sections.push(spec.name, section);
        }
        Ok(config)
    }

    /// The checks that need the host: the CPUs exist and may be used, and
    /// the priority is allowed to this process.
    pub fn check_against(&self, host: &HostInfo) -> Result<(), ConfigError> {
        self.measure
            .check_against(host, &self.realtime, &self.effective)?;
        self.export.check_against(host, &self.effective)?;
        for (_, section) in self.sections.iter() {
            section.check_against(host, &self.effective)?;
        }
        Ok(())
    }

    /// The effective configuration as TOML, each key commented with where
    /// its value came from (what `latencyd check-config` prints).
    pub fn to_annotated_toml(&self) -> String {
        let mut out = String::new();
        let specs: Vec<&str> = self.sections.iter().map(|(name, _)| name).collect();
        let sections = OWN_SECTIONS.iter().copied().chain(specs);
        for section in sections {
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

/// How many mistakes one run reports at most.
const MAX_REPORTED: usize = 50;

/// Takes `key` (`section.key`, or a whole `section`) out of the merged
/// tree, so the next read goes on past it; false when it was not there
/// (an error about no one key: nothing more can be read).
fn without_key(tree: &mut Value, key: &str) -> bool {
    let ValueKind::Table(root) = &mut tree.kind else {
        return false;
    };
    match key.split_once('.') {
        None => root.remove(key).is_some(),
        Some((section, name)) => match root.get_mut(section).map(|v| &mut v.kind) {
            Some(ValueKind::Table(table)) => table.remove(name).is_some(),
            _ => false,
        },
    }
}

/// The most latencyd reads of a configuration file (and of a web
/// configuration): the example, every key documented, is 18.6 KB; a file
/// over 50 times that is not a configuration.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The file's text, read once by `files::read_bounded`, as a `config`
/// source whose values remember the file as their origin (what
/// `config::File` would do, had it not read the path again itself).
#[derive(Debug, Clone)]
struct TomlText {
    uri: String,
    text: String,
}

impl Source for TomlText {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<Map<String, Value>, config::ConfigError> {
        config::Format::parse(&FileFormat::Toml, Some(&self.uri), &self.text).map_err(|cause| {
            config::ConfigError::FileParse {
                uri: Some(self.uri.clone()),
                cause,
            }
        })
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

#[cfg(test)]
pub(crate) mod tests;
