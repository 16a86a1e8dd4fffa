//! Access control for the HTTP endpoints, configured the way Prometheus
//! exporters are: a YAML file in the format of the exporter-toolkit's web
//! configuration (`--web.config.file`), with `tls_server_config` (TLS via
//! rustls, optionally verifying client certificates) and
//! `basic_auth_users` (bcrypt hashes).
//!
//! [`parse`] turns the text into plain settings without touching the file
//! system, so it can be fuzzed; [`load`] reads the file, the certificates
//! and the key, checks every hash, and builds what the server uses
//! ([`Security`]). Relative paths in the file are relative to the file's
//! directory, as in exporter-toolkit.
//!
//! Keys of the exporter-toolkit format that latencyd does not implement
//! (cipher suites, curves, inline certificates, `http_server_config`, rate
//! limits, the two client-auth types that accept unverified certificates)
//! are refused with a message saying so, never ignored.

//!
//! - `parse`: the file's text → `WebConfig`.
//! - `tls`: `TlsSettings` → rustls `ServerConfig`.
//! - `auth`: `BasicAuth`.

mod auth;
pub(crate) mod parse;
mod tls;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;

use crate::config::{self, Config, ConfigError};

pub use auth::{BasicAuth, Lead, Turn};
pub use parse::{ClientAuth, TlsSettings, TlsVersion, WebConfig, parse};
pub use tls::server_config;

/// What the server enforces: TLS, basic authentication, both or neither.
pub struct Security {
    pub tls: Option<Arc<ServerConfig>>,
    pub auth: Option<BasicAuth>,
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("basic_auth", &self.auth.is_some())
            .finish()
    }
}

impl Security {
    /// Open: no TLS, no authentication.
    pub fn open() -> Security {
        Security {
            tls: None,
            auth: None,
        }
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        let auth = match &self.auth {
            Some(auth) => {
                let n = auth.n_users();
                format!("basic auth, {n} user{}", if n == 1 { "" } else { "s" })
            }
            None => "no authentication".to_string(),
        };
        format!(
            "{}, {auth}",
            if self.tls.is_some() {
                "TLS"
            } else {
                "plain HTTP"
            }
        )
    }
}

/// Reads and checks a web configuration file and everything it names.
pub fn load(path: &Path) -> Result<Security, String> {
    // Opened as every other input: a regular file, up to a bound.
    let text = crate::files::read_text_bounded(
        path,
        crate::files::Links::Follow,
        crate::config::MAX_FILE_BYTES,
    )?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let config = parse(&text, dir).map_err(|e| format!("{}: {e}", path.display()))?;
    let tls = config
        .tls
        .as_ref()
        .map(|t| server_config(t).map(Arc::new))
        .transpose()?;
    let auth = (!config.users.is_empty()).then(|| BasicAuth::new(config.users));
    Ok(Security { tls, auth })
}

/// Reads `export.web_config_file` and everything it names (certificates,
/// key, client CA, password hashes); open HTTP when it is not set. Reads
/// files and may run bcrypt: never on the runtime thread.
pub fn for_config(config: &Config) -> Result<Security, ConfigError> {
    match &config.export.web_config_file {
        None => Ok(Security::open()),
        Some(path) => load(path).map_err(|reason| {
            config::key_error(&config.effective, "export.web_config_file", reason)
        }),
    }
}
