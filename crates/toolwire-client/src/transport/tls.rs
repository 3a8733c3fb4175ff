//! HTTPS for the HTTP transport: rustls with the program's default crypto provider if it
//! installed one, else aws-lc-rs (as reqwest does; this crate installs none), the platform's
//! trust roots through `rustls-platform-verifier` (on Linux the system store, or
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` when set, as OpenSSL reads them), and CA files the user adds
//! for private deployments.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::error::{Error, Result};

/// The TLS configuration of a client for `url`. A plain `http://` endpoint gets one that trusts
/// nothing, so it never depends on the machine's trust store (redirects cannot change the
/// scheme: they stay within the origin).
pub(crate) fn client_config(
    url: &reqwest::Url,
    ca_files: &[PathBuf],
) -> Result<rustls::ClientConfig> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Transport(format!("cannot set up TLS: {e}")))?;
    if url.scheme() != "https" {
        return Ok(builder
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth());
    }
    let mut extra = Vec::new();
    for path in ca_files {
        let certs = read_pem(path, "the CA file")?;
        check_anchors(&certs, path)?;
        extra.extend(certs);
    }
    if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
        // The platform verifier skips an unreadable SSL_CERT_FILE with a log line; a user who
        // set it deserves an error that names it. (Its certificates are not checked one by
        // one: a system bundle may hold some that rustls cannot use, which are skipped.)
        read_pem(Path::new(&path), "SSL_CERT_FILE")?;
    }
    let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider)
        .map_err(|e| Error::Transport(format!("cannot load the trusted CA certificates: {e}")))?;
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// The certificates of a PEM file; `what` names the file's role in errors.
fn read_pem(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |why: String| Error::Transport(format!("{what} {}: {why}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// Checks that each certificate can be a trust anchor, naming the file if one cannot.
fn check_anchors(certs: &[CertificateDer<'static>], path: &Path) -> Result<()> {
    let mut store = RootCertStore::empty();
    for cert in certs {
        store.add(cert.clone()).map_err(|e| {
            Error::Transport(format!(
                "the CA file {}: not a usable CA certificate: {e}",
                path.display()
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &tempfile::TempDir, name: &str, contents: &[u8]) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn a_bad_ca_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-ca.pem");
        let empty = file(&dir, "empty.pem", b"");
        let garbage = file(
            &dir,
            "garbage.pem",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        let cases = [
            (&missing, "No such file"),
            (&empty, "no PEM certificate"),
            (&garbage, "not a usable CA certificate"),
        ];
        for (path, why) in cases {
            let error = read_pem(path, "the CA file")
                .and_then(|certs| check_anchors(&certs, path))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&path.display().to_string()) && error.contains(why),
                "{error}"
            );
        }
    }
}
