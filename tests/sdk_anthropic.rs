//! Conformance with the official Anthropic Python SDK (`anthropic`, Messages API): what an
//! application sees when guardwire passes, blocks mid-stream, or refuses a request on
//! `POST /v1/messages`.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `tests/sdk/anthropic_messages.py <scenario>` (harness: tests/common/sdk.rs). `#[ignore]`d
//! like every SDK test; `tests/run` runs them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::sdk::{
    assert_cancelled, assert_no_leak, long_tail, points_inside, sse_events, Harness, Sdk, BANNED,
    INPUT_MESSAGE, OUTPUT_MESSAGE, PIECE_DELAY, TOOL_NAME, WAIT,
};
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5";

// ---- upstream bodies ----

fn message_start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 1}
        }}),
    )
}

fn block_start(index: u32, block: Value) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn block_delta(index: u32, delta: Value) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: u32) -> (&'static str, Value) {
    (
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_end(stop_reason: &str) -> [(&'static str, Value); 2] {
    [
        (
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": 9}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A complete text answer: one text block, one text_delta per piece, a ping in between.
fn text_stream(texts: &[&str]) -> Vec<u8> {
    let mut events = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        ("ping", json!({"type": "ping"})),
    ];
    for t in texts {
        events.push(block_delta(0, json!({"type": "text_delta", "text": t})));
    }
    events.push(block_stop(0));
    events.extend(message_end("end_turn"));
    sse_events(&events)
}

/// A short text block, then a tool_use block whose input arrives in these pieces.
fn tool_use_stream(argument_pieces: &[&str]) -> Vec<u8> {
    let mut events = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "Let me search."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_1", "name": TOOL_NAME, "input": {}}),
        ),
    ];
    for piece in argument_pieces {
        events.push(block_delta(
            1,
            json!({"type": "input_json_delta", "partial_json": piece}),
        ));
    }
    events.push(block_stop(1));
    events.extend(message_end("tool_use"));
    sse_events(&events)
}

fn whole_message(text: &str) -> String {
    json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 5, "output_tokens": 9}
    })
    .to_string()
}

/// The blocked-text upstream: the banned word spans three deltas, the first ending in its
/// first letter, and a long tail follows; the body never ends.
fn blocked_text_reply() -> (Reply, &'static str) {
    let clean_prefix = "Hello there, this is ";
    let mut texts: Vec<String> = ["Hello", " there, this is f", "orbid", "den lore"]
        .map(str::to_owned)
        .to_vec();
    texts.extend(long_tail(50));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let body = text_stream(&refs);
    let points = points_inside(&body, &["data:", "event:", "is f", "orbid", "den lo"]);
    (
        Reply::sse_split(&body, &points, PIECE_DELAY).then_hang(),
        clean_prefix,
    )
}

// ---- assertions ----

/// The one request the mock saw was the SDK's, forwarded to the same path with its key.
fn assert_forwarded(mock: &MockUpstream, stream: bool) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    let r = &requests[0];
    assert_eq!(r.path_and_query, "/v1/messages");
    // The key travels as `x-api-key` or (newer SDKs) `authorization: Bearer`; either way, intact.
    assert!(
        r.header("x-api-key") == Some("test-key")
            || r.header("authorization") == Some("Bearer test-key"),
        "{:?}",
        r.headers
    );
    assert!(r.header("anthropic-version").is_some(), "{:?}", r.headers);
    let body = r.body_json().expect("upstream request body is JSON");
    assert_eq!(body["model"], json!(MODEL));
    assert_eq!(body["stream"].as_bool().unwrap_or(false), stream, "{body}");
}

/// The error body guardwire sends for a block, as the SDK hands it over.
fn error_body(message: &str) -> Value {
    json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
}

/// The SDK raised on guardwire's mid-stream `event: error`. anthropic turns every in-band error
/// event into an `APIStatusError` built on the stream's HTTP response (status 200), so the class
/// is `APIStatusError` (or a subclass), with guardwire's body, type and message.
fn assert_stream_blocked(report: &Value) {
    let mro = report["exception_mro"].as_array().expect("exception_mro");
    assert!(
        mro.contains(&json!("APIStatusError")),
        "expected anthropic.APIStatusError: {report:#}"
    );
    assert_eq!(report["body"], error_body(OUTPUT_MESSAGE), "{report:#}");
    assert_eq!(report["type"], json!("invalid_request_error"), "{report:#}");
    assert_eq!(report["api_message"], json!(OUTPUT_MESSAGE), "{report:#}");
}

fn assert_bad_request(report: &Value, message: &str) {
    assert_eq!(report["exception"], json!("BadRequestError"), "{report:#}");
    assert_eq!(report["status_code"], json!(400), "{report:#}");
    assert_eq!(report["body"], error_body(message), "{report:#}");
    assert_eq!(report["type"], json!("invalid_request_error"), "{report:#}");
    assert_eq!(report["api_message"], json!(message), "{report:#}");
    assert!(
        !report["body"].to_string().contains(BANNED),
        "the error body leaks the answer: {report:#}"
    );
}

