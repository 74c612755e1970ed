//! Response bodies, above all the guarded stream: the OnChunk phase and the zero-leak hold-back.
//!
//! [`GuardedStream`] is a `poll_frame` state machine, polled by hyper on the client connection's
//! task (no extra task, no channel, no lock). Each upstream read goes through
//! SSE framing → protocol decoding → [`ExchangeGuard::on_chunk`] per delta; each frame is then held
//! until every channel it carries text for is *safe* past that text (no match in progress can
//! still include it), and frames are released in order, byte for byte as the upstream sent them.
//! On a violation the held frames are dropped, the protocol's native error frame is sent, the
//! body ends, and the upstream response is dropped, which cancels the upstream request.
//!
//! Here: the bodies, and the polling side of the stream (upstream reads, its life, timers,
//! output batches); `pipeline`: one frame's step, with no I/O (frame → deltas → checks →
//! hold-back → released bytes or a verdict); `frames`: the stream around it (frames in, what
//! was released out, AfterCall at the end);
//! `ending`: how a stream ends early (a block, an upstream failure, a cut answer).
//!
//! Checks that wait on someone else (a judge, an HTTP endpoint, a subprocess) fit this shape
//! without a second hold-back: a window under judgment caps its channel's
//! [`ExchangeGuard::safe_pos`] at the window's start until the verdict arrives, so `frames`
//! holds exactly what it must; the verdict is a future polled here beside the upstream read and
//! the timers (a `Pending` verdict is one more reason to return `Pending`, with the upstream still
//! read meanwhile), and a failed one ends the stream like any other violation.

mod ending;
mod frames;
mod judging;
mod pipeline;
mod proxy_body;
mod windows;

pub use proxy_body::ProxyBody;

use super::check;
use crate::delta::Delta;
use crate::error::GatewayError;
use crate::metrics::{ClientDeadline, LatencyLabels, Metrics, TrafficLabels, UpstreamErrorKind};
use crate::policy::ExchangeGuard;
use crate::protocol::Protocol;
use crate::sse::{SseFrame, SseFramer};
use crate::upstream::UpstreamBody;
use bytes::{Bytes, BytesMut};
use http_body::Body;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::time::Sleep;

/// Where a stream reports what happened: metrics and the request's identity for logs.
pub struct StreamContext {
    pub metrics: Arc<Metrics>,
    pub audit: Arc<crate::audit::Audit>,
    /// The client key's id, when keys are configured.
    pub key_id: Option<&'static str>,
    pub route: &'static str,
    pub protocol: &'static dyn Protocol,
    /// Time spent before the stream started (request handling, response head).
    pub overhead_so_far: Duration,
    pub idle_timeout: Duration,
    /// When the request arrived (`latency_budget` counts from here).
    pub started: tokio::time::Instant,
    /// When the whole exchange must be over (`timeouts.total_ms` after the request arrived).
    pub total_deadline: tokio::time::Instant,
    pub max_frame_bytes: usize,
    pub max_holdback_bytes: usize,
    /// Turns true when the drain deadline passes.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// Keeps this stream counted as in flight until it ends.
    pub permit: super::InFlight,
    /// How strings the decoder does not model are checked.
    pub fallback: check::Fallback,
    /// The labels the exchange's tokens and spend are counted under.
    pub traffic: TrafficLabels,
    /// When the request was sent upstream (time to first token counts from here).
    pub sent: std::time::Instant,
    /// The request's span and access-log facts; finished when the stream ends.
    pub trace: crate::telemetry::RequestTrace,
    /// With judged output checks: what they call with, and the request's conversation.
    pub judge: Option<(crate::judge::JudgeEnv, Arc<crate::delta::Conversation>)>,
    /// Judges' reasons go into findings (`audit.include_match`).
    pub keep_reasons: bool,
    /// The exchange's seed for the packs' evals, submitted when the stream ends.
    pub evals: Option<crate::evals::EvalSeed>,
    /// guardwire asked for usage, not the client: usage-only chunks are read, never relayed,
    /// and the `"usage":null` members the upstream adds to other chunks are removed.
    pub hide_usage: bool,
    /// The request, for an estimate of its input tokens when the provider reports none.
    pub request: super::estimate::RequestCopy,
    /// What the error frame that ends the stream repeats of the request (its JSON-RPC id).
    pub reply_to: crate::protocol::ReplyTo,
    /// The key's reservation against its limits over time and the session's spend: the
    /// stream's usage is recorded on them when the stream ends (however it ends), and they
    /// settle as they are dropped.
    pub spending: super::spending::Spending,
}

