//! Keep-alive for upstream connections.
//!
//! An HTTP/1 connection is driven by the task that uses it, not by a task of its own: the
//! request's task polls the connection before it polls the response body. A burst the upstream
//! sent at once is then read chunk after chunk within one turn of that task and leaves for the
//! client in one write; with a connection task in between, every chunk costs a hand-over between
//! tasks and a write of its own. Between requests an idle connection waits here, unpolled; it
//! is checked (closed by the upstream? ready for a request?) when taken, and swept every
//! [`SWEEP_EVERY`].
//!
//! HTTP/2 connections are shared by many requests, so each runs in its own task; one live
//! sender per upstream is kept.

use super::body::UpstreamBody;
use super::connect::Io;
use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{header, HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Idle HTTP/1 connections kept per upstream; more are closed when their request ends.
const MAX_IDLE_PER_UPSTREAM: usize = 1024;
/// How long an HTTP/1 connection may sit idle before it is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How often idle connections are checked for expiry and for being closed by the upstream.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

pub type H2Sender = http2::SendRequest<Full<Bytes>>;
type H1Connection = http1::Connection<TokioIo<Io>, Full<Bytes>>;

/// Where connections go: scheme (TLS or not) and authority of an upstream base URL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub tls: bool,
    /// Without the scheme's default port (`host`, not `host:443`): it is also the `Host` header
    /// and the HTTP/2 `:authority`, which carry the port only when it is not the default.
    pub authority: Authority,
    /// `authority` as a header value, made once.
    host: HeaderValue,
}

impl PoolKey {
    /// The key for a scheme and an authority as a checked base URL has it (its default port
    /// already dropped by `config::BaseUrl`).
    pub fn new(tls: bool, authority: Authority) -> Result<PoolKey, String> {
        let host = HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?;
        Ok(PoolKey {
            tls,
            authority,
            host,
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
    fn usable(&mut self) -> bool {
        self.drive(&mut Context::from_waker(Waker::noop()));
        self.conn.is_some() && self.sender.is_ready()
    }

    /// Sends `req` and waits for the response head, driving the connection meanwhile. The
    /// response body keeps the connection and returns it to `pool` once read to its end.
    pub async fn send(
        mut self,
        req: Request<Full<Bytes>>,
        pool: &Arc<Pool>,
    ) -> Result<Response<UpstreamBody>, Unsent> {
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
            Ok(resp) => {
                let pool = Arc::clone(pool);
                Ok(resp.map(|incoming| UpstreamBody::h1(incoming, self, pool)))
            }
            Err(mut e) => Err(Unsent {
                request: e.take_message(),
                error: e.into_error(),
            }),
        }
    }
}

struct Idle {
    conn: H1Conn,
    since: Instant,
}

#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Arc<PoolKey>, Vec<Idle>>>,
    h2: Mutex<HashMap<Arc<PoolKey>, H2Sender>>,
    /// Per TLS upstream whose protocol is not known to be HTTP/1: held while a connection is
    /// opened, so that a burst of first requests waits for one (possibly HTTP/2, shared)
    /// connection instead of each opening its own.
    connecting: Mutex<HashMap<Arc<PoolKey>, Arc<tokio::sync::Mutex<()>>>>,
    /// TLS upstreams that answered ALPN with HTTP/1.1: their connects need no gate.
    h1_only: Mutex<std::collections::HashSet<Arc<PoolKey>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here can be left half-updated by a panic; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// A new pool, swept in the background while it lives (when a tokio runtime is running).
    pub fn new() -> Arc<Pool> {
        let pool = Arc::new(Pool::default());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(sweep(Arc::downgrade(&pool)));
        }
        pool
    }

    /// The most recently used idle connection to `key` that is still usable. Each candidate is
    /// checked outside the lock (the check may read from its socket).
    pub fn take_idle(&self, key: &Arc<PoolKey>) -> Option<H1Conn> {
        loop {
            let mut entry = lock(&self.idle).get_mut(key)?.pop()?;
            if entry.since.elapsed() >= IDLE_TIMEOUT {
                // The rest are older still; the sweep closes them.
                return None;
            }
            if entry.conn.usable() {
                return Some(entry.conn);
            }
        }
    }

    /// Keeps a connection whose response was read to the end, if it can serve another request.
    pub fn put_idle(&self, mut conn: H1Conn) {
        if !conn.usable() {
            return;
        }
        let key = Arc::clone(&conn.key);
        let mut idle = lock(&self.idle);
        let list = idle.entry(key).or_default();
        if list.len() < MAX_IDLE_PER_UPSTREAM {
            list.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// The live HTTP/2 sender for `key`, if there is one.
    pub fn h2_sender(&self, key: &Arc<PoolKey>) -> Option<H2Sender> {
        let mut h2 = lock(&self.h2);
        match h2.get(key) {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            Some(_) => {
                h2.remove(key);
                None
            }
            None => None,
        }
    }

    /// Shares a new HTTP/2 connection, unless a live one is kept already (then the new one
    /// serves only the request it was opened for and closes after it).
    pub fn put_h2(&self, key: &Arc<PoolKey>, sender: &H2Sender) {
        let mut h2 = lock(&self.h2);
        if h2.get(key).is_none_or(|s| s.is_closed()) {
            h2.insert(Arc::clone(key), sender.clone());
        }
    }

    pub fn forget_h2(&self, key: &Arc<PoolKey>) {
        lock(&self.h2).remove(key);
    }

    /// The gate a connect to `key` goes through, or `None` when connects to it may run in
    /// parallel (plain HTTP, or TLS that negotiated HTTP/1.1 before).
    pub fn connect_gate(&self, key: &Arc<PoolKey>) -> Option<Arc<tokio::sync::Mutex<()>>> {
        if !key.tls || lock(&self.h1_only).contains(key) {
            return None;
        }
        Some(Arc::clone(
            lock(&self.connecting).entry(Arc::clone(key)).or_default(),
        ))
    }

    /// `key` negotiated HTTP/1.1: later connects to it run in parallel.
    pub fn mark_h1(&self, key: &Arc<PoolKey>) {
        if key.tls {
            lock(&self.h1_only).insert(Arc::clone(key));
            lock(&self.connecting).remove(key);
        }
    }

    /// Closes idle connections that expired or that the upstream closed.
    fn sweep_once(&self) {
        let mut stale = Vec::new();
        {
            let mut idle = lock(&self.idle);
            for list in idle.values_mut() {
                let mut kept = Vec::with_capacity(list.len());
                for mut entry in list.drain(..) {
                    if entry.since.elapsed() < IDLE_TIMEOUT && entry.conn.usable() {
                        kept.push(entry);
                    } else {
                        stale.push(entry);
                    }
                }
                *list = kept;
            }
            idle.retain(|_, list| !list.is_empty());
        }
        drop(stale);
    }
}

async fn sweep(pool: Weak<Pool>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        pool.sweep_once();
    }
}
