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

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    tls_server_config: Option<RawTls>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    // exporter-toolkit keys latencyd refuses by name.
    http_server_config: Option<serde_yaml_ng::Value>,
    rate_limit: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    // exporter-toolkit keys latencyd refuses by name.
    cert: Option<serde_yaml_ng::Value>,
    key: Option<serde_yaml_ng::Value>,
    client_ca: Option<serde_yaml_ng::Value>,
    cipher_suites: Option<serde_yaml_ng::Value>,
    curve_preferences: Option<serde_yaml_ng::Value>,
    prefer_server_cipher_suites: Option<serde_yaml_ng::Value>,
    client_allowed_sans: Option<serde_yaml_ng::Value>,
}

/// Which client certificates the server asks for and accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default).
    None,
    /// `VerifyClientCertIfGiven`: a certificate is optional but, if sent,
    /// must chain to `client_ca_file`.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    RequireAndVerify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    fn parse(key: &str, text: &str) -> Result<TlsVersion, String> {
        match text {
            "TLS12" => Ok(TlsVersion::Tls12),
            "TLS13" => Ok(TlsVersion::Tls13),
            "TLS10" | "TLS11" => Err(format!(
                "tls_server_config.{key}: {text} is not supported (rustls speaks TLS 1.2 and \
                 1.3 only); use TLS12 or TLS13"
            )),
            _ => Err(format!(
                "tls_server_config.{key}: '{text}' is not a TLS version; use TLS12 or TLS13"
            )),
        }
    }

    fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// `tls_server_config`, with paths made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<PathBuf>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

/// A parsed web configuration: nothing is read from disk yet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebConfig {
    pub tls: Option<TlsSettings>,
    /// User name → bcrypt hash.
    pub users: BTreeMap<String, String>,
}

fn refuse(key: &str, present: bool, why: &str) -> Result<(), String> {
    if present {
        Err(format!("{key} is not supported by latencyd: {why}"))
    } else {
        Ok(())
    }
}

/// Parses the text of a web configuration file; relative paths are taken
/// from `dir`.
pub fn parse(text: &str, dir: &Path) -> Result<WebConfig, String> {
    // An empty file is a valid configuration that enables nothing.
    if text.trim().is_empty() {
        return Ok(WebConfig::default());
    }
    let raw: RawWebConfig = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    refuse(
        "http_server_config",
        raw.http_server_config.is_some(),
        "latencyd speaks HTTP/1.1 and sets its own headers; remove the section",
    )?;
    refuse(
        "rate_limit",
        raw.rate_limit.is_some(),
        "use export.max_connections to bound the load instead",
    )?;
    let tls = raw
        .tls_server_config
        .map(|t| tls_settings(t, dir))
        .transpose()?;
    let users = raw.basic_auth_users.unwrap_or_default();
    for (user, hash) in &users {
        if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
            return Err(format!(
                "basic_auth_users: '{user}' cannot be a user name (empty, or has ':' or a \
                 control character)"
            ));
        }
        bcrypt_cost(hash).map_err(|why| format!("basic_auth_users.{user}: {why}"))?;
    }
    Ok(WebConfig { tls, users })
}

