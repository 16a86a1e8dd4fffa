//! `StartupError`: why the daemon could not start, and the exit status
//! that says so to systemd and scripts.

use std::fmt;

use crate::config::{self, ConfigError};

/// sysexits.h's EX_NOPERM: real-time scheduling or memory locking was
/// refused and `realtime.required` is true.
pub const EX_NOPERM: u8 = 77;

/// Why start-up failed.
#[derive(Debug)]
pub enum StartupError {
    /// The configuration is invalid, or does not fit this host (exit 78,
    /// EX_CONFIG); reported before any thread starts.
    Config(ConfigError),
    /// Every mistake one reading of the configuration found (exit 78).
    Configs(Vec<ConfigError>),
    /// A privilege the configuration needs was refused (exit 77,
    /// EX_NOPERM): real-time scheduling, memory locking, PM QoS.
    Permission(String),
    /// Logging could not be set up: said on stderr, since there is no log.
    Logging(String),
    /// Anything else (exit 1).
    Failure(String),
}

impl StartupError {
    pub fn exit_code(&self) -> u8 {
        match self {
            StartupError::Config(_) | StartupError::Configs(_) => config::EX_CONFIG,
            StartupError::Permission(_) => EX_NOPERM,
            StartupError::Logging(_) | StartupError::Failure(_) => 1,
        }
    }

    /// Whether the log is up when this error is reported: errors from
    /// before logging is set up go to stderr directly.
    pub fn before_logging(&self) -> bool {
        matches!(
            self,
            StartupError::Config(_) | StartupError::Configs(_) | StartupError::Logging(_)
        )
    }
}

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartupError::Config(err) => write!(f, "configuration error: {err}"),
            StartupError::Configs(errs) if errs.len() == 1 => {
                write!(f, "configuration error: {}", errs[0])
            }
            StartupError::Configs(errs) => {
                write!(f, "{} configuration errors:", errs.len())?;
                errs.iter().try_for_each(|err| write!(f, "\n  {err}"))
            }
            StartupError::Logging(err) => write!(f, "cannot set up logging: {err}"),
            StartupError::Permission(message) | StartupError::Failure(message) => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for StartupError {}

impl From<ConfigError> for StartupError {
    fn from(err: ConfigError) -> StartupError {
        StartupError::Config(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_exit_status() {
        let config = ConfigError {
            source: "built-in default".to_string(),
            key: "export.listen".to_string(),
            value: None,
            reason: "taken".to_string(),
        };
        assert_eq!(StartupError::Config(config).exit_code(), 78);
        assert_eq!(StartupError::Permission(String::new()).exit_code(), 77);
        assert_eq!(StartupError::Failure(String::new()).exit_code(), 1);
        assert_eq!(StartupError::Logging(String::new()).exit_code(), 1);
    }
}