// ---- tests ----

/// Near misses of the banned word, multi-byte UTF-8, an output-only "secret", escapes.
const CLEAN_TEXTS: [&str; 7] = [
    "Hé",
    "llo wörld ✓ ",
    "this is no forbidd",
    "enness, just ",
    "unforbidden lore",
    " with secret-42 and \"quotes\"\n",
    "the end.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_reaches_the_sdk_byte_for_byte() {
    let sdk = Sdk::anthropic();
    let body = text_stream(&CLEAN_TEXTS);
    let points = points_inside(&body, &["data:", "event:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "clean_stream").await;

    let full = CLEAN_TEXTS.concat();
    assert_eq!(report["text"], json!(full), "{report:#}");
    assert_eq!(report["final_text"], json!(full), "{report:#}");
    assert_eq!(report["stop_reason"], json!("end_turn"), "{report:#}");
    assert_eq!(report["id"], json!("msg_1"), "{report:#}");
    assert_forwarded(&h.mock, true);
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_raw_stream_in_tiny_pieces_reaches_the_sdk() {
    let sdk = Sdk::anthropic();
    let body = text_stream(&CLEAN_TEXTS);
    let h = Harness::start(Reply::sse_every(&body, 7, std::time::Duration::ZERO)).await;

    let report = h.run(&sdk, "clean_stream_raw").await;

    assert_eq!(report["text"], json!(CLEAN_TEXTS.concat()), "{report:#}");
    assert_eq!(report["stop_reason"], json!("end_turn"), "{report:#}");
    assert_forwarded(&h.mock, true);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_raises_api_error_without_leaking() {
    let sdk = Sdk::anthropic();
    let (reply, clean_prefix) = blocked_text_reply();
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "blocked_stream").await;

    assert_stream_blocked(&report);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        clean_prefix,
        &report,
    );
    assert_forwarded(&h.mock, true);
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_raw_stream_raises_api_error_without_leaking() {
    let sdk = Sdk::anthropic();
    let (reply, clean_prefix) = blocked_text_reply();
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "blocked_stream_raw").await;

    assert_stream_blocked(&report);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        clean_prefix,
        &report,
    );
    assert_eq!(report["stop_reason"], Value::Null, "{report:#}");
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_tool_input_raises_api_error_without_leaking() {
    let sdk = Sdk::anthropic();
    let clean_prefix = r#"{"query": "the archive of "#;
    let pieces = [
        r#"{"query": "#,
        r#""the archive of f"#,
        "orbid",
        r#"den lore", "limit": 3}"#,
    ];
    let body = tool_use_stream(&pieces);
    let points = points_inside(&body, &["data:", "of f", "orbid", "den lo"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_tool_args").await;

    assert_stream_blocked(&report);
    // The text block before the tool call is clean and arrives whole.
    assert_eq!(report["text"], json!("Let me search."), "{report:#}");
    let yielded = report["arguments"]["1"].as_str().unwrap_or("");
    assert_no_leak(yielded, clean_prefix, &report);
    let arguments = report["arguments"].as_object().expect("arguments object");
    assert!(
        arguments.keys().all(|k| k == "1"),
        "only content block 1 is a tool call: {report:#}"
    );
    assert_forwarded(&h.mock, true);
    let sent = h.mock.requests()[0].body_json().expect("JSON body");
    assert_eq!(sent["tools"][0]["name"], json!(TOOL_NAME), "{sent}");
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn nonstream_block_raises_bad_request() {
    let sdk = Sdk::anthropic();
    let reply = Reply::json(200, &whole_message("Here is the forbidden answer."));
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "nonstream_block").await;

    assert_bad_request(&report, OUTPUT_MESSAGE);
    assert_forwarded(&h.mock, false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn input_block_raises_bad_request_before_the_upstream_call() {
    let sdk = Sdk::anthropic();
    let h = Harness::start(Reply::sse(&text_stream(&["never sent"]))).await;

    let report = h.run(&sdk, "input_block").await;

    assert_bad_request(&report, INPUT_MESSAGE);
    assert_eq!(h.mock.request_count(), 0, "the upstream must not be called");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_nonstream_returns_the_text() {
    let sdk = Sdk::anthropic();
    let content = "Hé ✓, forbiddenness is no word; secret-42 may be said.\n\"ok\"";
    let h = Harness::start(Reply::json(200, &whole_message(content))).await;

    let report = h.run(&sdk, "clean_nonstream").await;

    assert_eq!(report["text"], json!(content), "{report:#}");
    assert_eq!(report["stop_reason"], json!("end_turn"), "{report:#}");
    assert_eq!(report["id"], json!("msg_2"), "{report:#}");
    assert_forwarded(&h.mock, false);
    h.stop().await;
}
