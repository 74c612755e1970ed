//! Byte-exact Server-Sent-Events framing.
//!
//! The proxy must forward clean streams frame for frame, byte for byte, so it cannot re-serialise
//! events the way general SSE parsers do. [`SseFramer`] only finds event boundaries (a blank line,
//! with any of CRLF, LF or CR as line terminator, even when split across reads) and hands out each
//! event's raw bytes; [`SseFrame::fields`] reads the `event:` and `data:` fields from them.
//! Work is O(bytes): each byte is looked at once, however the stream is split, and the bytes
//! between line terminators are skipped with `memchr`.

use bytes::{Bytes, BytesMut};
use std::borrow::Cow;

/// One SSE event exactly as the upstream sent it, terminating blank line included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    pub raw: Bytes,
}

/// The fields of a frame that guardwire reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SseFields<'a> {
    /// Value of the last `event:` line, if any.
    pub event: Option<&'a [u8]>,
    /// Values of the `data:` lines joined with `\n`; `None` when the frame has no data line
    /// (comments, keep-alives).
    pub data: Option<Cow<'a, [u8]>>,
    /// Value of the last `id:` line, if any.
    pub id: Option<&'a [u8]>,
    /// Value of the last `retry:` line, if any.
    pub retry: Option<&'a [u8]>,
    /// A line — a comment or a field, `data` included — holds a character some clients break
    /// lines at (`breaks_for_some_reader`): the rest of it is a line of its own to them
    /// (`data: …` behind a U+2028 in an `event:` line).
    pub line_breaks_for_some_reader: bool,
    /// A line names a field the SSE standard does not define: ignored by the standard, read by
    /// some clients all the same (google-genai hands a line that is not `data: …` to its JSON
    /// reader; a `data` behind a byte-order mark is data to a client that drops the mark).
    pub unknown_field: bool,
}

impl SseFrame {
    pub fn fields(&self) -> SseFields<'_> {
        let mut out = SseFields::default();
        for line in lines(&self.raw) {
            out.line_breaks_for_some_reader |= breaks_for_some_reader(line);
            let Some((name, value)) = field(line) else {
                continue;
            };
            match name {
                b"data" => {
                    out.data = Some(match out.data.take() {
                        None => Cow::Borrowed(value),
                        Some(prev) => {
                            let mut joined = prev.into_owned();
                            joined.push(b'\n');
                            joined.extend_from_slice(value);
                            Cow::Owned(joined)
                        }
                    })
                }
                b"event" => out.event = Some(value),
                b"id" => out.id = Some(value),
                b"retry" => out.retry = Some(value),
                _ => out.unknown_field = true,
            }
        }
        out
    }

    /// The values of every `event`, `id` and `retry` line, in order (a frame may repeat one;
    /// the standard keeps the last, a client that reads lines raw reads them all).
    pub fn field_values(&self) -> impl Iterator<Item = &[u8]> {
        lines(&self.raw).filter_map(|line| match field(line) {
            Some((b"event" | b"id" | b"retry", value)) => Some(value),
            _ => None,
        })
    }

    /// True when the frame carries nothing a client could read: only comments (keep-alives),
    /// blank lines and a numeric `retry:`. A frame without data that carries anything else
    /// (an `event:` or `id:` alone, an unknown field) is none of the protocols' and cannot be
    /// checked.
    pub fn is_inert(&self) -> bool {
        lines(&self.raw).all(|line| match field(line) {
            None => !breaks_for_some_reader(line),
            Some((name, value)) => {
                name == b"retry" && !value.is_empty() && value.iter().all(u8::is_ascii_digit)
            }
        })
    }

    /// True when every line is a comment, a blank line or one of the fields the SSE standard
    /// defines (`data`, `event`, `id`, `retry`). A frame with another field name (a `data`
    /// behind a byte-order mark, which a client that drops the mark reads as data) cannot be
    /// read as its client reads it.
    pub fn has_only_standard_fields(&self) -> bool {
        lines(&self.raw).all(|line| match field(line) {
            None => !breaks_for_some_reader(line),
            Some((name, _)) => matches!(name, b"data" | b"event" | b"id" | b"retry"),
        })
    }

    /// The same frame with every comment's text dropped (`:` kept, a keep-alive still): the
    /// standard ignores comments, but google-genai hands a line that is not `data: …` to its
    /// JSON reader and puts it in the exception it raises — text no check read would reach the
    /// app. (A frame without such a comment is returned as it is: no copy.)
    pub fn without_comment_text(self) -> SseFrame {
        let raw = &self.raw;
        let has_text = (raw.len() > 1 && raw[0] == b':' && !matches!(raw[1], b'\n' | b'\r'))
            || memchr::memmem::find_iter(raw, b"\n:")
                .chain(memchr::memmem::find_iter(raw, b"\r:"))
                .any(|i| !matches!(raw.get(i + 2), None | Some(b'\n' | b'\r')));
        if !has_text {
            return self;
        }
        // (One a reader splits is refused whole by the pipeline: left for it to see.)
        let comment = |line: &[u8]| line.first() == Some(&b':');
        if lines(raw).any(|l| comment(l) && breaks_for_some_reader(l)) {
            return self;
        }
        let mut out = Vec::with_capacity(raw.len());
        for line in lines(raw).filter(|l| !l.is_empty()) {
            out.extend_from_slice(if comment(line) { b":" } else { line });
            out.push(b'\n');
        }
        out.push(b'\n');
        SseFrame {
            raw: Bytes::from(out),
        }
    }

    /// The same frame with its data replaced: other lines (event, id, comments) stay in place,
    /// the `data:` lines become the lines of `data`.
    pub fn with_data(&self, data: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(self.raw.len() + data.len());
        let mut data_written = false;
        for line in lines(&self.raw) {
            if line.is_empty() {
                continue;
            }
            let is_data = line.starts_with(b"data:") || line == b"data";
            if !is_data {
                out.extend_from_slice(line);
                out.push(b'\n');
            } else if !data_written {
                for part in data.split(|&b| b == b'\n') {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(part);
                    out.push(b'\n');
                }
                data_written = true;
            }
        }
        out.push(b'\n');
        Bytes::from(out)
    }
}

