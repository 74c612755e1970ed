//! The stream template (`frame_template.rs`) against reading every Anthropic event in full.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::protocol::frame_template_tests::{extras, object, plain, value, Subject};
use crate::protocol::frame_template_tests::{refills_take_the_template, same_stream};
use crate::protocol::openai_chat::skim_tests::Gen;

static SUB: Subject<MessagesStream> = Subject {
    template: |d| d.template.as_ref(),
    forget: |d| d.template = None,
    structural: &STRUCTURAL,
    // One block, the one deltas are for (a delta is for the block started last).
    prelude: &[
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ],
    // Read with the stream's state (what block 0 is).
    probe: r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","text":"probe"}}"#,
};

/// A content_block_delta as Anthropic sends it (text, tool input or thinking), members in
/// random order, unknown members mixed in.
fn base(g: &mut Gen) -> String {
    let (kind, field, index) = [
        ("text_delta", "text", 0),
        ("input_json_delta", "partial_json", 0),
        ("thinking_delta", "thinking", 0),
    ][g.rng.below(3) as usize];
    let text = plain(g);
    let mut inner = vec![("type", format!("\"{kind}\"")), (field, text)];
    if g.rng.chance(15) {
        inner.push(("extra", value(g, Gen::string)));
    }
    let delta = object(g, inner);
    let mut top = vec![
        ("type", "\"content_block_delta\"".to_owned()),
        ("delta", delta),
    ];
    if g.rng.chance(90) {
        top.push(("index", index.to_string()));
    }
    extras(g, &mut top);
    object(g, top)
}

crate::template_property!(SUB, base);

#[test]
fn refilled_events_take_the_template() {
    refills_take_the_template(&SUB, base);
}

#[test]
fn a_stream_reads_the_same_with_and_without_templates() {
    let mut frames = vec![
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":36,"output_tokens":1}}}"#.to_owned(),
        r#"{"type":"ping"}"#.to_owned(),
    ];
    for (i, t) in ["Hello", " wor", "ld \\\"q\\\"", "", "!", " more", " text"]
        .iter()
        .enumerate()
    {
        frames.push(format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{t}"}},"ts":"@T{i:016}"}}"#
        ));
    }
    for t in ["a", "b", "c"] {
        frames.push(format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{t}"}}}}"#
        ));
    }
    frames.push(r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#.to_owned());
    frames.push(
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"d"}}"#
            .to_owned(),
    );
    frames.push(r#"{"type":"content_block_stop","index":0}"#.to_owned());
    frames.push(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":200}}"#.to_owned());
    frames.push(r#"{"type":"message_stop"}"#.to_owned());
    let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
    // With `ts` (an unknown string) the fallback reads every event; without it, the events
    // after the first plain one ("b", "c") come from the template with nothing left to read
    // ("d" follows a signature event, which replaced nothing: it is a template match too).
    assert_eq!(same_stream(&SUB, &frames), 3);
}