/// The answer's judged checks under way, once the rest of the stream passed.
type Judging = Pin<Box<dyn Future<Output = super::judged::Judgement> + Send>>;

/// Empties a delta list and turns it back to `'static` for keeping: collecting a Vec into one
/// of the same layout reuses its allocation (`filter` could not change the lifetime).
#[allow(clippy::unnecessary_filter_map)]
fn recycle(deltas: Vec<Delta<'_>>) -> Vec<Delta<'static>> {
    deltas.into_iter().filter_map(|_| None).collect()
}

/// Output gathered from ready upstream chunks is handed to hyper at the latest at this size.
const GATHER_MAX_BYTES: usize = 64 * 1024;

/// Where a guarded stream is in its life.
enum Lifecycle {
    /// Reading the upstream: frames are decoded, checked, held and released.
    Relaying(UpstreamBody),
    /// Nothing more is read or checked (the terminal frame came, the upstream ended, or the
    /// stream was stopped): what was released drains to the client. The upstream body is kept
    /// after a terminal frame, to read its end so that its connection can be reused; after a
    /// stop it is dropped, which cancels the upstream request.
    Draining(Option<UpstreamBody>),
    /// The client has had everything.
    Ended,
}

/// How output is batched into client writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Batch {
    /// Output goes out when the upstream has nothing ready.
    Idle,
    /// An upstream chunk was just taken: poll the upstream again before handing output over, so
    /// that chunks already received (an HTTP/2 burst is buffered by h2, an HTTP/1 burst sits in
    /// the connection's read buffer, decoded as the body is polled) leave in one client write.
    /// Never waits for the network.
    MoreReady,
    /// A full batch was handed over while the upstream had more ready: the next poll returns
    /// `Pending` once (waking itself) so that hyper writes the batch out first.
    YieldOnce,
}

pub struct GuardedStream {
    lifecycle: Lifecycle,
    /// The upstream's bytes into the UTF-8 text the frames are read from (as they came, for
    /// UTF-8 without a byte-order mark).
    text: super::charset::Transcoder,
    framer: SseFramer,
    /// The frame step: the decoder and the held frames.
    pipeline: pipeline::FramePipeline,
    guard: ExchangeGuard,
    /// Released bytes not yet handed to hyper, and their total length.
    out: VecDeque<Bytes>,
    out_bytes: usize,
    batch: Batch,
    /// When the upstream last sent something: the idle limit counts from here.
    last_read: tokio::time::Instant,
    frames: Vec<SseFrame>,
    idle: Pin<Box<Sleep>>,
    /// Resolves when the drain deadline passes.
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    ctx: StreamContext,
    overhead: Duration,
    /// The OnChunk span: open while the stream is relayed.
    _relay_span: tracing::Span,
    /// The judged checks of the whole answer, awaited before anything held is released.
    judging: Option<Judging>,
    /// Windowed judged checks: the windows under judgment.
    windows: Option<windows::Windows>,
    /// The answer reached its end and passed AfterCall (judged checks may still be under way).
    answered: bool,
    /// What guardwire estimated (`None`: not looked at yet).
    estimated: Option<super::estimate::Estimated>,
}

