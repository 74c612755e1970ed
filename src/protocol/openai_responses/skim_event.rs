//! Responses events read without serde_json: the events a stream template cannot read (each
//! comes once per answer), above all the four that close an answer — `output_text.done`,
//! `content_part.done`, `output_item.done` and `response.completed` — which repeat the whole
//! text. serde_json decoded each of them and the fallback (`residual`) walked each a second
//! time: a third of a Responses stream's instructions beyond Chat's.
//!
//! [`read`] builds the same [`Event`] serde_json builds, with [`Skim`] (never more lenient than
//! serde_json: anything it is not sure of — an escaped key, a known member twice, a value of an
//! unexpected type, a malformed value anywhere — is [`Unsure`], and the event is decoded by
//! serde_json as before). The deltas come from that `Event` by the same [`event_deltas`].
//!
//! **The fallback.** While reading, every string the fallback could report is noted: a string
//! read into a member that is not structural (a text, a name, arguments), and any string inside
//! a skipped member unless it is a structural key's string or the member is one of the
//! protocol's exempt trees (`STRUCTURAL.nested`, at the top and under `response`, the only
//! paths it names; below them none applies). [`read`] promises that the fallback has nothing
//! to read (`fully_read`) only when nothing was skipped that may carry text, every noted string
//! was delivered by place, as a borrowed delta text — what `check_residual` leaves out — and
//! no delta was delivered by value (the fallback matches those against what it finds).
//! An empty string (never delivered), a text with escapes (delivered by value) or any unknown
//! string sends the event through the fallback as before. The differential property test
//! (`skim_event_tests.rs`) holds [`read`] to serde_json and the fallback's finding.

use super::{
    event_deltas, Event, OutputContent, OutputItem, Usage, WholeResponse,
    EVENT_STRUCTURAL as STRUCTURAL,
};
use crate::delta::Delta;
use crate::protocol::residual::structure_shaped;
use crate::protocol::skim::{Skim, Skimmed, Unsure};
use crate::protocol::FrameKind;
use std::borrow::Cow;
use std::ops::Range;

/// What the fallback could report in an event read so far.
#[derive(Default)]
struct Texts {
    /// Literals (quotes included) of the strings read into members that are not structural.
    read: smallvec::SmallVec<[Range<usize>; 8]>,
    /// A skipped member has a string that is neither a structural key's nor exempt.
    unread: bool,
    /// Literals of the identifier-shaped strings under structural keys (outside the exempt
    /// trees): what the fallback hands to the secret and PII patterns
    /// (`residual_and_identifiers`), listed for them when the fallback does not walk.
    ids: smallvec::SmallVec<[Range<usize>; 8]>,
}

impl Texts {
    /// A structural key's string of the shape of structure: an identifier (when not empty).
    fn identifier(&mut self, literal: Range<usize>) {
        if literal.len() > 2 {
            self.ids.push(literal);
        }
    }
}

/// Reads `data` into `out` and returns its kind and whether the fallback has nothing left to
/// read; `None` (and `out` untouched) when serde_json must decode it. With `fully_read`,
/// `identifiers` gets the identifier-shaped strings the fallback would have handed to the
/// secret and PII patterns.
pub(super) fn read<'a>(
    data: &'a [u8],
    out: &mut Vec<Delta<'a>>,
    identifiers: &mut Vec<Range<usize>>,
    part: &mut Option<super::PartEvent>,
) -> Option<(FrameKind, bool)> {
    let mut s = Skim::new(data);
    let mut texts = Texts::default();
    let ev = event(&mut s, &mut texts).ok()?;
    s.end().ok()?;
    *part = super::part_of(&ev);
    let before = out.len();
    let kind = event_deltas(ev, out);
    let delivered = &out[before..];
    // A delta text delivered by value (escaped, or a name of guardwire's own) is matched by
    // the fallback against what it finds: the fallback reads the event.
    let fully_read = !texts.unread
        && delivered.iter().all(|d| borrowed_from(d, data))
        && texts
            .read
            .iter()
            .all(|lit| delivered.iter().any(|d| by_place(d, data, lit)));
    if fully_read {
        identifiers.extend(texts.ids);
    }
    Some((kind, fully_read))
}

/// True when `d` delivers the string whose literal is `lit` as a slice of `data` (borrowed),
/// as a text the checks read.
fn by_place(d: &Delta<'_>, data: &[u8], lit: &Range<usize>) -> bool {
    let Some(body) = data.get(lit.start + 1..lit.end - 1) else {
        return false;
    };
    let same = |t: &str| t.as_ptr() == body.as_ptr() && t.len() == body.len();
    match d {
        Delta::Text { text, .. } | Delta::Repeat { text, .. } => same(text),
        Delta::ToolCallStart { name, .. } => same(name),
        // Ids and reasons are no text the checks read (`proxy::check`): one noted here (not
        // of the shape of structure) is the fallback's to check.
        Delta::Finish { .. } | Delta::Usage { .. } => false,
    }
}