/// Whether `line` holds a character Python's `str.splitlines` (httpx's `aiter_lines`, which
/// SDKs read event streams with) breaks lines at besides CR and LF: VT, FF, FS, GS, RS, NEL,
/// U+2028, U+2029.
fn breaks_for_some_reader(line: &[u8]) -> bool {
    // One pass that finds none in nearly every line (ASCII text, or text without C2/E2 leads).
    if !line.iter().any(|&b| b < 0x20 || b == 0xc2 || b == 0xe2) {
        return false;
    }
    line.iter().any(|b| matches!(b, 0x0b | 0x0c | 0x1c..=0x1e))
        || line.windows(2).any(|w| w == [0xc2, 0x85])
        || line
            .windows(3)
            .any(|w| w == [0xe2, 0x80, 0xa8] || w == [0xe2, 0x80, 0xa9])
}

/// Splits raw bytes into lines on CRLF, LF or CR (terminators removed).
/// A line's field name and value (one leading space dropped from the value, as the SSE
/// specification says); `None` for a blank line or a comment.
#[inline]
fn field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    if line.is_empty() || line[0] == b':' {
        return None;
    }
    Some(match memchr::memchr(b':', line) {
        Some(i) => {
            let v = &line[i + 1..];
            (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
        }
        None => (line, &b""[..]),
    })
}

fn lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match memchr::memchr2(b'\n', b'\r', rest) {
            None => {
                let line = rest;
                rest = &[];
                Some(line)
            }
            Some(i) => {
                let line = &rest[..i];
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = &rest[i + skip..];
                Some(line)
            }
        }
    })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FramingError {
    #[error("SSE event larger than {limit} bytes")]
    FrameTooLarge { limit: usize },
}

