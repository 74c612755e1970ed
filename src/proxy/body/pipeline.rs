//! One frame's way through the checks, as one step with no I/O ([`FramePipeline::step`]): an
//! SSE frame in → the protocol's deltas → the frame checker (OnChunk and the fallback) → held
//! until every channel it carries text for is safe past that text → released in order, byte
//! for byte as it came or with its redacted texts masked; or a verdict that ends the stream.
//! The stream ([`GuardedStream`](super::GuardedStream)) polls the upstream, frames its bytes,
//! calls the step per frame and writes what was released; after AfterCall and the judged
//! checks it releases the rest ([`FramePipeline::release_ready`], [`FramePipeline::release_all`]).

use super::recycle;
use crate::delta::Delta;
use crate::policy::{ChannelId, ExchangeGuard, Finding};
use crate::protocol::{DecodeError, FrameKind, StreamDecoder};
use crate::proxy::check::{self, Fallback, Needs};
use crate::proxy::redact::{self, TextSpan};
use crate::sse::SseFrame;
use bytes::Bytes;
use std::collections::VecDeque;

/// A frame waiting for the scanner to move past its text.
struct Held {
    bytes: Bytes,
    /// (channel, position after this frame's text): releasable once safe there. Inline: a
    /// frame almost always carries one channel's text, and this is built for every event.
    needs: Needs,
    /// With redact-mode validators: the frame and where its texts are, to mask them on release.
    texts: Option<Box<(SseFrame, Vec<TextSpan>)>>,
}

/// Where a step's output goes, besides its verdict.
pub(super) trait Sink {
    /// A released frame, in order, for the client.
    fn release(&mut self, bytes: Bytes);
    /// The answer's first text arrived (time to first token).
    fn first_text(&mut self);
    /// Whether [`Sink::text`] wants the answer's checked text deltas.
    fn wants_texts(&self) -> bool;
    /// A checked text delta and its channel (windowed judging reads the answer as it streams).
    fn text(&mut self, channel: Option<ChannelId>, delta: &Delta<'_>);
}

/// What one frame came to.
#[derive(Debug)]
pub(super) enum Step {
    /// Checked: held, or released to the sink with whatever it made safe.
    Passed,
    /// The terminal frame (or the upstream's error event), queued behind what is held:
    /// AfterCall decides whether it all goes out.
    Terminal,
    /// The stream ends with the protocol's error frame; nothing held may be released.
    Stop(Stop),
}

/// Why a stream ends before its answer is complete.
#[derive(Debug)]
pub(super) enum Stop {
    /// An enforcing validator found a violation.
    Violation(Finding),
    /// The upstream sent what cannot be read or checked; the message says what.
    Malformed(&'static str),
    /// The protocol's decoder could not read the frame.
    Undecodable(DecodeError),
    /// More than the hold-back limit (`limits.max_holdback_bytes`) is held.
    HoldbackExceeded,
    /// A redaction could not be applied to the frame that carried its text.
    Unmaskable,
}

/// A stream's decoder and its held frames: everything a frame's step reads and changes
/// besides the guard.
pub(super) struct FramePipeline {
    decoder: Box<dyn StreamDecoder>,
    held: VecDeque<Held>,
    held_bytes: usize,
    /// The allocation of a frame's delta list, kept empty between frames so an event does not
    /// allocate one.
    delta_scratch: Vec<Delta<'static>>,
    fallback: Fallback,
    /// guardwire asked for usage, not the client (see `StreamContext::hide_usage`).
    hide_usage: bool,
    max_holdback_bytes: usize,
    /// The first text has not arrived yet (time to first token is still to be observed).
    awaiting_first_text: bool,
    /// The answer's text (up to [`crate::proxy::estimate::MAX_KEPT`] bytes) and its length,
    /// for an estimate of its tokens when the provider reports none.
    answer_text: String,
    answer_bytes: usize,
}

impl FramePipeline {
    pub(super) fn new(
        decoder: Box<dyn StreamDecoder>,
        fallback: Fallback,
        hide_usage: bool,
        max_holdback_bytes: usize,
    ) -> FramePipeline {
        FramePipeline {
            decoder,
            held: VecDeque::new(),
            held_bytes: 0,
            delta_scratch: Vec::new(),
            fallback,
            hide_usage,
            max_holdback_bytes,
            awaiting_first_text: true,
            answer_text: String::new(),
            answer_bytes: 0,
        }
    }

