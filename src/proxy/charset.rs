//! The charset rule: a body is checked as the text its reader decodes, and the reader is sent
//! exactly that text, as UTF-8.
//!
//! Readers disagree on how bytes become text. httpx (the Python SDKs: `mcp`, `a2a-sdk`, and
//! their SSE readers) decodes with the `charset` of `Content-Type` — any codec Python knows,
//! `utf-7` and `utf-32` included — and `Response.json()` ignores it, guessing UTF-16/32 from
//! a byte-order mark or the zero bytes of the first four; openai's and anthropic's SSE readers
//! decode UTF-8 whatever is declared; fetch (Node, the MCP TypeScript SDK, browsers) decodes
//! UTF-8 and drops a leading UTF-8 byte-order mark. Checking the bytes as UTF-8 while relaying
//! the upstream's `charset` let a server hand a client text guardwire never read.
//!
//! So a body is decoded once, as the Encoding Standard decodes it (encoding_rs): with the
//! encoding its `charset` names — a WHATWG label, UTF-8 when none is given — unless a
//! byte-order mark at its start names another (the mark is dropped). The checks read that text,
//! and the client gets it as UTF-8 under a `Content-Type` that says so (the upstream's
//! parameters are not relayed: they could name a charset a reader parses differently). A
//! charset guardwire cannot decode (`utf-7`, `utf-32`, any label the standard does not know,
//! several that disagree, an RFC 2231 `charset*`) is refused, never guessed. UTF-8 without a
//! mark, the normal case, goes through as it came: no copy, no second pass.
//!
//! The decoding is incremental ([`Transcoder`]): a character split across reads waits in the
//! decoder (at most 3 bytes) and comes out whole, so a stream checks and sends the same text
//! however its bytes were split. Malformed sequences become U+FFFD, as every reader above does
//! (they are in what was checked, and what is sent).

use bytes::Bytes;
use encoding_rs::{CoderResult, Decoder, Encoding, REPLACEMENT, UTF_8, X_USER_DEFINED};
use http::header::{self, HeaderMap, HeaderValue};

/// Why a body's declared charset cannot be read; the message names the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

/// What a head's `Content-Type` says of its body's bytes.
#[derive(Debug)]
pub struct Declared {
    /// What the body is decoded from (before a byte-order mark is looked at).
    pub encoding: &'static Encoding,
    /// The `Content-Type` the UTF-8 body goes on with; `None`: the one it came with says that
    /// already (or there was none).
    pub content_type: Option<HeaderValue>,
}

impl Declared {
    /// Puts the `Content-Type` the body goes on with into `headers`.
    pub fn label(&self, headers: &mut HeaderMap) {
        if let Some(v) = &self.content_type {
            headers.insert(header::CONTENT_TYPE, v.clone());
        }
    }

    /// A decoder for the body, from its first byte.
    pub fn transcoder(&self) -> Transcoder {
        Transcoder::new(self.encoding)
    }
}

/// The body capture's view of an answer (`capture:`): shown the body as the checks read it —
/// decoded from its declared charset into UTF-8 — so a record replays what was decided, not
/// the bytes on the wire.
pub struct DecodedTap {
    text: std::sync::Mutex<Transcoder>,
    inner: std::sync::Arc<dyn crate::upstream::Tap>,
}

impl DecodedTap {
    pub fn new(text: Transcoder, inner: std::sync::Arc<dyn crate::upstream::Tap>) -> DecodedTap {
        DecodedTap {
            text: std::sync::Mutex::new(text),
            inner,
        }
    }
}

impl crate::upstream::Tap for DecodedTap {
    fn data(&self, bytes: &[u8]) {
        let mut text = self.text.lock().unwrap_or_else(|p| p.into_inner());
        if text.passes() {
            drop(text);
            return self.inner.data(bytes);
        }
        let out = text.push(Bytes::copy_from_slice(bytes));
        drop(text);
        if !out.is_empty() {
            self.inner.data(&out);
        }
    }
}

