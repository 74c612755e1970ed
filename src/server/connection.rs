//! One client connection's lifetime, over whichever HTTP version it speaks:
//! - its first request must arrive within `timeouts.client_header_ms` of the accept (TLS
//!   handshake included): a peer that sends nothing, or stops inside the HTTP/2 preface or the
//!   first head, is dropped. (Later HTTP/1 heads are timed by hyper's own header timeout.)
//! - with no request in flight for `timeouts.client_idle_ms` it is closed: gracefully, so an
//!   HTTP/2 peer gets a GOAWAY; still open `timeouts.client_send_ms` later (the last answer's
//!   bytes wait for a client that does not read them), it is dropped.
//!   Requests that begin after the close began (HTTP/2 takes new streams until its client
//!   acknowledges the GOAWAY) are served: `client_send_ms` counts from when none is in flight.
//! - on shutdown it is asked to finish gracefully (requests in flight complete); still open
//!   [`DRAIN_FLUSH`] after the drain deadline, it is dropped.
//! - a response its client stopped reading ends through the connection's `send_watch` (HTTP/1;
//!   each HTTP/2 stream has its own): dropping the connection drops the response.
//!
//! A connection dropped for a client that does not read (its last answer unread, a blocked
//! HTTP/1 write, or one still blocked through the whole [`DRAIN_FLUSH`]) is reset, not closed
//! with a FIN: the kernel would keep an orphaned socket and the bytes the client refuses for
//! minutes (see [`super::client_socket`]). Any other is closed plainly: one that never had a
//! request, and one open at the drain whose client still reads (a long relayed answer; an
//! HTTP/2 connection, whose streams' writes are watched by the streams) — a reset would throw
//! away the bytes the FIN lets it take.
//!
//! Requests are tracked by a guard taken when the service is called and dropped with the
//! response body (for a stream: when the stream ends), so a long, quiet stream is not idle.
//! The timers run in a small watch task of their own; the connection's task only reads the
//! flag the watch sets, so relaying a stream's chunks does not poll them.

use super::send_watch::{SendSlot, SendWatch};
use crate::metrics::{DropReason, Metrics};
use crate::proxy::body::ProxyBody;
use crate::proxy::report::count_client_timeout;
use atomic_waker::AtomicWaker;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The requests of one connection: how many are in flight, and when one last ended; and how
/// its socket is to be closed.
pub struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// 1 + the milliseconds after `opened` at which the last request ended; 0 while none has.
    /// (With nothing in flight, 0 also means no request ever began.)
    last_end: AtomicU64,
    /// Set by [`drive`] as it drops the connection for a client that does not read: the
    /// socket is closed with a reset ([`super::client_socket`]). Here rather than in an
    /// allocation of its own: the socket and `drive` share this one already.
    reset: AtomicBool,
}

impl Activity {
    pub fn new(opened: Instant) -> Arc<Activity> {
        Arc::new(Activity {
            opened,
            in_flight: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
            reset: AtomicBool::new(false),
        })
    }

    /// The connection is dropped for a client that does not read: its socket is to be reset.
    fn reset_on_close(&self) {
        self.reset.store(true, Ordering::Relaxed);
    }

    /// Whether the connection's socket is to be closed with a reset. (Set and read on the
    /// connection's own task: `drive` returns, and the connection with its socket is dropped.)
    pub fn resets_on_close(&self) -> bool {
        self.reset.load(Ordering::Relaxed)
    }