/// Incremental event-boundary finder. Feed it bytes as they arrive; it returns complete frames.
/// Frames that lie wholly inside one pushed chunk share that chunk's memory (no copy); only an
/// event split across chunks is gathered in a buffer.
#[derive(Debug)]
pub struct SseFramer {
    /// The start of an event whose end has not arrived yet (empty between events).
    buf: BytesMut,
    /// The current line has content (so a terminator does not make a blank line).
    mid_line: bool,
    /// The previous byte was a CR; `Some(true)` if it ended a blank line. Whether a LF follows
    /// (CRLF) decides where the frame ends, so the decision waits for the next byte.
    pending_cr: Option<bool>,
    max_frame: usize,
}

impl SseFramer {
    pub fn new(max_frame: usize) -> Self {
        SseFramer {
            buf: BytesMut::new(),
            mid_line: false,
            pending_cr: None,
            max_frame,
        }
    }

    /// Bytes received but not yet part of a complete frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Appends the frames completed by `chunk` to `out`.
    pub fn push(&mut self, chunk: &Bytes, out: &mut Vec<SseFrame>) -> Result<(), FramingError> {
        let mut frame_start = 0;
        if !self.buf.is_empty() {
            // The event begun in an earlier chunk: gather it until its end.
            match self.find_end(chunk, 0) {
                Some(end) => {
                    self.buf.extend_from_slice(&chunk[..end]);
                    out.push(SseFrame {
                        raw: self.buf.split().freeze(),
                    });
                    frame_start = end;
                }
                None => {
                    self.buf.extend_from_slice(chunk);
                    return self.check_size();
                }
            }
        }
        while let Some(end) = self.find_end(chunk, frame_start) {
            out.push(SseFrame {
                raw: chunk.slice(frame_start..end),
            });
            frame_start = end;
        }
        self.buf.extend_from_slice(&chunk[frame_start..]);
        self.check_size()
    }

