//! The redaction rewrite (`proxy::redact`: `locate`, `redact_text`, `rewrite`), on spans found
//! the way the proxy finds them.
//!
//! Input: byte 0 = protocol (low 4 bits: `protocol::all()[b % n]`, as in `stream_decoder`) and
//! the number of redactions (`(b >> 4) & 7`); then 5 bytes per redaction: channel, start
//! (2 bytes, big-endian), length - 1, mask; then an upstream SSE body. The body is framed and
//! decoded with the protocol's stream decoder; each text delta gets its channel position (per
//! channel, in order of appearance) and its place in the frame data (`locate`, as
//! `proxy::check` does), then every frame's data is rewritten with the redactions (sorted and
//! merged like the policy's list).
//!
//! Asserts: no panic; when `rewrite` returns new data and the frame's data was JSON, the new
//! data is JSON too; `SseFrame::with_data` of it is one frame carrying exactly that data.
#![no_main]

use bytes::Bytes;
use guardwire::delta::{Channel, Delta};
use guardwire::policy::{ChannelId, Redaction};
use guardwire::protocol::{self, FrameKind};
use guardwire::proxy::redact::{self, TextSpan};
use guardwire::sse::SseFramer;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;

const MASKS: [&str; 5] = ["[REDACTED:credit_card]", "", "*", "\"\\\u{1}é\n😀", "[X]"];

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let all = protocol::all();
    let proto = all[usize::from(head & 0x0f) % all.len()];
    let count = usize::from((head >> 4) & 7).min(rest.len() / 5);
    let (specs, body) = rest.split_at(count * 5);

    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    if framer
        .push(&Bytes::copy_from_slice(body), &mut frames)
        .is_err()
    {
        return;
    }
    frames.extend(framer.finish());

    // Decode every frame and note where its texts are.
    let mut decoder = proto.stream_decoder();
    let mut channels: Vec<(u32, Channel, u64)> = Vec::new(); // (choice, channel, position)
    let mut spans_of = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let Some(payload) = frame.fields().data else {
            continue;
        };
        let mut deltas = Vec::new();
        let kind = decoder.decode(frame.fields().event, &payload, &mut deltas);
        let mut spans: Vec<TextSpan> = Vec::new();
        for d in &deltas {
            let (choice, channel, text, repeat_start) = match d {
                Delta::Text {
                    choice,
                    channel,
                    text,
                } => (*choice, *channel, text, None),
                Delta::Repeat {
                    choice,
                    channel,
                    text,
                    start,
                } => (*choice, *channel, text, Some(*start)),
                _ => continue,
            };
            let id: ChannelId = match channels
                .iter()
                .position(|c| (c.0, c.1) == (choice, channel))
            {
                Some(id) => id,
                None => {
                    channels.push((choice, channel, 0));
                    channels.len() - 1
                }
            };
            let len = text.len() as u64;
            let start = match repeat_start {
                None => {
                    channels[id].2 += len;
                    channels[id].2 - len
                }
                Some(start) => start.unwrap_or(channels[id].2.saturating_sub(len)),
            };
            let taken: Vec<_> = spans.iter().map(|s| s.literal.clone()).collect();
            let (literal, raw) = redact::locate(&payload, text, &taken).unwrap_or((0..0, false));
            spans.push(TextSpan {
                channel: id,
                start,
                end: start + len,
                literal,
                raw,
                text: text.to_string(),
            });
        }
        if !spans.is_empty() {
            spans_of.push((i, spans));
        }
        if !matches!(kind, Ok(FrameKind::Data | FrameKind::Passthrough)) {
            break;
        }
    }
    if channels.is_empty() {
        return;
    }

    // The redactions, sorted by (channel, start) and merged where they overlap.
    let mut redactions: Vec<Redaction> = specs
        .chunks_exact(5)
        .map(|s| {
            let start = u64::from(u16::from_be_bytes([s[1], s[2]]));
            Redaction {
                channel: usize::from(s[0]) % channels.len(),
                start,
                end: start + 1 + u64::from(s[3]),
                mask: MASKS[usize::from(s[4]) % MASKS.len()].to_owned(),
            }
        })
        .collect();
    redactions.sort_by_key(|r| (r.channel, r.start));
    redactions.dedup_by(|b, a| {
        let merge = a.channel == b.channel && b.start <= a.end;
        if merge {
            a.end = a.end.max(b.end);
        }
        merge
    });

    for (i, spans) in &spans_of {
        let frame = &frames[*i];
        let Some(payload) = frame.fields().data else {
            continue;
        };
        for s in spans {
            let _ = redact::redact_text(s, &redactions);
        }
        let Ok(Some(new)) = redact::rewrite(&payload, spans, &redactions) else {
            continue;
        };
        if serde_json::from_slice::<IgnoredAny>(&payload).is_ok() {
            assert!(
                serde_json::from_slice::<IgnoredAny>(&new).is_ok(),
                "redacted data is no longer JSON: {:?}",
                String::from_utf8_lossy(&new)
            );
        }
        let out = frame.with_data(&new);
        let mut again = Vec::new();
        let mut framer = SseFramer::new(1 << 20);
        framer.push(&out, &mut again).expect("under the limit");
        assert!(
            framer.finish().is_none(),
            "rewritten frame is not terminated"
        );
        assert_eq!(again.len(), 1, "rewritten frame is {} frames", again.len());
        assert_eq!(again[0].fields().data.as_deref(), Some(&new[..]));
    }
});
