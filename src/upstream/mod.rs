//! The upstream side: base URLs from config (never from the client), and the client that
//! reaches them: rustls (webpki roots plus an optional extra CA file, certificate verification
//! always on), HTTP/2 when the upstream offers it over TLS, else HTTP/1.1 with keep-alive.
//!
//! `conn.rs` is one connection, `connect.rs` opens connections, `h2.rs` is a shared HTTP/2
//! connection (its windows and stream count), `pool.rs` keeps them between requests, `body.rs`
//! is the response body that drives its HTTP/1 connection. The proxy, the judges and the trace
//! exporter all reach upstreams through this module; it knows none of them.

mod body;
mod conn;
mod connect;
mod h2;
mod pool;

pub use body::{Tap, UpstreamBody};

use crate::config::{BaseUrl, Config, RuntimeShape};
use bytes::Bytes;
use conn::{H1Conn, H2Sender, PoolKey, Unsent};
use connect::{Buffers, Connected, Connector};
use h2::{H2Settings, StreamSlot};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use pool::{LastConnect, Pool};
use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Why an upstream request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

/// The client for every upstream, shared by all requests.
pub struct UpstreamClient {
    connector: Connector,
    /// The connections of every thread but a `per_core` worker's.
    pool: Arc<Pool>,
    /// `server.runtime: per_core`: one pool per worker, made on the worker's first request. A
    /// connection's socket belongs to the event loop of the thread that opened it, and an
    /// HTTP/2 connection's task runs there: a request on another worker reusing it would be
    /// woken from that thread, the hand-over `per_core` is there to avoid.
    workers: Box<[OnceLock<Arc<Pool>>]>,
}