    fn check_size(&self) -> Result<(), FramingError> {
        if self.buf.len() > self.max_frame {
            return Err(FramingError::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        Ok(())
    }

    /// Scans `bytes` from `i` (the framer's state says what came before) for the end of the
    /// current event: the offset just past its blank line. `None` when `bytes` ends first; the
    /// state then describes the bytes scanned.
    fn find_end(&mut self, bytes: &[u8], mut i: usize) -> Option<usize> {
        while i < bytes.len() {
            if let Some(blank) = self.pending_cr.take() {
                if bytes[i] == b'\n' {
                    // CRLF: the LF belongs to the terminator the CR began.
                    i += 1;
                    if blank {
                        return Some(i);
                    }
                    continue;
                }
                if blank {
                    // A lone CR ended the blank line: the event ends before this byte.
                    return Some(i);
                }
            }
            // Only line terminators matter; memchr jumps over the text between them.
            let Some(k) = memchr::memchr2(b'\r', b'\n', &bytes[i..]) else {
                self.mid_line = true;
                return None;
            };
            i += k;
            let blank = k == 0 && !self.mid_line;
            self.mid_line = false;
            if bytes[i] == b'\r' {
                self.pending_cr = Some(blank);
                i += 1;
            } else {
                i += 1;
                if blank {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Ends the stream: whatever is left (an event without its closing blank line) becomes a last
    /// frame, so it is checked and forwarded rather than silently lost.
    pub fn finish(&mut self) -> Option<SseFrame> {
        self.pending_cr = None;
        self.mid_line = false;
        if self.buf.is_empty() {
            None
        } else {
            Some(SseFrame {
                raw: self.buf.split().freeze(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]
    use super::*;

    fn frames_of(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut f = SseFramer::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            f.push(&Bytes::copy_from_slice(c), &mut out)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        out.extend(f.finish());
        out.into_iter().map(|f| f.raw.to_vec()).collect()
    }

    /// The frames of `s` by the definition: an event ends with a blank line; lines end with
    /// CRLF, LF or CR. Byte by byte, the whole input at once.
    fn reference_frames(s: &[u8]) -> Vec<Vec<u8>> {
        let (mut frames, mut start, mut line_len, mut i) = (Vec::new(), 0, 0, 0);
        while i < s.len() {
            if s[i] == b'\r' || s[i] == b'\n' {
                let end = if s[i] == b'\r' && s.get(i + 1) == Some(&b'\n') {
                    i + 2
                } else {
                    i + 1
                };
                if line_len == 0 {
                    frames.push(s[start..end].to_vec());
                    start = end;
                }
                line_len = 0;
                i = end;
            } else {
                line_len += 1;
                i += 1;
            }
        }
        if start < s.len() {
            frames.push(s[start..].to_vec());
        }
        frames
    }

    proptest::proptest! {
        #[test]
        fn any_split_gives_the_reference_frames(
            s in proptest::collection::vec(proptest::sample::select(b"a:\r\n d".to_vec()), 0..80),
            cuts in proptest::collection::vec(0usize..80, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(s.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([s.len()]) {
                pieces.push(&s[at..c]);
                at = c;
            }
            proptest::prop_assert_eq!(frames_of(&pieces), reference_frames(&s));
        }
    }

    /// The events an independent SSE parser (eventsource-stream, which follows the WHATWG
    /// algorithm) reads from `chunks`: (event type, data), for events it dispatches.
    fn oracle_events(chunks: &[Vec<u8>]) -> Vec<(String, String)> {
        use eventsource_stream::Eventsource;
        use futures_util::{FutureExt, StreamExt};
        let stream = futures_util::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(c))),
        );
        stream
            .eventsource()
            .map(|e| e.unwrap_or_else(|e| panic!("{e}")))
            .map(|e| (e.event, e.data))
            .collect::<Vec<_>>()
            .now_or_never()
            .unwrap_or_default()
    }

    /// A stream of events of `event:`, `data:` and `id:` lines with UTF-8 values, every line
    /// ended by LF, CRLF or CR, then a blank line (a CR line end and an LF blank line make one
    /// CRLF, so some events run on into the next: both parsers must agree on that too).
    fn sse_stream() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let value = "[a-zé: {}\\\"\\[\\]😀]{0,12}";
        let line = prop_oneof![
            value.prop_map(|v| format!("data: {v}")),
            value.prop_map(|v| format!("data:{v}")),
            "[a-z_.]{1,12}".prop_map(|v| format!("event: {v}")),
            "[0-9]{1,3}".prop_map(|v| format!("id: {v}")),
        ];
        let end = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        let event = proptest::collection::vec((line, end.clone()), 1..5)
            .prop_flat_map(move |lines| (Just(lines), end.clone()));
        proptest::collection::vec(event, 0..6).prop_map(|events| {
            let mut s = String::new();
            for (lines, blank) in events {
                for (l, e) in lines {
                    s.push_str(&l);
                    s.push_str(e);
                }
                s.push_str(blank);
            }
            s.into_bytes()
        })
    }

    proptest::proptest! {
        /// The framer's frames, read with `fields`, are the events an independent parser reads,
        /// at any split of the stream.
        #[test]
        fn frames_agree_with_an_independent_sse_parser(
            s in sse_stream(),
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(s.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([s.len()]) {
                pieces.push(s[at..c].to_vec());
                at = c;
            }
            // Events that ended (a blank line): an unterminated tail is no event to a parser.
            let mut framer = SseFramer::new(1 << 20);
            let mut frames = Vec::new();
            for p in &pieces {
                framer.push(&Bytes::copy_from_slice(p), &mut frames).unwrap_or_else(|e| panic!("{e}"));
            }
            let ours: Vec<(String, String)> = frames
                .iter()
                .filter_map(|frame| {
                    let f = frame.fields();
                    let data = f.data?;
                    let event = f.event.map_or("message".into(), |e| String::from_utf8_lossy(e).into_owned());
                    Some((event, String::from_utf8_lossy(&data).into_owned()))
                })
                .collect();
            proptest::prop_assert_eq!(ours, oracle_events(&pieces));
        }
    }

    #[test]
    fn splits_on_every_terminator_style() {
        let s = b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\r\n";
        let got = frames_of(&[s]);
        assert_eq!(
            got,
            vec![
                b"data: a\n\n".to_vec(),
                b"data: b\r\n\r\n".to_vec(),
                b"data: c\r\r".to_vec(),
                b"data: d\n\r\n".to_vec()
            ]
        );
    }

    #[test]
    fn every_split_point_gives_the_same_frames() {
        let s: &[u8] = b"event: x\r\ndata: h\xc3\xa9llo\r\n\r\n: comment\n\ndata: a\rdata: b\r\r\ndata: [DONE]\n\n";
        let whole = frames_of(&[s]);
        assert_eq!(whole.concat(), s.to_vec());
        for i in 0..=s.len() {
            for j in i..=s.len() {
                assert_eq!(
                    frames_of(&[&s[..i], &s[i..j], &s[j..]]),
                    whole,
                    "split {i} {j}"
                );
            }
        }
    }

    #[test]
    fn fields_join_data_lines_and_skip_comments() {
        let f = SseFrame {
            raw: Bytes::from_static(b": hi\nevent: error\ndata: {\"a\":\ndata:1}\n\n"),
        };
        let fields = f.fields();
        assert_eq!(fields.event, Some(&b"error"[..]));
        assert_eq!(fields.data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        let c = SseFrame {
            raw: Bytes::from_static(b": keep-alive\n\n"),
        };
        assert_eq!(c.fields().data, None);
        assert!(c.is_inert() && !c.fields().line_breaks_for_some_reader);
        // Review 14: a comment some clients read as two lines (httpx's `aiter_lines` breaks at
        // U+2028, NEL, VT, FF, FS, GS, RS) is no keep-alive.
        for sep in [
            "\u{2028}", "\u{2029}", "\u{85}", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
        ] {
            let f = SseFrame {
                raw: Bytes::from(format!(": k{sep}data: {{\"a\":1}}\n\n")),
            };
            assert!(
                !f.is_inert() && f.fields().line_breaks_for_some_reader,
                "{sep:?}"
            );
            assert!(!f.has_only_standard_fields(), "{sep:?}");
        }
    }

    /// The comment rule holds however the stream is split: each frame is judged whole, and a
    /// multi-byte separator cut between reads is the same separator.
    #[test]
    fn a_comment_that_breaks_for_some_reader_is_flagged_at_every_split() {
        for sep in [
            "\u{2028}", "\u{2029}", "\u{85}", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
        ] {
            let s = format!("data: a\n\n: keep{sep}data: {{\"b\":1}}\r\n\r\n: ok\n\n");
            let s = s.as_bytes();
            for i in 0..=s.len() {
                for j in i..=s.len() {
                    let frames = frames_of(&[&s[..i], &s[i..j], &s[j..]]);
                    let flagged: Vec<bool> = frames
                        .iter()
                        .map(|f| {
                            let f = SseFrame {
                                raw: Bytes::from(f.clone()),
                            };
                            f.fields().line_breaks_for_some_reader && !f.is_inert()
                        })
                        .collect();
                    assert_eq!(flagged, [false, true, false], "{sep:?} split {i} {j}");
                }
            }
        }
    }

    #[test]
    fn comments_lose_their_text_and_keep_their_place() {
        let f = |s: &str| {
            SseFrame {
                raw: Bytes::copy_from_slice(s.as_bytes()),
            }
            .without_comment_text()
            .raw
        };
        assert_eq!(f(": forbidden fruit\n\n"), &b":\n\n"[..]);
        assert_eq!(f("data: x\r: secret\r\r"), &b"data: x\n:\n\n"[..]);
        assert_eq!(f("data: x\n:\n\n"), &b"data: x\n:\n\n"[..]);
        assert_eq!(f("data: x\n\n"), &b"data: x\n\n"[..]);
    }

    #[test]
    fn unterminated_tail_is_a_last_frame() {
        assert_eq!(
            frames_of(&[b"data: a\n\ndata: b\n"]),
            vec![b"data: a\n\n".to_vec(), b"data: b\n".to_vec()]
        );
    }

    #[test]
    fn oversized_frame_is_an_error() {
        let mut f = SseFramer::new(8);
        let mut out = Vec::new();
        assert!(f
            .push(&Bytes::from_static(b"data: 0123456789"), &mut out)
            .is_err());
    }
}
