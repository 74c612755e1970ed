//! The checking side of a [`GuardedStream`]: upstream bytes → SSE frames → the protocol's
//! deltas → the frame checker (OnChunk and the fallback) → frames held until every channel they
//! carry text for is safe, then released in order — as they came, or with redactions masked —
//! or the stream ends with the protocol's error frame. The polling side (upstream reads, timers,
//! output batches) is in the parent module.

use super::{recycle, GuardedStream, Held};
use crate::delta::Delta;
use crate::error::GatewayError;
use crate::metrics::{LatencyLabels, RouteLabels, UpstreamErrorKind};
use crate::protocol::FrameKind;
use crate::proxy::check::{self, Needs};
use crate::proxy::redact::{self, TextSpan};
use crate::sse::SseFrame;
use bytes::Bytes;
use std::sync::Arc;

impl GuardedStream {
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
            self.process_frame(frame);
        }
        self.frames = frames;
        self.report_findings();
    }

    fn process_frame(&mut self, frame: SseFrame) {
        let fields = frame.fields();
        let Some(data) = fields.data else {
            if frame.is_inert() {
                self.hold(frame.raw.clone(), Needs::new(), None);
            } else {
                // Fail closed: bytes outside every protocol's frames cannot be checked.
                self.upstream_failed(
                    UpstreamErrorKind::Malformed,
                    GatewayError::Upstream("the upstream sent a frame without data".into()),
                );
            }
            return;
        };
        let mut spans: Vec<TextSpan> = Vec::new();
        // An empty Vec<Delta<'static>> is a Vec<Delta<'_>> (deltas borrow this frame's data).
        let mut deltas: Vec<Delta<'_>> = std::mem::take(&mut self.delta_scratch);
        let kind = match self.decoder.decode(fields.event, &data, &mut deltas) {
            Ok(kind) => kind,
            Err(e) => {
                tracing::warn!(request_id = self.ctx.trace.request_id(), error = %e, "malformed upstream frame");
                self.upstream_failed(
                    UpstreamErrorKind::Malformed,
                    GatewayError::Upstream("the upstream sent a malformed stream frame".into()),
                );
                return;
            }
        };
        if self.awaiting_first_token && deltas.iter().any(|d| matches!(d, Delta::Text { .. })) {
            self.awaiting_first_token = false;
            self.ctx
                .metrics
                .upstream_first_token
                .get_or_create(&LatencyLabels {
                    route: self.ctx.route,
                    model: self.ctx.traffic.model,
                })
                .observe(self.ctx.sent.elapsed().as_secs_f64());
        }
        if self.guard.wants_usage() {
            for d in &deltas {
                if let Delta::Text { text, .. } = d {
                    self.answer_bytes += text.len();
                    if self.answer_text.len() + text.len() <= crate::proxy::estimate::MAX_KEPT {
                        self.answer_text.push_str(text);
                    }
                }
            }
        }
        let mut needs = Needs::new();
        let fallback = check::Fallback {
            fully_read: self.decoder.fully_read(),
            ..self.ctx.fallback
        };
        match check::check_payload(
            &mut self.guard,
            &deltas,
            &data,
            fallback,
            &mut needs,
            &mut spans,
        ) {
            Ok(()) => {}
            Err(check::Stop::Violation(finding)) => return self.block(finding),
            Err(check::Stop::Unchecked(why)) => {
                return self.upstream_failed(
                    UpstreamErrorKind::Malformed,
                    GatewayError::Upstream(why.into()),
                )
            }
        }
        if let Some(windows) = &mut self.windows {
            for d in &deltas {
                if let Delta::Text {
                    choice, channel, ..
                } = d
                {
                    windows.feed(self.guard.find_channel(*choice, *channel), d);
                }
            }
        }
        self.delta_scratch = recycle(deltas);
        drop(data);
        if self.ctx.hide_usage && self.decoder.usage_only() {
            // Asked for by guardwire alone: read (the guard has its usage), never released.
            return;
        }
        let texts = (!spans.is_empty()).then(|| Box::new((frame.clone(), spans)));
        match kind {
            FrameKind::Data | FrameKind::Passthrough => self.hold(frame.raw, needs, texts),
            FrameKind::Terminal | FrameKind::UpstreamError => {
                self.held.push_back(Held {
                    bytes: frame.raw,
                    needs: Needs::new(),
                    texts,
                });
                self.end_of_stream();
                self.stop_reading();
            }
        }
    }

    /// Queues a frame and releases every frame at the front that is now safe.
    fn hold(&mut self, bytes: Bytes, needs: Needs, texts: Option<Box<(SseFrame, Vec<TextSpan>)>>) {
        self.held_bytes += bytes.len();
        self.held.push_back(Held {
            bytes,
            needs,
            texts,
        });
        self.release_ready();
        if self.held_bytes > self.ctx.max_holdback_bytes {
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
    }

    /// Releases every frame at the front that is now safe.
    pub(super) fn release_ready(&mut self) {
        while let Some(front) = self.held.front() {
            if !front
                .needs
                .iter()
                .all(|&(ch, pos)| self.guard.safe_pos(ch) >= pos)
            {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                self.held_bytes -= h.bytes.len();
                self.release(h);
            }
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
        while let Some(h) = self.held.pop_front() {
            self.release(h);
        }
        self.held_bytes = 0;
    }

    /// Sends a held frame: as it came, or with its redacted texts masked.
    pub(super) fn release(&mut self, h: Held) {
        let Some(texts) = h.texts else {
            self.push_frame(h.bytes);
            return;
        };
        let (frame, spans) = *texts;
        let redactions = self.guard.redactions();
        let touched = |s: &TextSpan| {
            redactions
                .iter()
                .any(|r| r.channel == s.channel && r.start < s.end && r.end > s.start)
        };
        if !spans.iter().any(touched) {
            self.push_frame(h.bytes);
            return;
        }
        let data = frame
            .fields()
            .data
            .map(|d| d.into_owned())
            .unwrap_or_default();
        match redact::rewrite(&data, &spans, redactions) {
            Ok(Some(new)) => self.push_frame(frame.with_data(&new)),
            Ok(None) => self.push_frame(h.bytes),
            Err(redact::Unmaskable) => self.terminate(GatewayError::Internal(
                "a redaction could not be applied".into(),
            )),
        }
    }

    /// Queues a released upstream frame for the client; without the `"usage":null` member the
    /// upstream added because guardwire (not the client) asked for usage.
    fn push_frame(&mut self, bytes: Bytes) {
        if self.ctx.hide_usage {
            if let Some(plain) = crate::protocol::stream_usage::without_null_usage(&bytes) {
                return self.push_out(Bytes::from(plain));
            }
        }
        self.push_out(bytes)
    }
}
