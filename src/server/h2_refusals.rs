//! Counts the HTTP/2 streams refused for `limits.max_h2_streams`.
//!
//! hyper hands the cap to `h2`, which refuses a stream over it inside the connection (an
//! `RST_STREAM` with `REFUSED_STREAM`, never reaching the service) and offers no hook or
//! counter for it. It is the only `REFUSED_STREAM` `h2` 0.4 sends (the other resets it sends
//! — a stream guardwire ends, a protocol error — carry other codes), so this wrapper around
//! the connection's plaintext I/O reads the frame headers of what the server writes and counts
//! each `RST_STREAM` whose code is `REFUSED_STREAM`.
//!
//! It parses only connections whose first bytes from the client are the HTTP/2 preface; for
//! HTTP/1 it is one comparison on the first read and one branch per write. On HTTP/2 it reads
//! 9 bytes of header per frame and skips payloads without looking at them.

use crate::metrics::{Metrics, RejectReason};
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const RST_STREAM: u8 = 0x3;
const REFUSED_STREAM: u32 = 0x7;

/// What the client's first bytes said.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sniff {
    /// This many bytes of the preface matched so far.
    Preface(usize),
    Http2,
    Other,
}

/// Where the writer is in the server's frame sequence.
enum Frames {
    /// Inside a frame header: these bytes of it so far.
    Header([u8; 9], usize),
    /// Inside an `RST_STREAM`'s 4-byte error code.
    ResetCode([u8; 4], usize),
    /// This many payload bytes left to skip.
    Skip(usize),
}

pub struct H2Refusals<IO> {
    io: IO,
    sniff: Sniff,
    frames: Frames,
    metrics: Arc<Metrics>,
}

impl<IO> H2Refusals<IO> {
    pub fn new(io: IO, metrics: Arc<Metrics>) -> H2Refusals<IO> {
        H2Refusals {
            io,
            sniff: Sniff::Preface(0),
            frames: Frames::Header([0; 9], 0),
            metrics,
        }
    }

    /// The client's first bytes were already read elsewhere (peeked): `true` they were the
    /// HTTP/2 preface, `false` they were not. (HTTP/2's server writes its SETTINGS before it
    /// reads the preface through this wrapper, so the choice must be known before then.)
    pub fn known(mut self, http2: bool) -> H2Refusals<IO> {
        self.sniff = if http2 { Sniff::Http2 } else { Sniff::Other };
        self
    }

    fn sniff(&mut self, read: &[u8]) {
        let Sniff::Preface(seen) = self.sniff else {
            return;
        };
        let want = &PREFACE[seen..];
        let n = read.len().min(want.len());
        self.sniff = if read[..n] != want[..n] {
            Sniff::Other
        } else if seen + n == PREFACE.len() {
            Sniff::Http2
        } else {
            Sniff::Preface(seen + n)
        };
    }

    /// `written` went out to the client.
    fn wrote(&mut self, mut written: &[u8]) {
        match self.sniff {
            Sniff::Http2 => {}
            // The server writes only after the client's first bytes chose the protocol.
            Sniff::Preface(_) | Sniff::Other => {
                self.sniff = Sniff::Other;
                return;
            }
        }
        while !written.is_empty() {
            match &mut self.frames {
                Frames::Skip(left) => {
                    let n = (*left).min(written.len());
                    *left -= n;
                    written = &written[n..];
                    if *left == 0 {
                        self.frames = Frames::Header([0; 9], 0);
                    }
                }
                Frames::Header(head, got) => {
                    let n = (9 - *got).min(written.len());
                    head[*got..*got + n].copy_from_slice(&written[..n]);
                    *got += n;
                    written = &written[n..];
                    if *got == 9 {
                        let len = usize::from(head[0]) << 16
                            | usize::from(head[1]) << 8
                            | usize::from(head[2]);
                        self.frames = if head[3] == RST_STREAM && len == 4 {
                            Frames::ResetCode([0; 4], 0)
                        } else if len == 0 {
                            Frames::Header([0; 9], 0)
                        } else {
                            Frames::Skip(len)
                        };
                    }
                }
                Frames::ResetCode(code, got) => {
                    let n = (4 - *got).min(written.len());
                    code[*got..*got + n].copy_from_slice(&written[..n]);
                    *got += n;
                    written = &written[n..];
                    if *got == 4 {
                        if u32::from_be_bytes(*code) == REFUSED_STREAM {
                            self.metrics.reject(RejectReason::H2Streams);
                        }
                        self.frames = Frames::Header([0; 9], 0);
                    }
                }
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for H2Refusals<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(this.sniff, Sniff::Preface(_)) && buf.filled().len() > before {
            let read = buf.filled()[before..].to_vec();
            this.sniff(&read);
        }
        res
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for H2Refusals<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &res {
            this.wrote(&buf[..*n]);
        }
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &res {
            let mut left = *n;
            for b in bufs {
                if left == 0 {
                    break;
                }
                let take = left.min(b.len());
                this.wrote(&b[..take]);
                left -= take;
            }
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            0,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    fn refused(m: &Metrics) -> bool {
        m.render(crate::metrics::Exposition::Text004)
            .contains("guardwire_rejected_total{reason=\"max_h2_streams\"} 1\n")
    }

    #[test]
    fn counts_refused_streams_at_every_split_and_nothing_else() {
        let mut out = frame(0x4, &[0; 6]);
        out.extend(frame(0x0, &[0x3, 0, 0, 0, 0x7, 0, 0])); // DATA that looks like a reset
        out.extend(frame(RST_STREAM, &0x8u32.to_be_bytes())); // CANCEL
        out.extend(frame(RST_STREAM, &REFUSED_STREAM.to_be_bytes()));
        out.extend(frame(0x8, &[0, 0, 1, 0]));
        for split in 0..=out.len() {
            let m = Arc::new(Metrics::new());
            let mut w = H2Refusals::new((), Arc::clone(&m));
            w.sniff(&PREFACE[..5]);
            w.sniff(PREFACE[5..].as_ref());
            w.wrote(&out[..split]);
            w.wrote(&out[split..]);
            assert!(refused(&m), "split at {split}");
        }
        // HTTP/1: the same bytes are not parsed.
        let m = Arc::new(Metrics::new());
        let mut w = H2Refusals::new((), Arc::clone(&m));
        w.sniff(b"POST / HTTP/1.1\r\n");
        w.wrote(&out);
        assert!(!refused(&m));
    }
}
