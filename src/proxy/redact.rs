//! Rewriting frames and bodies for `mode: redact`.
//!
//! Checks report redactions as byte spans of a channel's text (see
//! [`crate::policy::Redaction`]). The text of each delta sits in its frame as one JSON string
//! literal; when a frame is released, every literal whose span a redaction touches is replaced
//! by the re-encoded, redacted text. This is the same for every protocol: no wire format is
//! re-serialised, and untouched frames pass byte for byte.

use crate::policy::{ChannelId, Redaction};
use std::borrow::Cow;
use std::ops::Range;

/// Where one delta's text is: its channel span and its JSON string literal in the frame data.
#[derive(Debug, Clone)]
pub struct TextSpan {
    pub channel: ChannelId,
    /// Channel positions of the text.
    pub start: u64,
    pub end: u64,
    /// The string literal (quotes included) in the data; for `raw` texts, the JSON value itself.
    pub literal: Range<usize>,
    /// The text is a JSON value written as is (Gemini's function-call `args` object).
    pub raw: bool,
    pub text: String,
}

/// Finds where in `data` a decoded text came from: exactly, by address, when decoding borrowed
/// it (a string literal's content, or a raw JSON value: `raw` is then true); else the first
/// string literal not already taken that decodes to it.
pub fn locate(data: &[u8], text: &str, taken: &[Range<usize>]) -> Option<(Range<usize>, bool)> {
    if let Some(found) = borrowed_range(data, text) {
        return Some(found);
    }
    string_literals(data)
        .find(|lit| {
            !taken.contains(lit)
                && serde_json::from_slice::<Cow<'_, str>>(&data[lit.clone()])
                    .is_ok_and(|s| s == text)
        })
        .map(|lit| (lit, false))
}

/// Where `text` lies in `data` when decoding borrowed it: its string literal (quotes included),
/// or, when not quoted, a raw JSON value (`true` then). An unescaped copy never lies inside.
pub fn borrowed_range(data: &[u8], text: &str) -> Option<(Range<usize>, bool)> {
    let (base, at) = (data.as_ptr() as usize, text.as_ptr() as usize);
    if at < base || at + text.len() > base + data.len() {
        return None;
    }
    let off = at - base;
    let quoted = off > 0
        && off + text.len() < data.len()
        && data[off - 1] == b'"'
        && data[off + text.len()] == b'"';
    Some(if quoted {
        (off - 1..off + text.len() + 1, false)
    } else {
        (off..off + text.len(), true)
    })
}

/// True when `data` has log-probabilities that are not empty (`null`, `[]`, `{}`), or might:
/// a key written with escapes that spells one of their names counts, whatever its value.
fn carries_logprobs(data: &[u8]) -> bool {
    const KEYS: [&[u8]; 3] = [b"\"logprobs\"", b"\"top_logprobs\"", b"\"logprobsResult\""];
    let escaped_key = || {
        string_literals(data).any(|lit| {
            data[lit.clone()].contains(&b'\\')
                && data[lit.end..].trim_ascii_start().starts_with(b":")
                && serde_json::from_slice::<String>(&data[lit])
                    .is_ok_and(|key| KEYS.iter().any(|k| &k[1..k.len() - 1] == key.as_bytes()))
        })
    };
    escaped_key()
        || KEYS.iter().any(|key| {
            memchr::memmem::find_iter(data, key).any(|at| {
                let rest = data[at + key.len()..].trim_ascii_start();
                let Some(value) = rest.strip_prefix(b":") else {
                    return false; // a string value, not a key
                };
                let value = value.trim_ascii_start();
                !(value.starts_with(b"null")
                    || value.starts_with(b"[]")
                    || value.starts_with(b"{}")
                    || (value.starts_with(b"[") && value[1..].trim_ascii_start().starts_with(b"]")))
            })
        })
}

/// Every string literal of a JSON text, quotes included, in order.
fn string_literals(data: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < data.len() {
            if data[i] == b'"' {
                let start = i;
                i += 1;
                while i < data.len() {
                    match data[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            return Some(start..i);
                        }
                        _ => i += 1,
                    }
                }
                return None;
            }
            i += 1;
        }
        None
    })
}

/// A redaction that cannot be written back: the text was not found in its frame, or a raw JSON
/// value would no longer be JSON once masked. The caller fails closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unmaskable;

/// The data with every touched text rewritten; `Ok(None)` when no redaction touches it.
pub fn rewrite(
    data: &[u8],
    spans: &[TextSpan],
    redactions: &[Redaction],
) -> Result<Option<Vec<u8>>, Unmaskable> {
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for s in spans {
        let Some(text) = redact_text(s, redactions) else {
            continue;
        };
        if s.literal.is_empty() {
            return Err(Unmaskable);
        }
        let encoded = if s.raw {
            if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
                return Err(Unmaskable);
            }
            text
        } else {
            // A String always serialises.
            serde_json::to_string(&text).unwrap_or_default()
        };
        edits.push((s.literal.clone(), encoded));
    }
    if edits.is_empty() {
        return Ok(None);
    }
    if carries_logprobs(data) {
        // Log-probabilities repeat the text token by token (as strings and as byte lists);
        // they cannot be masked faithfully, and leaving them would leak what was masked.
        return Err(Unmaskable);
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(data.len());
    let mut at = 0;
    for (range, text) in edits {
        if range.start < at {
            continue; // two deltas from one literal: the first edit stands
        }
        out.extend_from_slice(&data[at..range.start]);
        out.extend_from_slice(text.as_bytes());
        at = range.end;
    }
    out.extend_from_slice(&data[at..]);
    Ok(Some(out))
}