/// True when every text of `d` is a slice of `data`.
fn borrowed_from(d: &Delta<'_>, data: &[u8]) -> bool {
    let range = data.as_ptr_range();
    let inside = |t: &str| {
        let r = t.as_bytes().as_ptr_range();
        range.start <= r.start && r.end <= range.end
    };
    match d {
        Delta::Text { text, .. } | Delta::Repeat { text, .. } => inside(text),
        Delta::ToolCallStart { name, id, .. } => inside(name) && id.as_deref().is_none_or(inside),
        Delta::Finish { reason, .. } => inside(reason),
        Delta::Usage { .. } => true,
    }
}

/// A member read at most once (serde_json refuses a known member twice).
fn once(seen: &mut u16, bit: u16) -> Skimmed<()> {
    if *seen & bit != 0 {
        return Err(Unsure);
    }
    *seen |= bit;
    Ok(())
}

/// `null` or a string; a string under a key that is not structural is noted in `texts`.
fn opt_str<'a>(
    s: &mut Skim<'a>,
    texts: &mut Texts,
    structural: bool,
) -> Skimmed<Option<Cow<'a, str>>> {
    let start = s.value_start();
    let v = s.opt_str()?;
    // A structural key's string is structure only of its shape (`residual::structure_shaped`).
    if v.is_some() {
        match structural && structure_shaped(s.since(start)) {
            true => texts.identifier(start..s.pos()),
            false => texts.read.push(start..s.pos()),
        }
    }
    Ok(v)
}

/// A member the struct does not read, at `path` from the top (`STRUCTURAL.nested`'s paths):
/// an exempt tree is skipped, anything else walked for strings the fallback would report.
fn unread(s: &mut Skim<'_>, texts: &mut Texts, key: &[u8], path: &[&str]) -> Skimmed<()> {
    if STRUCTURAL
        .nested
        .iter()
        .any(|(p, k)| *p == path && k.as_bytes() == key)
    {
        return s.skip();
    }
    unread_value(s, texts, STRUCTURAL.is_structural_key(key))
}

/// A value nobody reads: any string in it that the fallback would report sets
/// `texts.unread` — every string but a structural key's own (an object member's; not the
/// strings of an array under one). An escaped key inside is [`Unsure`].
fn unread_value(s: &mut Skim<'_>, texts: &mut Texts, structural: bool) -> Skimmed<()> {
    let start = s.value_start();
    match s.bytes().get(start) {
        Some(b'"') => {
            s.skip_str()?;
            match structural && structure_shaped(s.since(start)) {
                true => texts.identifier(start..s.pos()),
                false => texts.unread = true,
            }
            Ok(())
        }
        Some(b'{') => s.object(|s, key| unread_value(s, texts, STRUCTURAL.is_structural_key(key))),
        Some(b'[') => s.array(|s| unread_value(s, texts, false)),
        _ => s.skip(),
    }
}

/// A member's value that is below the paths `STRUCTURAL.nested` names (see the tests).
const DEEP: &[&str] = &["(below the exempt paths)"];

fn event<'a>(s: &mut Skim<'a>, texts: &mut Texts) -> Skimmed<Event<'a>> {
    let mut ev = Event::default();
    let mut seen = 0;
    s.object(|s, key| {
        match key {
            b"type" => {
                once(&mut seen, 1)?;
                let start = s.value_start();
                ev.kind = s.str()?;
                // A type that does not look like one is text for the fallback.
                if !structure_shaped(s.since(start)) {
                    return Err(Unsure);
                }
                texts.identifier(start..s.pos());
            }
            b"output_index" => {
                once(&mut seen, 2)?;
                ev.output_index = if s.null() { None } else { Some(s.u32()?) };
            }
            b"content_index" => {
                once(&mut seen, 2048)?;
                ev.content_index = if s.null() { None } else { Some(s.u32()?) };
            }
            b"summary_index" => {
                once(&mut seen, 4096)?;
                ev.summary_index = if s.null() { None } else { Some(s.u32()?) };
            }
            b"delta" => {
                once(&mut seen, 4)?;
                ev.delta = opt_str(s, texts, false)?;
            }
            b"text" => {
                once(&mut seen, 8)?;
                ev.text = opt_str(s, texts, false)?;
            }
            b"refusal" => {
                once(&mut seen, 16)?;
                ev.refusal = opt_str(s, texts, false)?;
            }
            b"arguments" => {
                once(&mut seen, 32)?;
                ev.arguments = opt_str(s, texts, false)?;
            }
            b"input" => {
                once(&mut seen, 64)?;
                ev.input = opt_str(s, texts, false)?;
            }
            // Read leniently by serde (anything but a string is `None`): only the two
            // shapes here.
            b"code" => {
                once(&mut seen, 128)?;
                ev.code = opt_str(s, texts, false)?;
            }
            b"part" => {
                once(&mut seen, 256)?;
                ev.part = if s.null() {
                    None
                } else {
                    Some(content(s, texts)?)
                };
            }
            b"item" => {
                once(&mut seen, 512)?;
                ev.item = if s.null() {
                    None
                } else {
                    Some(item(s, texts)?)
                };
            }
            b"response" => {
                once(&mut seen, 1024)?;
                ev.response = if s.null() {
                    None
                } else {
                    Some(response(s, texts)?)
                };
            }
            _ => unread(s, texts, key, &[])?,
        }
        Ok(())
    })?;
    // `type` is required.
    if seen & 1 == 0 {
        return Err(Unsure);
    }
    Ok(ev)
}

