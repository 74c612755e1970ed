//! Conformance with the official Google Gen AI Python SDK (`google-genai`, Gemini API): what an
//! application sees when guardwire passes, blocks mid-stream, or refuses a request on
//! `/v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `tests/sdk/gemini.py <scenario>` (harness: tests/common/sdk.rs). `#[ignore]`d like every SDK
//! test; `tests/run` runs them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{sse_data_frames, MockUpstream, Reply};
use common::sdk::{
    assert_cancelled, assert_no_leak, long_tail, points_inside, Harness, Sdk, BANNED,
    INPUT_MESSAGE, OUTPUT_MESSAGE, PIECE_DELAY, TOOL_NAME, WAIT,
};
use serde_json::{json, Value};

const MODEL: &str = "gemini-2.5-flash";
const STREAM_PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
const PLAIN_PATH: &str = "/v1beta/models/gemini-2.5-flash:generateContent";

// ---- upstream bodies ----

/// One GenerateContentResponse with these parts (and a finish reason and usage when given).
fn response(parts: Value, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut r = json!({"modelVersion": MODEL, "responseId": "resp-1"});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
        r["usageMetadata"] =
            json!({"promptTokenCount": 5, "candidatesTokenCount": 9, "totalTokenCount": 14});
    }
    r["candidates"] = json!([candidate]);
    r
}

fn frames(responses: &[Value]) -> Vec<u8> {
    let jsons: Vec<String> = responses.iter().map(Value::to_string).collect();
    let refs: Vec<&str> = jsons.iter().map(String::as_str).collect();
    sse_data_frames(&refs)
}

/// A complete text answer: one chunk per piece, then an empty chunk that finishes it.
fn text_stream(texts: &[&str]) -> Vec<u8> {
    let mut responses: Vec<Value> = texts
        .iter()
        .map(|t| response(json!([{"text": t}]), None))
        .collect();
    responses.push(response(json!([{"text": ""}]), Some("STOP")));
    frames(&responses)
}

/// A short text chunk, then a chunk with one whole function call with these args.
fn function_call_stream(args: Value) -> Vec<u8> {
    frames(&[
        response(json!([{"text": "Let me search."}]), None),
        response(
            json!([{"functionCall": {"name": TOOL_NAME, "args": args}}]),
            Some("STOP"),
        ),
    ])
}

fn whole_response(text: &str) -> String {
    response(json!([{"text": text}]), Some("STOP")).to_string()
}

// ---- assertions ----

/// The one request the mock saw was the SDK's, forwarded to the same path with its key.
fn assert_forwarded(mock: &MockUpstream, path: &str) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    let r = &requests[0];
    assert_eq!(r.path_and_query, path);
    assert_eq!(
        r.header("x-goog-api-key"),
        Some("test-key"),
        "{:?}",
        r.headers
    );
    let body = r.body_json().expect("upstream request body is JSON");
    assert!(
        body["contents"][0]["parts"][0]["text"].is_string(),
        "{body}"
    );
}