/// The text of `span` with the redactions of its channel applied: each redacted range removed,
/// and each mask placed where its match starts (so a match over several frames is masked once).
pub fn redact_text(span: &TextSpan, redactions: &[Redaction]) -> Option<String> {
    let text = span.text.as_str();
    let mut out = String::with_capacity(text.len());
    let mut cur = 0usize;
    let mut touched = false;
    for r in redactions
        .iter()
        .filter(|r| r.channel == span.channel && r.start < span.end && r.end > span.start)
    {
        touched = true;
        let a = floor_boundary(text, (r.start.max(span.start) - span.start) as usize);
        let b = ceil_boundary(text, (r.end.min(span.end) - span.start) as usize);
        if a > cur {
            out.push_str(&text[cur..a]);
        }
        if r.start >= span.start {
            out.push_str(&r.mask);
        }
        cur = cur.max(b);
    }
    if !touched {
        return None;
    }
    out.push_str(&text[cur.min(text.len())..]);
    Some(out)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn red(start: u64, end: u64) -> Redaction {
        Redaction {
            channel: 0,
            start,
            end,
            mask: "[X]".into(),
        }
    }

    #[test]
    fn frames_with_logprobs_cannot_be_rewritten() {
        let span = TextSpan {
            channel: 0,
            start: 0,
            end: 7,
            literal: 0..0,
            raw: false,
            text: "call 55".into(),
        };
        let r = [red(5, 13)];
        for (data, ok) in [
            (&br#"{"x":"call 55","logprobs":null}"#[..], true),
            (br#"{"x":"call 55","logprobs": [ ]}"#, true),
            (
                br#"{"x":"call 55","logprobs":{"content":[{"token":"55"}]}}"#,
                false,
            ),
            (br#"{"x":"call 55","top_logprobs":[{"token":"55"}]}"#, false),
            // A key spelled with escapes is what the client's parser reads: logprobs.
            (br#"{"x":"call 55","\u006cogprobs":{"content":[]}}"#, false),
            (br#"{"x":"call 55","other\n":{"content":[]}}"#, true),
        ] {
            let s = TextSpan {
                literal: 5..14,
                ..span.clone()
            };
            assert_eq!(
                rewrite(data, &[s], &r).is_ok(),
                ok,
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn locates_borrowed_and_escaped_texts() {
        let data = br#"{"a":"same","b":"tab\there","c":"same"}"#;
        // Borrowed: the raw content of the literal (escapes and all), found by address.
        let borrowed: &str = std::str::from_utf8(&data[17..26]).unwrap();
        assert_eq!(borrowed, "tab\\there");
        assert_eq!(locate(data, borrowed, &[]), Some((16..27, false)));
        // Copied when unescaped: found by value.
        assert_eq!(locate(data, "tab\there", &[]), Some((16..27, false)));
        assert_eq!(locate(data, "same", &[]), Some((5..11, false)));
        let first = 5..11;
        assert_eq!(
            locate(data, "same", std::slice::from_ref(&first)),
            Some((32..38, false))
        );
        let raw = br#"{"args":{"a":1}}"#;
        let value = std::str::from_utf8(&raw[8..15]).unwrap();
        assert_eq!(locate(raw, value, &[]), Some((8..15, true)));
    }

    #[test]
    fn masks_once_where_the_match_starts_and_removes_the_rest() {
        // Channel text "call 555-0100 now" in three frames: "call 55", "5-01", "00 now".
        let span = |start: u64, text: &str| TextSpan {
            channel: 0,
            start,
            end: start + text.len() as u64,
            literal: 0..0,
            raw: false,
            text: text.into(),
        };
        let r = [red(5, 13)];
        assert_eq!(
            redact_text(&span(0, "call 55"), &r).as_deref(),
            Some("call [X]")
        );
        assert_eq!(redact_text(&span(7, "5-01"), &r).as_deref(), Some(""));
        assert_eq!(
            redact_text(&span(11, "00 now"), &r).as_deref(),
            Some(" now")
        );
        assert_eq!(redact_text(&span(13, " now"), &r), None);
        let data = br#"{"x":"call 55"}"#;
        let s = TextSpan {
            literal: 5..14,
            ..span(0, "call 55")
        };
        assert_eq!(
            rewrite(data, &[s], &r).unwrap().unwrap(),
            br#"{"x":"call [X]"}"#.to_vec()
        );
    }
}