thread_local! {
    /// The `per_core` worker this thread is, if it is one.
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Marks this thread as `per_core` worker `index`: the upstream clients keep its connections
/// apart from every other thread's.
pub fn enter_worker(index: usize) {
    WORKER.with(|w| w.set(Some(index)));
}

/// The `per_core` worker this thread is, if it is one (what else keeps connections per worker
/// asks: the state store's, `state/redis.rs`).
pub fn worker_index() -> Option<usize> {
    WORKER.with(Cell::get)
}

impl UpstreamClient {
    /// The client `config` asks for: `timeouts.connect_ms`, `upstream_tls.ca_path` (CA
    /// certificates trusted besides the webpki roots), the connections' buffers
    /// (`limits.upstream_read_buffer_bytes`, `limits.upstream_receive_buffer_bytes`) and the
    /// `limits.upstream_h2_*` settings.
    pub fn for_config(config: &Config) -> Result<Self, String> {
        Ok(UpstreamClient {
            connector: Connector::new(
                Duration::from_millis(config.timeouts.connect_ms),
                config.upstream_tls.ca_path.as_deref(),
                Buffers {
                    read: config.limits.upstream_read_buffer_bytes,
                    receive: config.limits.upstream_receive_buffer_bytes,
                },
                H2Settings {
                    stream_window: config.limits.upstream_h2_stream_window_bytes,
                    max_streams: config.limits.upstream_h2_streams_per_connection,
                },
            )?,
            pool: Pool::new(),
            workers: match config.server.runtime {
                RuntimeShape::WorkStealing => Box::default(),
                RuntimeShape::PerCore => (0..config.server.worker_count())
                    .map(|_| OnceLock::new())
                    .collect(),
            },
        })
    }

    /// The pool of the thread this runs on (see `workers`).
    fn pool(&self) -> &Arc<Pool> {
        match worker_index().and_then(|i| self.workers.get(i)) {
            // Made on the worker: its sweep runs on the worker's event loop.
            Some(slot) => slot.get_or_init(Pool::new),
            None => &self.pool,
        }
    }

    /// Sends `req` to `base`'s host and waits for the response head. `req`'s URI is the target
    /// in origin form (from [`UpstreamBase::uri_for`]); scheme, authority and `Host` are set
    /// here for the HTTP version of the connection it goes out on. A request that a reused
    /// connection could not take (the upstream had closed it) is sent again on another.
    pub async fn request(
        &self,
        base: &UpstreamBase,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let key = &base.key;
        // Looked up once: the request's task stays on the thread it started on.
        let pool = self.pool();
        req = match Self::try_h2(pool, key, req).await? {
            Ok(resp) => return Ok(resp),
            Err(unsent) => unsent,
        };
        while let Some(conn) = pool.take_idle(key) {
            match conn.send(req).await {
                Ok(sent) => return Ok(h1_body(pool, sent)),
                Err(Unsent {
                    request: Some(unsent),
                    error,
                }) => {
                    tracing::debug!(error = %error, "idle upstream connection could not take a request");
                    req = unsent;
                }
                Err(Unsent { error, .. }) => return Err(error.into()),
            }
        }
        let Some(gate) = pool.connect_gate(key) else {
            return self.connect_and_send(pool, key, req, None).await;
        };
        loop {
            // While another request connects, wait for it. While the upstream speaks HTTP/2,
            // take a stream on what it brought, or connect next holding the gate: a burst's
            // connects are made one at a time, each new connection taking as many waiters as
            // it has room for, rather than one connection per request.
            let held = match gate.try_lock() {
                Ok(held) => held,
                Err(_) => {
                    let held = gate.lock().await;
                    // A failing upstream is not tried one request after another (each waiting
                    // out the connect timeout): after waiting for one failed connect, a request
                    // tries its own at once, as it does for an HTTP/1.1 upstream.
                    if matches!(*held, LastConnect::Failed | LastConnect::H1) {
                        drop(held);
                        return self.connect_and_send(pool, key, req, None).await;
                    }
                    held
                }
            };
            // Checked again under the gate: a connection may have come since `try_h2`.
            if let Some(stream) = pool.h2_stream(key) {
                // Sent once the gate is let go: a response head may take long.
                drop(held);
                req = match Self::try_h2_from(pool, key, req, Some(stream)).await? {
                    Ok(resp) => return Ok(resp),
                    Err(unsent) => unsent,
                };
                continue;
            }
            return self.connect_and_send(pool, key, req, Some(held)).await;
        }
    }

    /// Opens a connection to `key` and sends `req` on it, holding `gate` (if any) until the
    /// connection is shared in `pool` and telling it how the connect went.
    async fn connect_and_send(
        &self,
        pool: &Arc<Pool>,
        key: &Arc<PoolKey>,
        mut req: Request<Full<Bytes>>,
        mut gate: Option<tokio::sync::MutexGuard<'_, LastConnect>>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let mut tell = |last| {
            if let Some(held) = gate.as_mut() {
                **held = last;
            }
        };
        // Stays so if this request is abandoned while connecting: the next waiter connects.
        tell(LastConnect::None);
        let connected = self.connector.connect(key).await;
        match connected {
            Err(e) => {
                tell(LastConnect::Failed);
                Err(e)
            }
            Ok(Connected::H1(conn)) => {
                tell(LastConnect::H1);
                pool.mark_h1(key);
                drop(gate);
                conn.send(req)
                    .await
                    .map(|sent| h1_body(pool, sent))
                    .map_err(|unsent| unsent.error.into())
            }
            Ok(Connected::H2(conn)) => {
                tell(LastConnect::H2);
                // This request goes out on the new connection whatever its room: one try, even
                // on an upstream that allows no stream (h2 then holds it until a timeout).
                let (mut sender, stream) = conn.stream();
                pool.put_h2(key, conn);
                drop(gate);
                key.h2_form(&mut req);
                let resp = sender.send_request(req).await?;
                Ok(resp.map(|incoming| UpstreamBody::h2(incoming, stream)))
            }
        }
    }

    /// Sends `req` on one of `pool`'s shared HTTP/2 connections to `key` with room for another
    /// stream, if there is one; hands the request back when there is none. A connection that
    /// could not take the request is dropped from the pool and the next one tried.
    async fn try_h2(
        pool: &Pool,
        key: &Arc<PoolKey>,
        req: Request<Full<Bytes>>,
    ) -> Result<Result<Response<UpstreamBody>, Request<Full<Bytes>>>, UpstreamError> {
        Self::try_h2_from(pool, key, req, None).await
    }

    /// [`try_h2`](Self::try_h2), first on `taken` (a stream already taken) if given.
    async fn try_h2_from(
        pool: &Pool,
        key: &Arc<PoolKey>,
        req: Request<Full<Bytes>>,
        mut taken: Option<(H2Sender, StreamSlot)>,
    ) -> Result<Result<Response<UpstreamBody>, Request<Full<Bytes>>>, UpstreamError> {
        let mut req = req;
        while let Some((mut sender, stream)) = taken.take().or_else(|| pool.h2_stream(key)) {
            key.h2_form(&mut req);
            req = match sender.ready().await {
                Ok(()) => match sender.try_send_request(req).await {
                    Ok(resp) => {
                        return Ok(Ok(resp.map(|incoming| UpstreamBody::h2(incoming, stream))))
                    }
                    Err(mut e) => match e.take_message() {
                        Some(unsent) => unsent,
                        None => return Err(e.into_error().into()),
                    },
                },
                Err(e) => {
                    tracing::debug!(error = %e, "shared upstream HTTP/2 connection ended");
                    req
                }
            };
            pool.forget_h2(key, &stream);
        }
        Ok(Err(req))
    }
}

/// An HTTP/1 response whose body drives its connection and hands it back to `pool`.
fn h1_body(pool: &Arc<Pool>, (resp, conn): (Response<Incoming>, H1Conn)) -> Response<UpstreamBody> {
    resp.map(|incoming| UpstreamBody::h1(incoming, conn, Arc::clone(pool)))
}

