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
//! upstream's `SETTINGS_MAX_CONCURRENT_STREAMS`, if lower) at once, and the connections stay
//! bounded by the requests in flight (`limits.max_concurrent_requests`).

use super::conn::{H1Conn, H2Sender, PoolKey};
use super::h2::{H2Conn, StreamSlot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Idle HTTP/1 connections kept per upstream; more are closed when their request ends.
const MAX_IDLE_PER_UPSTREAM: usize = 1024;
/// How long an HTTP/1 connection may sit idle before it is closed.
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
    /// one. Connections that ended are dropped on the way.
    pub fn h2_stream(&self, key: &Arc<PoolKey>) -> Option<(H2Sender, StreamSlot)> {
        let mut h2 = lock(&self.h2);
        let conns = h2.get_mut(key)?;
        conns.retain(|conn| !conn.is_closed());
        let stream = conns.iter().find_map(H2Conn::try_stream);
        if conns.is_empty() {
            h2.remove(key);
        }
        stream
    }

    /// Shares a new HTTP/2 connection beside those kept for `key`.
    pub fn put_h2(&self, key: &Arc<PoolKey>, conn: H2Conn) {
        lock(&self.h2)
            .entry(Arc::clone(key))
            .or_default()
            .push(conn);
    }

    /// Drops the connection of `stream`, which could not take a request.
    pub fn forget_h2(&self, key: &Arc<PoolKey>, stream: &StreamSlot) {
        if let Some(conns) = lock(&self.h2).get_mut(key) {
            conns.retain(|conn| !conn.carries(stream));
        }
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