impl GuardedStream {
    pub fn new(
        upstream: UpstreamBody,
        text: super::charset::Transcoder,
        guard: ExchangeGuard,
        ctx: StreamContext,
    ) -> Self {
        ctx.metrics.streams_in_flight.inc();
        let decoder = ctx.protocol.stream_decoder();
        let mut guard = guard;
        if decoder.repeats_text() {
            guard.keep_full_text(ctx.max_frame_bytes);
        }
        let now = tokio::time::Instant::now();
        let first_deadline = next_deadline(&ctx, &guard, now);
        let mut ctx = ctx;
        let windows = match guard.policy().judged_window() {
            Some(window) => ctx.judge.take().map(|(env, conversation)| {
                windows::Windows::new(
                    window,
                    env,
                    conversation,
                    Arc::clone(guard.policy()),
                    ctx.keep_reasons,
                )
            }),
            None => None,
        };
        GuardedStream {
            lifecycle: Lifecycle::Relaying(upstream),
            text,
            framer: SseFramer::new(ctx.max_frame_bytes),
            pipeline: pipeline::FramePipeline::new(
                decoder,
                ctx.fallback,
                ctx.hide_usage,
                ctx.max_holdback_bytes,
            ),
            guard,
            out: VecDeque::new(),
            out_bytes: 0,
            batch: Batch::Idle,
            last_read: now,
            frames: Vec::new(),
            idle: Box::pin(tokio::time::sleep_until(first_deadline)),
            stop: {
                let mut rx = ctx.stop.clone();
                Box::pin(async move {
                    let _ = rx.wait_for(|stop| *stop).await;
                })
            },
            overhead: ctx.overhead_so_far,
            _relay_span: ctx.trace.on_chunk_span(),
            judging: None,
            windows,
            answered: false,
            estimated: None,
            ctx,
        }
    }

    /// When the whole exchange must be over (`timeouts.total_ms` after the request arrived).
    pub fn total_deadline(&self) -> tokio::time::Instant {
        self.ctx.total_deadline
    }

    /// Its client stopped reading and `deadline` passed while a write waited (see
    /// `server/send_watch.rs`): the stream is dropped without another byte, which cancels the
    /// upstream request and releases the permit. Counted, logged, and the exchange's outcome.
    pub fn client_timed_out(&mut self, deadline: ClientDeadline) {
        self.ctx.trace.note_failure();
        super::report::count_client_timeout(
            &self.ctx.metrics,
            self.ctx.route,
            deadline,
            Some(self.ctx.trace.request_id()),
        );
    }

