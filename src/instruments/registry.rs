//! The instruments the daemon runs, in the order it steps them and serves
//! their families, objects and lines, and reads their configuration
//! sections. Adding an instrument is one folder beside this file and one
//! line here.

use std::sync::OnceLock;

use super::shape::Entry;
use crate::config::{Config, SectionSpec, Sources};

/// Every registered instrument.
pub static INSTRUMENTS: &[&Entry] = &[
    &super::forensics::ENTRY,
    &super::observe::ENTRY,
    &super::load_windows::ENTRY,
    &super::host_facts::ENTRY,
    &super::timerlat::ENTRY,
    &super::hwnoise::ENTRY,
    &super::busypoll::ENTRY,
    &super::qualification::ENTRY,
];

/// The registered instruments' configuration sections, in registry order:
/// what every configuration is read with.
pub fn config_sections() -> &'static [&'static SectionSpec] {
    static SECTIONS: OnceLock<Vec<&'static SectionSpec>> = OnceLock::new();
    SECTIONS.get_or_init(|| {
        INSTRUMENTS
            .iter()
            .filter_map(|entry| entry.section)
            .collect()
    })
}

/// The built-in defaults of every section, the instruments' included.
pub fn builtin_config() -> Config {
    Config::builtin(config_sections())
}

/// `sources` read with every section ([`Config::load_reporting_all`]).
pub fn load_config(sources: &Sources) -> Result<Config, Vec<crate::config::ConfigError>> {
    Config::load_reporting_all(sources, config_sections())
}

/// Loads `toml` with every section, as `crate::config::tests::load` does
/// with the daemon's own (the instruments' sections' tests).
#[cfg(test)]
pub(crate) fn load_for_tests(
    toml: Option<&str>,
    env: &[(&str, &str)],
    flags: &[(&'static str, &str, &'static str)],
) -> (
    Result<Config, crate::config::ConfigError>,
    Option<tempfile::NamedTempFile>,
) {
    crate::config::tests::load_with(config_sections(), toml, env, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ENV_PREFIX;
    use config::Environment;

    /// A key changed on reload reaches the part of the instrument named
    /// as its section (`Parts::apply`).
    #[test]
    fn each_section_is_named_as_its_instrument() {
        for entry in INSTRUMENTS {
            if let Some(section) = entry.section {
                assert_eq!(section.name, entry.name);
            }
        }
        assert!(config_sections().len() > 1);
    }

    #[test]
    fn every_instrument_with_a_section_is_read_with_its_defaults() {
        let config = builtin_config();
        let named: Vec<&str> = config.sections.iter().map(|(name, _)| name).collect();
        assert_eq!(
            named,
            [
                "forensics",
                "observe",
                "load",
                "host",
                "timerlat",
                "hwnoise",
                "busypoll"
            ]
        );
        assert_eq!(config.effective.len(), 69, "every key is listed");
        use crate::instruments::{forensics, observe, timerlat};
        let t = config.section::<timerlat::TimerlatConfig>();
        assert!(!t.enabled);
        assert_eq!((t.period_us, t.priority), (1000, 95));
        let f = config.section::<forensics::ForensicsConfig>();
        assert!(!f.enabled, "forensics is off by default");
        assert_eq!(f.threshold_ns, 500 * crate::units::NS_PER_US);
        assert!(!f.capture_new_max);
        let o = config.section::<observe::ObserveConfig>();
        assert!(!o.enabled, "observe is off by default");
        assert_eq!(o.cpus, observe::ObserveCpus::Unmeasured);
        assert_eq!((o.max_tasks, o.max_names), (64, 64));
        assert!(
            (config.effective.values()).all(|e| e.source == "built-in default"),
            "{:?}",
            config.effective
        );
    }

    /// config.example.toml must load with the real parser, set every key, and
    /// show exactly the built-in defaults it claims to show.
    #[test]
    fn the_example_file_documents_every_key_with_its_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.toml");
        let sources = Sources {
            file: Some(path.into()),
            flags: vec![],
        };
        let no_env = Environment::with_prefix(ENV_PREFIX).source(Some(Default::default()));
        let example = Config::load_with_env(&sources, no_env, config_sections()).unwrap();
        assert!(
            example.effective.values().all(|e| e.source == path),
            "every key is set in the example: {:?}",
            example
                .effective
                .iter()
                .filter(|(_, e)| e.source != path)
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        );
        let builtin = builtin_config();
        assert!(
            builtin.changed_keys(&example).is_empty(),
            "{:?}",
            builtin.changed_keys(&example)
        );
    }
}