/// The media type (`type/subtype`, lower case) and charset of a head's `Content-Type`, or why
/// its body cannot be read as its readers read it. No `Content-Type`: UTF-8, no media type.
pub fn declared(headers: &HeaderMap) -> Result<Declared, Unreadable> {
    let mut lines = headers.get_all(header::CONTENT_TYPE).iter();
    let Some(value) = lines.next() else {
        return Ok(Declared {
            encoding: UTF_8,
            content_type: None,
        });
    };
    if lines.next().is_some() {
        // Readers join them, or take the first, or the last.
        return Err(Unreadable("several Content-Type headers".into()));
    }
    let shown = || String::from_utf8_lossy(value.as_bytes()).into_owned();
    let parsed = parse(value.as_bytes())
        .ok_or_else(|| Unreadable(format!("Content-Type `{}` cannot be read", shown())))?;
    let mut encoding = None;
    for label in &parsed.charsets {
        let found = match label {
            Label::Extended => {
                return Err(Unreadable(format!(
                    "Content-Type `{}` has an RFC 2231 charset parameter",
                    shown()
                )))
            }
            Label::Plain(l) => supported(l).ok_or_else(|| {
                Unreadable(format!(
                    "charset `{}` (Content-Type `{}`) is not one guardwire can decode",
                    String::from_utf8_lossy(l),
                    shown()
                ))
            })?,
        };
        if encoding.is_some_and(|e| e != found) {
            return Err(Unreadable(format!(
                "Content-Type `{}` declares several charsets",
                shown()
            )));
        }
        encoding = Some(found);
    }
    // Kept as it came only when it says UTF-8 plainly: its type and, at most, `charset=utf-8`.
    let plain = parsed.others == 0
        && match parsed.charsets.as_slice() {
            [] => true,
            [Label::Plain(l)] => l.eq_ignore_ascii_case(b"utf-8"),
            _ => false,
        };
    let content_type = match plain {
        true => None,
        false => {
            let mut v = parsed.essence.clone();
            if !parsed.charsets.is_empty() {
                v.push_str("; charset=utf-8");
            }
            Some(HeaderValue::from_str(&v).map_err(|_| Unreadable("bad Content-Type".into()))?)
        }
    };
    Ok(Declared {
        encoding: encoding.unwrap_or(UTF_8),
        content_type,
    })
}

/// The encoding a WHATWG label names, if guardwire decodes it: not the "replacement" encoding
/// (labels of ISO-2022-KR, HZ and others whose text the standard refuses) nor x-user-defined
/// (no reader outside browsers knows it).
fn supported(label: &[u8]) -> Option<&'static Encoding> {
    Encoding::for_label(label).filter(|e| *e != REPLACEMENT && *e != X_USER_DEFINED)
}

/// A `charset` parameter as written.
#[derive(Debug, PartialEq, Eq)]
enum Label {
    Plain(Vec<u8>),
    /// `charset*=…` (RFC 2231): Python's `email` reads it; guardwire does not.
    Extended,
}

#[derive(Debug)]
struct Parsed {
    /// `type/subtype`, lower case.
    essence: String,
    charsets: Vec<Label>,
    /// Parameters other than `charset`.
    others: usize,
}

/// `type/subtype *( ; name=value )`, with quoted values (RFC 9110 §8.3.1). `None`: not a media
/// type, or a quoted value not closed.
fn parse(v: &[u8]) -> Option<Parsed> {
    let (essence, mut rest) = match memchr::memchr(b';', v) {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    let essence = essence.trim_ascii();
    let (kind, sub) = essence.split_at(memchr::memchr(b'/', essence)?);
    let sub = &sub[1..];
    if !is_token(kind) || !is_token(sub) {
        return None;
    }
    let mut parsed = Parsed {
        essence: String::from_utf8_lossy(essence).to_ascii_lowercase(),
        charsets: Vec::new(),
        others: 0,
    };
    while !rest.trim_ascii().is_empty() {
        let (name, after) = match memchr::memchr2(b'=', b';', rest) {
            Some(i) if rest[i] == b'=' => (&rest[..i], &rest[i + 1..]),
            // A parameter without a value.
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, &b""[..]),
        };
        let name = name.trim_ascii();
        let (value, after) = value(after)?;
        rest = after;
        if name.eq_ignore_ascii_case(b"charset") {
            parsed.charsets.push(Label::Plain(value));
        } else if name.len() > 7 && name[..8].eq_ignore_ascii_case(b"charset*") {
            parsed.charsets.push(Label::Extended);
        } else if !name.is_empty() {
            parsed.others += 1;
        }
    }
    Some(parsed)
}

