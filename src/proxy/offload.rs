//! Checking work off the async workers. A check runs where its request is polled: on the async
//! worker that also serves other connections (one of two on a two-core machine; the only one
//! of a `per_core` worker). A small check takes microseconds and stays there, but a large one
//! (an MCP batch at its cap, a long SSE event, a large whole answer) takes milliseconds to
//! seconds, and every other request on that worker — other tenants', `/healthz` — would wait
//! for it. Checks over [`THRESHOLD_BYTES`] run on tokio's blocking pool instead, at most
//! [`permits`] at once (the cores: more would only share them); the rest wait for a permit
//! without holding a worker — each in its tenant's queue ([`Tenant`]): a freed permit goes to
//! the waiting tenant that holds the fewest, in turn, so one tenant's queue of large checks
//! delays another tenant's check by at most the checks already running, not by its queue.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};
use tokio::sync::oneshot;

/// Checking work over this many bytes of input runs on the blocking pool (a JSON-RPC batch
/// always does, [`jsonrpc_work`]). A chosen bound, not a measured optimum: below it one
/// message's check takes well under a millisecond, while the hop to the pool and back costs
/// tens of microseconds (docs/mcp.md, "Bounded work", has what was measured).
pub const THRESHOLD_BYTES: usize = 64 << 10;

/// Large checks at once, over every route: the cores guardwire may use.
pub fn permits() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

/// Whose check it is: the client key's, else the client address's (as counted for
/// `limits.max_concurrent_requests_per_client_address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tenant {
    Key(&'static str),
    Address(IpAddr),
    Unknown,
}

impl Tenant {
    pub fn of(key_id: Option<&'static str>, address: Option<IpAddr>) -> Tenant {
        match (key_id, address) {
            (Some(k), _) => Tenant::Key(k),
            (None, Some(a)) => Tenant::Address(a),
            (None, None) => Tenant::Unknown,
        }
    }
}

/// The blocking pool's permits, shared out fairly among the tenants waiting for one.
struct FairPool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    free: usize,
    /// Permits each tenant holds (tenants holding none are not kept).
    held: HashMap<Tenant, usize>,
    /// Each waiting tenant's waiters, oldest first; `turns` orders the tenants.
    waiting: HashMap<Tenant, VecDeque<oneshot::Sender<()>>>,
    turns: VecDeque<Tenant>,
}

impl PoolState {
    fn take(&mut self, tenant: Tenant) {
        *self.held.entry(tenant).or_default() += 1;
    }

    fn give_back(&mut self, tenant: Tenant) {
        if let Some(n) = self.held.get_mut(&tenant) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&tenant);
            }
        }
    }

    /// The next waiter: of the waiting tenant holding the fewest permits, the first in turn
    /// among them (O(waiting tenants)); the tenant goes to the back of the turns.
    fn next_waiter(&mut self) -> Option<(Tenant, oneshot::Sender<()>)> {
        loop {
            let at = (0..self.turns.len())
                .min_by_key(|&i| (self.held.get(&self.turns[i]).copied().unwrap_or(0), i))?;
            let tenant = self.turns.remove(at)?;
            let queue = self.waiting.get_mut(&tenant)?;
            let waiter = queue.pop_front();
            if queue.is_empty() {
                self.waiting.remove(&tenant);
            } else {
                self.turns.push_back(tenant);
            }
            if let Some(w) = waiter {
                return Some((tenant, w));
            }
        }
    }
}

/// A permit of the pool: given back when dropped.
struct Permit {
    pool: &'static FairPool,
    tenant: Tenant,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.pool.release(self.tenant);
    }
}

/// A waiter's side: a permit granted after its future was dropped goes back to the pool.
struct Waiting {
    pool: &'static FairPool,
    tenant: Tenant,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            if rx.try_recv().is_ok() {
                self.pool.release(self.tenant);
            }
        }
    }
}

