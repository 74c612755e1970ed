//! The frame checker shared by streamed and whole answers: OnChunk over one payload's decoded
//! deltas, noting for each text where its channel now stands (what the hold-back waits for)
//! and, when the policy redacts, where the text sits in the payload (what a redaction
//! rewrites). Then the fallback: every string of the payload that the decoder did not turn
//! into a delta and that is not structure ([`crate::protocol::residual`]) is checked too, as
//! `unknown_content` says. A stream runs it per SSE frame; a whole answer once, over its body.

use super::redact::{self, TextSpan};
use crate::config::UnknownContent;
use crate::delta::{Channel, Delta};
use crate::policy::{ChannelId, ExchangeGuard, Finding};
use crate::protocol::residual::{self, Structural};
use std::borrow::Cow;
use std::ops::Range;

/// (channel, position after a payload's text on it): the payload is releasable once every
/// channel is safe up to its position. Inline: a frame almost always carries one channel.
pub type Needs = smallvec::SmallVec<[(ChannelId, u64); 2]>;

/// Why a payload cannot be released.
#[derive(Debug)]
pub enum Stop {
    /// An enforcing validator found a violation.
    Violation(Finding),
    /// The payload carries what cannot be checked; the message says what (an upstream fault).
    Unchecked(&'static str),
}

impl From<Finding> for Stop {
    fn from(f: Finding) -> Self {
        Stop::Violation(f)
    }
}

/// How a payload is checked: its protocol's structural keys and the route's `unknown_content`.
#[derive(Clone, Copy)]
pub struct Fallback {
    pub structural: &'static Structural,
    pub unknown: UnknownContent,
    /// The decoder read every string of the payload or knows it as structure
    /// ([`crate::protocol::StreamDecoder::fully_read`]): nothing is left to walk.
    pub fully_read: bool,
}

/// Runs OnChunk over `deltas`, decoded from `data`, then the fallback over the rest of `data`.
/// Stops at the first violation.
pub fn check_payload(
    guard: &mut ExchangeGuard,
    deltas: &[Delta<'_>],
    data: &[u8],
    fallback: Fallback,
    needs: &mut Needs,
    spans: &mut Vec<TextSpan>,
) -> Result<(), Stop> {
    let redacts = guard.policy().redacts();
    for d in deltas {
        // Each choice and tool call opens channels with their own checks' state: bounded, so
        // one answer's work and memory are (fail closed past the bound).
        if guard.channel_count() > MAX_MODELLED_CHANNELS
            || (matches!(d, Delta::ToolCallStart { .. }) && guard.call_count() >= MAX_TOOL_CALLS)
        {
            return Err(Stop::Unchecked(
                "the upstream's answer has too many choices or tool calls to check",
            ));
        }
        if d.choice().is_some_and(|c| !guard.choice_expected(c)) {
            return Err(Stop::Unchecked(
                "the upstream answered a choice the request did not ask for (an index past its n)",
            ));
        }
        if !guard.repeat_is_verified(d) {
            return Err(Stop::Unchecked(if guard.full_text_dropped() {
                "the upstream's answer is too long to verify the text it repeats"
            } else {
                "the upstream repeated text that it had not streamed"
            }));
        }
        // A tool call's id and a finish reason reach the client too, whatever decoder read
        // them (a fast path delivers them as known strings the fallback leaves out): an
        // identifier meets the secret and PII patterns, anything else is read as text.
        let value = match d {
            Delta::ToolCallStart {
                choice,
                id: Some(id),
                ..
            } => Some((*choice, &**id)),
            Delta::Finish { choice, reason } => Some((*choice, &**reason)),
            _ => None,
        };
        if let Some((choice, value)) = value {
            if crate::protocol::identifier::is_identifier(value) {
                guard.check_identifier(value)?;
            } else {
                let value = Cow::Borrowed(value);
                check_complete(guard, choice, STRUCTURE_TEXTS, value, None, needs, spans)?;
            }
        }
        let Some((ch, pos)) = guard.on_chunk(d)? else {
            if let Delta::ToolCallStart { choice, name, .. } = d {
                // A tool name reaches the client too: checked as a text of its own, complete.
                let literal = redacts
                    .then(|| redact::locate(data, name, &[]).map(|(r, _)| r))
                    .flatten();
                let name = Cow::Borrowed(&**name);
                check_complete(guard, *choice, TOOL_NAMES, name, literal, needs, spans)?;
            }
            continue;
        };
        note_need(needs, ch, pos);
        if !redacts {
            continue;
        }
        // `pos` may lie past the text (a character split between deltas is waited for).
        let end = guard.channel_end(ch);
        let located = match d {
            Delta::Text { text, .. } => Some((text, end - text.len() as u64)),
            Delta::Repeat { text, start, .. } => Some((
                text,
                start.unwrap_or_else(|| end.saturating_sub(text.len() as u64)),
            )),
            _ => None,
        };
        if let Some((text, start)) = located {
            let taken: Vec<_> = spans.iter().map(|s| s.literal.clone()).collect();
            // Not found cannot happen for a text decoded from this data; an empty literal
            // makes a redaction touching it fail closed on release.
            let (literal, raw) = redact::locate(data, text, &taken).unwrap_or((0..0, false));
            spans.push(TextSpan {
                channel: ch,
                start,
                end: start + text.len() as u64,
                literal,
                raw,
                text: text.to_string(),
            });
        }
    }
    // With `pass`, a protocol with a schema (A2A) still has the fields it names read: the
    // values at its places of structure.
    let pass = fallback.unknown == UnknownContent::Pass;
    if !fallback.fully_read && (!pass || fallback.structural.schema.is_some()) {
        check_residual(guard, deltas, data, fallback, needs, spans)?;
    }
    Ok(())
}

/// Channels one answer may open (each has scanner state); beyond, fields of unknown paths
/// fail closed rather than grow the stream's memory without bound.
const MAX_CHANNELS: usize = 512;

/// Channels of what the decoders model (choices' texts, tool calls' arguments) one answer may
/// open: far past what a provider sends (128 choices, each with a few tool calls).
const MAX_MODELLED_CHANNELS: usize = 4096;

/// Tool calls one answer may make (the tool checks read the turn's calls at each).
const MAX_TOOL_CALLS: usize = 1024;

/// The [`Channel::Other`] of tool names (residual paths are hashes; a clash only joins texts).
const TOOL_NAMES: u32 = u32::MAX;

/// The [`Channel::Other`] of tool call ids and finish reasons that are no identifiers.
const STRUCTURE_TEXTS: u32 = u32::MAX - 2;

/// Checks `text` on [`Channel::Other`]`(path)`, as a piece of the text streamed there and as a
/// value of its own ([`ExchangeGuard::check_whole_value`]); with redaction, notes where it
/// sits (`literal`: its string literal in the payload; `None` makes a redaction touching it
/// fail closed).
fn check_text(
    guard: &mut ExchangeGuard,
    choice: u32,
    path: u32,
    text: Cow<'_, str>,
    literal: Option<Range<usize>>,
    needs: &mut Needs,
    spans: &mut Vec<TextSpan>,
) -> Result<(), Stop> {
    let d = Delta::Text {
        choice,
        channel: Channel::Other(path),
        text: Cow::Borrowed(&text),
    };
    let Some((ch, pos)) = guard.on_chunk(&d)? else {
        return Ok(());
    };
    note_need(needs, ch, pos);
    guard.check_whole_value(ch, &text)?;
    if guard.policy().redacts() {
        let end = guard.channel_end(ch);
        spans.push(TextSpan {
            channel: ch,
            start: end - text.len() as u64,
            end,
            literal: literal.unwrap_or(0..0),
            raw: false,
            text: text.into_owned(),
        });
    }
    Ok(())
}

/// [`check_text`] for a text that is whole (a tool name, an id read as text), then a line
/// break on its channel, which ends any match in progress so its frame is not held for what
/// follows. The line break is no value (no whole-value scan) and nothing to redact.
fn check_complete(
    guard: &mut ExchangeGuard,
    choice: u32,
    path: u32,
    text: Cow<'_, str>,
    literal: Option<Range<usize>>,
    needs: &mut Needs,
    spans: &mut Vec<TextSpan>,
) -> Result<(), Stop> {
    check_text(guard, choice, path, text, literal, needs, spans)?;
    let line_break = Delta::Text {
        choice,
        channel: Channel::Other(path),
        text: Cow::Borrowed("\n"),
    };
    if let Some((ch, pos)) = guard.on_chunk(&line_break)? {
        note_need(needs, ch, pos);
    }
    Ok(())
}

/// The [`Channel::Other`] of a frame's `event`, `id` and `retry` values.
const FIELD_VALUES: u32 = u32::MAX - 3;

/// A frame's `event`, `id` and `retry` values reach the client too (google-genai puts a line
/// that is not `data:` in the exception it raises): an identifier meets the secret and PII
/// patterns (each value once per stream), anything else is read as a text of its own.
pub fn field_values<'a>(
    guard: &mut ExchangeGuard,
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<(), Stop> {
    for value in values {
        let Ok(value) = std::str::from_utf8(value) else {
            return Err(Stop::Unchecked(
                "the upstream sent a field that is not UTF-8",
            ));
        };
        whole_value(guard, FIELD_VALUES, value)?;
    }
    Ok(())
}

/// What the stream decoder read of the last frame beside its deltas: the identifiers it
/// skipped as structure in a frame it read in full (each once per stream,
/// `check_identifier` remembers), and the values the readers join across frames
/// ([`crate::protocol::StreamDecoder::joined_values`]). The proxy and `eval --replay` alike.
pub fn decoder_values(
    guard: &mut ExchangeGuard,
    decoder: &dyn crate::protocol::StreamDecoder,
    data: &[u8],
) -> Result<(), Stop> {
    if decoder.fully_read() {
        for r in decoder.identifiers() {
            let value = data
                .get(r.start + 1..r.end.saturating_sub(1))
                .and_then(|v| std::str::from_utf8(v).ok());
            let Some(value) = value else {
                return Err(Stop::Unchecked(
                    "the upstream sent a frame guardwire cannot read",
                ));
            };
            guard.check_identifier(value)?;
        }
    }
    for value in decoder.joined_values() {
        whole_value(guard, STRUCTURE_TEXTS, value)?;
    }
    Ok(())
}

/// A value read whole: an identifier by the secret and PII patterns, anything else as a text
/// of its own on [`Channel::Other`]`(path)`.
fn whole_value(guard: &mut ExchangeGuard, path: u32, value: &str) -> Result<(), Stop> {
    if crate::protocol::identifier::is_identifier(value) {
        guard.check_identifier(value)?;
        return Ok(());
    }
    let text = Cow::Borrowed(value);
    check_complete(
        guard,
        0,
        path,
        text,
        None,
        &mut Needs::new(),
        &mut Vec::new(),
    )
}

fn note_need(needs: &mut Needs, ch: ChannelId, pos: u64) {
    // From the back: a channel's texts come together (the last one noted, nearly always).
    match needs.iter_mut().rev().find(|(c, _)| *c == ch) {
        Some(n) => n.1 = pos,
        None => needs.push((ch, pos)),
    }
}

/// The fallback: the strings of `data` that are neither structure nor one of the deltas' texts
/// go to the output checks on [`Channel::Other`] of their path (or, with
/// `unknown_content: block`, end the answer).
fn check_residual(
    guard: &mut ExchangeGuard,
    deltas: &[Delta<'_>],
    data: &[u8],
    fallback: Fallback,
    needs: &mut Needs,
    spans: &mut Vec<TextSpan>,
) -> Result<(), Stop> {
    // The texts the decoder delivered and the checks read: by place when it borrowed from
    // `data`, else by value. Not a tool call's id or a finish reason: those are structure
    // only while they look it, which the walk decides ([`residual::structure_shaped`]).
    let mut known: smallvec::SmallVec<[Range<usize>; 4]> = smallvec::SmallVec::new();
    let mut by_value: smallvec::SmallVec<[&str; 2]> = smallvec::SmallVec::new();
    for d in deltas {
        let t: &str = match d {
            Delta::Text { text, .. } | Delta::Repeat { text, .. } => text,
            Delta::ToolCallStart { name, .. } => name,
            Delta::Finish { .. } | Delta::Usage { .. } => continue,
        };
        match redact::borrowed_range(data, t) {
            Some((r, _)) => known.push(r),
            None => by_value.push(t),
        }
    }
    known.sort_unstable_by_key(|r| r.start);
    // A multiset, so that a payload with many escaped texts (the same or not) costs n log n.
    let mut by_value = residual::ReadTexts::new(by_value);
    let mut left: Vec<(Range<usize>, u32)> = Vec::new();
    let mut structure: Vec<(Range<usize>, u32)> = Vec::new();
    let mut identifiers: Vec<Range<usize>> = Vec::new();
    residual::residual_parts(
        data,
        fallback.structural,
        &known,
        &mut left,
        &mut structure,
        &mut identifiers,
    )
    .map_err(|_| Stop::Unchecked("the upstream sent a frame guardwire cannot read"))?;
    // Text in a field the schema names as structure: read as text under every setting.
    for (lit, path) in structure {
        if guard.channel_count() > MAX_CHANNELS {
            return Err(Stop::Unchecked(
                "the upstream's answer has too many distinct fields to check",
            ));
        }
        let Ok(text) = serde_json::from_slice::<Cow<'_, str>>(&data[lit.clone()]) else {
            return Err(Stop::Unchecked(
                "the upstream sent a frame guardwire cannot read",
            ));
        };
        check_text(guard, 0, path, text, Some(lit), needs, spans)?;
    }
    if fallback.unknown == UnknownContent::Pass {
        left.clear();
    }
    // Structure in the shape of an identifier: the secret and PII patterns still read it.
    for lit in identifiers {
        // No escape in an identifier's literal: its text is what stands between the quotes.
        let Some(value) = std::str::from_utf8(&data[lit.start + 1..lit.end - 1]).ok() else {
            return Err(Stop::Unchecked(
                "the upstream sent a frame guardwire cannot read",
            ));
        };
        guard.check_identifier(value)?;
    }
    for (lit, path) in left {
        if guard.channel_count() > MAX_CHANNELS {
            return Err(Stop::Unchecked(
                "the upstream's answer has too many distinct fields to check",
            ));
        }
        let Ok(text) = serde_json::from_slice::<Cow<'_, str>>(&data[lit.clone()]) else {
            return Err(Stop::Unchecked(
                "the upstream sent a frame guardwire cannot read",
            ));
        };
        // A string equal to a text the decoder delivered by value is that text (already
        // checked) — unless its path already carries text of its own: then it continues that
        // text and is checked with it (a copy could otherwise split a match between frames).
        if by_value.take_if(&text, || !guard.has_channel(0, Channel::Other(path))) {
            continue;
        }
        if text.is_empty() {
            continue;
        }
        if fallback.unknown == UnknownContent::Block {
            return Err(Stop::Unchecked(
                "the upstream sent content guardwire does not model (unknown_content: block)",
            ));
        }
        check_text(guard, 0, path, text, Some(lit), needs, spans)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
