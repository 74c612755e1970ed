//! Responses whose client stopped reading, ended from outside their body.
//!
//! A response body is polled only when its writer has room for more (hyper's HTTP/1
//! dispatcher on the connection's task; the task hyper spawns for each HTTP/2 stream): a client
//! that stops reading stops the polls, and with them every timer the body keeps (idle, total,
//! drain). Those timers stay right whenever the body is polled or waits on the upstream; the
//! watch here covers the one gap: the body handed data over and has not been polled since (a
//! write to the client is blocked). Such a response ends once the block has lasted
//! `timeouts.client_send_ms`, or at its stream's total deadline, whichever comes first: the
//! writer is dropped (HTTP/1: the connection closes; HTTP/2: the stream is reset with CANCEL),
//! which drops the body, and with it the upstream request and the in-flight permit.
//!
//! While a write is blocked nothing more is read from the upstream (backpressure), so what a
//! silent client holds stays what it held when it stopped: the body's hold-back and one
//! output batch, the writer's buffer (HTTP/1: `limits.max_header_bytes` and a batch; HTTP/2:
//! a batch beyond the flow-control window), the upstream connection's read buffer (HTTP/1: at
//! most `limits.upstream_read_buffer_bytes`, 64 KiB, where hyper's default grows to ~408 KiB
//! under a fast upstream; relayed frames are slices of it and keep earlier buffers alive
//! while they wait) and the sockets' kernel buffers: the client's bounded by
//! `limits.client_notsent_lowat_bytes`, the upstream's receive buffer by what autotuning grew
//! it to while guardwire read fast (up to `net.ipv4.tcp_rmem`'s maximum), or by
//! `limits.upstream_receive_buffer_bytes` when set.
//!
//! Cost: the body and its watch run on one task, so the body marks a hand-over and the poll
//! after it with relaxed atomic increments, and the writer's task reads one atomic after each
//! of its polls. The clock is read and the watch's one timer (per HTTP/1 connection, per
//! HTTP/2 stream, made the first time a write blocks) moved only when a new block begins.
//! No task and no channel per stream.

use crate::metrics::ClientDeadline;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// What a response's body tells the watch of its writer, and what the watch decided.
pub struct SendSlot {
    base: Instant,
    /// Odd from the body's hand-over of data until its next poll (a write waits on the client);
    /// every hand-over and every poll after one moves it on, so each block has its own value.
    state: AtomicU64,
    /// The response being written: the longest a block may last, in ms.
    send_ms: AtomicU64,
    /// Its total deadline, ms after `base` (`u64::MAX`: none).
    total_at: AtomicU64,
    /// Why the watch ended the response (`NOT_ENDED`, or a [`ClientDeadline`] + 1).
    ended: AtomicU8,
}

const NO_DEADLINE: u64 = u64::MAX;

/// A [`SendSlot`]'s state while a write waits on the client: odd.
#[inline]
fn blocked(state: u64) -> bool {
    state & 1 == 1
}
const NOT_ENDED: u8 = 0;

impl SendSlot {
    pub fn new() -> Arc<SendSlot> {
        Arc::new(SendSlot {
            base: Instant::now(),
            state: AtomicU64::new(0),
            send_ms: AtomicU64::new(NO_DEADLINE),
            total_at: AtomicU64::new(NO_DEADLINE),
            ended: AtomicU8::new(NOT_ENDED),
        })
    }

    /// A response begins on this writer: its blocks may last `send`, and it must be over by
    /// `total` (when it has a total deadline).
    pub fn arm(&self, send: Duration, total: Option<Instant>) {
        let send = u64::try_from(send.as_millis()).unwrap_or(NO_DEADLINE);
        let total = total.map_or(NO_DEADLINE, |at| {
            let ms = at.saturating_duration_since(self.base).as_millis();
            u64::try_from(ms).unwrap_or(NO_DEADLINE)
        });
        self.send_ms.store(send, Ordering::Relaxed);
        self.total_at.store(total, Ordering::Relaxed);
        self.ended.store(NOT_ENDED, Ordering::Relaxed);
        self.polled();
    }

    /// The body is polled: whatever it handed over before was taken.
    #[inline]
    pub fn polled(&self) {
        let state = self.state.load(Ordering::Relaxed);
        if blocked(state) {
            self.state.store(state + 1, Ordering::Relaxed);
        }
    }

    /// The body handed data over; until its next poll, a write may be waiting on the client.
    #[inline]
    pub fn handed_over(&self) {
        let state = self.state.load(Ordering::Relaxed);
        if !blocked(state) {
            // The next odd value: a new block.
            self.state.store(state + 1, Ordering::Relaxed);
        }
    }

    /// The response's body is gone: nothing is watched until the next one; returns what
    /// ended it, when the watch did.
    pub fn finish(&self) -> Option<ClientDeadline> {
        self.polled();
        self.send_ms.store(NO_DEADLINE, Ordering::Relaxed);
        self.total_at.store(NO_DEADLINE, Ordering::Relaxed);
        match self.ended.swap(NOT_ENDED, Ordering::Relaxed) {
            NOT_ENDED => None,
            1 => Some(ClientDeadline::Send),
            _ => Some(ClientDeadline::Total),
        }
    }

    /// The block a write is in now (it waits on the client), if one is: the same value while
    /// that one write stays blocked, another once the client took it.
    pub fn blocked_write(&self) -> Option<u64> {
        let state = self.state.load(Ordering::Relaxed);
        blocked(state).then_some(state)
    }

