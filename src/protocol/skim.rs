//! A strict, allocation-free JSON reader for the stream hot path.
//!
//! serde_json's derive path spends most of a chat chunk's decoding on what guardwire throws
//! away: every key is decoded and UTF-8-checked, every ignored value parsed, the chunk struct
//! moved several times. A stream decoder needs a few strings from a frame whose shape barely
//! varies, so it walks the frame with this reader first and hands anything the reader does not
//! fully understand — an escaped key, an unexpected type, a known key twice, deep nesting — to
//! serde_json, which then decides and reports errors exactly as before ([`Unsure`]).
//!
//! The reader is never more lenient than serde_json: whatever it accepts is JSON that serde_json
//! accepts with the same values (the decoders' differential tests hold it to that).

use std::borrow::Cow;

/// "Not sure": the caller decodes the input with serde_json instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsure;

pub type Skimmed<T> = Result<T, Unsure>;

/// Nesting limit, below serde_json's 128 so that anything deeper goes to serde for its error.
const MAX_DEPTH: u32 = 100;

pub struct Skim<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// A value skipped by [`Skim::skip_unread`] may carry text.
    unread_text: bool,
    /// Where the strings are whose content the parse does not depend on.
    holes: Holes,
}

/// The string values of one input, in order, whose bytes change nothing else the reader
/// decides: those skipped under a structural key, and the ones a caller marks
/// ([`Skim::mark_hole`]) because it keeps their value. Another input with the same bytes
/// around other valid strings in these places reads the same but for those strings — what
/// the chat decoder's per-stream template relies on (`openai_chat/template.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holes {
    /// `[opening quote, after the closing quote)` of each string.
    spans: [(u32, u32); Holes::MAX],
    len: u8,
    /// Bit `k`: hole `k` was marked by the caller (its value is kept).
    marked: u8,
    /// More holes than [`Holes::MAX`] (or an input over 4 GiB): unusable as a template.
    overflow: bool,
}

impl Holes {
    const MAX: usize = 8;

    fn push(&mut self, start: usize, end: usize, marked: bool) {
        let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(end)) else {
            self.overflow = true;
            return;
        };
        match self.spans.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = (start, end);
                self.marked |= u8::from(marked) << self.len;
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    /// The holes in order, each with whether the caller marked it; `None` after an overflow.
    pub fn spans(&self) -> Option<impl Iterator<Item = (usize, usize, bool)> + '_> {
        (!self.overflow).then(|| {
            self.spans[..usize::from(self.len)]
                .iter()
                .enumerate()
                .map(|(k, &(s, e))| (s as usize, e as usize, self.marked >> k & 1 == 1))
        })
    }
}

