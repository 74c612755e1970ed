//! Opening upstream connections: TCP (no Nagle), then rustls with ALPN `h2` and `http/1.1` for
//! `https://`, then the hyper handshake for whichever HTTP version the upstream chose.

use super::conn::{H1Conn, Io, PoolKey};
use super::h2::{self, H2Conn, H2Settings};
use super::UpstreamError;
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A fresh connection, by the HTTP version the upstream speaks on it.
pub enum Connected {
    H1(H1Conn),
    H2(H2Conn),
}

pub struct Connector {
    tls: TlsConnector,
    timeout: Duration,
    h2: H2Settings,
}

impl Connector {
    /// Trusts the webpki roots plus, when given, the CA certificates in `extra_ca` (PEM); opens
    /// HTTP/2 connections with `h2`.
    pub fn new(
        timeout: Duration,
        extra_ca: Option<&Path>,
        h2: H2Settings,
    ) -> Result<Connector, String> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = extra_ca {
            let shown = path.display();
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("upstream_tls.ca_path: cannot read {shown}: {e}"))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("upstream_tls.ca_path: {shown}: {e}"))?;
            if certs.is_empty() {
                return Err(format!(
                    "upstream_tls.ca_path: {shown} holds no certificate"
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("upstream_tls.ca_path: {shown}: {e}"))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("upstream TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Connector {
            tls: TlsConnector::from(Arc::new(config)),
            timeout,
            h2,
        })
    }

    /// TCP, TLS and the HTTP handshake, all within the connect timeout.
    pub async fn connect(&self, key: &Arc<PoolKey>) -> Result<Connected, UpstreamError> {
        match tokio::time::timeout(self.timeout, self.open(key)).await {
            Ok(result) => result,
            Err(_) => Err(UpstreamError::Connect(format!(
                "connecting to {} took longer than timeouts.connect_ms",
                key.authority
            ))),
        }
    }

    async fn open(&self, key: &Arc<PoolKey>) -> Result<Connected, UpstreamError> {
        let host = key.host();
        // Resolved apart from connecting, so the error says which of the two failed.
        let addrs: Vec<_> = tokio::net::lookup_host((host, key.port()))
            .await
            .map_err(|e| {
                UpstreamError::Connect(format!("could not resolve {}: {e}", key.authority))
            })?
            .collect();
        let tcp = TcpStream::connect(&addrs[..]).await.map_err(|e| {
            UpstreamError::Connect(format!("could not connect to {}: {e}", key.authority))
        })?;
        tcp.set_nodelay(true)
            .map_err(|e| UpstreamError::Connect(format!("{}: {e}", key.authority)))?;
        if !key.tls {
            return h1(Io::Plain(tcp), key).await;
        }
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| UpstreamError::Connect(format!("{}: {e}", key.authority)))?;
        let tls = self.tls.connect(name, tcp).await.map_err(|e| {
            UpstreamError::Connect(format!("TLS with {} failed: {e}", key.authority))
        })?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = Io::Tls(Box::new(tls));
        if !h2 {
            return h1(io, key).await;
        }
        h2::handshake(io, self.h2)
            .await
            .map(Connected::H2)
            .map_err(UpstreamError::Http)
    }
}

async fn h1(io: Io, key: &Arc<PoolKey>) -> Result<Connected, UpstreamError> {
    let (sender, conn) = http1::Builder::new()
        .handshake::<_, Full<Bytes>>(TokioIo::new(io))
        .await
        .map_err(UpstreamError::Http)?;
    Ok(Connected::H1(H1Conn::new(sender, conn, Arc::clone(key))))
}
