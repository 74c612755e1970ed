//! How a [`GuardedStream`] ends before its answer is complete: a block, an upstream that
//! failed or stopped inside its answer, or any other error — the held frames are dropped, the
//! protocol's error frame is the last thing sent, and dropping the upstream body cancels the
//! upstream request.

use super::{GuardedStream, Lifecycle};
use crate::error::GatewayError;
use crate::metrics::UpstreamErrorKind;
use crate::policy::Finding;

impl GuardedStream {
    /// The upstream body ended before its terminal event (after it, the stream is draining and
    /// the body's end is read in the background). Bytes of an unfinished frame, or an answer the
    /// protocol does not take for complete, end the stream with the error frame: a cut answer
    /// must never reach the client looking complete.
    pub(super) fn upstream_ended(&mut self) {
        if !self.reading() {
            return;
        }
        if let Some(last) = self.framer.finish() {
            if !last.raw.iter().all(|b| matches!(b, b'\r' | b'\n')) {
                return self.upstream_failed(
                    UpstreamErrorKind::Malformed,
                    GatewayError::Upstream("the upstream stream ended inside a frame".into()),
                );
            }
        }
        if !self.pipeline.decoder().complete_without_terminal() {
            // What did arrive is judged first (a violation it completes is reported as the
            // block it is); either way nothing held is released.
            let after_call = self.ctx.trace.after_call_span().entered();
            let verdict = self.guard.after_call();
            drop(after_call);
            if let Err(finding) = verdict {
                self.report_findings();
                return self.block(finding);
            }
            self.report_findings();
            return self.upstream_failed(
                UpstreamErrorKind::Incomplete,
                GatewayError::UpstreamIncomplete,
            );
        }
        self.end_of_stream();
    }

    pub(super) fn block(&mut self, finding: Finding) {
        let err = self.reporter().block(finding);
        self.terminate(err);
    }

    pub(super) fn upstream_failed(&mut self, kind: UpstreamErrorKind, err: GatewayError) {
        crate::proxy::report::count_upstream_error(&self.ctx.metrics, self.ctx.route, kind);
        tracing::warn!(
            request_id = self.ctx.trace.request_id(),
            route = self.ctx.route,
            kind = kind.as_str(),
            "upstream stream failed"
        );
        self.terminate(err);
    }

    /// Ends the stream with the protocol's error frame; unreleased text is dropped, and dropping
    /// the upstream body cancels the upstream request.
    pub(super) fn terminate(&mut self, err: GatewayError) {
        if !matches!(err, GatewayError::Blocked { .. }) {
            self.ctx.trace.note_failure();
        }
        self.pipeline.drop_held();
        // Verdicts still under way no longer matter: dropping them cancels their calls.
        self.judging = None;
        self.windows = None;
        let frame = self
            .ctx
            .protocol
            .stream_error_frame(&err, &self.ctx.reply_to);
        self.push_out(frame);
        self.lifecycle = Lifecycle::Draining(None);
    }
}