    pub(super) fn decoder(&self) -> &dyn StreamDecoder {
        &*self.decoder
    }

    /// The answer's text kept for an estimate of its tokens, and its whole length.
    pub(super) fn answer(&self) -> (&str, usize) {
        (&self.answer_text, self.answer_bytes)
    }

    /// One frame: decoded, checked, then held or released with what it made safe.
    pub(super) fn step(
        &mut self,
        frame: SseFrame,
        guard: &mut ExchangeGuard,
        sink: &mut impl Sink,
    ) -> Step {
        let frame = frame.without_comment_text();
        let fields = frame.fields();
        // Fail closed: a comment some clients read as more lines than guardwire does.
        if fields.line_breaks_for_some_reader {
            return Step::Stop(Stop::Malformed(
                "the upstream sent a line holding a line break some clients read (U+2028, NEL, VT, FF, …)",
            ));
        }
        let Some(data) = fields.data else {
            if frame.is_inert() {
                return self.hold(frame.raw.clone(), Needs::new(), None, guard, sink);
            }
            // Fail closed: bytes outside every protocol's frames cannot be checked.
            return Step::Stop(Stop::Malformed("the upstream sent a frame without data"));
        };
        // Fail closed: a line the standard ignores that some clients read (a JSON line in a
        // frame with data, which google-genai decodes as a chunk of its own).
        if fields.unknown_field {
            return Step::Stop(Stop::Malformed(
                "the upstream sent a line that is no field of the SSE standard (some clients read it)",
            ));
        }
        let mut spans: Vec<TextSpan> = Vec::new();
        // An empty Vec<Delta<'static>> is a Vec<Delta<'_>> (deltas borrow this frame's data).
        let mut deltas: Vec<Delta<'_>> = std::mem::take(&mut self.delta_scratch);
        let kind = match self.decoder.decode(fields.event, &data, &mut deltas) {
            Ok(kind) => kind,
            Err(e) => return Step::Stop(Stop::Undecodable(e)),
        };
        if self.awaiting_first_text && deltas.iter().any(|d| matches!(d, Delta::Text { .. })) {
            self.awaiting_first_text = false;
            sink.first_text();
        }
        if guard.wants_usage() {
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
        let fallback = Fallback {
            fully_read: self.decoder.fully_read(),
            ..self.fallback
        };
        let checked = check::check_payload(guard, &deltas, &data, fallback, &mut needs, &mut spans)
            .and_then(|()| check::field_values(guard, frame.field_values()));
        match checked {
            Ok(()) => {}
            Err(check::Stop::Violation(finding)) => return Step::Stop(Stop::Violation(finding)),
            Err(check::Stop::Unchecked(why)) => return Step::Stop(Stop::Malformed(why)),
        }
        // A frame the decoder read in full skipped the fallback: its identifiers still meet the
        // secret and PII patterns; values joined across frames are read whole.
        match check::decoder_values(guard, &*self.decoder, &data) {
            Ok(()) => {}
            Err(check::Stop::Violation(finding)) => return Step::Stop(Stop::Violation(finding)),
            Err(check::Stop::Unchecked(why)) => return Step::Stop(Stop::Malformed(why)),
        }
        if sink.wants_texts() {
            for d in &deltas {
                if let Delta::Text {
                    choice, channel, ..
                } = d
                {
                    sink.text(guard.find_channel(*choice, *channel), d);
                }
            }
        }
        self.delta_scratch = recycle(deltas);
        drop(data);
        if self.hide_usage && self.decoder.usage_only() {
            // Asked for by guardwire alone: read (the guard has its usage), never released.
            return Step::Passed;
        }
        let texts = (!spans.is_empty()).then(|| Box::new((frame.clone(), spans)));
        match kind {
            FrameKind::Data | FrameKind::Passthrough => {
                self.hold(frame.raw, needs, texts, guard, sink)
            }
            FrameKind::Terminal | FrameKind::UpstreamError => {
                self.held.push_back(Held {
                    bytes: frame.raw,
                    needs: Needs::new(),
                    texts,
                });
                Step::Terminal
            }
        }
    }

    /// Queues a frame and releases every frame at the front that is now safe.
    fn hold(
        &mut self,
        bytes: Bytes,
        needs: Needs,
        texts: Option<Box<(SseFrame, Vec<TextSpan>)>>,
        guard: &ExchangeGuard,
        sink: &mut impl Sink,
    ) -> Step {
        self.held_bytes += bytes.len();
        self.held.push_back(Held {
            bytes,
            needs,
            texts,
        });
        if let Err(stop) = self.release_ready(guard, sink) {
            return Step::Stop(stop);
        }
        if self.held_bytes > self.max_holdback_bytes {
            return Step::Stop(Stop::HoldbackExceeded);
        }
        Step::Passed
    }

    /// Releases every frame at the front that is now safe.
    pub(super) fn release_ready(
        &mut self,
        guard: &ExchangeGuard,
        sink: &mut impl Sink,
    ) -> Result<(), Stop> {
        while let Some(front) = self.held.front() {
            if !front
                .needs
                .iter()
                .all(|&(ch, pos)| guard.safe_pos(ch) >= pos)
            {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                self.held_bytes -= h.bytes.len();
                self.release(h, guard, sink)?;
            }
        }
        Ok(())
    }

    /// Releases everything held, in order: the answer passed every check.
    pub(super) fn release_all(
        &mut self,
        guard: &ExchangeGuard,
        sink: &mut impl Sink,
    ) -> Result<(), Stop> {
        while let Some(h) = self.held.pop_front() {
            self.release(h, guard, sink)?;
        }
        self.held_bytes = 0;
        Ok(())
    }

    /// Drops everything held: the stream ends without it.
    pub(super) fn drop_held(&mut self) {
        self.held.clear();
        self.held_bytes = 0;
    }

    /// Sends a held frame: as it came, or with its redacted texts masked.
    fn release(&self, h: Held, guard: &ExchangeGuard, sink: &mut impl Sink) -> Result<(), Stop> {
        let Some(texts) = h.texts else {
            self.push_frame(h.bytes, sink);
            return Ok(());
        };
        let (frame, spans) = *texts;
        let redactions = guard.redactions();
        let touched = |s: &TextSpan| {
            redactions
                .iter()
                .any(|r| r.channel == s.channel && r.start < s.end && r.end > s.start)
        };
        if !spans.iter().any(touched) {
            self.push_frame(h.bytes, sink);
            return Ok(());
        }
        let data = frame
            .fields()
            .data
            .map(|d| d.into_owned())
            .unwrap_or_default();
        match redact::rewrite(&data, &spans, redactions) {
            Ok(Some(new)) => self.push_frame(frame.with_data(&new), sink),
            Ok(None) => self.push_frame(h.bytes, sink),
            Err(redact::Unmaskable) => return Err(Stop::Unmaskable),
        }
        Ok(())
    }

    /// A released upstream frame for the client; without the `"usage":null` member the
    /// upstream added because guardwire (not the client) asked for usage. OpenAI adds it to
    /// every chunk, so the frame is released as its two slices around the member (no copy,
    /// no allocation: the output batch joins its pieces once anyway).
    fn push_frame(&self, bytes: Bytes, sink: &mut impl Sink) {
        if self.hide_usage {
            if let Some(member) = crate::protocol::stream_usage::null_usage_member(&bytes) {
                sink.release(bytes.slice(..member.start));
                return sink.release(bytes.slice(member.end..));
            }
        }
        sink.release(bytes)
    }
}

#[cfg(test)]
mod tests;
