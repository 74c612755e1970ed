//! Byte-exact Server-Sent-Events framing.
//!
//! The proxy must forward clean streams frame for frame, byte for byte, so it cannot re-serialise
//! events the way general SSE parsers do. [`SseFramer`] only finds event boundaries (a blank line,
//! with any of CRLF, LF or CR as line terminator, even when split across reads) and hands out each
//! event's raw bytes; [`SseFrame::fields`] reads the `event:` and `data:` fields from them.
//! Work is O(bytes): each byte is looked at once, however the stream is split.

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
}

impl SseFrame {
    pub fn fields(&self) -> SseFields<'_> {
        let mut out = SseFields::default();
        for line in lines(&self.raw) {
            if line.is_empty() || line[0] == b':' {
                continue;
            }
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
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
                _ => {}
            }
        }
        out
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

/// Splits raw bytes into lines on CRLF, LF or CR (terminators removed).
fn lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
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
#[derive(Debug)]
pub struct SseFramer {
    buf: BytesMut,
    /// Index in `buf` of the first byte not looked at yet.
    scanned: usize,
    /// Bytes seen on the current line (0 = at the start of a line).
    line_len: usize,
    /// The previous byte was a CR; `Some(true)` if it ended a blank line. Whether a LF follows
    /// (CRLF) decides where the frame ends, so the decision waits for the next byte.
    pending_cr: Option<bool>,
    max_frame: usize,
}

impl SseFramer {
    pub fn new(max_frame: usize) -> Self {
        SseFramer {
            buf: BytesMut::new(),
            scanned: 0,
            line_len: 0,
            pending_cr: None,
            max_frame,
        }
    }

    /// Bytes received but not yet part of a complete frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Appends `chunk` and pushes every frame it completes onto `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseFrame>) -> Result<(), FramingError> {
        self.buf.extend_from_slice(chunk);
        let mut i = self.scanned;
        while i < self.buf.len() {
            let b = self.buf[i];
            if let Some(blank) = self.pending_cr.take() {
                if b == b'\n' {
                    // CRLF: the LF belongs to the terminator the CR began.
                    if blank {
                        self.emit(i + 1, out);
                        i = 0;
                    } else {
                        i += 1;
                    }
                    continue;
                }
                if blank {
                    self.emit(i, out);
                    i = 0;
                }
            }
            match b {
                b'\r' => {
                    self.pending_cr = Some(self.line_len == 0);
                    self.line_len = 0;
                }
                b'\n' => {
                    let blank = self.line_len == 0;
                    self.line_len = 0;
                    if blank {
                        self.emit(i + 1, out);
                        i = 0;
                        continue;
                    }
                }
                _ => self.line_len += 1,
            }
            i += 1;
        }
        self.scanned = self.buf.len();
        if self.buf.len() > self.max_frame {
            return Err(FramingError::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        Ok(())
    }

    /// Ends the stream: whatever is left (an event without its closing blank line) becomes a last
    /// frame, so it is checked and forwarded rather than silently lost.
    pub fn finish(&mut self) -> Option<SseFrame> {
        self.pending_cr = None;
        self.line_len = 0;
        self.scanned = 0;
        if self.buf.is_empty() {
            None
        } else {
            Some(SseFrame {
                raw: self.buf.split().freeze(),
            })
        }
    }

    fn emit(&mut self, end: usize, out: &mut Vec<SseFrame>) {
        out.push(SseFrame {
            raw: self.buf.split_to(end).freeze(),
        });
        self.line_len = 0;
        self.scanned = 0;
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
            f.push(c, &mut out).unwrap_or_else(|e| panic!("{e}"));
        }
        out.extend(f.finish());
        out.into_iter().map(|f| f.raw.to_vec()).collect()
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
        assert!(f.push(b"data: 0123456789", &mut out).is_err());
    }
}