    /// A request began; it lasts until the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        RequestGuard(Arc::clone(self))
    }

    /// When the last request ended, if one has.
    fn last_end(&self) -> Option<Instant> {
        match self.last_end.load(Ordering::Acquire) {
            0 => None,
            ms => Some(self.opened + Duration::from_millis(ms - 1)),
        }
    }

    /// Resolves when the connection has had no request in flight for `idle` — or, before its
    /// first request, when `first` has passed since it was opened without one beginning.
    /// Returns whether any request began.
    pub async fn expired(&self, first: Duration, idle: Duration) -> bool {
        let first_due = self.opened + first;
        self.quiet(self.opened + first.min(idle), idle, Some(first_due))
            .await
    }

    /// Resolves once no request has been in flight for `quiet`, and not before `not_before`.
    async fn quiet_for(&self, not_before: Instant, quiet: Duration) {
        self.quiet(not_before, quiet, None).await;
    }

    /// The wait of [`Self::expired`] and [`Self::quiet_for`]: true once no request has been in
    /// flight for `quiet` (and `not_before` passed); false when none began by `first_due`.
    ///
    /// Requests do not wake it: it sleeps to its deadline and then reads the counters (still
    /// busy: it looks again `quiet` later; idle: it is due `quiet` after the last request
    /// ended). A request costs three atomic updates (one as it begins, two as it ends), never
    /// a task wake or a timer change.
    async fn quiet(
        &self,
        not_before: Instant,
        quiet: Duration,
        first_due: Option<Instant>,
    ) -> bool {
        let mut deadline = not_before;
        loop {
            tokio::time::sleep_until(deadline).await;
            if self.in_flight.load(Ordering::Acquire) > 0 {
                deadline = Instant::now() + quiet;
                continue;
            }
            let due = match (self.last_end(), first_due) {
                (Some(last_end), _) => (last_end + quiet).max(not_before),
                (None, None) => not_before,
                (None, Some(first_due)) if Instant::now() < first_due => {
                    deadline = first_due;
                    continue;
                }
                (None, Some(_)) => return false,
            };
            if Instant::now() >= due {
                return true;
            }
            deadline = due;
        }
    }
}

/// One request in flight on a connection.
pub struct RequestGuard(Arc<Activity>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let a = &self.0;
        let ms = u64::try_from(a.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        a.last_end.fetch_max(ms + 1, Ordering::AcqRel);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until it is dropped, and tells
/// its writer's [`SendWatch`] when a write may be waiting on the client.
pub struct TrackedBody {
    body: ProxyBody,
    /// A relayed upstream body (passthrough paths, upstream error answers) ends at the
    /// exchange's total deadline as a guarded stream does (which keeps its own): an upstream
    /// that trickles, or never ends, does not hold the request for ever.
    relay_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    slot: Arc<SendSlot>,
    /// For counting a response that is not a guarded stream (which counts its own).
    route: &'static str,
    metrics: Arc<Metrics>,
    _request: RequestGuard,
}

impl TrackedBody {
    /// `slot` is the writer's ([`super::send_watch::current`]); a write of this body may stay blocked
    /// for `send`, and a streamed body must end by its total deadline (a guarded stream's own,
    /// `total_at` for a relayed one).
    pub fn new(
        body: ProxyBody,
        request: RequestGuard,
        slot: Arc<SendSlot>,
        send: Duration,
        total_at: tokio::time::Instant,
        route: &'static str,
        metrics: Arc<Metrics>,
    ) -> TrackedBody {
        let total = match &body {
            ProxyBody::Guarded(g) => Some(g.total_deadline()),
            ProxyBody::Upstream(_) | ProxyBody::Mcp(_) => Some(total_at),
            ProxyBody::Full(_) => None,
        };
        slot.arm(send, total);
        let relay_deadline = matches!(body, ProxyBody::Upstream(_) | ProxyBody::Mcp(_))
            .then(|| Box::pin(tokio::time::sleep_until(total_at)));
        TrackedBody {
            body,
            relay_deadline,
            slot,
            route,
            metrics,
            _request: request,
        }
    }
}

/// A relayed body reached the exchange's total deadline: the response is cut (an error to
/// hyper, so the client sees an incomplete answer, never a short one that looks whole).
#[derive(Debug)]
pub struct RelayDeadline;

impl std::fmt::Display for RelayDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer took longer than the total time allowed (timeouts.total_ms)")
    }
}

impl std::error::Error for RelayDeadline {}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        this.slot.polled();
        if let Some(deadline) = &mut this.relay_deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                this.relay_deadline = None;
                // Dropping the body cancels the upstream request.
                this.body = ProxyBody::Full(None);
                crate::proxy::report::count_upstream_error(
                    &this.metrics,
                    this.route,
                    crate::metrics::UpstreamErrorKind::Total,
                );
                tracing::warn!(
                    route = this.route,
                    "a relayed answer took longer than timeouts.total_ms: cut, upstream request cancelled"
                );
                return Poll::Ready(Some(Err(Box::new(RelayDeadline))));
            }
        }
        let frame = Pin::new(&mut this.body)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as Self::Error);
        if let Poll::Ready(Some(Ok(_))) = &frame {
            this.slot.handed_over();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        let Some(deadline) = self.slot.finish() else {
            return;
        };
        match &mut self.body {
            ProxyBody::Guarded(stream) => stream.client_timed_out(deadline),
            _ => count_client_timeout(&self.metrics, self.route, deadline, None),
        }
    }
}

