//! The checks a configuration passes before the daemon uses it, the same
//! for `check-config`, `run` and a reload (SIGHUP), so that the three
//! agree on what is refused and every refusal is exit 78 or a counted
//! refused reload, never a panic later.

use super::http::webconfig::{self, Security};
use crate::config::{self, Config, ConfigError};
use crate::host::HostInfo;

/// Every check a configuration passes before it is used, the same for
/// `check-config`, `run` and a reload: the host, the web configuration,
/// and the routes with the metrics' path. A check that panics (a bug)
/// refuses the configuration, naming no key, instead of taking the
/// process down: a configuration is never half-checked.
pub(super) fn check_whole(config: &Config, host: &HostInfo) -> Result<Security, ConfigError> {
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Test builds can make the check panic, to prove the above.
        #[cfg(feature = "fault-injection")]
        if std::env::var_os("FAULT_INJECTION_LATENCYD_CHECK_PANICS")
            .is_some_and(|flag| std::path::Path::new(&flag).exists())
        {
            panic!("a configuration check panicked (fault injection)");
        }
        // And hang while a flag file exists, to prove that a reload runs
        // beside the event loop and is refused at its deadline.
        #[cfg(feature = "fault-injection")]
        if let Some(flag) = std::env::var_os("FAULT_INJECTION_LATENCYD_CHECK_HANGS") {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::path::Path::new(&flag).exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        config.check_against(host)?;
        super::http::check_routes(&config.export.telemetry_path)
            .map_err(|why| config::key_error(&config.effective, "export.telemetry_path", why))?;
        webconfig::for_config(config)
    }));
    checked.unwrap_or_else(|_| {
        Err(config::key_error(
            &config.effective,
            "(the whole configuration)",
            "checking it failed inside latencyd (a bug: please report it with the \
             configuration); nothing of it was applied"
                .to_string(),
        ))
    })
}
