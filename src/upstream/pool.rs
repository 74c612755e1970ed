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
//! HTTP/2 connections are shared by many requests, so each runs in its own task. A request
//! goes out on the first live connection to its upstream that has room for another stream (see
//! `h2.rs`: streams held by clients that stopped reading must not make others wait); when none
//! has, another connection is opened and kept beside the others. So an upstream gets one
//! connection until it carries `limits.upstream_h2_streams_per_connection` streams (or the
//! upstream's `SETTINGS_MAX_CONCURRENT_STREAMS`, if lower) at once. Those connects go through
//! the upstream's gate one at a time, each new connection taking up to that many waiting
//! requests, so a burst opens about one connection per that many requests (see
//! `UpstreamClient::request`). The sweep closes every connection but the first that has carried
//! no stream for [`IDLE_TIMEOUT`]: the pool shrinks back after a peak.

use super::conn::{H1Conn, H2Sender, PoolKey};
use super::h2::{H2Conn, StreamSlot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Idle HTTP/1 connections kept per upstream; more are closed when their request ends.
const MAX_IDLE_PER_UPSTREAM: usize = 1024;
/// How long a connection may sit idle before it is closed (HTTP/1), or carry no stream
/// (HTTP/2, every connection to an upstream but its first).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How often idle connections are checked for expiry and for being closed by the upstream.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

struct Idle {
    conn: H1Conn,
    since: Instant,
}

#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Arc<PoolKey>, Vec<Idle>>>,
    h2: Mutex<HashMap<Arc<PoolKey>, Vec<H2Conn>>>,
    /// Per TLS upstream whose protocol is not known to be HTTP/1: held while a connection is
    /// opened, so that a burst of first requests waits for one (possibly HTTP/2, shared)
    /// connection instead of each opening its own.
    connecting: Mutex<HashMap<Arc<PoolKey>, Arc<ConnectGate>>>,
    /// TLS upstreams that answered ALPN with HTTP/1.1: their connects need no gate.
    h1_only: Mutex<std::collections::HashSet<Arc<PoolKey>>>,
}

/// Held while a connect to one upstream runs; tells the requests that waited for it how the last
/// connect through it went.
pub type ConnectGate = tokio::sync::Mutex<LastConnect>;