/// What the watch asks of the connection, read by the connection's task on each of its wakes:
/// one atomic load (and a waker registration while nothing new is asked), so a stream's chunk
/// wakes cost next to nothing. Each value asks more than the one before.
#[derive(Default)]
struct Ask {
    what: AtomicU8,
    waker: AtomicWaker,
}

const SERVE: u8 = 0;
/// Finish what is in flight, then close (idle, or shutting down).
const FINISH: u8 = 1;
/// Close now; the reasons, for the log:
/// no request ever began;
const DROP_UNUSED: u8 = 2;
/// asked to finish when idle, still open `timeouts.client_send_ms` later: the last answer's
/// bytes wait for a client that does not read them;
const DROP_UNREAD: u8 = 3;
/// the drain deadline passed, and the streams' error frames had [`DRAIN_FLUSH`] to go out;
const DROP_DRAINED: u8 = 4;
/// the same, and the connection's write was blocked all through [`DRAIN_FLUSH`]: a client
/// that does not read.
const DROP_DRAINED_UNREAD: u8 = 5;

/// After the drain deadline, how long the streams' error frames have to reach their clients
/// before the connections still open are dropped (the shutdown waits 2 s for them).
const DRAIN_FLUSH: Duration = Duration::from_secs(1);

impl Ask {
    fn set(&self, what: u8) {
        self.what.fetch_max(what, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Ready with what is asked once it is more than `seen`. The waker is registered only
    /// when Pending: a caller that got Ready polls again to wait for the next ask.
    fn poll(&self, cx: &mut Context<'_>, seen: u8) -> Poll<u8> {
        match self.what.load(Ordering::Acquire) {
            what if what > seen => return Poll::Ready(what),
            _ => {}
        }
        self.waker.register(cx.waker());
        match self.what.load(Ordering::Acquire) {
            what if what > seen => Poll::Ready(what),
            _ => Poll::Pending,
        }
    }
}

/// Aborts the watch task when the connection is done.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The limits a connection is held to (`timeouts.*`).
#[derive(Clone, Copy)]
pub struct Limits {
    /// For the first request, from the accept (`client_header_ms`).
    pub first: Duration,
    /// With no request in flight (`client_idle_ms`).
    pub idle: Duration,
    /// For a blocked write (`client_send_ms`).
    pub send: Duration,
}

/// The server's shutdown as a connection sees it: `stop` turns true when the server shuts down
/// (the server's drain waits until every connection has dropped its copy); `streams_stopped`
/// turns true at the drain deadline.
pub struct Shutdown {
    pub stop: watch::Receiver<bool>,
    pub streams_stopped: watch::Receiver<bool>,
}

/// Drives `conn` to its end under the rules in the module docs. `graceful` is hyper's graceful
/// shutdown of the connection. `slot` is the connection's own [`SendSlot`], for the responses
/// it writes itself (HTTP/1). Connections it drops are counted in
/// `guardwire_connections_dropped_total`, and those of clients that do not read are marked
/// in `activity` to be reset.
pub async fn drive<C>(
    conn: C,
    graceful: impl Fn(Pin<&mut C>),
    activity: Arc<Activity>,
    limits: Limits,
    slot: Arc<SendSlot>,
    shutdown: Shutdown,
    metrics: Arc<Metrics>,
) where
    C: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
{
    let Shutdown {
        stop,
        streams_stopped,
    } = shutdown;
    let ask = Arc::new(Ask::default());
    let _watch = AbortOnDrop(tokio::spawn(watch_connection(
        Arc::clone(&activity),
        Arc::clone(&ask),
        limits,
        Arc::clone(&slot),
        stop.clone(),
        streams_stopped,
    )));
    // Held (never polled) until the connection ends, for the server's drain.
    let _alive = stop;
    let mut send_watch = SendWatch::new(slot);
    tokio::pin!(conn);
    let mut asked = SERVE;
    // Why the connection is dropped, and whether its client does not read (then it is reset).
    let dropped = std::future::poll_fn(|cx| {
        // Until `ask` is Pending: only then is this task's waker registered for the next ask
        // (after `FINISH`, a connection whose write is blocked has nothing else to wake it).
        while asked < DROP_UNUSED {
            let Poll::Ready(what) = ask.poll(cx, asked) else {
                break;
            };
            asked = what;
            match what {
                FINISH => graceful(conn.as_mut()),
                DROP_UNUSED => {
                    tracing::debug!("client sent no request in time: connection dropped");
                    return Poll::Ready(Some((DropReason::Header, false)));
                }
                DROP_UNREAD => {
                    tracing::debug!("client does not read its last answer: connection reset");
                    return Poll::Ready(Some((DropReason::Unread, true)));
                }
                DROP_DRAINED => {
                    tracing::debug!("drain deadline: connection closed");
                    return Poll::Ready(Some((DropReason::Drain, false)));
                }
                _ => {
                    tracing::debug!("drain deadline, its write blocked: connection reset");
                    return Poll::Ready(Some((DropReason::Drain, true)));
                }
            }
        }
        match conn.as_mut().poll(cx) {
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "client connection ended with an error");
                // hyper's own HTTP/1 head timeout (`client_header_ms` too): the same drop.
                // Not a reset: nothing of guardwire's waits for the client but, at most, a
                // TLS handshake's or an HTTP/2 SETTINGS frame's few bytes; and it may be a
                // pool's idle connection, which an orderly close lets the client retire
                // without an error. (HTTP/1: hyper does not time the next head while an
                // answer waits to be flushed.)
                let timeout = e
                    .downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout);
                Poll::Ready(timeout.then_some((DropReason::Header, false)))
            }
            Poll::Ready(Ok(())) => Poll::Ready(None),
            // Dropping the connection drops the response it writes (see `send_watch`).
            Poll::Pending => send_watch.poll_expired(cx).map(|_| {
                tracing::debug!("client does not take its answer: connection reset");
                Some((DropReason::Blocked, true))
            }),
        }
    })
    .await;
    if let Some((reason, unread)) = dropped {
        metrics.dropped(reason);
        if unread {
            activity.reset_on_close();
        }
    }
}