    /// True while the upstream is read (frames are still decoded and checked).
    fn reading(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Relaying(_))
    }

    /// Stops reading: after a terminal frame the upstream body is kept to read its end; a stop
    /// that came first (a block while judging the end) stands.
    fn stop_reading(&mut self) {
        self.lifecycle = match std::mem::replace(&mut self.lifecycle, Lifecycle::Ended) {
            Lifecycle::Relaying(up) => Lifecycle::Draining(Some(up)),
            other => other,
        };
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        // The clock is read when this poll first takes something from the upstream and once at
        // its end, not twice per upstream frame: a burst of 40 events is decoded in one poll,
        // and the time between its frames is the proxy's work too (hyper decoding the next
        // chunk), never a wait on the upstream.
        let mut busy_since = None;
        let polled = self.relay(cx, &mut busy_since);
        if let Some(since) = busy_since {
            self.overhead += since.elapsed();
        }
        polled
    }

    /// One poll of the stream; `busy_since` is set when it first reads the upstream.
    fn relay(
        &mut self,
        cx: &mut Context<'_>,
        busy_since: &mut Option<Instant>,
    ) -> Poll<Option<Bytes>> {
        if self.batch == Batch::YieldOnce {
            // hyper keeps polling a body that is ready and writes only when its buffer is full
            // (up to 16 pieces): after a full batch, let it write before decoding more.
            self.batch = Batch::Idle;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // Once per poll, not per upstream frame: polling registers this task's waker, and a
        // burst of frames is decoded in one poll.
        if self.reading() && self.stop.as_mut().poll(cx).is_ready() {
            tracing::info!(
                request_id = self.ctx.trace.request_id(),
                "drain deadline: ending the stream"
            );
            self.terminate(GatewayError::ShuttingDown);
        }
        loop {
            if self.windows.is_some() {
                if self.poll_windows(cx) {
                    continue;
                }
                if !self.reading() && self.out.is_empty() && self.windows.is_some() {
                    if self.verdict_limit_reached(cx) {
                        continue;
                    }
                    return Poll::Pending;
                }
            }
            if self.judging.is_some() && self.out.is_empty() {
                match self.poll_judging(cx) {
                    Poll::Pending if self.verdict_limit_reached(cx) => continue,
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => continue,
                }
            }
            let upstream = match &mut self.lifecycle {
                Lifecycle::Relaying(up) => up,
                Lifecycle::Draining(_) if !self.out.is_empty() => {
                    // hyper may not poll again after the last output (`is_end_stream`).
                    self.batch = Batch::Idle;
                    self.release_upstream(cx);
                    return Poll::Ready(Some(self.take_out()));
                }
                Lifecycle::Draining(_) => {
                    self.release_upstream(cx);
                    self.lifecycle = Lifecycle::Ended;
                    return Poll::Ready(None);
                }
                Lifecycle::Ended => return Poll::Ready(None),
            };
            // Output waits while the upstream has more ready (see `Batch::MoreReady`).
            let more_ready = self.batch == Batch::MoreReady;
            if !self.out.is_empty() && (!more_ready || self.out_bytes >= GATHER_MAX_BYTES) {
                self.batch = if more_ready {
                    Batch::YieldOnce
                } else {
                    Batch::Idle
                };
                return Poll::Ready(Some(self.take_out()));
            }
            match Pin::new(upstream).poll_frame(cx) {
                Poll::Pending => {
                    if self.timer_fired(cx) {
                        continue;
                    }
                    self.batch = Batch::Idle;
                    if !self.out.is_empty() {
                        continue;
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Some(Ok(frame))) => {
                    // The idle limit counts from this poll's first read: earlier by at most
                    // the time the burst takes to decode.
                    let started = *busy_since.get_or_insert_with(Instant::now);
                    self.last_read = tokio::time::Instant::from_std(started);
                    if let Ok(data) = frame.into_data() {
                        let data = self.text.push(data);
                        self.ingest(&data);
                    }
                    self.batch = Batch::MoreReady;
                }
                Poll::Ready(Some(Err(_))) => {
                    self.upstream_failed(
                        UpstreamErrorKind::Reset,
                        GatewayError::Upstream("the upstream connection failed mid-stream".into()),
                    );
                }
                Poll::Ready(None) => {
                    busy_since.get_or_insert_with(Instant::now);
                    // A character the body cut short, or a start too short to read yet.
                    let tail = self.text.finish();
                    if !tail.is_empty() {
                        self.ingest(&tail);
                    }
                    self.upstream_ended();
                    // The body is over: nothing of it is left to read.
                    self.lifecycle = Lifecycle::Draining(None);
                }
            }
        }
    }

    /// Polls the stream's one timer. It is not moved on every read (that would touch the timer
    /// wheel once per event); when it fires early it is set to the limit now due. Returns true
    /// when it fired and the stream must be looked at again.
    fn timer_fired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.idle.as_mut().poll(cx).is_pending() {
            return false;
        }
        let now = tokio::time::Instant::now();
        if let Some((_, ms)) = self.guard.latency_deadline() {
            if now >= self.ctx.started + Duration::from_millis(ms) {
                let elapsed = (now - self.ctx.started).as_millis() as u64;
                if let Err(finding) = self.guard.check_latency(elapsed) {
                    self.block(finding);
                }
                let deadline = next_deadline(&self.ctx, &self.guard, self.last_read);
                self.idle.as_mut().reset(deadline);
                return true;
            }
        }
        let due = next_deadline(&self.ctx, &self.guard, self.last_read);
        if now < due {
            self.idle.as_mut().reset(due);
            return true;
        }
        let (kind, why) = if now >= self.ctx.total_deadline {
            (
                UpstreamErrorKind::Total,
                "the answer took longer than the total time allowed",
            )
        } else {
            (
                UpstreamErrorKind::Idle,
                "the upstream sent nothing for too long",
            )
        };
        self.upstream_failed(kind, GatewayError::UpstreamTimeout(why.into()));
        true
    }

    fn push_out(&mut self, b: Bytes) {
        self.out_bytes += b.len();
        self.out.push_back(b);
    }

    /// Everything released so far, as one piece: one write to the client.
    fn take_out(&mut self) -> Bytes {
        self.out_bytes = 0;
        if self.out.len() == 1 {
            return self.out.pop_front().unwrap_or_default();
        }
        let mut joined = BytesMut::with_capacity(self.out.iter().map(Bytes::len).sum());
        for b in self.out.drain(..) {
            joined.extend_from_slice(&b);
        }
        joined.freeze()
    }

    /// After the terminal frame the upstream body normally ends at once or soon after; reading
    /// that end lets its connection be reused. What is not there yet is read in the background;
    /// the client's stream does not wait for it.
    fn release_upstream(&mut self, cx: &mut Context<'_>) {
        if let Lifecycle::Draining(Some(mut up)) =
            std::mem::replace(&mut self.lifecycle, Lifecycle::Draining(None))
        {
            loop {
                match Pin::new(&mut up).poll_frame(cx) {
                    Poll::Ready(Some(Ok(_))) => {}
                    Poll::Pending => return up.finish_in_background(),
                    Poll::Ready(_) => return,
                }
            }
        }
    }

    fn reporter(&self) -> super::Reporter<'_> {
        super::Reporter {
            metrics: &self.ctx.metrics,
            audit: &self.ctx.audit,
            policy: self.guard.policy(),
            route: self.ctx.route,
            key_id: self.ctx.key_id,
            request_id: self.ctx.trace.request_id(),
            trace: &self.ctx.trace,
        }
    }

    /// Estimates, once, the token counts the provider did not report (at the answer's end, so
    /// that `cost_budget` reads them, or when the stream is dropped without one).
    fn estimate_usage(&mut self) -> super::estimate::Estimated {
        if let Some(done) = self.estimated {
            return done;
        }
        let (text, total) = self.pipeline.answer();
        let request = &self.ctx.request;
        let done = super::estimate::fill(
            &mut self.guard,
            || request.tokens(),
            || super::estimate::count(std::iter::once(text), total),
        );
        self.estimated = Some(done);
        done
    }

    fn report_findings(&mut self) {
        if !self.guard.has_findings() {
            return; // the common case: no reporter, no policy reference taken
        }
        let policy = Arc::clone(self.guard.policy());
        let reporter = super::Reporter {
            metrics: &self.ctx.metrics,
            audit: &self.ctx.audit,
            policy: &policy,
            route: self.ctx.route,
            key_id: self.ctx.key_id,
            request_id: self.ctx.trace.request_id(),
            trace: &self.ctx.trace,
        };
        self.guard.take_findings(|monitored, redacted| {
            reporter.redactions(redacted);
            reporter.monitor(monitored);
        });
    }
}

