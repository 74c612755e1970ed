//! Stream templates for the serde decoders (Anthropic Messages, OpenAI Responses, Gemini): the
//! chat decoder's idea (`openai_chat/template.rs`) without a hand-written reader.
//!
//! The text events of one stream repeat each other but for their text and a few members the
//! decoder never reads (a sequence number, an obfuscation string, a response id). Each such
//! event was decoded by serde_json and then walked a second time by the fallback (`residual`):
//! 3–4× the instructions of the whole rest of the stream's decoding. So each stream keeps its
//! last text event as a template, and an event that is the template's bytes around other
//! values in the template's holes is read from those values alone.
//!
//! The holes, and why a template match reads exactly what serde_json would:
//! - **The text**: the one string the serde decode delivered as the event's only delta, found
//!   by place (serde borrowed it, so it had no escapes; its literal is in the frame). serde's
//!   result depends on that string only through the string itself (a field read with
//!   `borrow_opt_str`); [`Skim::str`] reads it as serde does — borrowed when plain, unescaped
//!   when not, and never accepting a string serde_json refuses.
//! - **Unread members**: top-level members whose key the decoder's struct does not have
//!   (serde ignores their values, whatever they are), holding a string or a number. A new
//!   value must be of the same kind, so that the fallback finds the same strings in the same
//!   places (below).
//!
//! The decoder records a template only for an event it decodes without its per-stream state
//! (a template match must not skip a state change) into exactly one [`Delta::Text`]. Keys are
//! compared byte for byte, so a renamed or escaped key is no match; any byte that differs
//! outside the holes, a hole that is not a valid value of its kind, or trailing bytes read the
//! event in full, as before.
//!
//! **The fallback.** Outside the holes the bytes, hence the JSON paths, are the template's;
//! a string hole is a string in both; the text is delivered by place in both (when plain). So
//! the fallback's finding on a matching event is the template's, with the text's string read.
//! When that finding is empty — computed once per template, on its first match — and the new
//! text is plain and not empty, the decoder promises [`super::StreamDecoder::fully_read`]: the
//! fallback would report nothing, and does not walk the event. Otherwise it walks it as
//! before. The differential tests (`frame_template_tests.rs`) hold the template path to a
//! fresh decoder, its fallback finding included, on refilled, rough and corrupted events.

use super::residual::{residual_strings, structure_shaped, Structural};
use super::skim::Skim;
use super::FrameKind;
use crate::delta::{Channel, Delta};
use std::borrow::Cow;
use std::ops::Range;

/// Events longer than this are not kept as templates (memory per open stream).
const MAX_FRAME: usize = 2048;
/// Holes per template, the text included.
const MAX_HOLES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hole {
    /// The text delivered as the delta.
    Text,
    /// A string under a key the decoder does not read.
    Str,
    /// A number under a key the decoder does not read.
    Num,
}

pub struct FrameTemplate {
    frame: Vec<u8>,
    /// `[start, end)` of each hole's value in `frame`, in order.
    holes: Vec<(usize, usize, Hole)>,
    /// The literal (quotes included) of the text in `frame`.
    text: Range<usize>,
    choice: u32,
    channel: Channel,
    kind: FrameKind,
    /// The fallback finds nothing in `frame` but its text (computed on the first match).
    residual_empty: Option<bool>,
}

impl FrameTemplate {
    /// Keeps `data` as `slot`'s template when its decode (`kind`, the deltas `deltas`) is one
    /// [`Delta::Text`] borrowed from `data`, `data` is an object, and its holes are few:
    /// `read` lists the top-level keys the decoder's struct reads (every spelling serde
    /// accepts). Otherwise `slot` keeps the template it has. Only for events decoded without
    /// the stream's state.
    pub fn record(
        slot: &mut Option<FrameTemplate>,
        data: &[u8],
        kind: FrameKind,
        deltas: &[Delta<'_>],
        read: &[&[u8]],
    ) {
        if data.len() > MAX_FRAME {
            return;
        }
        let [Delta::Text {
            choice,
            channel,
            text: Cow::Borrowed(text),
        }] = deltas
        else {
            return;
        };
        let Some(literal) = literal_of(data, text) else {
            return;
        };
        let mut holes = Vec::with_capacity(4);
        let mut s = Skim::new(data);
        let walked = s.object(|s, key| {
            let start = s.value_start();
            s.skip()?;
            if !read.contains(&key) {
                match data[start] {
                    b'"' => holes.push((start, s.pos(), Hole::Str)),
                    b'-' | b'0'..=b'9' => holes.push((start, s.pos(), Hole::Num)),
                    _ => {}
                }
            }
            Ok(())
        });
        if walked.and_then(|()| s.end()).is_err() {
            return;
        }
        // The text lies in a member the decoder reads; an overlap would be a bug: no template.
        if holes
            .iter()
            .any(|&(a, b, _)| a < literal.end && literal.start < b)
        {
            return;
        }
        holes.push((literal.start, literal.end, Hole::Text));
        holes.sort_unstable_by_key(|h| h.0);
        if holes.len() > MAX_HOLES {
            return;
        }
        let t = slot.get_or_insert_with(|| FrameTemplate {
            frame: Vec::new(),
            holes: Vec::new(),
            text: 0..0,
            choice: 0,
            channel: Channel::Content,
            kind,
            residual_empty: None,
        });
        t.frame.clear();
        t.frame.extend_from_slice(data);
        t.holes = holes;
        t.text = literal;
        t.choice = *choice;
        t.channel = *channel;
        t.kind = kind;
        t.residual_empty = None;
    }

    /// Reads `data` from `slot`'s template if it matches: its delta into `out`, and its kind.
    /// `fully_read` is set to whether the fallback has nothing left to read in `data`
    /// ([`FrameTemplate::fully_read`]; false when there is no match) — the decoder's
    /// [`super::StreamDecoder::fully_read`] for this frame; `identifiers` gets the literals of
    /// the string holes whose value differs from the template's (the decoder's
    /// [`super::StreamDecoder::identifiers`]: the template's own were read with its frame).
    pub fn read<'a>(
        slot: &mut Option<FrameTemplate>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
        structural: &Structural,
        fully_read: &mut bool,
        identifiers: &mut Vec<Range<usize>>,
    ) -> Option<FrameKind> {
        *fully_read = false;
        let t = slot.as_mut()?;
        let listed = identifiers.len();
        let Some(text) = t.text(data, identifiers) else {
            identifiers.truncate(listed);
            return None;
        };
        *fully_read = t.fully_read(&text, structural);
        out.extend(t.delta(text));
        Some(t.kind)
    }