/// google-genai raised `errors.ClientError` (code 400) with guardwire's status and message.
fn assert_client_error(report: &Value, message: &str) {
    assert_eq!(report["exception"], json!("ClientError"), "{report:#}");
    assert_eq!(report["exception_module"], json!("google.genai.errors"));
    assert_eq!(report["code"], json!(400), "{report:#}");
    assert_eq!(report["status"], json!("INVALID_ARGUMENT"), "{report:#}");
    assert_eq!(report["message"], json!(message), "{report:#}");
    assert!(
        !report["details"].to_string().contains(BANNED),
        "the error leaks the answer: {report:#}"
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
    let sdk = Sdk::gemini();
    let body = text_stream(&CLEAN_TEXTS);
    let points = points_inside(&body, &["data:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(report["text"], json!(CLEAN_TEXTS.concat()), "{report:#}");
    assert_eq!(report["finish_reasons"], json!(["STOP"]), "{report:#}");
    assert_eq!(report["chunks"], json!(CLEAN_TEXTS.len() + 1), "{report:#}");
    assert_forwarded(&h.mock, STREAM_PATH);
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_in_tiny_pieces_reaches_the_sdk() {
    let sdk = Sdk::gemini();
    let body = text_stream(&CLEAN_TEXTS);
    let h = Harness::start(Reply::sse_every(&body, 7, std::time::Duration::ZERO)).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(report["text"], json!(CLEAN_TEXTS.concat()), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_raises_client_error_without_leaking() {
    let sdk = Sdk::gemini();
    let clean_prefix = "Hello there, this is ";
    let mut texts: Vec<String> = ["Hello", " there, this is f", "orbid", "den lore"]
        .map(str::to_owned)
        .to_vec();
    texts.extend(long_tail(50));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let body = text_stream(&refs);
    let points = points_inside(&body, &["data:", "is f", "orbid", "den lo"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_stream").await;

    assert_client_error(&report, OUTPUT_MESSAGE);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        clean_prefix,
        &report,
    );
    assert_eq!(report["finish_reasons"], json!([]), "{report:#}");
    assert_forwarded(&h.mock, STREAM_PATH);
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_function_call_is_never_yielded() {
    let sdk = Sdk::gemini();
    // Gemini sends a function call whole; on the wire it is split inside the banned word.
    let body = function_call_stream(json!({"query": "the forbidden lore", "limit": 3}));
    let points = points_inside(&body, &["data:", BANNED, "functionCall"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_function_call").await;

    assert_client_error(&report, OUTPUT_MESSAGE);
    assert_eq!(
        report["function_calls"],
        json!([]),
        "the blocked function call reached the application: {report:#}"
    );
    assert_no_leak(
        report["text"].as_str().expect("text"),
        "Let me search.",
        &report,
    );
    assert_forwarded(&h.mock, STREAM_PATH);
    let sent = h.mock.requests()[0].body_json().expect("JSON body");
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        json!(TOOL_NAME),
        "{sent}"
    );
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_function_call_reaches_the_sdk() {
    let sdk = Sdk::gemini();
    let args = json!({"query": "the unforbidden lore ✓", "limit": 3});
    let h = Harness::start(Reply::sse(&function_call_stream(args.clone()))).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(
        report["function_calls"],
        json!([{"name": TOOL_NAME, "args": args}]),
        "{report:#}"
    );
    assert_eq!(report["text"], json!("Let me search."), "{report:#}");
    assert_eq!(report["finish_reasons"], json!(["STOP"]), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn nonstream_block_raises_client_error() {
    let sdk = Sdk::gemini();
    let reply = Reply::json(200, &whole_response("Here is the forbidden answer."));
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "nonstream_block").await;

    assert_client_error(&report, OUTPUT_MESSAGE);
    assert_forwarded(&h.mock, PLAIN_PATH);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn input_block_raises_client_error_before_the_upstream_call() {
    let sdk = Sdk::gemini();
    let h = Harness::start(Reply::sse(&text_stream(&["never sent"]))).await;

    let report = h.run(&sdk, "input_block").await;

    assert_client_error(&report, INPUT_MESSAGE);
    assert_eq!(report["chunks"], json!(0), "{report:#}");
    assert_eq!(h.mock.request_count(), 0, "the upstream must not be called");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_nonstream_returns_the_text() {
    let sdk = Sdk::gemini();
    let content = "Hé ✓, forbiddenness is no word; secret-42 may be said.\n\"ok\"";
    let h = Harness::start(Reply::json(200, &whole_response(content))).await;

    let report = h.run(&sdk, "clean_nonstream").await;

    assert_eq!(report["text"], json!(content), "{report:#}");
    assert_eq!(report["finish_reason"], json!("STOP"), "{report:#}");
    assert_forwarded(&h.mock, PLAIN_PATH);
    h.stop().await;
}
