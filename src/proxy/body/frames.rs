//! The checking side of a [`GuardedStream`], around its frame step ([`super::pipeline`]):
//! upstream bytes → SSE frames → one step each → what the step released written to the
//! client, or the stream ended for what it stopped at; at the answer's end, AfterCall and the
//! judged checks decide whether what is held goes out. The polling side (upstream reads,
//! timers, output batches) is in the parent module.

use super::pipeline::{FramePipeline, Sink, Step, Stop};
use super::windows::Windows;
use super::{GuardedStream, StreamContext};
use crate::delta::Delta;
use crate::error::GatewayError;
use crate::metrics::{LatencyLabels, RouteLabels, UpstreamErrorKind};
use crate::policy::{ChannelId, ExchangeGuard};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;

/// Where the step's output goes: the client's output queue, the windows under judgment and
/// the time-to-first-token metric. Borrowed apart from the pipeline and the guard, per frame.
pub(super) struct Writer<'a> {
    out: &'a mut VecDeque<Bytes>,
    out_bytes: &'a mut usize,
    windows: Option<&'a mut Windows>,
    ctx: &'a StreamContext,
}

impl Sink for Writer<'_> {
    fn release(&mut self, bytes: Bytes) {
        *self.out_bytes += bytes.len();
        self.out.push_back(bytes);
    }

    fn first_text(&mut self) {
        self.ctx
            .metrics
            .upstream_first_token
            .get_or_create(&LatencyLabels {
                route: self.ctx.route,
                model: self.ctx.traffic.model,
            })
            .observe(self.ctx.sent.elapsed().as_secs_f64());
    }

    fn wants_texts(&self) -> bool {
        self.windows.is_some()
    }

    fn text(&mut self, channel: Option<ChannelId>, delta: &Delta<'_>) {
        if let Some(windows) = &mut self.windows {
            windows.feed(channel, delta);
        }
    }
}

impl GuardedStream {
    /// The frame step's state, the guard and the writer, borrowed apart.
    fn parts(&mut self) -> (&mut FramePipeline, &mut ExchangeGuard, Writer<'_>) {
        let writer = Writer {
            out: &mut self.out,
            out_bytes: &mut self.out_bytes,
            windows: self.windows.as_mut(),
            ctx: &self.ctx,
        };
        (&mut self.pipeline, &mut self.guard, writer)
    }

    pub(super) fn ingest(&mut self, data: &Bytes) {
        if !self.reading() {
            return; // after the terminal frame: nothing more is relayed
        }
        if let Err(e) = self.framer.push(data, &mut self.frames) {
            self.upstream_failed(
                UpstreamErrorKind::Malformed,
                GatewayError::Upstream(e.to_string()),
            );
            return;
        }
        self.process_frames();
    }

    fn process_frames(&mut self) {
        let mut frames = std::mem::take(&mut self.frames);
        for frame in frames.drain(..) {
            if !self.reading() {
                break;
            }
            let (pipeline, guard, mut writer) = self.parts();
            match pipeline.step(frame, guard, &mut writer) {
                Step::Passed => {}
                Step::Terminal => {
                    self.end_of_stream();
                    self.stop_reading();
                }
                Step::Stop(stop) => self.stop(stop),
            }
        }
        self.frames = frames;
        self.report_findings();
    }

    /// Ends the stream for what the frame step stopped at.
    fn stop(&mut self, stop: Stop) {
        match stop {
            Stop::Violation(finding) => self.block(finding),
            Stop::Malformed(why) => self.upstream_failed(
                UpstreamErrorKind::Malformed,
                GatewayError::Upstream(why.into()),
            ),
            Stop::Undecodable(e) => {
                tracing::warn!(request_id = self.ctx.trace.request_id(), error = %e, "malformed upstream frame");
                self.upstream_failed(
                    UpstreamErrorKind::Malformed,
                    GatewayError::Upstream("the upstream sent a malformed stream frame".into()),
                );
            }
            Stop::HoldbackExceeded => {
                tracing::warn!(
                    request_id = self.ctx.trace.request_id(),
                    route = self.ctx.route,
                    "hold-back limit exceeded"
                );
                self.ctx
                    .metrics
                    .holdback_exceeded
                    .get_or_create(&RouteLabels {
                        route: self.ctx.route,
                    })
                    .inc();
                self.terminate(GatewayError::HoldbackExceeded {
                    limit: self.ctx.max_holdback_bytes,
                });
            }
            Stop::Unmaskable => self.terminate(GatewayError::Internal(
                "a redaction could not be applied".into(),
            )),
        }
    }

    /// Releases every frame at the front that is now safe.
    pub(super) fn release_ready(&mut self) {
        let (pipeline, guard, mut writer) = self.parts();
        if let Err(stop) = pipeline.release_ready(guard, &mut writer) {
            self.stop(stop);
        }
    }

    /// AfterCall at the end of the upstream stream: decide pending matches, run whole-response
    /// checks, then release everything held (or block).
    pub(super) fn end_of_stream(&mut self) {
        // Monitor-mode latency budgets are judged here (enforced ones end the stream earlier).
        let elapsed = (tokio::time::Instant::now() - self.ctx.started).as_millis() as u64;
        self.estimate_usage();
        let _span = self.ctx.trace.after_call_span().entered();
        let verdict = self
            .guard
            .check_latency(elapsed)
            .and_then(|()| self.guard.after_call());
        if let Err(finding) = verdict {
            self.report_findings();
            return self.block(finding);
        }
        self.report_findings();
        self.answered = true;
        if let Some(windows) = &mut self.windows {
            // The last window, refusals and tool calls; everything held goes out once every
            // window passed (`poll_windows`).
            windows.finish(self.guard.judged_unmodelled(), self.guard.judged_answer().1);
            return;
        }
        if let Some((env, conversation)) = self.ctx.judge.take() {
            // Everything is held (a judged answer is buffered): it goes out once the judged
            // checks pass (`GuardedStream::poll_judging`).
            let (text, tool_calls) = self.guard.judged_answer();
            let subject = crate::judge::Subject {
                conversation,
                answer: Some(crate::judge::Answer { text, tool_calls }),
            };
            self.judging = Some(Box::pin(crate::proxy::judged::judge_all(
                env,
                Arc::clone(self.guard.policy()),
                crate::proxy::judged::Side::Output,
                subject,
                self.ctx.keep_reasons,
            )));
            return;
        }
        self.release_all();
    }

    /// Releases everything held, in order: the answer passed every check.
    pub(super) fn release_all(&mut self) {
        let (pipeline, guard, mut writer) = self.parts();
        if let Err(stop) = pipeline.release_all(guard, &mut writer) {
            self.stop(stop);
        }
    }
}
