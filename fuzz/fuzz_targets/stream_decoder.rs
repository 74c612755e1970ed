//! Every protocol's stream decoder (`Protocol::stream_decoder`), fed as the proxy feeds it.
//!
//! Input: byte 0 picks the protocol (`protocol::all()[b % n]`: 0 openai_chat, 1 openai_responses,
//! 2 anthropic_messages, 3 gemini, and so on in `ProtocolId::ALL`'s order); the rest is an
//! upstream SSE body. It is framed by `SseFramer`
//! and each frame with data is decoded (its `event:` name and joined `data:` lines), until a
//! decoding error or a terminal or error event, where the proxy stops too.
//!
//! Asserts: no panic; every text delta borrowed from the frame lies inside its data (what the
//! redaction's `locate` relies on when it finds texts by address).
#![no_main]

use bytes::Bytes;
use guardwire::delta::Delta;
use guardwire::protocol::{self, FrameKind};
use guardwire::sse::SseFramer;
use libfuzzer_sys::fuzz_target;
use std::borrow::Cow;

fuzz_target!(|data: &[u8]| {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let all = protocol::all();
    let proto = all[usize::from(head) % all.len()];
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    if framer
        .push(&Bytes::copy_from_slice(body), &mut frames)
        .is_err()
    {
        return;
    }
    frames.extend(framer.finish());

    let mut decoder = proto.stream_decoder();
    for frame in &frames {
        let fields = frame.fields();
        let Some(payload) = fields.data else {
            continue;
        };
        let mut out = Vec::new();
        let kind = decoder.decode(fields.event, &payload, &mut out);
        for d in &out {
            let text = match d {
                Delta::Text { text, .. } | Delta::Repeat { text, .. } => text,
                _ => continue,
            };
            if let Cow::Borrowed(t) = text {
                let (base, at) = (payload.as_ptr() as usize, t.as_ptr() as usize);
                if (base..base + payload.len()).contains(&at) {
                    assert!(
                        at + t.len() <= base + payload.len(),
                        "text runs past the data"
                    );
                }
            }
        }
        match kind {
            Ok(FrameKind::Data | FrameKind::Passthrough) => {}
            Ok(FrameKind::Terminal | FrameKind::UpstreamError) | Err(_) => break,
        }
    }
    let _ = decoder.complete_without_terminal();
});
