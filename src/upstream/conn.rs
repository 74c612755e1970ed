//! One upstream connection: where it goes ([`PoolKey`]), the socket under it ([`Io`]) and an
//! HTTP/1 connection driven by whoever holds it ([`H1Conn`]). `connect.rs` makes them,
//! `pool.rs` keeps them, `body.rs` drives one while its response is read.

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{header, HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioIo;
use std::future::{poll_fn, Future};
use std::hash::{Hash, Hasher};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub type H2Sender = http2::SendRequest<Full<Bytes>>;
pub type H1Connection = http1::Connection<TokioIo<Io>, Full<Bytes>>;

/// Where connections go: scheme (TLS or not) and authority of an upstream base URL.
#[derive(Debug, PartialEq, Eq)]
pub struct PoolKey {
    pub tls: bool,
    /// Without the scheme's default port (`host`, not `host:443`): it is also the `Host` header
    /// and the HTTP/2 `:authority`, which carry the port only when it is not the default.
    pub authority: Authority,
    /// `authority` as a header value, made once.
    host: HeaderValue,
    /// `tls` and `authority` hashed, once: the pool looks a key up at least twice per request,
    /// and `Authority` hashes byte by byte (lowercasing each), ~1,100 instructions a time.
    hashed: u64,
}

impl Hash for PoolKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Equal keys have equal `tls` and `authority`, so equal `hashed`.
        state.write_u64(self.hashed);
    }
}

impl PoolKey {
    /// The key for a scheme and an authority as a checked base URL has it (its default port
    /// already dropped by `config::BaseUrl`).
    pub fn new(tls: bool, authority: Authority) -> Result<PoolKey, String> {
        let host = HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?;
        // A fixed hasher: the pool's maps hash this again with their own random keys.
        let mut hasher = std::hash::DefaultHasher::new();
        (tls, &authority).hash(&mut hasher);
        Ok(PoolKey {
            tls,
            authority,
            host,
            hashed: hasher.finish(),
        })
    }

    /// Puts `req` in the form an HTTP/1.1 upstream expects (RFC 9112 §3.2): the target in
    /// origin form (`/v1/chat/completions?…`) and `Host` set to this upstream's authority.
    /// h11 (uvicorn), nginx, Go and Node refuse absolute-form targets without `Host`.
    pub fn h1_form<B>(&self, req: &mut Request<B>) {
        if req.uri().scheme().is_some() {
            let origin = req
                .uri()
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/"));
            *req.uri_mut() = Uri::from(origin);
        }
        req.headers_mut().insert(header::HOST, self.host.clone());
    }

    /// Puts `req` in the form hyper's HTTP/2 client sends: an absolute URI, whose scheme and
    /// authority become `:scheme` and `:authority` (so no `Host` header).
    pub fn h2_form<B>(&self, req: &mut Request<B>) {
        req.headers_mut().remove(header::HOST);
        if req.uri().scheme().is_none() {
            let mut parts = std::mem::take(req.uri_mut()).into_parts();
            parts.scheme = Some(if self.tls {
                Scheme::HTTPS
            } else {
                Scheme::HTTP
            });
            parts.authority = Some(self.authority.clone());
            if parts.path_and_query.is_none() {
                parts.path_and_query = Some(PathAndQuery::from_static("/"));
            }
            // Scheme, authority and path are all set, so the parts always form a URI.
            *req.uri_mut() = Uri::from_parts(parts).unwrap_or_default();
        }
    }

    /// The host to connect to, without the brackets of an IPv6 literal.
    pub fn host(&self) -> &str {
        let host = self.authority.host();
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    pub fn port(&self) -> u16 {
        self.authority
            .port_u16()
            .unwrap_or(if self.tls { 443 } else { 80 })
    }
}

/// An HTTP/1 connection and its request handle, driven by whoever holds it.
pub struct H1Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended (closed or failed). Boxed: it holds hyper's
    /// buffers and state (≈ 700 B), moved with every hand-over.
    conn: Option<Box<H1Connection>>,
    key: Arc<PoolKey>,
}

/// A request that did not go out: the error, and the request when it was not sent at all (so it
/// can be sent on another connection).
pub struct Unsent {
    pub error: hyper::Error,
    pub request: Option<Request<Full<Bytes>>>,
}

impl H1Conn {
    pub fn new(
        sender: http1::SendRequest<Full<Bytes>>,
        conn: H1Connection,
        key: Arc<PoolKey>,
    ) -> H1Conn {
        H1Conn {
            sender,
            conn: Some(Box::new(conn)),
            key,
        }
    }

    /// Lets the connection read, write and decode as far as it can without waiting.
    pub fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = &mut self.conn {
            if let Poll::Ready(result) = Pin::new(conn.as_mut()).poll(cx) {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "upstream HTTP/1 connection ended with an error");
                }
                self.conn = None;
            }
        }
    }

    /// Whether the connection can take a request now. Polls it without a waker, so an idle
    /// connection notices that the upstream closed it.
    pub fn usable(&mut self) -> bool {
        self.drive(&mut Context::from_waker(Waker::noop()));
        self.conn.is_some() && self.sender.is_ready()
    }

    /// Sends `req` and waits for the response head, driving the connection meanwhile. The
    /// connection comes back with the head: the response body keeps it and returns it to the
    /// pool once read to its end.
    pub async fn send(
        mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, H1Conn), Unsent> {
        let mut req = req;
        self.key.h1_form(&mut req);
        let response = self.sender.try_send_request(req);
        let mut response = std::pin::pin!(response);
        let result = poll_fn(|cx| {
            self.drive(cx);
            response.as_mut().poll(cx)
        })
        .await;
        match result {
            Ok(resp) => Ok((resp, self)),
            Err(mut e) => Err(Unsent {
                request: e.take_message(),
                error: e.into_error(),
            }),
        }
    }

    /// Where this connection goes.
    pub fn key(&self) -> &Arc<PoolKey> {
        &self.key
    }
}

/// A plain or TLS upstream socket.
pub enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
