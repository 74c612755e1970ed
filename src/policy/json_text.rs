//! Tool-call arguments as the client's JSON parser reads them.
//!
//! Arguments stream as JSON text, and JSON escapes can spell any character: `"\u0066orbidden"`
//! is the string `forbidden` to every client, and `"alpha\nforbidden"` has a line break (a word
//! boundary) before `forbidden`. Scanning the raw text would miss the first and misjudge the
//! second, so the scanner is fed the same text with every string literal's escapes resolved
//! (`\uXXXX` with surrogate pairs, `\n`, `\"`, ...); everything outside string literals (keys'
//! quotes, `:`, numbers, brackets) stays as it is, so patterns written for the JSON still read
//! it the same way.
//!
//! The decoding is incremental: an escape split between two deltas is completed by the second,
//! and [`JsonTextDecoder::pending`] tells the hold-back that the first delta ends inside a
//! character the scanner has not seen yet. Everything else in guardwire (the hold-back, hits,
//! redactions) keeps positions in the raw arguments text; [`JsonTextDecoder::raw_pos`] maps a
//! scanner position back, through a mark kept after each escape.

use std::borrow::Cow;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Escape {
    /// Not inside an escape sequence.
    #[default]
    None,
    /// After a backslash.
    Backslash,
    /// After `\u` and `digits` hex digits, whose value so far is `value`.
    Unicode { digits: u8, value: u16 },
}

#[derive(Debug, Default, Clone)]
pub struct JsonTextDecoder {
    /// Every backslash starts an escape, inside quotes or not (text whose strings a reader
    /// decodes as JSON held in JSON: [`JsonTextDecoder::anywhere`]).
    anywhere: bool,
    in_string: bool,
    escape: Escape,
    /// The raw text of the escape being read (at most `\uXXXX`), written out as it is when it
    /// turns out not to be a valid escape, as a lenient parser would keep it.
    escape_raw: String,
    /// A high surrogate waiting for its low half, and its raw text.
    high: Option<(u16, String)>,
    raw_len: u64,
    decoded_len: u64,
    /// The raw position just after the byte being read (what a mark made now records).
    raw_at: u64,
    /// The raw position of the backslash of the escape being read.
    escape_start: u64,
    /// (decoded, raw) lengths after each escape, oldest first; pruned by [`Self::prune`].
    marks: VecDeque<(u64, u64)>,
}

impl JsonTextDecoder {
    /// A decoder of every escape, wherever it stands: the text read once more as JSON held in
    /// the strings of the JSON around it would be (its quotes, unescaped by the level outside,
    /// no longer tell where its strings are; outside a string a JSON text has no backslash).
    pub fn anywhere() -> Self {
        JsonTextDecoder {
            anywhere: true,
            in_string: true,
            ..JsonTextDecoder::default()
        }
    }

