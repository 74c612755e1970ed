//! TLS for tests: a self-signed certificate for `localhost`, and a client config trusting it.

use std::path::Path;
use std::sync::Arc;

/// A self-signed certificate for `localhost`, written as PEM files (`cert.pem`, `key.pem` in
/// `dir`); returns its DER.
pub fn write_cert(dir: &Path) -> rustls::pki_types::CertificateDer<'static> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), certified.signing_key.serialize_pem()).unwrap();
    certified.cert.der().clone()
}

/// A client config trusting only `cert`.
pub fn client_config(cert: &rustls::pki_types::CertificateDer<'static>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}