    /// The text of `data` if it is this template with other values in its holes; the literals
    /// of string holes whose value differs from the template's go into `identifiers` (left
    /// there on no match: the caller drops them).
    pub fn text<'a>(
        &self,
        data: &'a [u8],
        identifiers: &mut Vec<Range<usize>>,
    ) -> Option<Cow<'a, str>> {
        let mut text = None;
        let (mut at, mut from) = (0, 0); // in `data`, in the template
        for &(start, end, hole) in &self.holes {
            let same = &self.frame[from..start];
            if data.get(at..at + same.len())? != same {
                return None;
            }
            at += same.len();
            from = end;
            // The same string as the template's: nothing to read (a string ends at its
            // closing quote; a number could go on, so it is always read).
            let old = &self.frame[start..end];
            if hole == Hole::Str && data.get(at..at + old.len()) == Some(old) {
                at += old.len();
                continue;
            }
            let mut s = Skim::at(data, at);
            match hole {
                Hole::Text => text = Some(s.str().ok()?),
                Hole::Str => {
                    s.skip_str().ok()?;
                    // The fallback exempts a string under a structural key by its shape too
                    // (`residual::structure_shaped`): a new value must keep the template's.
                    if !structure_shaped(s.since(at)) {
                        return None;
                    }
                    identifiers.push(at..s.pos());
                }
                Hole::Num => {
                    if !matches!(data.get(at), Some(b'-' | b'0'..=b'9')) {
                        return None;
                    }
                    s.skip().ok()?;
                }
            }
            at = s.pos();
        }
        (data.get(at..)? == &self.frame[from..])
            .then_some(text)
            .flatten()
    }

    /// The deltas and kind of an event that matched with `text`.
    pub fn delta<'a>(&self, text: Cow<'a, str>) -> Option<Delta<'a>> {
        (!text.is_empty()).then_some(Delta::Text {
            choice: self.choice,
            channel: self.channel,
            text,
        })
    }

    /// Whether the fallback has nothing to read in an event that matched with `text` (see the
    /// module's header).
    #[allow(clippy::ptr_arg)] // whether the text is borrowed is the question
    pub fn fully_read(&mut self, text: &Cow<'_, str>, structural: &Structural) -> bool {
        if text.is_empty() || matches!(text, Cow::Owned(_)) {
            return false;
        }
        *self.residual_empty.get_or_insert_with(|| {
            let mut left = Vec::new();
            residual_strings(
                &self.frame,
                structural,
                std::slice::from_ref(&self.text),
                &mut left,
            )
            .is_ok()
                && left.is_empty()
        })
    }
}

/// The literal (quotes included) of `text`, a string serde borrowed from `data`.
fn literal_of(data: &[u8], text: &str) -> Option<Range<usize>> {
    let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
    let end = start.checked_add(text.len())?;
    (start > 0
        && end < data.len()
        && data[start - 1] == b'"'
        && data[end] == b'"'
        && !data[start..end].contains(&b'\\'))
    .then_some(start - 1..end + 1)
}

#[cfg(test)]
impl FrameTemplate {
    /// The holes, `(start, end, text, number)`, for the differential tests.
    pub fn holes_for_tests(&self) -> Vec<(usize, usize, bool, bool)> {
        self.holes
            .iter()
            .map(|&(a, b, h)| (a, b, h == Hole::Text, h == Hole::Num))
            .collect()
    }
}
