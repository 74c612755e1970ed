//! Waiting for the answer's verdicts once the upstream has ended: a held answer's judged checks
//! (released or blocked when they are in), and the limits that still apply while they are
//! awaited (the drain stop, `timeouts.total_ms`).

use super::{GuardedStream, UpstreamErrorKind};
use crate::error::GatewayError;
use std::future::Future;
use std::task::{Context, Poll};

impl GuardedStream {
    /// Verdicts awaited after the upstream ended still obey the drain stop and the total limit
    /// (while reading, the stream's timer and stop are polled anyway). True when one of them
    /// ended the stream.
    pub(super) fn verdict_limit_reached(&mut self, cx: &mut Context<'_>) -> bool {
        if self.reading() {
            return false;
        }
        if self.stop.as_mut().poll(cx).is_ready() {
            tracing::info!(
                request_id = self.ctx.trace.request_id(),
                "drain deadline: ending the stream awaiting verdicts"
            );
            self.terminate(GatewayError::ShuttingDown);
            return true;
        }
        // The stream's one timer, now that nothing is read, waits for the total limit.
        if self.idle.deadline() != self.ctx.total_deadline {
            self.idle.as_mut().reset(self.ctx.total_deadline);
        }
        if self.idle.as_mut().poll(cx).is_ready() {
            self.upstream_failed(
                UpstreamErrorKind::Total,
                GatewayError::UpstreamTimeout(
                    "the answer took longer than the total time allowed".into(),
                ),
            );
            return true;
        }
        false
    }

    /// Polls the answer's judged checks; once they are in, releases what was held or blocks.
    pub(super) fn poll_judging(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(judging) = &mut self.judging else {
            return Poll::Ready(());
        };
        let judgement = std::task::ready!(judging.as_mut().poll(cx));
        // (Its wait is not in `overhead`, which counts the time spent in polls.)
        self.judging = None;
        self.reporter().monitor(&judgement.monitored);
        match judgement.block {
            Some(finding) => self.block(finding),
            None => {
                self.release_all();
            }
        }
        Poll::Ready(())
    }
}