impl<'a> Skim<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Skim {
            b,
            i: 0,
            depth: 0,
            unread_text: false,
            holes: Holes::default(),
        }
    }

    /// A reader positioned at byte `at` of `b` (which the caller knows to be a value's start).
    pub fn at(b: &'a [u8], at: usize) -> Self {
        let mut s = Skim::new(b);
        s.i = at;
        s
    }

    /// The whole input.
    pub fn bytes(&self) -> &'a [u8] {
        self.b
    }

    /// The position of the next byte to read.
    pub fn pos(&self) -> usize {
        self.i
    }

    /// The bytes read from `start` (a position of this input) to here.
    pub fn since(&self, start: usize) -> &'a [u8] {
        self.b.get(start..self.i).unwrap_or_default()
    }

    /// Where the next value starts (whitespace skipped).
    pub fn value_start(&mut self) -> usize {
        self.peek();
        self.i
    }

    /// Marks the string value read from `start` to here as a hole the caller keeps.
    pub fn mark_hole(&mut self, start: usize) {
        self.holes.push(start, self.i, true);
    }

    /// The holes seen so far.
    pub fn holes(&self) -> Holes {
        self.holes
    }

    /// A string, checked and not kept.
    pub fn skip_str(&mut self) -> Skimmed<()> {
        self.eat(b'"')?;
        self.string_body().map(|_| ())
    }

    fn peek(&mut self) -> Option<u8> {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                self.i += 1;
            } else {
                return Some(c);
            }
        }
        None
    }

    fn eat(&mut self, c: u8) -> Skimmed<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    fn enter(&mut self) -> Skimmed<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unsure);
        }
        Ok(())
    }

    /// Only whitespace is left (serde_json rejects trailing characters).
    pub fn end(&mut self) -> Skimmed<()> {
        if self.peek().is_none() {
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    /// An object: `f` is called with each key (raw bytes; an escaped key is [`Unsure`]) and
    /// must consume its value.
    pub fn object(&mut self, mut f: impl FnMut(&mut Self, &'a [u8]) -> Skimmed<()>) -> Skimmed<()> {
        self.members(b'{', b'}', |s| {
            s.eat(b'"')?;
            let (key, escaped) = s.string_body()?;
            // A key not in the shape of a field name is read by the fallback (`residual`).
            if escaped || !super::residual::name_shaped(key) {
                return Err(Unsure);
            }
            s.eat(b':')?;
            f(s, key)
        })
    }

    /// An array: `f` is called once per element and must consume it.
    pub fn array(&mut self, f: impl FnMut(&mut Self) -> Skimmed<()>) -> Skimmed<()> {
        self.members(b'[', b']', f)
    }

    /// `open`, members read by `each` and separated by commas, `close`.
    fn members(
        &mut self,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Self) -> Skimmed<()>,
    ) -> Skimmed<()> {
        self.eat(open)?;
        self.enter()?;
        if self.peek() == Some(close) {
            self.i += 1;
        } else {
            loop {
                each(self)?;
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(c) if c == close => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(Unsure),
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// Consumes a `null` if one is next.
    pub fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    /// A string, borrowed from the input unless it has escapes.
    pub fn str(&mut self) -> Skimmed<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i - 1;
        let (body, escaped, _) = self.string_scan()?;
        if escaped {
            // Rare enough (newlines, quotes) to let serde_json unescape just this string (it
            // checks the UTF-8 itself).
            return serde_json::from_slice::<String>(&self.b[start..self.i])
                .map(Cow::Owned)
                .map_err(|_| Unsure);
        }
        // The one UTF-8 check of a kept string (`string_scan` leaves it to the caller).
        std::str::from_utf8(body)
            .map(Cow::Borrowed)
            .map_err(|_| Unsure)
    }

    /// `null` or a string.
    pub fn opt_str(&mut self) -> Skimmed<Option<Cow<'a, str>>> {
        if self.null() {
            Ok(None)
        } else {
            self.str().map(Some)
        }
    }

    /// A non-negative integer that fits `u64` (serde_json's own rule for unsigned fields:
    /// no sign, fraction or exponent).
    pub fn u64(&mut self) -> Skimmed<u64> {
        self.peek();
        let digits = self.b[self.i..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let text = &self.b[self.i..self.i + digits];
        if digits == 0 || (digits > 1 && text[0] == b'0') {
            return Err(Unsure);
        }
        if matches!(self.b.get(self.i + digits), Some(b'.' | b'e' | b'E')) {
            return Err(Unsure);
        }
        let mut v: u64 = 0;
        for &c in text {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .ok_or(Unsure)?;
        }
        self.i += digits;
        Ok(v)
    }

    pub fn u32(&mut self) -> Skimmed<u32> {
        u32::try_from(self.u64()?).map_err(|_| Unsure)
    }

    /// `null` or a `u64`.
    pub fn opt_u64(&mut self) -> Skimmed<Option<u64>> {
        if self.null() {
            Ok(None)
        } else {
            self.u64().map(Some)
        }
    }

    /// The value of member `key`, which the caller does not read: skipped, noting whether it
    /// may carry text (a string inside, and `key` not one of `structural`).
    pub fn skip_unread(&mut self, key: &[u8], structural: impl Fn(&[u8]) -> bool) -> Skimmed<()> {
        self.peek();
        let start = self.i;
        self.skip()?;
        // A structural key exempts a string value only, of the shape of structure (see
        // `residual::Structural`).
        let exempt = self.b[start] == b'"'
            && structural(key)
            && crate::protocol::residual::structure_shaped(&self.b[start..self.i]);
        if exempt {
            self.holes.push(start, self.i, false);
        } else if !self.unread_text && memchr::memchr(b'"', &self.b[start..self.i]).is_some() {
            self.unread_text = true;
        }
        Ok(())
    }

    /// True when some value skipped with [`Skim::skip_unread`] may carry text: the fallback
    /// (`residual`) must read the input.
    pub fn unread_text(&self) -> bool {
        self.unread_text
    }

    /// Any value, checked against the JSON grammar and not kept.
    pub fn skip(&mut self) -> Skimmed<()> {
        match self.peek().ok_or(Unsure)? {
            b'"' => {
                self.i += 1;
                self.string_body().map(|_| ())
            }
            // Keys of skipped objects may have escapes.
            b'{' => self.members(b'{', b'}', |s| {
                s.eat(b'"')?;
                s.string_body()?;
                s.eat(b':')?;
                s.skip()
            }),
            b'[' => self.array(|s| s.skip()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Unsure),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Skimmed<()> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Skimmed<()> {
        let b = self.b;
        let mut i = self.i;
        let digits = |i: &mut usize| {
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - start
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let first = b.get(i).copied();
        let int = digits(&mut i);
        if int == 0 || (int > 1 && first == Some(b'0')) {
            return Err(Unsure);
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return Err(Unsure);
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return Err(Unsure);
            }
        }
        self.i = i;
        Ok(())
    }

    /// The rest of a string whose opening quote is consumed: its raw body (valid UTF-8), and
    /// whether it has escapes. Control characters, malformed escapes and `\u` surrogates that
    /// are not a high-low pair are [`Unsure`].
    fn string_body(&mut self) -> Skimmed<(&'a [u8], bool)> {
        let (body, escaped, non_ascii) = self.string_scan()?;
        // serde_json checks UTF-8 in keys and kept strings; checking skipped ones too keeps this
        // reader from accepting what serde_json might not. ASCII needs no second look.
        if non_ascii {
            std::str::from_utf8(body).map_err(|_| Unsure)?;
        }
        Ok((body, escaped))
    }

    /// [`Skim::string_body`] but for the UTF-8 check, which is the caller's: the raw body,
    /// whether it has escapes, and whether it has bytes ≥ 0x80 (only those need the check).
    fn string_scan(&mut self) -> Skimmed<(&'a [u8], bool, bool)> {
        let b = self.b;
        let start = self.i;
        let mut escaped = false;
        let mut non_ascii = false;
        let mut i = start;
        loop {
            i += plain_run(&b[i..], &mut non_ascii);
            match *b.get(i).ok_or(Unsure)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match b.get(i + 1).ok_or(Unsure)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            i = match hex_unit(b, i + 2)? {
                                0xD800..=0xDBFF if b.get(i + 6..i + 8) == Some(b"\\u") => {
                                    match hex_unit(b, i + 8)? {
                                        0xDC00..=0xDFFF => i + 12,
                                        _ => return Err(Unsure),
                                    }
                                }
                                0xD800..=0xDFFF => return Err(Unsure),
                                _ => i + 6,
                            };
                        }
                        _ => return Err(Unsure),
                    }
                }
                _ => return Err(Unsure), // a control character
            }
        }
        self.i = i + 1;
        Ok((&b[start..i], escaped, non_ascii))
    }
}

/// Length of the leading run of `b` free of `"`, `\\` and control characters; notes in
/// `non_ascii` whether the run has bytes ≥ 0x80. Most strings are short (keys, ids, a delta's
/// few words): their first [`SHORT_RUN`] bytes go eight per step (SWAR, ~3–7 instructions per
/// byte, no call); a run longer than that (a closing event's whole answer) goes to
/// [`long_run`] (~0.7 instructions per byte, with a fixed cost a short string would not repay).
fn plain_run(b: &[u8], non_ascii: &mut bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = 0;
    while let Some(word) = b.get(i..i + 8) {
        if i == SHORT_RUN {
            return i + long_run(&b[i..], non_ascii);
        }
        let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // Bytes < 0x20 (exact for ASCII bytes; bytes ≥ 0x80 are masked out by `!x`), `"`, `\\`.
        let stop = (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
            | zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')));
        if stop != 0 {
            // The lowest flagged byte is exact (borrows only run upwards).
            let bit = stop.trailing_zeros();
            // The bytes before the flagged one: their high bits, from the word in hand.
            *non_ascii |= x & HIGH & ((1u64 << (bit & !7)) - 1) != 0;
            return i + (bit / 8) as usize;
        }
        *non_ascii |= x & HIGH != 0;
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        *non_ascii |= c >= 0x80;
        i += 1;
    }
    i
}

/// Bytes [`plain_run`] reads eight at a time before it hands the rest to [`long_run`].
const SHORT_RUN: usize = 32;

/// [`plain_run`] for long runs: memchr's SIMD search for `"` or `\\`, then one pass over the
/// bytes before it (a fold the compiler vectorizes) for the smallest byte (a control
/// character?) and the union of the high bits (non-ASCII?).
fn long_run(b: &[u8], non_ascii: &mut bool) -> usize {
    let end = memchr::memchr2(b'"', b'\\', b).unwrap_or(b.len());
    let run = &b[..end];
    let (least, any) = run
        .iter()
        .fold((u8::MAX, 0u8), |(least, any), &c| (least.min(c), any | c));
    if least < 0x20 {
        // A control character stops the run (rare: the string is then read by serde_json).
        let at = run.iter().position(|&c| c < 0x20).unwrap_or(end);
        *non_ascii |= run[..at].iter().any(|&c| c >= 0x80);
        return at;
    }
    *non_ascii |= any >= 0x80;
    end
}

/// The code unit of the four hex digits at `at`.
fn hex_unit(b: &[u8], at: usize) -> Skimmed<u16> {
    let hex = b.get(at..at + 4).ok_or(Unsure)?;
    if !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(Unsure);
    }
    let hex = std::str::from_utf8(hex).map_err(|_| Unsure)?;
    u16::from_str_radix(hex, 16).map_err(|_| Unsure)
}

#[cfg(test)]
mod tests;