fn content<'a>(s: &mut Skim<'a>, texts: &mut Texts) -> Skimmed<OutputContent<'a>> {
    let mut c = OutputContent::default();
    let mut seen = 0;
    s.object(|s, key| {
        match key {
            b"type" => {
                once(&mut seen, 1)?;
                c.kind = opt_str(s, texts, true)?;
            }
            b"text" => {
                once(&mut seen, 2)?;
                c.text = opt_str(s, texts, false)?;
            }
            b"refusal" => {
                once(&mut seen, 4)?;
                c.refusal = opt_str(s, texts, false)?;
            }
            _ => unread(s, texts, key, DEEP)?,
        }
        Ok(())
    })?;
    Ok(c)
}

/// An array of contents (`null` is no array to serde).
fn contents<'a>(s: &mut Skim<'a>, texts: &mut Texts) -> Skimmed<Vec<OutputContent<'a>>> {
    let mut v = Vec::new();
    s.array(|s| {
        v.push(content(s, texts)?);
        Ok(())
    })?;
    Ok(v)
}

fn item<'a>(s: &mut Skim<'a>, texts: &mut Texts) -> Skimmed<OutputItem<'a>> {
    let mut it = OutputItem::default();
    let mut seen = 0;
    s.object(|s, key| {
        match key {
            b"type" => {
                once(&mut seen, 1)?;
                it.kind = opt_str(s, texts, true)?;
            }
            b"name" => {
                once(&mut seen, 2)?;
                it.name = opt_str(s, texts, false)?;
            }
            b"call_id" => {
                once(&mut seen, 4)?;
                it.call_id = opt_str(s, texts, true)?;
            }
            b"arguments" => {
                once(&mut seen, 8)?;
                it.arguments = opt_str(s, texts, false)?;
            }
            b"input" => {
                once(&mut seen, 16)?;
                it.input = opt_str(s, texts, false)?;
            }
            b"code" => {
                once(&mut seen, 32)?;
                it.code = opt_str(s, texts, false)?;
            }
            b"content" => {
                once(&mut seen, 64)?;
                it.content = contents(s, texts)?;
            }
            b"summary" => {
                once(&mut seen, 128)?;
                it.summary = contents(s, texts)?;
            }
            _ => unread(s, texts, key, DEEP)?,
        }
        Ok(())
    })?;
    Ok(it)
}

fn response<'a>(s: &mut Skim<'a>, texts: &mut Texts) -> Skimmed<WholeResponse<'a>> {
    let mut r = WholeResponse::default();
    let mut seen = 0;
    s.object(|s, key| {
        match key {
            b"output" => {
                once(&mut seen, 1)?;
                s.array(|s| {
                    r.output.push(item(s, texts)?);
                    Ok(())
                })?;
            }
            b"status" => {
                once(&mut seen, 2)?;
                r.status = opt_str(s, texts, true)?;
            }
            b"usage" => {
                once(&mut seen, 4)?;
                r.usage = if s.null() {
                    None
                } else {
                    Some(usage(s, texts)?)
                };
            }
            _ => unread(s, texts, key, &["response"])?,
        }
        Ok(())
    })?;
    Ok(r)
}

fn usage(s: &mut Skim<'_>, texts: &mut Texts) -> Skimmed<Usage> {
    let mut u = Usage::default();
    let mut seen = 0;
    s.object(|s, key| {
        match key {
            b"input_tokens" => {
                once(&mut seen, 1)?;
                u.input_tokens = s.opt_u64()?;
            }
            b"output_tokens" => {
                once(&mut seen, 2)?;
                u.output_tokens = s.opt_u64()?;
            }
            _ => unread(s, texts, key, DEEP)?,
        }
        Ok(())
    })?;
    Ok(u)
}

#[cfg(test)]
#[path = "skim_event_tests.rs"]
mod tests;
