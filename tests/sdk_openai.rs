//! Conformance with the official OpenAI Python SDK: what an application using `openai` sees when
//! guardwire passes, blocks mid-stream, or refuses a request.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `tests/sdk/openai_chat.py <scenario>` with `$GUARDWIRE_SDK_PYTHON`, the interpreter of the
//! venv that `tests/run` builds from `tests/sdk/requirements.txt` (harness: tests/common/sdk.rs).
//! The tests are `#[ignore]`d so a plain `cargo test` works without Python; `tests/run` runs
//! them with `--include-ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::mock_upstream::{openai_chat_stream, sse_data_frames, Reply};
use common::sdk::{
    assert_cancelled, assert_no_leak, assert_openai_forwarded,
    assert_openai_stream_blocked as assert_stream_blocked, long_tail, points_inside, Harness, Sdk,
    BANNED, INPUT_MESSAGE, OUTPUT_MESSAGE, PIECE_DELAY, REDACT_PACK, TOOL_NAME, WAIT,
};
use serde_json::{json, Value};

// ---- upstream bodies ----

fn chat_completion(content: &str) -> String {
    json!({
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    })
    .to_string()
}

/// A tool-call stream: the call's head, one chunk per argument piece, `tool_calls`, `[DONE]`.
fn tool_call_stream(name: &str, argument_pieces: &[&str]) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-3",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
        .to_string()
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": ""}
        }]}),
        Value::Null,
    )];
    for piece in argument_pieces {
        frames.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            Value::Null,
        ));
    }
    frames.push(chunk(json!({}), json!("tool_calls")));
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut out = sse_data_frames(&refs);
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

// ---- assertions ----

