//! The stream template (`frame_template.rs`) against reading every Gemini chunk in full.
#![allow(clippy::unwrap_used)]

use super::stream::GeminiStream;
use super::*;
use crate::protocol::frame_template_tests::{extras, object, plain, value, Subject};
use crate::protocol::frame_template_tests::{refills_take_the_template, same_stream};
use crate::protocol::openai_chat::skim_tests::Gen;

static SUB: Subject<GeminiStream> = Subject {
    template: GeminiStream::template,
    forget: |d| d.template = None,
    structural: &STRUCTURAL,
    prelude: &[],
    // Read with the stream's state (how many calls candidate 0 made).
    probe: r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"index":0}]}"#,
};

/// A text chunk as Gemini sends it (answer or thought), members in random order, unknown
/// members mixed in.
fn base(g: &mut Gen) -> String {
    let mut part = vec![("text", plain(g))];
    if g.rng.chance(20) {
        part.push(("thought", "true".to_owned()));
    }
    let part = object(g, part);
    let content = object(
        g,
        vec![("parts", format!("[{part}]")), ("role", "\"model\"".into())],
    );
    let mut cand = vec![("content", content)];
    if g.rng.chance(80) {
        cand.push(("index", g.rng.below(2).to_string()));
    }
    let cand = object(g, cand);
    let mut top = vec![("candidates", format!("[{cand}]"))];
    if g.rng.chance(80) {
        top.push(("modelVersion", "\"gemini-2.5-flash\"".into()));
    }
    if g.rng.chance(80) {
        top.push(("responseId", value(g, Gen::string)));
    }
    extras(g, &mut top);
    object(g, top)
}

crate::template_property!(SUB, base);

#[test]
fn refilled_chunks_take_the_template() {
    refills_take_the_template(&SUB, base);
}

#[test]
fn a_stream_reads_the_same_with_and_without_templates() {
    let mut frames = Vec::new();
    for (i, t) in ["Hello", " wor", "ld \\\"q\\\"", "", "!", " more"]
        .iter()
        .enumerate()
    {
        frames.push(format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{t}"}}],"role":"model"}},"index":0}}],"modelVersion":"gemini-2.5-flash","responseId":"@T{i:016}"}}"#
        ));
    }
    frames.push(r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":"b"}}}],"role":"model"},"index":0}]}"#.to_owned());
    frames.push(r#"{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"@T0000000000000009"}"#.to_owned());
    frames.push(r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":36,"candidatesTokenCount":200,"totalTokenCount":236},"modelVersion":"gemini-2.5-flash","responseId":"@T0000000000000010"}"#.to_owned());
    let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
    // " wor", "!", " more" and "x" from the template with nothing left to read (the escaped
    // text and the empty one are left to the fallback).
    assert_eq!(same_stream(&SUB, &frames), 4);
}