/// The stream's one timer: the idle limit from the last upstream read, the total limit, or the next enforced
/// `latency_budget`, whichever comes first.
fn next_deadline(
    ctx: &StreamContext,
    guard: &ExchangeGuard,
    last_read: tokio::time::Instant,
) -> tokio::time::Instant {
    let mut at = (last_read + ctx.idle_timeout).min(ctx.total_deadline);
    if let Some((_, ms)) = guard.latency_deadline() {
        at = at.min(ctx.started + Duration::from_millis(ms));
    }
    at
}

impl Drop for GuardedStream {
    fn drop(&mut self) {
        let (metrics, route) = (&self.ctx.metrics, self.ctx.route);
        let model = self.ctx.traffic.model;
        metrics.streams_in_flight.dec();
        metrics
            .overhead
            .get_or_create(&LatencyLabels { route, model })
            .observe(self.overhead.as_secs_f64());
        metrics
            .request_duration
            .get_or_create(&LatencyLabels { route, model })
            .observe(self.ctx.started.elapsed().as_secs_f64());
        let estimated = self.estimate_usage();
        let metrics = &self.ctx.metrics;
        super::report::count_usage(
            metrics,
            &self.ctx.traffic,
            &self.guard,
            &self.ctx.trace,
            estimated,
        );
        // Cut short (client gone, blocked, upstream failure) with the output estimated from
        // what was relayed: the provider bills what it generated, reasoning the stream never
        // showed included — the key's reservation settles at no less than it reserved.
        let cut_short = estimated.output && !self.answered;
        self.ctx.spending.record(&self.guard, cut_short);
        // A turn for the evals when it was blocked or answered in full; not a stream cut off
        // (client gone, upstream failure, drain stop) or left awaiting verdicts.
        let trace = &self.ctx.trace;
        let complete = self.answered
            && !trace.has_failed()
            && self.judging.is_none()
            && self.windows.is_none();
        if trace.was_blocked() || complete {
            if let Some(seed) = self.ctx.evals.take() {
                let ctx = &self.ctx;
                ctx.spending.submit_evals(seed, &self.guard, &ctx.trace);
            }
        }
        // The head went out as 200; a block or failure since is the trace's outcome.
        self.ctx.trace.finish(200);
    }
}

#[cfg(test)]
mod tests;
