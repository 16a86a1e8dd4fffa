//! Parsing a web configuration file's text into plain settings
//! (`WebConfig`) without touching the file system, so it can be fuzzed.
//! Relative paths are taken from the file's directory, as in
//! exporter-toolkit; unsupported keys are refused by name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

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
pub(super) fn bcrypt_cost(hash: &str) -> Result<u32, String> {
    let not_bcrypt = || {
        "is not a bcrypt hash ($2y$, $2b$ or $2a$, a cost, 53 characters); make one with \
         `htpasswd -nBC 10 USER`"
            .to_string()
    };
    let bytes = hash.as_bytes();
    // Cut by byte position below: only ASCII can be cut anywhere (a
    // 60-byte hash with a multi-byte character panicked here).
    if bytes.len() != 60
        || !hash.is_ascii()
        || !matches!(&hash[..4], "$2y$" | "$2b$" | "$2a$")
        || bytes[6] != b'$'
    {
        return Err(not_bcrypt());
    }
    // What bcrypt itself would refuse later: its own alphabet only.
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'/');
    if !bytes[7..].iter().all(alphabet) {
        return Err(not_bcrypt());
    }
    let cost: u32 = hash[4..6].parse().map_err(|_| not_bcrypt())?;
    if !(4..=31).contains(&cost) {
        return Err(not_bcrypt());
    }
    if cost > MAX_BCRYPT_COST {
        return Err(format!(
            "has bcrypt cost {cost}, above the {MAX_BCRYPT_COST} latencyd accepts: each request \
             with a wrong password costs one check at that cost, and cost {cost} takes about \
             {} s of a CPU; make a hash with `htpasswd -nBC 10 USER`",
            1u64 << (cost - MAX_BCRYPT_COST)
        ));
    }
    Ok(cost)
}

/// The highest bcrypt cost a password hash may have. Every refused
/// credential costs one check at the configured cost (`auth.rs`), so the
/// cost is what a client with a wrong password makes latencyd spend: cost
/// 14 took 0.85 s of one CPU per check on the 2-core test machine (cost 12
/// 0.22 s; each step doubles it), so a check at 14 still fits many times in
/// a scrape timeout, while cost 17 took about 8 s and the parser's old
/// limit, 31, about a day.
pub const MAX_BCRYPT_COST: u32 = 14;

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$04$GaaVZTkHhvmuAuAjJFV0GOqdYh8I6YyHjAsOc4ac52rxFDRhkhFDq";

    #[test]
    fn a_hash_of_the_right_length_but_not_ascii_is_refused_not_a_panic() {
        assert_eq!(bcrypt_cost(HASH), Ok(4));
        // 60 bytes: 58 ASCII and one two-byte character at byte 4..6.
        let forged = format!("$2y\u{e9}{}", &HASH[5..]);
        assert_eq!(forged.len(), 60);
        assert!(bcrypt_cost(&forged).is_err());
        let forged = format!("{}\u{e9}", &HASH[..58]);
        assert_eq!(forged.len(), 60);
        assert!(bcrypt_cost(&forged).is_err());
        assert!(
            bcrypt_cost(&format!("{}!", &HASH[..59])).is_err(),
            "outside bcrypt's alphabet"
        );
    }

    #[test]
    fn a_cost_that_would_stall_every_wrong_password_is_refused_naming_the_user() {
        let at = |cost: u32| format!("$2y${cost:02}{}", &HASH[6..]);
        assert_eq!(bcrypt_cost(&at(MAX_BCRYPT_COST)), Ok(MAX_BCRYPT_COST));
        let err = parse_here(&format!("basic_auth_users:\n  alice: {}\n", at(17))).unwrap_err();
        assert!(
            err.contains("basic_auth_users.alice") && err.contains("cost 17, above the 14"),
            "{err}"
        );
        assert!(bcrypt_cost(&at(31)).is_err());
    }

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