fn tls_settings(t: RawTls, dir: &Path) -> Result<TlsSettings, String> {
    let key = "tls_server_config";
    refuse(
        &format!("{key}.cert / {key}.key / {key}.client_ca"),
        t.cert.is_some() || t.key.is_some() || t.client_ca.is_some(),
        "give the PEM files with cert_file, key_file and client_ca_file",
    )?;
    refuse(
        &format!("{key}.cipher_suites / curve_preferences / prefer_server_cipher_suites"),
        t.cipher_suites.is_some()
            || t.curve_preferences.is_some()
            || t.prefer_server_cipher_suites.is_some(),
        "rustls offers only modern suites and curves and chooses among them itself; remove \
         these keys",
    )?;
    refuse(
        &format!("{key}.client_allowed_sans"),
        t.client_allowed_sans.is_some(),
        "issue client certificates from a CA reserved for scrapers instead",
    )?;
    let path = |name: &str, value: Option<String>| -> Result<Option<PathBuf>, String> {
        match value {
            None => Ok(None),
            Some(v) if v.trim().is_empty() => Err(format!("{key}.{name} is empty")),
            Some(v) => Ok(Some(dir.join(v))),
        }
    };
    let cert_file = path("cert_file", t.cert_file)?
        .ok_or_else(|| format!("{key}.cert_file is missing: TLS needs a certificate"))?;
    let key_file = path("key_file", t.key_file)?
        .ok_or_else(|| format!("{key}.key_file is missing: TLS needs the certificate's key"))?;
    let client_ca_file = path("client_ca_file", t.client_ca_file)?;
    let client_auth = match t.client_auth_type.as_deref() {
        None | Some("NoClientCert") => ClientAuth::None,
        Some("VerifyClientCertIfGiven") => ClientAuth::VerifyIfGiven,
        Some("RequireAndVerifyClientCert") => ClientAuth::RequireAndVerify,
        Some(other @ ("RequestClientCert" | "RequireAnyClientCert")) => {
            return Err(format!(
                "{key}.client_auth_type: {other} accepts certificates nobody verified, which \
                 latencyd does not do; use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ));
        }
        Some(other) => {
            return Err(format!(
                "{key}.client_auth_type: '{other}' is not one of NoClientCert, \
                 VerifyClientCertIfGiven, RequireAndVerifyClientCert"
            ));
        }
    };
    match (client_auth, &client_ca_file) {
        (ClientAuth::None, Some(_)) => {
            return Err(format!(
                "{key}.client_ca_file is set but client_auth_type is NoClientCert: set \
                 client_auth_type to VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ));
        }
        (ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify, None) => {
            return Err(format!(
                "{key}.client_auth_type verifies client certificates, so client_ca_file must \
                 name the CA that issues them"
            ));
        }
        _ => {}
    }
    let min_version = t
        .min_version
        .as_deref()
        .map_or(Ok(TlsVersion::Tls12), |v| {
            TlsVersion::parse("min_version", v)
        })?;
    let max_version = t
        .max_version
        .as_deref()
        .map_or(Ok(TlsVersion::Tls13), |v| {
            TlsVersion::parse("max_version", v)
        })?;
    if min_version > max_version {
        return Err(format!("{key}: min_version is above max_version"));
    }
    Ok(TlsSettings {
        cert_file,
        key_file,
        client_auth,
        client_ca_file,
        min_version,
        max_version,
    })
}

/// The cost of a bcrypt hash (`$2y$10$…` → 10), or why it is not one.
fn bcrypt_cost(hash: &str) -> Result<u32, String> {
    let not_bcrypt = || {
        "is not a bcrypt hash ($2y$, $2b$ or $2a$, a cost, 53 characters); make one with \
         `htpasswd -nBC 10 USER`"
            .to_string()
    };
    let bytes = hash.as_bytes();
    if bytes.len() != 60 || !matches!(&hash[..4], "$2y$" | "$2b$" | "$2a$") || bytes[6] != b'$' {
        return Err(not_bcrypt());
    }
    let cost: u32 = hash[4..6].parse().map_err(|_| not_bcrypt())?;
    if !(4..=31).contains(&cost) {
        return Err(not_bcrypt());
    }
    Ok(cost)
}

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
                let n = auth.users.len();
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
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
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

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "the {what} {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(certs)
}

/// The rustls configuration for `tls`, with its files read and checked.
pub fn server_config(tls: &TlsSettings) -> Result<ServerConfig, String> {
    let certs = read_certs(&tls.cert_file, "cert_file")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file).map_err(|e| {
        format!(
            "cannot read a PEM private key from key_file {}: {e}",
            tls.key_file.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static SupportedProtocolVersion> = [TlsVersion::Tls12, TlsVersion::Tls13]
        .into_iter()
        .filter(|v| (tls.min_version..=tls.max_version).contains(v))
        .map(TlsVersion::rustls)
        .collect();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match (&tls.client_ca_file, tls.client_auth) {
        (Some(ca_file), ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(ca_file, "client_ca_file")? {
                roots.add(cert).map_err(|e| {
                    format!(
                        "client_ca_file {}: a bad CA certificate: {e}",
                        ca_file.display()
                    )
                })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if tls.client_auth == ClientAuth::VerifyIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("client_ca_file {}: {e}", ca_file.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "cert_file {} and key_file {} do not make a usable certificate: {e}",
            tls.cert_file.display(),
            tls.key_file.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// How many verified credentials are remembered, so that a scraper does
/// not pay a bcrypt run per scrape; past this the memory starts afresh.
const AUTH_CACHE_LIMIT: usize = 1024;

/// HTTP basic authentication against bcrypt hashes.
///
/// Every check of a credential that is not already known to be good runs
/// one bcrypt verification of the same cost, whether the header is
/// malformed, the user unknown or the password wrong: an unknown user is
/// checked against a dummy hash of the highest configured cost, and user
/// names are compared in constant time. Good credentials are remembered
/// by a SHA-256 digest (never in clear) for later requests.
pub struct BasicAuth {
    users: Vec<(String, String)>,
    dummy_hash: String,
    good: Mutex<HashSet<[u8; 32]>>,
}

impl BasicAuth {
    /// `users` must have been checked by [`parse`].
    fn new(users: BTreeMap<String, String>) -> BasicAuth {
        let cost = users
            .values()
            .filter_map(|hash| bcrypt_cost(hash).ok())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        BasicAuth {
            dummy_hash: dummy_hash(cost),
            users: users.into_iter().collect(),
            good: Mutex::new(HashSet::new()),
        }
    }

    /// Whether an `Authorization` header value carries a configured user and
    /// that user's password. Runs bcrypt, so call it off the async runtime.
    pub fn check(&self, authorization: Option<&[u8]>) -> bool {
        let (user, password) = authorization
            .and_then(decode_basic)
            .unwrap_or_else(|| (Vec::new(), Vec::new()));
        // Every configured name is compared, in constant time.
        let mut found: Option<&str> = None;
        for (name, hash) in &self.users {
            if bool::from(name.as_bytes().ct_eq(&user)) {
                found = Some(hash);
            }
        }
        let hash = found.unwrap_or(&self.dummy_hash);
        let digest: [u8; 32] = Sha256::new()
            .chain_update(&user)
            .chain_update([0])
            .chain_update(&password)
            .chain_update([0])
            .chain_update(hash.as_bytes())
            .finalize()
            .into();
        let mut good = self.good.lock().unwrap_or_else(|e| e.into_inner());
        if found.is_some() && good.contains(&digest) {
            return true;
        }
        drop(good);
        let verified = bcrypt::verify(&password, hash).unwrap_or(false);
        let ok = verified && found.is_some();
        if ok {
            good = self.good.lock().unwrap_or_else(|e| e.into_inner());
            if good.len() >= AUTH_CACHE_LIMIT {
                good.clear();
            }
            good.insert(digest);
        }
        ok
    }
}

/// A hash of `cost` that no password matches, made once per cost for the
/// life of the process (a reload storm must not run bcrypt each time).
fn dummy_hash(cost: u32) -> String {
    static MADE: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    made.entry(cost)
        .or_insert_with(|| {
            // A random salt each time; the password is never a user's.
            bcrypt::hash("latencyd: no such user", cost).unwrap_or_default()
        })
        .clone()
}

/// `Basic base64(user:password)` → (user, password).
fn decode_basic(header: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$04$GaaVZTkHhvmuAuAjJFV0GOqdYh8I6YyHjAsOc4ac52rxFDRhkhFDq";

    fn parse_here(text: &str) -> Result<WebConfig, String> {
        parse(text, Path::new("/etc/latencyd"))
    }

    #[test]
    fn a_full_configuration_parses() {
        let config = parse_here(&format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /keys/server.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
             min_version: TLS13\nbasic_auth_users:\n  prometheus: '{HASH}'\n"
        ))
        .unwrap();
        let tls = config.tls.unwrap();
        assert_eq!(tls.cert_file, Path::new("/etc/latencyd/server.crt"));
        assert_eq!(tls.key_file, Path::new("/keys/server.key"));
        assert_eq!(
            tls.client_ca_file.unwrap(),
            Path::new("/etc/latencyd/ca.crt")
        );
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(
            (tls.min_version, tls.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        assert_eq!(config.users["prometheus"], HASH);
        assert_eq!(parse_here("").unwrap(), WebConfig::default());
        assert_eq!(parse_here("# nothing\n").unwrap(), WebConfig::default());
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        for (text, needle) in [
            (
                "tls_server_config:\n  key_file: k\n",
                "cert_file is missing",
            ),
            (
                "tls_server_config:\n  cert_file: c\n",
                "key_file is missing",
            ),
            (
                "tls_server_config:\n  cert_file: ''\n  key_file: k\n",
                "cert_file is empty",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n",
                "client_auth_type is NoClientCert",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAndVerifyClientCert\n",
                "client_ca_file must",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAnyClientCert\n",
                "nobody verified",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Maybe\n",
                "'Maybe' is not one of",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS10\n",
                "TLS10 is not supported",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n",
                "min_version is above max_version",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "not supported by latencyd",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  certfile: x\n",
                "unknown field `certfile`",
            ),
            (
                "http_server_config:\n  http2: false\n",
                "http_server_config is not supported",
            ),
            (
                "basic_auth_users:\n  alice: secret\n",
                "basic_auth_users.alice: is not a bcrypt hash",
            ),
            ("basic_auth_users:\n  alice: 42\n", "basic_auth_users.alice"),
            ("basic_auth_users:\n  'a:b': x\n", "cannot be a user name"),
            ("basic_auth_users: [alice]\n", "basic_auth_users"),
            ("users:\n  alice: x\n", "unknown field `users`"),
            ("tls_server_config: [\n", "tls_server_config"),
            ("- 1\n- 2\n", "expected struct"),
        ] {
            let err = parse_here(text).expect_err(text);
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn bcrypt_hashes_are_recognised() {
        assert_eq!(bcrypt_cost(HASH), Ok(4));
        for bad in [
            "",
            "$2y$",
            "$1$abc",
            &HASH.replace("$2y$04$", "$2y$xx$"),
            &HASH.replace("$2y$04$", "$2y$99$"),
            &HASH[..59],
            &format!("{HASH}x"),
        ] {
            assert!(bcrypt_cost(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn basic_auth_accepts_only_the_right_pair() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let other = bcrypt::hash("other", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([
            ("prometheus".to_string(), hash),
            ("grafana".to_string(), other),
        ]));
        let header = |user: &str, password: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        };
        let check = |value: &str| auth.check(Some(value.as_bytes()));
        assert!(check(&header("prometheus", "s3cret")));
        assert!(check(&header("prometheus", "s3cret")), "remembered");
        assert!(check(&header("grafana", "other")));
        assert!(check(&format!(
            "basic  {}",
            &header("grafana", "other")[6..]
        )));
        assert!(!check(&header("prometheus", "S3cret")));
        assert!(
            !check(&header("prometheus", "other")),
            "another user's password"
        );
        assert!(!check(&header("nobody", "s3cret")));
        assert!(!check(&header("", "")));
        assert!(!check("Bearer abc"));
        assert!(!check("Basic !!!"));
        assert!(!check("Basic"));
        assert!(!auth.check(None));
        assert!(!auth.check(Some(&[0xff, 0xfe])));
    }

    #[test]
    fn a_wrong_user_costs_what_a_wrong_password_costs() {
        // Without the dummy hash an unknown user would be refused in
        // microseconds and a wrong password in milliseconds; the ratio of
        // the fastest of several tries is compared, not a time.
        let auth = BasicAuth::new(BTreeMap::from([(
            "prometheus".to_string(),
            bcrypt::hash("s3cret", 6).unwrap(),
        )]));
        let fastest = |value: &str| {
            (0..7)
                .map(|_| {
                    let started = std::time::Instant::now();
                    assert!(!auth.check(Some(value.as_bytes())));
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        };
        let header = |credentials: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            )
        };
        let wrong_password = fastest(&header("prometheus:guess"));
        for other in [
            header("nobody:guess"),
            header("prometheu:s3cret"),
            header("no colon"),
            "Bearer token".to_string(),
        ] {
            let ratio = fastest(&other) / wrong_password;
            assert!(
                (0.33..3.0).contains(&ratio),
                "{other}: {ratio:.2}× the time of a wrong password"
            );
        }
    }

    #[test]
    fn the_shipped_example_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
        let text = std::fs::read_to_string(dir.join("web-config.example.yml")).unwrap();
        let config = parse(&text, &dir).unwrap();
        let tls = config.tls.unwrap();
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(tls.cert_file, dir.join("latencyd.crt"));
        assert!(bcrypt::verify("change-me", &config.users["prometheus"]).unwrap());
    }
}
