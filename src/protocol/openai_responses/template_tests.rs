//! The stream template (`frame_template.rs`) against reading every Responses event in full.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::protocol::frame_template_tests::{extras, object, plain, value, Subject};
use crate::protocol::frame_template_tests::{refills_take_the_template, same_stream};
use crate::protocol::openai_chat::skim_tests::Gen;

static SUB: Subject<ResponsesStream> = Subject {
    template: |d| d.template.as_ref(),
    forget: |d| d.template = None,
    structural: &EVENT_STRUCTURAL,
    prelude: &[],
    probe: r#"{"type":"response.output_text.done","text":"probe"}"#,
};

/// A text delta event as OpenAI sends it (answer, refusal, tool arguments, reasoning),
/// members in random order, unknown members mixed in.
fn base(g: &mut Gen) -> String {
    let kind = [
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_text.delta",
        "response.custom_tool_call_input.delta",
    ][g.rng.below(5) as usize];
    let mut top = vec![("type", format!("\"{kind}\"")), ("delta", plain(g))];
    for (k, v) in [
        ("sequence_number", g.rng.below(100).to_string()),
        ("item_id", value(g, Gen::string)),
        ("output_index", g.rng.below(2).to_string()),
        ("content_index", "0".into()),
        ("logprobs", "[]".into()),
        ("obfuscation", value(g, Gen::string)),
    ] {
        if g.rng.chance(80) {
            top.push((k, v));
        }
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
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}"#.to_owned(),
        r#"{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]},"sequence_number":1}"#.to_owned(),
    ];
    let texts = ["Hello", " wor", "ld \\\"q\\\"", "", "!", " more"];
    for (i, t) in texts.iter().enumerate() {
        frames.push(format!(
            r#"{{"type":"response.output_text.delta","sequence_number":{},"item_id":"msg_1","output_index":0,"content_index":0,"delta":"{t}","logprobs":[],"obfuscation":"@T{i:016}"}}"#,
            i + 2
        ));
    }
    frames.push(r#"{"type":"response.output_text.done","sequence_number":8,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello world \"q\"! more","logprobs":[]}"#.to_owned());
    let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
    // " wor", "!" and " more" from the template with nothing left to read; `response.created`
    // and "Hello" (which makes the template) by the serde-free reader (`skim_event.rs`), also
    // with nothing left (the part's empty text, the escaped and the empty delta and the
    // escaped repeat go through the fallback).
    assert_eq!(same_stream(&SUB, &frames), 5);
}
