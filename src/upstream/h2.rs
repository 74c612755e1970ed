//! A shared HTTP/2 upstream connection ([`H2Conn`]): its flow-control windows, and the streams
//! it carries counted against the most it may carry.
//!
//! Isolation between the requests sharing it: DATA a stream has received but nobody has read
//! (its client stopped reading, so guardwire stopped polling its body) keeps that much of both
//! the stream's and the connection's receive window. hyper's defaults (2 MiB a stream, 5 MiB the
//! connection) let three such streams stall every other stream on the connection. Here a
//! stream's window is `limits.upstream_h2_stream_window_bytes` and the connection's is that
//! times `limits.upstream_h2_streams_per_connection`, the most streams guardwire puts on one
//! connection: streams that are never read can never use up the connection's window. (Credit
//! costs nothing until the upstream sends; what one blocked stream holds is its own window.)
//!
//! A request over the upstream's `SETTINGS_MAX_CONCURRENT_STREAMS` would wait in h2's queue until
//! a stream ends, which a never-reading client may hold off for `timeouts.client_send_ms`; so a
//! connection takes a stream only while it carries fewer than that (and the configured cap),
//! and the pool opens another connection instead.

use super::conn::{H2Sender, Io};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The HTTP/2 client settings from config.
#[derive(Debug, Clone, Copy)]
pub struct H2Settings {
    /// Each stream's receive window (`limits.upstream_h2_stream_window_bytes`).
    pub stream_window: u32,
    /// Most streams on one connection (`limits.upstream_h2_streams_per_connection`).
    pub max_streams: u32,
}

impl H2Settings {
    /// The connection's receive window: room for every stream's whole window at once. Config
    /// bounds both factors so that it stays under HTTP/2's 2^31 - 1.
    fn connection_window(&self) -> u32 {
        self.stream_window.saturating_mul(self.max_streams)
    }
}

/// A shared HTTP/2 connection: the handle that sends requests on it, and its stream count.
pub struct H2Conn {
    sender: H2Sender,
    streams: Arc<Streams>,
}

struct Streams {
    /// Streams taken and not yet given back ([`StreamSlot`]s alive).
    open: AtomicUsize,
    /// The most this connection may carry: the upstream's current
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, within [`H2Settings::max_streams`].
    limit: AtomicUsize,
    /// When `open` last fell to 0 (or the connection was opened): how long it has been idle.
    idle_since: Mutex<Instant>,
}

/// One stream's place on an [`H2Conn`], from taking it until the response body ends.
pub struct StreamSlot(Arc<Streams>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
    }
}

impl H2Conn {
    /// A stream on this connection, unless it carries as many as it may.
    pub fn try_stream(&self) -> Option<(H2Sender, StreamSlot)> {
        let limit = self.streams.limit.load(Ordering::Relaxed);
        self.streams
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < limit).then_some(open + 1)
            })
            .ok()?;
        Some(self.slot())
    }

    /// A stream on this connection, whatever it carries: for the request a fresh connection was
    /// opened for (it may carry at least one).
    pub fn stream(&self) -> (H2Sender, StreamSlot) {
        self.streams.open.fetch_add(1, Ordering::Relaxed);
        self.slot()
    }

    fn slot(&self) -> (H2Sender, StreamSlot) {
        (self.sender.clone(), StreamSlot(Arc::clone(&self.streams)))
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Whether the upstream allows no stream on this connection (`SETTINGS_MAX_CONCURRENT_STREAMS`
    /// of 0): it can never take a request.
    pub fn refuses_streams(&self) -> bool {
        self.streams.limit.load(Ordering::Relaxed) == 0
    }

    /// The most streams this connection carries for now.
    pub fn limit(&self) -> usize {
        self.streams.limit.load(Ordering::Relaxed)
    }

    /// Lowers the limit to `known` (an upstream's limit seen on an older connection to it) until
    /// the upstream's own SETTINGS are seen on this one: they arrive after the handshake.
    pub fn assume_limit(&self, known: usize) {
        self.streams.limit.fetch_min(known, Ordering::Relaxed);
    }

    /// When this connection last carried no stream, if it carries none now.
    pub fn idle_since(&self) -> Option<Instant> {
        let since = *self
            .streams
            .idle_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Read after the instant: a stream taken in between shows here.
        (self.streams.open.load(Ordering::Relaxed) == 0).then_some(since)
    }

    /// Whether `slot` is a stream of this connection.
    pub fn carries(&self, slot: &StreamSlot) -> bool {
        Arc::ptr_eq(&self.streams, &slot.0)
    }
}

/// The HTTP/2 handshake on `io`, with `settings`' windows. The connection runs in a task of its
/// own (it multiplexes the streams of many requests' tasks), which also keeps the upstream's
/// stream limit up to date.
pub async fn handshake(io: Io, settings: H2Settings) -> Result<H2Conn, hyper::Error> {
    // Setting the windows also keeps hyper's adaptive window off: it would grow a stream's
    // window past the bound.
    let (sender, conn) = http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(settings.stream_window)
        .initial_connection_window_size(settings.connection_window())
        .handshake::<_, Full<Bytes>>(TokioIo::new(io))
        .await?;
    let cap = settings.max_streams as usize;
    // What h2 assumes until the upstream's SETTINGS arrive (100).
    let mut reported = conn.current_max_send_streams();
    let streams = Arc::new(Streams {
        open: AtomicUsize::new(0),
        limit: AtomicUsize::new(cap.min(reported)),
        idle_since: Mutex::new(Instant::now()),
    });
    let watched = Arc::clone(&streams);
    tokio::spawn(async move {
        let mut conn = std::pin::pin!(conn);
        let ended = poll_fn(|cx| {
            let polled = conn.as_mut().poll(cx);
            // The upstream's SETTINGS are read by the connection task hyper spawns, not by this
            // one (which hands requests over to it): a new limit shows here when this task
            // next runs, at the next request it dispatches, so it may lag by one request.
            // Only a change is taken: until then the pool's assumption (`assume_limit`) holds.
            let now = conn.current_max_send_streams();
            if now != reported {
                reported = now;
                watched.limit.store(now.min(cap), Ordering::Relaxed);
            }
            polled
        })
        .await;
        if let Err(e) = ended {
            tracing::debug!(error = %e, "upstream HTTP/2 connection ended with an error");
        }
    });
    Ok(H2Conn { sender, streams })
}