/// The connection's watch: asks it to close when it has been idle too long (or never sent a
/// request), to finish when the server stops, and to close at the latest [`DRAIN_FLUSH`] after
/// the drain deadline. `slot` is the connection's own (HTTP/1's writes).
async fn watch_connection(
    activity: Arc<Activity>,
    ask: Arc<Ask>,
    limits: Limits,
    slot: Arc<SendSlot>,
    mut stop: watch::Receiver<bool>,
    mut streams_stopped: watch::Receiver<bool>,
) {
    tokio::select! {
        any_request = activity.expired(limits.first, limits.idle) => {
            if !any_request {
                return ask.set(DROP_UNUSED);
            }
            // With nothing in flight a graceful close is immediate, unless the last answer's
            // bytes still wait for the client to read them. A request that begins meanwhile
            // (an HTTP/2 stream opened before its client saw the GOAWAY) is served: its own
            // send watch ends it if its client stops reading.
            ask.set(FINISH);
            activity.quiet_for(Instant::now() + limits.send, limits.send).await;
            ask.set(DROP_UNREAD);
        }
        // Also when the server is gone (sender dropped).
        _ = wait_true(&mut stop) => {
            ask.set(FINISH);
            wait_true(&mut streams_stopped).await;
            // A write blocked all through the flush, the same one, is a client that does not
            // read; one that moved on is being read, and gets the FIN after what it reads.
            let blocked = slot.blocked_write();
            tokio::time::sleep(DRAIN_FLUSH).await;
            if blocked.is_some() && slot.blocked_write() == blocked {
                ask.set(DROP_DRAINED_UNREAD);
            } else {
                ask.set(DROP_DRAINED);
            }
        }
    }
}

/// Resolves when `rx` turns true, or its sender is gone.
async fn wait_true(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}
