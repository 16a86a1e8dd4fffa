//! The rustls server configuration a `TlsSettings` describes, with its
//! certificates and key read and checked.

use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::parse::{ClientAuth, TlsSettings, TlsVersion};
use crate::files::Links;

/// A certificate or key file's bytes: a regular file (a FIFO there must
/// not hang a reload) of at most `config::MAX_FILE_BYTES`.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    crate::files::read_bounded(path, Links::Follow, crate::config::MAX_FILE_BYTES)
        .map_err(|e| format!("the {what}: {e}"))
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
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
    let key_pem = read_pem(&tls.key_file, "key_file")?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
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

impl TlsVersion {
    fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}