    fn at(&self, ms: u64) -> Option<Instant> {
        (ms != NO_DEADLINE).then(|| self.base + Duration::from_millis(ms))
    }
}

/// The writer's side: polled after the writer returned `Pending`.
pub struct SendWatch {
    slot: Arc<SendSlot>,
    /// The block the timer is set for.
    watched: u64,
    /// (deadline, which one it is), for the block being watched.
    due: Option<(Instant, ClientDeadline)>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl SendWatch {
    pub fn new(slot: Arc<SendSlot>) -> SendWatch {
        SendWatch {
            slot,
            watched: 0,
            due: None,
            timer: None,
        }
    }

    /// Ready when the response being written must end now: a write has been blocked for the
    /// send limit, or past the total deadline. The caller then drops the writer.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<ClientDeadline> {
        let state = self.slot.state.load(Ordering::Relaxed);
        if !blocked(state) {
            // Not waiting on the client: the body's own timers rule (a stale timer may still
            // wake the task once).
            return Poll::Pending;
        }
        if state != self.watched {
            self.watched = state;
            let send = self.slot.send_ms.load(Ordering::Relaxed);
            let send = (send != NO_DEADLINE).then(|| Instant::now() + Duration::from_millis(send));
            let total = self.slot.at(self.slot.total_at.load(Ordering::Relaxed));
            self.due = match (send, total) {
                (Some(s), Some(t)) if t <= s => Some((t, ClientDeadline::Total)),
                (Some(s), _) => Some((s, ClientDeadline::Send)),
                (None, Some(t)) => Some((t, ClientDeadline::Total)),
                (None, None) => None,
            };
            if let Some((at, _)) = self.due {
                match &mut self.timer {
                    Some(timer) => timer.as_mut().reset(at),
                    None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
                }
            }
        }
        let (Some((_, deadline)), Some(timer)) = (self.due, &mut self.timer) else {
            return Poll::Pending;
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let code = match deadline {
            ClientDeadline::Send => 1,
            ClientDeadline::Total => 2,
        };
        self.slot.ended.store(code, Ordering::Relaxed);
        Poll::Ready(deadline)
    }
}

tokio::task_local! {
    /// The slot of the HTTP/2 stream whose task this is.
    static STREAM_SLOT: Arc<SendSlot>;
}

/// The slot of the writer running this task: the HTTP/2 stream's, else `connection`'s (an
/// HTTP/1 connection writes its responses on its own task).
pub fn current(connection: &Arc<SendSlot>) -> Arc<SendSlot> {
    STREAM_SLOT
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::clone(connection))
}

/// The executor of the client connections: hyper spawns each HTTP/2 stream's task (the
/// service's future, then the response body) through it, and each gets a watch of its own,
/// reachable by the service through [`current`]. An expired watch ends the task, which drops
/// the stream: h2 resets it, the rest of the connection carries on.
#[derive(Clone, Copy, Default)]
pub struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        let slot = SendSlot::new();
        let mut watch = SendWatch::new(Arc::clone(&slot));
        tokio::spawn(STREAM_SLOT.scope(slot, async move {
            tokio::pin!(fut);
            std::future::poll_fn(|cx| {
                if fut.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                watch.poll_expired(cx).map(|deadline| {
                    tracing::debug!(
                        deadline = deadline.as_str(),
                        "HTTP/2 stream reset: its client stopped reading"
                    );
                })
            })
            .await;
        }));
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    /// Polls the watch until it expires (a generous bound, not a timing assertion).
    async fn expiry(watch: &mut SendWatch) -> ClientDeadline {
        let expired = std::future::poll_fn(|cx| watch.poll_expired(cx));
        tokio::time::timeout(Duration::from_secs(30), expired)
            .await
            .expect("the watch never expired")
    }

    #[tokio::test]
    async fn only_a_write_that_is_not_taken_expires() {
        let slot = SendSlot::new();
        let mut watch = SendWatch::new(Arc::clone(&slot));
        // No time at all for a blocked write, and the total deadline already passed.
        slot.arm(Duration::ZERO, Some(Instant::now()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(
            watch.poll_expired(&mut cx).is_pending(),
            "nothing handed over"
        );
        for _ in 0..3 {
            slot.handed_over();
            slot.polled();
            assert!(watch.poll_expired(&mut cx).is_pending(), "taken at once");
        }
        slot.handed_over();
        assert_eq!(expiry(&mut watch).await, ClientDeadline::Total);
        assert_eq!(slot.finish(), Some(ClientDeadline::Total));
        assert_eq!(slot.finish(), None, "reported once");
    }

    #[tokio::test]
    async fn the_send_limit_ends_a_blocked_write_and_a_new_response_starts_clean() {
        let slot = SendSlot::new();
        let mut watch = SendWatch::new(Arc::clone(&slot));
        slot.arm(Duration::ZERO, None);
        slot.handed_over();
        assert_eq!(expiry(&mut watch).await, ClientDeadline::Send);
        assert_eq!(slot.finish(), Some(ClientDeadline::Send));
        // The next response on the writer (HTTP/1 keep-alive): not blocked, not ended.
        slot.arm(Duration::from_secs(3600), None);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(watch.poll_expired(&mut cx).is_pending());
        assert_eq!(slot.finish(), None);
        // A total deadline sooner than the send limit is the one that ends a block.
        slot.arm(Duration::from_secs(3600), Some(Instant::now()));
        slot.handed_over();
        assert_eq!(expiry(&mut watch).await, ClientDeadline::Total);
    }
}
