//! SSE framer (`guardwire::sse`): arbitrary bytes pushed in arbitrary pieces.
//!
//! Input: byte 0 = `k` (low 4 bits: the number of cuts; high bits = 0xF0: a 16-byte frame
//! limit), then `k` bytes, each the length of one piece, then the stream (the last piece is what
//! is left).
//!
//! Asserts, without a frame limit:
//! - the frames (and the tail `finish` returns) put back together are the stream, byte for byte;
//! - pushing the stream in pieces gives the same frames as pushing it whole;
//! - they are the frames of the definition (an event ends with a blank line; a line ends with
//!   CRLF, LF or CR), computed byte by byte here;
//! - `with_data` of a frame's own data gives one frame with the same `event` and `data`.
//!
//! With the 16-byte limit: only that nothing panics (when the error comes depends on the cuts).
#![no_main]

use bytes::Bytes;
use guardwire::sse::{SseFrame, SseFramer};
use libfuzzer_sys::fuzz_target;

/// Frames of `pieces` pushed one by one, then the framer's tail; `None` on a framing error.
fn frames_of(pieces: &[&[u8]], max_frame: usize) -> Option<Vec<SseFrame>> {
    let mut framer = SseFramer::new(max_frame);
    let mut out = Vec::new();
    for p in pieces {
        framer.push(&Bytes::copy_from_slice(p), &mut out).ok()?;
    }
    out.extend(framer.finish());
    Some(out)
}

/// The frames by the definition, byte by byte over the whole stream.
fn reference_frames(s: &[u8]) -> Vec<&[u8]> {
    let (mut frames, mut start, mut line_len, mut i) = (Vec::new(), 0, 0, 0);
    while i < s.len() {
        if s[i] == b'\r' || s[i] == b'\n' {
            let end = if s[i] == b'\r' && s.get(i + 1) == Some(&b'\n') {
                i + 2
            } else {
                i + 1
            };
            if line_len == 0 {
                frames.push(&s[start..end]);
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
        frames.push(&s[start..]);
    }
    frames
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let cuts = usize::from(head & 0x0f).min(rest.len());
    let (lens, stream) = rest.split_at(cuts);
    let mut pieces = Vec::with_capacity(cuts + 1);
    let mut at = 0;
    for &len in lens {
        let end = (at + usize::from(len)).min(stream.len());
        pieces.push(&stream[at..end]);
        at = end;
    }
    pieces.push(&stream[at..]);

    if head & 0xf0 == 0xf0 {
        let _ = frames_of(&pieces, 16);
        return;
    }
    let limit = 1 << 20;
    let split = frames_of(&pieces, limit).expect("no frame is over the limit");
    let whole = frames_of(&[stream], limit).expect("no frame is over the limit");
    assert_eq!(
        split, whole,
        "pieces and whole stream give different frames"
    );
    let raw: Vec<&[u8]> = split.iter().map(|f| &f.raw[..]).collect();
    assert_eq!(
        raw.concat(),
        stream,
        "frames do not reassemble to the stream"
    );
    assert_eq!(
        raw,
        reference_frames(stream),
        "frames differ from the definition"
    );

    for frame in &split {
        let fields = frame.fields();
        let _ = frame.is_inert();
        let Some(payload) = fields.data else {
            continue;
        };
        let rewritten = frame.with_data(&payload);
        let again = frames_of(&[&rewritten], limit).expect("no frame is over the limit");
        assert_eq!(again.len(), 1, "with_data gave {} frames", again.len());
        let f2 = again[0].fields();
        assert_eq!(f2.event, fields.event, "with_data changed the event");
        assert_eq!(
            f2.data.as_deref(),
            Some(&payload[..]),
            "with_data changed the data"
        );
    }
});