    /// Decodes the next piece of the arguments. Borrows when the piece holds no escape (and
    /// completes none): the common case costs one search for `"` and `\`.
    pub fn decode<'t>(&mut self, raw: &'t str) -> Cow<'t, str> {
        let bytes = raw.as_bytes();
        let plain = if self.anywhere {
            memchr::memchr(b'\\', bytes).is_none().then_some(true)
        } else {
            plain_end(bytes, self.in_string)
        };
        if let (false, Some(in_string)) = (self.pending(), plain) {
            self.in_string = in_string;
            self.raw_len += bytes.len() as u64;
            self.decoded_len += bytes.len() as u64;
            return Cow::Borrowed(raw);
        }
        let mut out = String::with_capacity(raw.len());
        let mut plain = 0; // start of the bytes not yet copied
        let mut i = 0;
        while i < bytes.len() {
            if self.pending() {
                // Inside an escape (or after a high surrogate): one byte at a time.
                self.raw_at = self.raw_len + i as u64;
                if self.escape_byte(bytes[i], &mut out) {
                    i += 1;
                }
                plain = i;
                continue;
            }
            let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                break;
            };
            i += at;
            if bytes[i] == b'"' {
                self.in_string = self.anywhere || !self.in_string;
            } else if self.in_string {
                out.push_str(&raw[plain..i]);
                self.decoded_len += (i - plain) as u64;
                self.escape_start = self.raw_len + i as u64;
                self.escape = Escape::Backslash;
                self.escape_raw.clear();
                self.escape_raw.push('\\');
            }
            i += 1;
            if self.pending() {
                plain = i;
            }
        }
        out.push_str(&raw[plain..]);
        self.decoded_len += (bytes.len() - plain) as u64;
        self.raw_len += bytes.len() as u64;
        Cow::Owned(out)
    }

    /// One byte after a backslash (or after a high surrogate); `raw_at` is its position.
    /// Returns false when the byte is not part of the escape and must be read again as text.
    fn escape_byte(&mut self, b: u8, out: &mut String) -> bool {
        match self.escape {
            Escape::None => {
                if b != b'\\' {
                    self.lone_high(out, self.raw_at);
                    return false;
                }
                // Perhaps the low half of the surrogate pair.
                self.escape_start = self.raw_at;
                self.escape = Escape::Backslash;
                self.escape_raw.clear();
                self.escape_raw.push('\\');
            }
            Escape::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.escape_raw.push('u');
                        self.escape = Escape::Unicode {
                            digits: 0,
                            value: 0,
                        };
                        return true;
                    }
                    _ => {
                        self.invalid_escape(out);
                        return false;
                    }
                };
                self.raw_at += 1;
                self.lone_high(out, self.escape_start);
                self.emit(c, out);
            }
            Escape::Unicode { digits, value } => {
                let Some(d) = (b as char).to_digit(16).filter(|_| b.is_ascii()) else {
                    self.invalid_escape(out);
                    return false;
                };
                self.escape_raw.push(b as char);
                let value = value << 4 | d as u16;
                if digits < 3 {
                    self.escape = Escape::Unicode {
                        digits: digits + 1,
                        value,
                    };
                    return true;
                }
                self.raw_at += 1;
                self.unicode(value, out);
            }
        }
        true
    }

    /// A complete `\uXXXX`.
    fn unicode(&mut self, unit: u16, out: &mut String) {
        self.escape = Escape::None;
        match (self.high.take(), unit) {
            (Some((high, _)), 0xDC00..=0xDFFF) => {
                let c = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                self.emit(char::from_u32(c).unwrap_or('\u{FFFD}'), out);
            }
            (high, 0xD800..=0xDBFF) => {
                self.high = high;
                self.lone_high(out, self.escape_start);
                self.high = Some((unit, std::mem::take(&mut self.escape_raw)));
            }
            (high, _) => {
                self.high = high;
                self.lone_high(out, self.escape_start);
                // A lone low surrogate decodes to the replacement character.
                self.emit(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'), out);
            }
        }
    }

    /// A backslash followed by what no JSON escape is: the client's parser rejects the
    /// arguments, so what was read of the escape is scanned as it came, and the byte that
    /// ended it is read again as text.
    fn invalid_escape(&mut self, out: &mut String) {
        self.lone_high(out, self.escape_start);
        let raw = std::mem::take(&mut self.escape_raw);
        self.escape = Escape::None;
        out.push_str(&raw);
        self.decoded_len += raw.len() as u64;
        self.mark();
    }

    /// A high surrogate not followed by its low half decodes to the replacement character,
    /// whose raw text (the high's escape) ends at `at`. The escape being read, if any, goes on.
    fn lone_high(&mut self, out: &mut String, at: u64) {
        if self.high.take().is_some() {
            out.push('\u{FFFD}');
            self.decoded_len += '\u{FFFD}'.len_utf8() as u64;
            self.marks.push_back((self.decoded_len, at));
        }
    }

    fn emit(&mut self, c: char, out: &mut String) {
        out.push(c);
        self.decoded_len += c.len_utf8() as u64;
        self.escape = Escape::None;
        self.escape_raw.clear();
        self.mark();
    }

    fn mark(&mut self) {
        self.marks.push_back((self.decoded_len, self.raw_at));
    }

    /// True when the text read ends inside an escape or after a high surrogate: a character
    /// the scanner has not seen yet.
    pub fn pending(&self) -> bool {
        self.escape != Escape::None || self.high.is_some()
    }

    /// The end of the arguments: an unfinished escape is scanned as it came.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if let Some((_, raw)) = self.high.take() {
            out.push_str(&raw);
        }
        if self.escape != Escape::None {
            out.push_str(&self.escape_raw);
            self.escape = Escape::None;
        }
        self.decoded_len += out.len() as u64;
        self.raw_at = self.raw_len;
        self.mark();
        out
    }

    /// Length of the raw text read.
    pub fn raw_len(&self) -> u64 {
        self.raw_len
    }

    /// The raw position of decoded position `pos`.
    pub fn raw_pos(&self, pos: u64) -> u64 {
        let i = self.marks.partition_point(|&(d, _)| d <= pos);
        let next = self.marks.get(i).map_or(self.raw_len, |&(_, r)| r);
        match i.checked_sub(1).map(|i| self.marks[i]) {
            Some((d, r)) => (r + (pos - d)).min(next),
            None => pos.min(next),
        }
    }

    /// Positions before decoded `pos` will not be mapped again: marks before the last one at
    /// or before it are dropped.
    pub fn prune(&mut self, pos: u64) {
        let i = self.marks.partition_point(|&(d, _)| d <= pos);
        if i > 1 {
            self.marks.drain(..i - 1);
        }
    }
}