/// How the last connect through a [`ConnectGate`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LastConnect {
    /// None was made yet, or the last was abandoned with its request.
    #[default]
    None,
    /// It brought a shared HTTP/2 connection.
    H2,
    /// The upstream answered with HTTP/1.1 (its connects need no gate from now on).
    H1,
    /// It failed.
    Failed,
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
        let key = Arc::clone(conn.key());
        let mut idle = lock(&self.idle);
        let list = idle.entry(key).or_default();
        if list.len() < MAX_IDLE_PER_UPSTREAM {
            list.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// A stream on a live HTTP/2 connection to `key` that has room for one more, if there is
    /// one. Connections that ended, or whose upstream allows no stream, are dropped on the way.
    pub fn h2_stream(&self, key: &Arc<PoolKey>) -> Option<(H2Sender, StreamSlot)> {
        let mut h2 = lock(&self.h2);
        let conns = h2.get_mut(key)?;
        conns.retain(|conn| !conn.is_closed() && !conn.refuses_streams());
        let stream = conns.iter().find_map(H2Conn::try_stream);
        if conns.is_empty() {
            h2.remove(key);
        }
        stream
    }

    /// Shares a new HTTP/2 connection beside those kept for `key`, unless the upstream already
    /// said it takes no stream on it. Until its own SETTINGS are seen, it is assumed to take as
    /// many streams as the oldest connection to the upstream: waiting requests must not crowd
    /// onto it past the upstream's limit, into h2's queue.
    pub fn put_h2(&self, key: &Arc<PoolKey>, conn: H2Conn) {
        if conn.refuses_streams() {
            return;
        }
        let mut h2 = lock(&self.h2);
        let conns = h2.entry(Arc::clone(key)).or_default();
        if let Some(oldest) = conns
            .iter()
            .find(|c| !c.is_closed() && !c.refuses_streams())
        {
            conn.assume_limit(oldest.limit());
        }
        conns.push(conn);
    }

    /// Drops the connection of `stream`, which could not take a request.
    pub fn forget_h2(&self, key: &Arc<PoolKey>, stream: &StreamSlot) {
        if let Some(conns) = lock(&self.h2).get_mut(key) {
            conns.retain(|conn| !conn.carries(stream));
        }
    }

    /// The gate a connect to `key` goes through, or `None` when connects to it may run in
    /// parallel (plain HTTP, or TLS that negotiated HTTP/1.1 before).
    pub fn connect_gate(&self, key: &Arc<PoolKey>) -> Option<Arc<ConnectGate>> {
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

    /// Closes idle HTTP/1 connections that expired or that the upstream closed, and HTTP/2
    /// connections that ended, that the upstream allows no stream, or that carried no stream
    /// for `idle_timeout` (all but the first per upstream), as of `now`.
    fn sweep_once(&self, now: Instant, idle_timeout: Duration) {
        let expired = |since: Instant| now.saturating_duration_since(since) >= idle_timeout;
        let mut stale = Vec::new();
        {
            let mut idle = lock(&self.idle);
            for list in idle.values_mut() {
                let mut kept = Vec::with_capacity(list.len());
                for mut entry in list.drain(..) {
                    if !expired(entry.since) && entry.conn.usable() {
                        kept.push(entry);
                    } else {
                        stale.push(entry);
                    }
                }
                *list = kept;
            }
            idle.retain(|_, list| !list.is_empty());
        }
        let mut stale_h2 = Vec::new();
        {
            let mut h2 = lock(&self.h2);
            for conns in h2.values_mut() {
                let mut kept = Vec::with_capacity(conns.len());
                for conn in conns.drain(..) {
                    let ended = conn.is_closed() || conn.refuses_streams();
                    let spare = !kept.is_empty() && conn.idle_since().is_some_and(expired);
                    if ended || spare {
                        stale_h2.push(conn);
                    } else {
                        kept.push(conn);
                    }
                }
                *conns = kept;
            }
            h2.retain(|_, conns| !conns.is_empty());
        }
        // Closed outside the locks.
        drop(stale);
        drop(stale_h2);
    }
}

async fn sweep(pool: Weak<Pool>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        pool.sweep_once(Instant::now(), IDLE_TIMEOUT);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::upstream::conn::Io;
    use crate::upstream::h2::{handshake, H2Settings};

    /// `n` HTTP/2 connections to a listener that accepts and keeps them (the client's handshake
    /// needs no answer), pooled under one key.
    async fn pool_of_h2(n: usize) -> (Pool, Arc<PoolKey>, Vec<tokio::net::TcpStream>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let key = Arc::new(PoolKey::new(true, addr.to_string().parse().unwrap()).unwrap());
        let pool = Pool::default();
        let settings = H2Settings {
            stream_window: 65535,
            max_streams: 4,
        };
        let mut accepted = Vec::new();
        for _ in 0..n {
            let io = Io::Plain(tokio::net::TcpStream::connect(addr).await.unwrap());
            accepted.push(listener.accept().await.unwrap().0);
            pool.put_h2(&key, handshake(io, settings).await.unwrap());
        }
        (pool, key, accepted)
    }

    fn pooled_h2(pool: &Pool, key: &Arc<PoolKey>) -> usize {
        lock(&pool.h2).get(key).map_or(0, Vec::len)
    }

    /// After a peak, the sweep closes the HTTP/2 connections that carried no stream for
    /// `IDLE_TIMEOUT`, but keeps the upstream's first one and those carrying streams.
    #[tokio::test]
    async fn the_sweep_closes_spare_idle_http2_connections() {
        let (pool, key, _accepted) = pool_of_h2(4).await;
        // Four streams fill the first connection, the fifth is on the second.
        let streams: Vec<_> = (0..5).map(|_| pool.h2_stream(&key).unwrap()).collect();
        drop(streams);
        let busy = pool.h2_stream(&key).unwrap();
        let now = Instant::now();
        pool.sweep_once(now, IDLE_TIMEOUT);
        assert_eq!(pooled_h2(&pool, &key), 4, "nothing was idle long enough");
        let later = now + IDLE_TIMEOUT;
        pool.sweep_once(later, IDLE_TIMEOUT);
        assert_eq!(pooled_h2(&pool, &key), 1, "the first connection stays");
        // It is the one carrying `busy`: one still carrying a stream is kept, however old.
        assert!(lock(&pool.h2)[&key][0].carries(&busy.1));
        // Its stream ended: kept anyway, as the upstream's first connection.
        drop(busy);
        pool.sweep_once(later, IDLE_TIMEOUT);
        assert_eq!(pooled_h2(&pool, &key), 1);
    }

    /// A later connection carrying a stream is kept beside the idle first one.
    #[tokio::test]
    async fn the_sweep_keeps_http2_connections_carrying_streams() {
        let (pool, key, _accepted) = pool_of_h2(3).await;
        let fill: Vec<_> = (0..4).map(|_| pool.h2_stream(&key).unwrap()).collect();
        let on_second = pool.h2_stream(&key).unwrap();
        drop(fill);
        pool.sweep_once(Instant::now() + IDLE_TIMEOUT, IDLE_TIMEOUT);
        let kept = &lock(&pool.h2)[&key];
        assert_eq!(kept.len(), 2, "the first and the one carrying a stream");
        assert!(kept[1].carries(&on_second.1));
    }

    /// A connection whose upstream ended it is pruned.
    #[tokio::test]
    async fn the_sweep_prunes_ended_http2_connections() {
        let (pool, key, accepted) = pool_of_h2(2).await;
        drop(accepted);
        let deadline = Instant::now() + Duration::from_secs(30);
        while lock(&pool.h2)[&key].iter().any(|c| !c.is_closed()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        pool.sweep_once(Instant::now(), IDLE_TIMEOUT);
        assert_eq!(pooled_h2(&pool, &key), 0);
    }
}
