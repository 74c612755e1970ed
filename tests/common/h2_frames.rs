//! Raw HTTP/2 frames, for tests that must act as no HTTP/2 library would let them (open more
//! streams than allowed, leave a PING unanswered).

use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADERS: u8 = 1;
pub const DATA: u8 = 0;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;

/// One HTTP/2 frame: type, flags, stream id, payload.
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// A frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Reads frames from `sock` into `buf` until one satisfies `want`; panics after `bound`, or
/// if the server closes the connection first.
pub async fn frame_where(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
    bound: Duration,
    want: impl Fn(&Frame) -> bool,
) -> Frame {
    tokio::time::timeout(bound, async {
        loop {
            while buf.len() >= 9 {
                let len =
                    usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let frame = Frame {
                    kind: buf[3],
                    flags: buf[4],
                    stream: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff,
                    payload: buf[9..9 + len].to_vec(),
                };
                buf.drain(..9 + len);
                if want(&frame) {
                    return frame;
                }
            }
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed the HTTP/2 connection");
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("no such frame in time")
}