// ---- tests ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_reaches_the_sdk_byte_for_byte() {
    let sdk = Sdk::openai_chat();
    // Near misses of the banned word (no word boundary), multi-byte UTF-8, an output-only
    // "secret" (the secret check is input-only), escapes: all must pass untouched.
    let texts = [
        "Hé",
        "llo wörld ✓ ",
        "this is no forbidd",
        "enness, just ",
        "unforbidden lore",
        " with secret-42 and \"quotes\"\n",
        "the end.",
    ];
    let body = openai_chat_stream(&texts);
    let points = points_inside(&body, &["data:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(report["text"], json!(texts.concat()), "{report:#}");
    assert_eq!(report["finish_reasons"], json!(["stop"]), "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/chat/completions", true);
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_in_tiny_pieces_reaches_the_sdk() {
    let sdk = Sdk::openai_chat();
    let texts = ["Every ", "piece ", "arrives, ", "forbiddenness ", "or not."];
    let body = openai_chat_stream(&texts);
    let h = Harness::start(Reply::sse_every(&body, 5, Duration::from_millis(1))).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(report["text"], json!(texts.concat()), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_raises_api_error_without_leaking() {
    let sdk = Sdk::openai_chat();
    // The banned word spans three content chunks, the first ending in its first letter.
    let clean_prefix = "Hello there, this is ";
    let mut texts: Vec<String> = ["Hello", " there, this is f", "orbid", "den lore"]
        .map(str::to_owned)
        .to_vec();
    texts.extend(long_tail(50));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let body = openai_chat_stream(&refs);
    let points = points_inside(&body, &["data:", "is f", "orbid", "den lo"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_stream").await;

    assert_stream_blocked(&report);
    let yielded = report["text"].as_str().expect("text");
    assert_no_leak(yielded, clean_prefix, &report);
    assert_openai_forwarded(&h.mock, "/v1/chat/completions", true);
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_with_the_word_in_one_chunk() {
    let sdk = Sdk::openai_chat();
    // The whole word arrives in one content chunk, split on the wire in its middle.
    let clean_prefix = "Some harmless text, then a ";
    let mut texts: Vec<String> = ["Some harmless text, ", "then a ", "forbidden", " word"]
        .map(str::to_owned)
        .to_vec();
    texts.extend(long_tail(50));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let body = openai_chat_stream(&refs);
    let points = points_inside(&body, &["data:", BANNED]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_stream").await;

    assert_stream_blocked(&report);
    let yielded = report["text"].as_str().expect("text");
    assert_no_leak(yielded, clean_prefix, &report);
    assert!(
        h.mock.wait_for_cancelled(1, WAIT).await,
        "the upstream request was not cancelled after the block"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_tool_arguments_raise_api_error_without_leaking() {
    let sdk = Sdk::openai_chat();
    let clean_prefix = r#"{"query": "the archive of "#;
    let pieces = [
        r#"{"query": "#,
        r#""the archive of f"#,
        "orbid",
        r#"den lore", "limit": 3}"#,
    ];
    let body = tool_call_stream(TOOL_NAME, &pieces);
    let points = points_inside(&body, &["data:", "of f", "orbid", "den lo"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run(&sdk, "blocked_tool_args").await;

    assert_stream_blocked(&report);
    let yielded = report["arguments"]["0"].as_str().unwrap_or("");
    assert_no_leak(yielded, clean_prefix, &report);
    let arguments = report["arguments"].as_object().expect("arguments object");
    assert!(
        arguments.keys().all(|k| k == "0"),
        "only tool call 0 exists: {report:#}"
    );
    assert_openai_forwarded(&h.mock, "/v1/chat/completions", true);
    let sent = h.mock.requests()[0].body_json().expect("JSON body");
    assert_eq!(
        sent["tools"][0]["function"]["name"],
        json!(TOOL_NAME),
        "{sent}"
    );
    assert!(
        h.mock.wait_for_cancelled(1, WAIT).await,
        "the upstream request was not cancelled after the block"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn nonstream_block_raises_bad_request() {
    let sdk = Sdk::openai_chat();
    let reply = Reply::json(200, &chat_completion("Here is the forbidden answer."));
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "nonstream_block").await;

    assert_eq!(report["exception"], json!("BadRequestError"), "{report:#}");
    assert_eq!(report["status_code"], json!(400), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(report["type"], json!("guardrail_violation"), "{report:#}");
    let body = &report["body"];
    assert_eq!(body["message"], json!(OUTPUT_MESSAGE), "{report:#}");
    assert!(
        !body.to_string().contains(BANNED),
        "the error body leaks the answer: {report:#}"
    );
    assert_openai_forwarded(&h.mock, "/v1/chat/completions", false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn input_block_raises_bad_request_before_the_upstream_call() {
    let sdk = Sdk::openai_chat();
    let h = Harness::start(Reply::sse(&openai_chat_stream(&["never sent"]))).await;

    let report = h.run(&sdk, "input_block").await;

    assert_eq!(report["exception"], json!("BadRequestError"), "{report:#}");
    assert_eq!(report["status_code"], json!(400), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(report["type"], json!("guardrail_violation"), "{report:#}");
    assert_eq!(
        report["body"]["message"],
        json!(INPUT_MESSAGE),
        "{report:#}"
    );
    assert_eq!(h.mock.request_count(), 0, "the upstream must not be called");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_nonstream_returns_the_content() {
    let sdk = Sdk::openai_chat();
    let content = "Hé ✓, forbiddenness is no word; secret-42 may be said.\n\"ok\"";
    let h = Harness::start(Reply::json(200, &chat_completion(content))).await;

    let report = h.run(&sdk, "clean_nonstream").await;

    assert_eq!(report["content"], json!(content), "{report:#}");
    assert_eq!(report["finish_reason"], json!("stop"), "{report:#}");
    assert_eq!(report["id"], json!("chatcmpl-2"), "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/chat/completions", false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn redacted_stream_reaches_the_sdk_masked() {
    let sdk = Sdk::openai_chat();
    let texts = [
        "Pay with 4111 11",
        "11 1111 1111 via pro",
        "ject bluebird, thanks.",
    ];
    let body = openai_chat_stream(&texts);
    let points = points_inside(&body, &["data:", "11 11", "blue"]);
    let h = Harness::start_with(Reply::sse_split(&body, &points, PIECE_DELAY), REDACT_PACK).await;

    let report = h.run(&sdk, "clean_stream").await;

    assert_eq!(
        report["text"],
        json!("Pay with [REDACTED:credit_card] via project [codename], thanks."),
        "{report:#}"
    );
    assert_eq!(report["finish_reasons"], json!(["stop"]), "{report:#}");
    h.stop().await;
}

// ---- legacy Completions and Embeddings ----

fn completion_stream(texts: &[&str]) -> Vec<u8> {
    let mut body: String = texts
        .iter()
        .map(|t| {
            format!(
                "data: {}\n\n",
                json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-4o",
                       "choices": [{"index": 0, "text": t, "logprobs": null, "finish_reason": null}]})
            )
        })
        .collect();
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-4o",
               "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": "stop"}]})
    ));
    body.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn legacy_completions_stream_is_checked_for_the_sdk() {
    let sdk = Sdk::openai_chat();
    let texts = ["Once upon a time ", "there was a f", "orbidden", " door."];
    let body = completion_stream(&texts);
    let h = Harness::start(Reply::sse_every(&body, 7, Duration::from_millis(1))).await;
    let report = h.run(&sdk, "completion_blocked").await;
    assert_stream_blocked(&report);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        "Once upon a time ",
        &report,
    );
    h.stop().await;

    let clean = ["Once upon a time ", "there was a door."];
    let h = Harness::start(Reply::sse(&completion_stream(&clean))).await;
    let report = h.run(&sdk, "completion_clean").await;
    assert_eq!(report["text"], json!(clean.concat()), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn embeddings_inputs_are_checked_for_the_sdk() {
    let sdk = Sdk::openai_chat();
    let vectors = json!({"object": "list", "model": "gpt-4o", "usage": {"prompt_tokens": 2, "total_tokens": 2},
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]},
                 {"object": "embedding", "index": 1, "embedding": [0.4, 0.5, 0.6]}]})
    .to_string();
    let h = Harness::start(Reply::json(200, &vectors)).await;
    let report = h.run(&sdk, "embeddings_input_block").await;
    assert_eq!(report["exception"], json!("BadRequestError"), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(h.mock.request_count(), 0, "the upstream must not be called");
    let report = h.run(&sdk, "embeddings_clean").await;
    assert_eq!(report["count"], json!(2), "{report:#}");
    assert_eq!(report["dims"], json!(3), "{report:#}");
    h.stop().await;
}

/// A key over its `rpm_limit`: the SDK raises `RateLimitError` (429, `rate_limit_exceeded`),
/// with the `retry-after` and `x-ratelimit-*` headers it reads; the answer it was given before
/// carried the headers too (docs/limits.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn a_key_over_its_rate_limit_raises_rate_limit_error() {
    let sdk = Sdk::openai_chat();
    let reply = Reply::json(200, &chat_completion("fine"));
    let keys = "keys:\n  - {id: app, key: test-key, rpm_limit: 1}\n";
    let h = Harness::start_config(reply, common::sdk::PACK, keys).await;

    let report = h.run(&sdk, "rate_limited").await;

    assert_eq!(report["exception"], json!("RateLimitError"), "{report:#}");
    assert_eq!(report["status_code"], json!(429), "{report:#}");
    assert_eq!(report["code"], json!("rate_limit_exceeded"), "{report:#}");
    let headers = &report["headers"];
    assert_eq!(
        headers["x-ratelimit-limit-requests"],
        json!("1"),
        "{report:#}"
    );
    assert_eq!(
        headers["x-ratelimit-remaining-requests"],
        json!("0"),
        "{report:#}"
    );
    let retry: u64 = headers["retry-after"].as_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{report:#}");
    assert_eq!(
        report["first_headers"]["x-ratelimit-remaining-requests"],
        json!("0")
    );
    assert_eq!(
        h.mock.request_count(),
        1,
        "the refused call never went upstream"
    );
    h.stop().await;
}