/// For `bytes` read from outside (or inside) a string: `None` when a backslash sits inside a
/// string, else whether the text ends inside one. One pass.
fn plain_end(bytes: &[u8], mut in_string: bool) -> Option<bool> {
    for i in memchr::memchr2_iter(b'"', b'\\', bytes) {
        match bytes[i] {
            b'"' => in_string = !in_string,
            _ if in_string => return None,
            _ => {}
        }
    }
    Some(in_string)
}

/// The whole of a JSON text as [`JsonTextDecoder`] reads it (BeforeCall's tool-call history).
pub fn decode_whole(raw: &str) -> Cow<'_, str> {
    let mut d = JsonTextDecoder::default();
    let text = d.decode(raw);
    let rest = d.finish();
    if rest.is_empty() {
        text
    } else {
        Cow::Owned(text.into_owned() + &rest)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    /// Feeds `raw` in pieces cut at `cuts`; returns the decoded text.
    fn feed(raw: &str, cuts: &[usize]) -> (String, JsonTextDecoder) {
        let mut d = JsonTextDecoder::default();
        let mut out = String::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&raw.len())) {
            if c < at || !raw.is_char_boundary(c) {
                continue;
            }
            out.push_str(&d.decode(&raw[at..c]));
            at = c;
        }
        out.push_str(&d.finish());
        (out, d)
    }

    #[test]
    fn escapes_in_strings_are_resolved_and_the_rest_kept() {
        let raw = r#"{"q":"\u0066orbidden \ud83d\ude00 a\nb \"x\" \\ \/","n":[1,2.5e3,true]}"#;
        assert_eq!(
            decode_whole(raw),
            "{\"q\":\"forbidden 😀 a\nb \"x\" \\ /\",\"n\":[1,2.5e3,true]}"
        );
        // Outside strings nothing is an escape; no escape at all borrows.
        assert!(matches!(decode_whole(r#"{"a":1}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn broken_escapes_are_scanned_as_they_came() {
        assert_eq!(decode_whole(r#""\x""#), r#""\x""#);
        assert_eq!(decode_whole(r#""\u12g""#), r#""\u12g""#);
        assert_eq!(decode_whole(r#""\ud800x""#), "\"\u{FFFD}x\"");
        assert_eq!(decode_whole(r#""\udc00""#), "\"\u{FFFD}\"");
        assert_eq!(decode_whole(r#""\ud800\ud800\udc00""#), "\"\u{FFFD}𐀀\"");
        assert_eq!(decode_whole(r#""\é""#), r#""\é""#);
        assert_eq!(decode_whole(r#""end\u00"#), r#""end\u00"#);
        assert_eq!(decode_whole(r#""end\ud83d"#), r#""end\ud83d"#);
    }

    #[test]
    fn a_lone_high_surrogate_keeps_the_next_characters_raw_positions() {
        let raw = r#""\ud800\u0066x\ud800\q""#;
        let (got, d) = feed(raw, &[]);
        assert_eq!(got, "\"\u{FFFD}fx\u{FFFD}\\q\"");
        // "f" starts at the raw `\u0066` (byte 7), "x" at byte 13, the invalid `\q` at 20.
        assert_eq!(d.raw_pos(4), 7);
        assert_eq!(d.raw_pos(5), 13);
        assert_eq!(d.raw_pos(9), 20);
    }

    #[test]
    fn a_split_escape_is_pending_until_its_last_byte() {
        let mut d = JsonTextDecoder::default();
        assert_eq!(d.decode(r#"{"q":"\u00"#), r#"{"q":""#);
        assert!(d.pending());
        assert_eq!(d.decode("66orbidden"), "forbidden");
        assert!(!d.pending());
        assert_eq!(d.decode(r#"\ud83d"#), "");
        assert!(d.pending());
        assert_eq!(d.decode(r#"\ude00""#), "😀\"");
    }

    /// One character of a string literal, written as JSON may write it.
    fn encoded(c: char, how: u8) -> String {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '/' => Some("\\/"),
            _ => None,
        };
        match (how % 3, short) {
            (0, Some(s)) => s.to_owned(),
            (0, None) if !c.is_control() => c.to_string(),
            (1, _) | (0, None) => c
                .encode_utf16(&mut [0; 2])
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
            (_, Some(s)) => s.to_owned(),
            _ if c.is_control() => format!("\\u{:04X}", c as u32),
            _ => c.to_string(),
        }
    }

    proptest! {
        #[test]
        fn any_escaping_and_any_split_decodes_as_serde_json_does(
            values in prop::collection::vec(("[a-z]{1,3}", "\\PC{0,12}", prop::collection::vec(any::<u8>(), 12)), 1..4),
            cuts in prop::collection::vec(0usize..400, 0..8),
        ) {
            // The raw arguments, the decoded text expected, and where each decoded character
            // starts in the raw text.
            let (mut raw, mut want, mut starts) = (String::from("{"), String::from("{"), Vec::new());
            for (i, (key, value, how)) in values.iter().enumerate() {
                if i > 0 {
                    raw.push(',');
                    want.push(',');
                }
                raw.push_str(&format!("\"{key}\":\""));
                want.push_str(&format!("\"{key}\":\""));
                for (j, c) in value.chars().enumerate() {
                    starts.push((want.len() as u64, raw.len() as u64));
                    raw.push_str(&encoded(c, how[j % how.len()]));
                    want.push(c);
                }
                raw.push('"');
                want.push('"');
            }
            raw.push('}');
            want.push('}');
            let parsed: serde_json::Value = serde_json::from_str(&raw).unwrap();
            prop_assert!(parsed.is_object());
            let mut cuts = cuts;
            cuts.sort_unstable();
            let (got, d) = feed(&raw, &cuts);
            prop_assert_eq!(&got, &want);
            for (dpos, rpos) in starts {
                prop_assert_eq!(d.raw_pos(dpos), rpos);
            }
            prop_assert_eq!(d.raw_pos(want.len() as u64), raw.len() as u64);
        }
    }
}
