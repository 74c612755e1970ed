//! Checking work off the async workers. A check runs where its request is polled: on the async
//! worker that also serves other connections (one of two on a two-core machine; the only one
//! of a `per_core` worker). A small check takes microseconds and stays there, but a large one
//! (an MCP batch at its cap, a long SSE event, a large whole answer) takes milliseconds to
//! seconds, and every other request on that worker — other tenants', `/healthz` — would wait
//! for it. Checks over [`THRESHOLD_BYTES`] run on tokio's blocking pool instead, at most
//! [`permits`] at once (the cores: more would only share them); the rest wait for a permit
//! without holding a worker.

use std::sync::{Arc, OnceLock};
use tokio::sync::Semaphore;

/// Checking work over this many bytes of input runs on the blocking pool (a JSON-RPC batch
/// always does, [`jsonrpc_work`]). A chosen bound, not a measured optimum: below it one
/// message's check takes well under a millisecond, while the hop to the pool and back costs
/// tens of microseconds (docs/mcp.md, "Bounded work", has what was measured).
pub const THRESHOLD_BYTES: usize = 64 << 10;

/// Large checks at once, over every route: the cores guardwire may use.
pub fn permits() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

fn pool() -> &'static Arc<Semaphore> {
    static POOL: OnceLock<Arc<Semaphore>> = OnceLock::new();
    POOL.get_or_init(|| Arc::new(Semaphore::new(permits())))
}

/// The size a JSON-RPC body counts as: a batch (an array) as large whatever its bytes, since
/// its checks cost per message (a fresh guard each: ~100 µs with a realistic pack, so 128 small
/// messages take milliseconds in under 64 KiB).
pub fn jsonrpc_work(body: &[u8]) -> usize {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => body.len().max(THRESHOLD_BYTES),
        _ => body.len(),
    }
}

/// Whether checking `bytes` of input is moved off the async worker.
pub fn is_large(bytes: usize) -> bool {
    bytes >= THRESHOLD_BYTES
}

/// Runs `check` over `bytes` of input: in place when small, else on the blocking pool once a
/// permit is free. `None`: it panicked there (the caller fails closed).
pub async fn check<T: Send + 'static>(
    bytes: usize,
    check: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if !is_large(bytes) {
        return Some(check());
    }
    // The semaphore is never closed.
    let permit = Arc::clone(pool()).acquire_owned().await.ok()?;
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

    #[tokio::test(flavor = "current_thread")]
    async fn large_work_leaves_the_worker_free() {
        // A single-thread runtime: while the large check runs, the runtime's one worker still
        // answers (here, a timer), which it could not if the check ran on it.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let work = tokio::spawn(check(THRESHOLD_BYTES, move || {
            rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok()
        }));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tx.send(()).ok();
        assert_eq!(work.await.ok(), Some(Some(true)));
        // Small work runs in place.
        let here = std::thread::current().id();
        assert_eq!(
            check(10, move || std::thread::current().id() == here).await,
            Some(true)
        );
        assert_eq!(
            check(THRESHOLD_BYTES, move || std::thread::current().id() == here).await,
            Some(false)
        );
    }
}
