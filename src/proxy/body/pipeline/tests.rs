//! The frame step alone, without a stream around it: what it releases, holds and stops at.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::config::UnknownContent;
use crate::policy::Policy;
use crate::protocol;
use std::sync::Arc;

/// What a step released and the texts it was shown, in order.
#[derive(Default)]
struct Collected {
    released: Vec<Bytes>,
    first_texts: usize,
    texts: Vec<String>,
    wants_texts: bool,
}

impl Sink for Collected {
    fn release(&mut self, bytes: Bytes) {
        self.released.push(bytes);
    }
    fn first_text(&mut self) {
        self.first_texts += 1;
    }
    fn wants_texts(&self) -> bool {
        self.wants_texts
    }
    fn text(&mut self, _channel: Option<ChannelId>, delta: &Delta<'_>) {
        if let Delta::Text { text, .. } = delta {
            self.texts.push(text.to_string());
        }
    }
}

/// An OpenAI chat stream's pipeline and a guard whose policy bans the word `zqxjv`.
fn pipeline() -> (FramePipeline, ExchangeGuard) {
    let doc: serde_json::Value = serde_norway::from_str(
        "validators:\n  - type: banned_words\n    params: { words: [zqxjv] }\n",
    )
    .unwrap();
    let pack = crate::policy::pack::parse_pack("t.yaml", &doc, &Default::default()).unwrap();
    let policy = Arc::new(Policy::compile_packs(vec![pack]).unwrap());
    let p = protocol::by_name("openai_chat").unwrap();
    let fallback = Fallback {
        structural: p.stream_structural(),
        unknown: UnknownContent::Scan,
        fully_read: false,
    };
    let pipeline = FramePipeline::new(p.stream_decoder(), fallback, false, 1 << 20);
    (pipeline, policy.exchange_guard(Default::default(), None))
}

/// A chat chunk carrying `text` as content.
fn chunk(text: &str) -> SseFrame {
    let data = serde_json::json!({
        "id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
    });
    SseFrame {
        raw: Bytes::from(format!("data: {data}\n\n")),
    }
}

fn done() -> SseFrame {
    SseFrame {
        raw: Bytes::from_static(b"data: [DONE]\n\n"),
    }
}

#[test]
fn clean_frames_are_released_as_they_came_and_in_order() {
    let (mut p, mut guard) = pipeline();
    let mut sink = Collected {
        wants_texts: true,
        ..Collected::default()
    };
    let (a, b) = (chunk("hello there"), chunk(" and more words"));
    assert!(matches!(
        p.step(a.clone(), &mut guard, &mut sink),
        Step::Passed
    ));
    assert!(matches!(
        p.step(b.clone(), &mut guard, &mut sink),
        Step::Passed
    ));
    // What follows the first frame's text decides it: it is out, byte for byte.
    assert_eq!(sink.released.first(), Some(&a.raw));
    assert!(matches!(
        p.step(done(), &mut guard, &mut sink),
        Step::Terminal
    ));
    guard.after_call().unwrap();
    p.release_all(&guard, &mut sink).unwrap();
    assert_eq!(sink.released, vec![a.raw, b.raw, done().raw]);
    assert_eq!(sink.first_texts, 1);
    assert_eq!(sink.texts, ["hello there", " and more words"]);
    assert_eq!(p.answer().1, 0, "no usage wanted: no answer kept");
}

#[test]
fn a_violation_stops_with_nothing_released() {
    let (mut p, mut guard) = pipeline();
    let mut sink = Collected::default();
    let step = p.step(chunk("say zqxjv now"), &mut guard, &mut sink);
    assert!(matches!(step, Step::Stop(Stop::Violation(_))), "{step:?}");
    assert!(sink.released.is_empty());
}

#[test]
fn the_hold_back_keeps_a_frame_whose_tail_may_start_a_match() {
    let (mut p, mut guard) = pipeline();
    let mut sink = Collected::default();
    // `zq` may be the start of the banned word: the frame is held, not released.
    let step = p.step(chunk("say zq"), &mut guard, &mut sink);
    assert!(matches!(step, Step::Passed), "{step:?}");
    assert!(sink.released.is_empty());
    // The next frame completes the word: the stream stops, and the held frame never went out.
    let step = p.step(chunk("xjv now"), &mut guard, &mut sink);
    assert!(matches!(step, Step::Stop(Stop::Violation(_))), "{step:?}");
    assert!(sink.released.is_empty());
}

#[test]
fn a_frame_without_data_that_is_not_inert_stops_the_stream() {
    let (mut p, mut guard) = pipeline();
    let mut sink = Collected::default();
    let keep_alive = SseFrame {
        raw: Bytes::from_static(b": keep-alive\n\n"),
    };
    assert!(matches!(
        p.step(keep_alive.clone(), &mut guard, &mut sink),
        Step::Passed
    ));
    // (Relayed without its text: a keep-alive still.)
    assert_eq!(sink.released, vec![Bytes::from_static(b":\n\n")]);
    let step = p.step(
        SseFrame {
            raw: Bytes::from_static(b"event: x\n\n"),
        },
        &mut guard,
        &mut sink,
    );
    assert!(matches!(step, Step::Stop(Stop::Malformed(_))), "{step:?}");
}