/// A parameter's value (a token or a quoted string, unquoted) and what follows its `;`.
fn value(v: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let t = v.trim_ascii_start();
    if t.first() == Some(&b'"') {
        let mut out = Vec::new();
        let mut i = 1;
        loop {
            match *t.get(i)? {
                b'"' => break,
                b'\\' => {
                    out.push(*t.get(i + 1)?);
                    i += 2;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        let rest = &t[i + 1..];
        let rest = match memchr::memchr(b';', rest) {
            Some(j) => &rest[j + 1..],
            None => &b""[..],
        };
        return Some((out, rest));
    }
    Some(match memchr::memchr(b';', v) {
        Some(i) => (v[..i].trim_ascii().to_vec(), &v[i + 1..]),
        None => (v.trim_ascii().to_vec(), &b""[..]),
    })
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A body's bytes decoded into UTF-8 as they arrive (see the module's text).
pub struct Transcoder {
    state: State,
}

impl std::fmt::Debug for Transcoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match &self.state {
            State::Start(_) => "Transcoder(start)",
            State::Utf8 => "Transcoder(UTF-8)",
            State::Decoding(d) => d.encoding().name(),
        })
    }
}

enum State {
    /// The first bytes of a body declared UTF-8, until they show whether a byte-order mark
    /// starts it (at most 2 bytes wait here).
    Start(Vec<u8>),
    /// UTF-8 without a mark: the bytes are the text.
    Utf8,
    Decoding(Box<Decoder>),
}

impl Transcoder {
    pub fn new(encoding: &'static Encoding) -> Transcoder {
        let state = match encoding == UTF_8 {
            true => State::Start(Vec::new()),
            // The decoder looks for a byte-order mark itself.
            false => State::Decoding(Box::new(encoding.new_decoder())),
        };
        Transcoder { state }
    }

    /// True while bytes go through as they came (UTF-8 without a mark, after its start).
    pub fn passes(&self) -> bool {
        matches!(self.state, State::Utf8)
    }

    /// The UTF-8 text of `chunk`, the next bytes of the body (empty while a character or the
    /// start of a body is incomplete).
    pub fn push(&mut self, chunk: Bytes) -> Bytes {
        match &mut self.state {
            State::Utf8 => chunk,
            // An empty piece is not given to the decoder: encoding_rs 0.8.35's Shift_JIS
            // decoder forgets a pending lead byte on an empty, not last, input.
            State::Decoding(_) if chunk.is_empty() => chunk,
            State::Decoding(d) => decode(d, &chunk, false),
            State::Start(head) => {
                let bytes = match head.is_empty() {
                    true => chunk,
                    false => {
                        head.extend_from_slice(&chunk);
                        Bytes::from(std::mem::take(head))
                    }
                };
                if may_become_a_mark(&bytes) {
                    self.state = State::Start(bytes.to_vec());
                    return Bytes::new();
                }
                match Encoding::for_bom(&bytes) {
                    None => {
                        self.state = State::Utf8;
                        bytes
                    }
                    Some((e, mark)) if e == UTF_8 => {
                        self.state = State::Utf8;
                        bytes.slice(mark..)
                    }
                    Some((e, mark)) => {
                        let mut d = Box::new(e.new_decoder_without_bom_handling());
                        let out = decode(&mut d, &bytes[mark..], false);
                        self.state = State::Decoding(d);
                        out
                    }
                }
            }
        }
    }

    /// What is left at the body's end: a character it cut short (as U+FFFD), or a start too
    /// short to be a mark.
    pub fn finish(&mut self) -> Bytes {
        match std::mem::replace(&mut self.state, State::Utf8) {
            State::Utf8 => Bytes::new(),
            State::Start(head) => Bytes::from(head),
            State::Decoding(mut d) => decode(&mut d, &[], true),
        }
    }

    /// A whole body, decoded.
    pub fn whole(mut self, body: Bytes) -> Bytes {
        let text = self.push(body);
        let tail = self.finish();
        match tail.is_empty() {
            true => text,
            false => [text, tail].concat().into(),
        }
    }
}

/// True when `bytes` are too few to tell, and could still be the start of a byte-order mark.
fn may_become_a_mark(bytes: &[u8]) -> bool {
    const UTF8_MARK: &[u8] = b"\xEF\xBB\xBF";
    match bytes.len() {
        0 => true,
        1 => matches!(bytes[0], 0xEF | 0xFE | 0xFF),
        2 => bytes == &UTF8_MARK[..2],
        _ => false,
    }
}

/// `src` decoded into UTF-8; `last`: the body ends with it.
fn decode(d: &mut Decoder, mut src: &[u8], last: bool) -> Bytes {
    let room = d
        .max_utf8_buffer_length(src.len())
        .unwrap_or(src.len().saturating_mul(3));
    let mut out = String::with_capacity(room);
    loop {
        let (result, read, _) = d.decode_to_string(src, &mut out, last);
        src = &src[read..];
        match result {
            CoderResult::InputEmpty => return Bytes::from(out),
            CoderResult::OutputFull => out.reserve(src.len().saturating_mul(3) + 16),
        }
    }
}

#[cfg(test)]
mod tests;