/// A provider's base URL, split for fast request-URI building.
#[derive(Debug, Clone)]
pub struct UpstreamBase {
    /// Scheme (TLS or not) and authority; also which pooled connections serve it.
    key: Arc<PoolKey>,
    /// Path prefix without trailing slash ("" for a bare host).
    pub prefix: String,
}

impl UpstreamBase {
    /// The upstream of a checked base URL.
    pub fn new(url: &BaseUrl) -> Result<UpstreamBase, String> {
        Ok(UpstreamBase {
            key: Arc::new(
                PoolKey::new(url.tls, url.authority.clone())
                    .map_err(|e| format!("`{url}`: {e}"))?,
            ),
            prefix: url.prefix.clone(),
        })
    }

    pub fn scheme(&self) -> Scheme {
        if self.key.tls {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        }
    }

    pub fn authority(&self) -> &Authority {
        &self.key.authority
    }

    /// The upstream request target (origin form: path and query, under the base URL's path)
    /// for a client request path and query. Scheme and authority come from the base URL when
    /// the request goes out ([`UpstreamClient::request`]), never from the client.
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let pq = format!("{}{}", self.prefix, path_and_query);
        Ok(Uri::from(PathAndQuery::try_from(pq)?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http::header::HOST;

    fn parse_base_url(url: &str) -> Result<UpstreamBase, String> {
        UpstreamBase::new(&BaseUrl::parse(url)?)
    }

    fn request(base: &UpstreamBase, path: &str) -> Request<()> {
        let mut req = Request::new(());
        *req.uri_mut() = base.uri_for(path).unwrap();
        req
    }

    #[test]
    fn http1_requests_go_in_origin_form_with_the_upstreams_host() {
        for (url, host, target) in [
            (
                "http://127.0.0.1:8000",
                "127.0.0.1:8000",
                "/v1/chat/completions?x=1",
            ),
            (
                "http://vllm.internal:80/",
                "vllm.internal",
                "/v1/chat/completions?x=1",
            ),
            (
                "https://gw.example.com:443/openai/v1",
                "gw.example.com",
                "/openai/v1/v1/chat/completions?x=1",
            ),
            (
                "https://[::1]:8443",
                "[::1]:8443",
                "/v1/chat/completions?x=1",
            ),
        ] {
            let base = parse_base_url(url).unwrap();
            let mut req = request(&base, "/v1/chat/completions?x=1");
            // A client's Host never gets here (headers::forwardable drops it); one set anyway
            // is replaced.
            req.headers_mut()
                .insert(HOST, "client.example".parse().unwrap());
            base.key.h1_form(&mut req);
            assert_eq!(req.uri().to_string(), target, "{url}");
            assert_eq!(req.headers().get_all(HOST).iter().count(), 1);
            assert_eq!(req.headers()[HOST], host, "{url}");
            // Going out on HTTP/2 instead (a retried request): absolute form, no Host.
            base.key.h2_form(&mut req);
            assert_eq!(
                req.uri().to_string(),
                format!("{}://{host}{target}", base.scheme()),
                "{url}"
            );
            assert!(req.headers().get(HOST).is_none());
            // And back: each form is right whatever the request had before.
            base.key.h1_form(&mut req);
            assert_eq!(req.uri().to_string(), target, "{url}");
            assert_eq!(req.headers()[HOST], host, "{url}");
        }
    }

    #[test]
    fn bases_of_one_upstream_find_each_others_pooled_connections() {
        // The key's hash is computed once (`PoolKey::new`); keys made apart must still meet.
        let mut slots = std::collections::HashMap::new();
        for (url, slot) in [
            ("https://api.example.com", 0),
            ("http://api.example.com", 1),
            ("http://api.example.com:8080", 2),
            ("https://api.example.com:443/openai/v1", 0),
            ("http://api.example.com:80/v1", 1),
            ("http://api.example.com:8080/other", 2),
        ] {
            let key = parse_base_url(url).unwrap().key;
            let found = *slots.entry(key).or_insert(slot);
            assert_eq!(found, slot, "{url}");
        }
        assert_eq!(slots.len(), 3);
    }

    #[test]
    fn base_urls_are_checked() {
        for (url, what) in [
            ("ftp://x", "http:// or https://"),
            ("http://x/?a=1", "query"),
            ("http://user:pw@x", "user info"),
            ("/v1", "http:// or https://"),
        ] {
            let e = parse_base_url(url).unwrap_err();
            assert!(e.contains(what), "{url}: {e}");
        }
        let base = parse_base_url("https://host:443/openai/v1/").unwrap();
        assert_eq!(base.authority().as_str(), "host");
        assert_eq!(base.key.port(), 443);
        assert_eq!(base.prefix, "/openai/v1");
    }
}
