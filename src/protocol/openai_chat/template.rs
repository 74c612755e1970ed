//! The chunks of one chat stream differ in little but their text: the same id, model,
//! `created` and framing around a new `content` string (and, from OpenAI, a random
//! `obfuscation` string). Reading every chunk from scratch was a third of the instructions a
//! stream costs the proxy without packs. So each stream keeps its last plain text chunk as a
//! template, and a chunk that is the template's bytes around other valid strings in the
//! template's holes is read from those strings alone.
//!
//! Why that reads exactly what the fast path would: [`Skim`] reads left to right and decides
//! only from the bytes it has read (a value's end is found inside the value). A hole is a
//! string after which the reader's state does not depend on the string's bytes — one skipped
//! under a structural key, or the content text, whose value is what this module returns. So
//! the fast path, reading the new chunk, passes the same states at the same bytes outside the
//! holes, and reads each hole as a string of its own, as done here. Anything else — a byte that
//! differs outside the holes, a hole that is no valid string, trailing bytes — reads the chunk
//! in full (and the differential tests in `template_tests.rs` hold both paths to the same
//! deltas).

use super::Chunk;
use crate::protocol::residual::structure_shaped;
use crate::protocol::skim::{Holes, Skim};
use std::borrow::Cow;

/// Chunks longer than this are not kept as templates (memory per open stream).
const MAX_FRAME: usize = 2048;

pub(super) struct Template {
    frame: Vec<u8>,
    holes: Holes,
    choice: u32,
    fully_read: bool,
}

impl Template {
    /// Keeps `data` (read by the fast path into `chunk`, with `holes`) as `slot`'s template if it
    /// is a plain text chunk: one choice with a `content` string and nothing else to report.
    /// Otherwise `slot` keeps the template it has.
    pub(super) fn record(
        slot: &mut Option<Template>,
        data: &[u8],
        chunk: &Chunk<'_>,
        holes: &Holes,
        fully_read: bool,
    ) {
        if data.len() > MAX_FRAME || chunk.usage.is_some() || chunk.error.is_some() {
            return;
        }
        let [choice] = chunk.choices.as_slice() else {
            return;
        };
        let Some(d) = &choice.delta else {
            return;
        };
        let plain = d.content.is_some()
            && d.refusal.is_none()
            && d.reasoning_content.is_none()
            && d.reasoning.is_none()
            && d.tool_calls.is_none()
            && d.function_call.is_none()
            && choice.finish_reason.is_none();
        // Exactly one marked hole: the content text.
        let marked = holes.spans().map(|h| h.filter(|&(_, _, m)| m).count());
        if !plain || marked != Some(1) {
            return;
        }
        let t = slot.get_or_insert_with(|| Template {
            frame: Vec::new(),
            holes: Holes::default(),
            choice: 0,
            fully_read: false,
        });
        t.frame.clear();
        t.frame.extend_from_slice(data);
        t.holes = *holes;
        t.choice = choice.index;
        t.fully_read = fully_read;
    }

    /// The content text of `data` if it is this template with other strings in its holes; the
    /// structural strings that differ from the template's go into `identifiers` (for the
    /// secret and PII patterns: the template's own were read with its frame).
    pub(super) fn text<'a>(
        &self,
        data: &'a [u8],
        identifiers: &mut Vec<std::ops::Range<usize>>,
    ) -> Option<Cow<'a, str>> {
        let listed = identifiers.len();
        let text = self.read(data, identifiers);
        if text.is_none() {
            identifiers.truncate(listed);
        }
        text
    }

    fn read<'a>(
        &self,
        data: &'a [u8],
        identifiers: &mut Vec<std::ops::Range<usize>>,
    ) -> Option<Cow<'a, str>> {
        let mut text = None;
        let (mut at, mut from) = (0, 0); // in `data`, in the template
        for (start, end, marked) in self.holes.spans()? {
            let same = &self.frame[from..start];
            if data.get(at..at + same.len())? != same {
                return None;
            }
            at += same.len();
            from = end;
            // The same string as the template's: nothing to read (its end is where it was).
            let old = &self.frame[start..end];
            if !marked && data.get(at..at + old.len()) == Some(old) {
                at += old.len();
                continue;
            }
            let mut s = Skim::at(data, at);
            if marked {
                text = Some(s.str().ok()?);
            } else {
                s.skip_str().ok()?;
                // A structural value stays one only while it looks it: else read in full.
                if !structure_shaped(s.since(at)) {
                    return None;
                }
                identifiers.push(at..s.pos());
            }
            at = s.pos();
        }
        (data.get(at..)? == &self.frame[from..])
            .then_some(text)
            .flatten()
    }

    pub(super) fn choice(&self) -> u32 {
        self.choice
    }

    pub(super) fn fully_read(&self) -> bool {
        self.fully_read
    }
}
