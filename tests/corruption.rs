//! Randomly corrupted upstream streams, every protocol: each one reaches the client either
//! whole (relayed as the upstream sent it: then it was complete, and checked) or as whole
//! frames of it followed by one error frame — never raw garbage, never cut short without the
//! error frame. Corruptions: byte flips, cuts, inserted invalid UTF-8, deep nesting, dropped
//! and duplicated bytes. `GUARDWIRE_CORRUPT_STREAMS` streams per protocol (default 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::protocols::all;
use common::proxy::{send, start_proxy_all};
use common::scripted::{carried, echo_upstream, Rng};

const PACK: &str =
    "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"] }\n";

fn corrupt(body: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = body.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b.truncate(at),
            2 => {
                let bad: &[u8] =
                    [&b"\xff"[..], b"\xc3", b"\xed\xa0\x80", b"\xf8\x88"][rng.below(4)];
                b.splice(at..at, bad.iter().copied());
            }
            3 => {
                let depth = 1 + rng.below(300);
                let nest = "[".repeat(depth) + &"]".repeat(depth);
                b.splice(at..at, nest.bytes());
            }
            4 => {
                b.remove(at.min(b.len().saturating_sub(1)));
            }
            _ => {
                let byte = b[at];
                b.insert(at, byte);
            }
        }
        if b.is_empty() {
            break;
        }
    }
    b
}

#[tokio::test]
async fn corrupted_streams_end_whole_or_with_the_error_frame() {
    let per_protocol: usize = std::env::var("GUARDWIRE_CORRUPT_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mock = echo_upstream().await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for p in all() {
        let (frames, _) = (p.text_frames)(&["Hello", ", wor", "ld. ", "All fine."]);
        let clean = frames.concat();
        let (mut whole, mut closed) = (0, 0);
        for i in 0..per_protocol {
            let seed = rng.0;
            let bad = corrupt(clean.as_bytes(), &mut rng);
            let a = send(
                proxy.addr(),
                "POST",
                p.stream_path,
                (p.stream_body)(&carried(&bad, &[])),
                &[("content-type", "application/json")],
            )
            .await;
            let out = a.body.to_vec();
            let what = || {
                format!(
                    "{} #{i} (seed {seed:#x}):\nupstream: {:?}\nclient:   {:?}",
                    p.name,
                    String::from_utf8_lossy(&bad),
                    String::from_utf8_lossy(&out)
                )
            };
            // Relayed whole (up to the terminal event: what follows it is never relayed): then
            // it was complete.
            let terminal = match p.name {
                "openai_chat" => "[DONE]",
                "openai_responses" => "response.completed",
                "anthropic_messages" => "message_stop",
                _ => "finishReason",
            };
            let text = String::from_utf8_lossy(&out);
            let last_frame = text.trim_end_matches('\n').rsplit("\n\n").next();
            if out == bad
                || (bad.starts_with(&out)
                    && out.ends_with(b"\n\n")
                    && last_frame.is_some_and(|f| f.contains(terminal)))
            {
                assert!(text.contains(terminal), "{}", what());
                whole += 1;
                continue;
            }
            // Else: whole frames of what the upstream sent, then one error frame.
            let cut = out
                .windows(2)
                .enumerate()
                .filter(|(_, w)| *w == b"\n\n")
                .map(|(at, _)| at + 2)
                .filter(|&at| at < out.len())
                .rev()
                .find(|&at| bad.starts_with(&out[..at]) && bad[..at].ends_with(b"\n\n"))
                .unwrap_or(0);
            let tail = String::from_utf8_lossy(&out[cut..]);
            assert!(
                bad.starts_with(&out[..cut])
                    && tail.contains("error")
                    && tail.ends_with("\n\n")
                    && tail.matches("\n\n").count() == 1,
                "{}",
                what()
            );
            closed += 1;
        }
        assert_eq!(whole + closed, per_protocol);
        eprintln!(
            "{}: {whole} relayed whole, {closed} ended with the error frame",
            p.name
        );
    }
}
