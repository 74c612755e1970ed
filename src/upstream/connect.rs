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
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;

/// A fresh connection, by the HTTP version the upstream speaks on it.
pub enum Connected {
    H1(H1Conn),
    H2(H2Conn),
}

pub struct Connector {
    tls: TlsConnector,
    timeout: Duration,
    buffers: Buffers,
    h2: H2Settings,
}

/// What one upstream connection may buffer (`limits.upstream_read_buffer_bytes`,
/// `limits.upstream_receive_buffer_bytes`; the latter 0: the kernel's autotuning).
#[derive(Clone, Copy)]
pub struct Buffers {
    pub read: usize,
    pub receive: usize,
}

impl Connector {
    /// Trusts the webpki roots plus, when given, the CA certificates in `extra_ca` (PEM); opens
    /// connections with `buffers`, and HTTP/2 ones with `h2`.
    pub fn new(
        timeout: Duration,
        extra_ca: Option<&Path>,
        buffers: Buffers,
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
            buffers,
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
        let tcp = connect_tcp(&addrs, self.buffers.receive)
            .await
            .map_err(|e| {
                UpstreamError::Connect(format!("could not connect to {}: {e}", key.authority))
            })?;
        tcp.set_nodelay(true)
            .map_err(|e| UpstreamError::Connect(format!("{}: {e}", key.authority)))?;
        if !key.tls {
            return h1(Io::Plain(tcp), key, self.buffers.read).await;
        }
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| UpstreamError::Connect(format!("{}: {e}", key.authority)))?;
        let tls = self.tls.connect(name, tcp).await.map_err(|e| {
            UpstreamError::Connect(format!("TLS with {} failed: {e}", key.authority))
        })?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = Io::Tls(Box::new(tls));
        if !h2 {
            return h1(io, key, self.buffers.read).await;
        }
        h2::handshake(io, self.h2)
            .await
            .map(Connected::H2)
            .map_err(UpstreamError::Http)
    }
}

/// Tries each address in turn, as `TcpStream::connect` does, with `SO_RCVBUF` (when not 0)
/// set before connecting: the window scale is agreed in the handshake, from the buffer then.
async fn connect_tcp(addrs: &[SocketAddr], receive_buffer: usize) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in addrs {
        let attempt = async {
            let socket = match addr {
                SocketAddr::V4(_) => TcpSocket::new_v4()?,
                SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            if receive_buffer > 0 {
                // Checked at load to be at most 1 GiB.
                socket.set_recv_buffer_size(u32::try_from(receive_buffer).unwrap_or(u32::MAX))?;
            }
            socket.connect(*addr).await
        };
        match attempt.await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

/// `read_buffer` caps hyper's read buffer, which grows while a fast upstream fills each read.
async fn h1(io: Io, key: &Arc<PoolKey>, read_buffer: usize) -> Result<Connected, UpstreamError> {
    let (sender, conn) = http1::Builder::new()
        .max_buf_size(read_buffer)
        .handshake::<_, Full<Bytes>>(TokioIo::new(io))
        .await
        .map_err(UpstreamError::Http)?;
    Ok(Connected::H1(H1Conn::new(sender, conn, Arc::clone(key))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::connect_tcp;
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    /// An address nothing listens on (a listener's, closed again).
    async fn closed_address() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    }

    #[tokio::test]
    async fn upstream_sockets_get_the_configured_receive_buffer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receive_buffer =
            |tcp: &tokio::net::TcpStream| socket2::SockRef::from(tcp).recv_buffer_size().unwrap();
        // Linux doubles the value asked for (bookkeeping overhead).
        let small = receive_buffer(&connect_tcp(&[addr], 4096).await.unwrap());
        assert!((4096..=8192 + 1024).contains(&small), "{small}");
        // 0 sets nothing: the socket keeps what a plain connect gets (the kernel's default).
        let unset = receive_buffer(&connect_tcp(&[addr], 0).await.unwrap());
        let plain = receive_buffer(&tokio::net::TcpStream::connect(addr).await.unwrap());
        assert_eq!(unset, plain);
    }

    #[tokio::test]
    async fn each_address_is_tried_in_turn() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap();
        let closed = closed_address().await;
        let tcp = connect_tcp(&[closed, open], 4096).await.unwrap();
        assert_eq!(tcp.peer_addr().unwrap(), open);
        let refused = connect_tcp(&[closed], 4096).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        let none = connect_tcp(&[], 0).await.unwrap_err();
        assert_eq!(none.kind(), std::io::ErrorKind::InvalidInput);
    }
}
