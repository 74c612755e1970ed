//! TLS termination for clients: rustls, certificate chain and key from PEM files, ALPN for
//! HTTP/2 and HTTP/1.1. The server config is part of the runtime, so a reload re-reads the files
//! and new connections get the renewed certificate.

use crate::config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// Builds the rustls server config from the configured files.
pub fn server_config(tls: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, String> {
    let cert_path = tls.cert_path.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.cert_path)
        .map_err(|e| format!("tls.cert_path: cannot read {cert_path}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls.cert_path: {cert_path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("tls.cert_path: {cert_path} holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key_path)
        .map_err(|e| format!("tls.key_path: {}: {e}", tls.key_path.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls: the certificate and key do not go together: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