impl FairPool {
    fn new(permits: usize) -> FairPool {
        FairPool {
            state: Mutex::new(PoolState {
                free: permits,
                ..PoolState::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A permit for `tenant`: at once when one is free and nobody waits, else in turn.
    /// `None` only if the pool dropped the waiter unserved (it does not).
    async fn acquire(&'static self, tenant: Tenant) -> Option<Permit> {
        let rx = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.free > 0 && st.turns.is_empty() {
                st.free -= 1;
                st.take(tenant);
                return Some(Permit { pool: self, tenant });
            }
            let (tx, rx) = oneshot::channel();
            let queue = st.waiting.entry(tenant).or_default();
            if queue.is_empty() {
                st.turns.push_back(tenant);
            }
            queue.push_back(tx);
            rx
        };
        let mut waiting = Waiting {
            pool: self,
            tenant,
            rx: Some(rx),
        };
        let granted = match waiting.rx.as_mut() {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        waiting.rx = None;
        // (Made only when granted: a permit gives one back when dropped.)
        if granted {
            Some(Permit { pool: self, tenant })
        } else {
            None
        }
    }

    /// `tenant` gives a permit back: to the next waiter, else to the free ones.
    fn release(&self, tenant: Tenant) {
        let mut st = self.lock();
        st.give_back(tenant);
        while let Some((next, tx)) = st.next_waiter() {
            st.take(next);
            // (Sending runs none of the waiter's code: safe under the lock.)
            if tx.send(()).is_ok() {
                return;
            }
            // Its waiter went away: the next one.
            st.give_back(next);
        }
        st.free += 1;
    }
}

fn pool() -> &'static FairPool {
    static POOL: OnceLock<FairPool> = OnceLock::new();
    POOL.get_or_init(|| FairPool::new(permits()))
}

/// The work a JSON-RPC body counts as: a batch (an array) as large whatever its bytes, since
/// its checks cost per message (a fresh guard each: ~100 µs with a realistic pack, so 128 small
/// messages take milliseconds in under 64 KiB).
pub fn jsonrpc_work(body: &[u8]) -> usize {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => work(body).max(THRESHOLD_BYTES),
        _ => work(body),
    }
}

/// The work checking `body` is estimated to take, in bytes of prose (what [`THRESHOLD_BYTES`]
/// counts): what costs more per byte counts more. Each JSON string, each mark the reader's
/// view may read as Markdown, costs a step of its own (a punctuation mark counts as 17 bytes);
/// a `<` or `&` may open an element or a reference the view builds (HTML's tree: 145); a byte
/// of a non-ASCII character goes through the view's Unicode tables (32). Measured worst cases:
/// 65 KB of tiny JSON strings took ~29 ms to check, 60 KB of nested table markup ~130 ms,
/// 63 KB of Hangul ~50 ms (Thai, Arabic, CJK 10–14 ms), as much English prose ~3 ms. One table
/// lookup per byte (~0.5 ns), stopped once the sum reaches the threshold: a large body costs no
/// pass at all.
pub fn work(body: &[u8]) -> usize {
    if body.len() >= THRESHOLD_BYTES {
        return body.len();
    }
    let mut sum = 0usize;
    // (Chunks keep a `u32` sum per chunk exact: 4096 × 145 fits; the compiler vectorises it.)
    for chunk in body.chunks(4096) {
        sum += chunk
            .iter()
            .map(|&b| u32::from(WORK[usize::from(b)]))
            .sum::<u32>() as usize;
        if sum >= THRESHOLD_BYTES {
            break;
        }
    }
    sum
}

/// Each byte's work in bytes of prose ([`work`]).
static WORK: [u8; 256] = {
    let mut w = [1u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_punctuation() {
            w[b] = 17;
        }
        if !c.is_ascii() {
            w[b] = 32;
        }
        if c == b'<' || c == b'&' {
            w[b] = 145;
        }
        b += 1;
    }
    w
};

/// Whether checking `work` (see [`work`]) is moved off the async worker.
pub fn is_large(work: usize) -> bool {
    work >= THRESHOLD_BYTES
}

/// Runs `check` of `work` (see [`work`]) for `tenant`: in place when small, else on the
/// blocking pool once a permit is `tenant`'s. `None`: it panicked there (the caller fails
/// closed).
pub async fn check<T: Send + 'static>(
    work: usize,
    tenant: Tenant,
    check: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if !is_large(work) {
        return Some(check());
    }
    let permit = pool().acquire(tenant).await?;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        check()
    })
    .await
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_what_costs_more_per_byte() {
        let prose = "The quick brown fox jumps over the lazy dog, twice. ".repeat(600);
        assert!(prose.len() > 30_000 && !is_large(work(prose.as_bytes())));
        // 65 KB of tiny JSON strings (~29 ms to check) and 6 KB of nested tables go to the pool.
        let strings = format!("{{\"x\":[{}\"a\"]}}", "\"a\",".repeat(16_000));
        assert!(strings.len() < THRESHOLD_BYTES && is_large(work(strings.as_bytes())));
        let tables = "<table><tr><td>a".repeat(400);
        assert!(is_large(work(tables.as_bytes())));
        // Hangul (~50 ms per 63 KB through the view's Unicode tables): 6 KB goes.
        let hangul = "한국어 문장입니다 ".repeat(300);
        assert!(hangul.len() < 8_000 && is_large(work(hangul.as_bytes())));
        // A body over the threshold is large without a pass.
        assert!(is_large(work(&vec![b'a'; THRESHOLD_BYTES])));
        assert!(!is_large(work(
            b"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
        )));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn large_work_leaves_the_worker_free() {
        // A single-thread runtime: while the large check runs, the runtime's one worker still
        // answers (here, a timer), which it could not if the check ran on it.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let work = tokio::spawn(check(THRESHOLD_BYTES, Tenant::Unknown, move || {
            rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok()
        }));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tx.send(()).ok();
        assert_eq!(work.await.ok(), Some(Some(true)));
        // Small work runs in place.
        let here = std::thread::current().id();
        assert_eq!(
            check(10, Tenant::Unknown, move || std::thread::current().id()
                == here)
            .await,
            Some(true)
        );
        assert_eq!(
            check(THRESHOLD_BYTES, Tenant::Unknown, move || {
                std::thread::current().id() == here
            })
            .await,
            Some(false)
        );
    }

    fn leaked(permits: usize) -> &'static FairPool {
        Box::leak(Box::new(FairPool::new(permits)))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_freed_permit_goes_to_the_waiting_tenant_holding_fewest_in_turn() {
        let pool = leaked(1);
        let (a, b) = (Tenant::Key("a"), Tenant::Key("b"));
        let first = pool.acquire(a).await;
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Tenant a queues three checks before tenant b's one.
        for (name, tenant) in [("a1", a), ("a2", a), ("a3", a), ("b1", b)] {
            let order = std::sync::Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                let permit = pool.acquire(tenant).await;
                order.lock().unwrap_or_else(|p| p.into_inner()).push(name);
                tokio::task::yield_now().await;
                drop(permit);
            }));
            tokio::task::yield_now().await;
        }
        drop(first);
        for t in tasks {
            assert!(t.await.is_ok());
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(order, ["a1", "b1", "a2", "a3"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiter_that_goes_away_loses_no_permit() {
        let pool = leaked(1);
        let held = pool.acquire(Tenant::Key("a")).await;
        let gone = tokio::spawn(pool.acquire(Tenant::Key("a")));
        tokio::task::yield_now().await;
        gone.abort();
        let next = tokio::spawn(pool.acquire(Tenant::Key("b")));
        tokio::task::yield_now().await;
        drop(held);
        let next = next.await.ok().flatten();
        assert!(next.is_some());
        drop(next);
        // Every permit is back: one is free at once.
        assert_eq!(pool.lock().free, 1);
        assert!(pool.acquire(Tenant::Unknown).await.is_some());
    }
}
