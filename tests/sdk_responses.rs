//! Conformance with the official OpenAI Python SDK's Responses API (`client.responses.create`
//! and the `client.responses.stream` helper): what an application sees when guardwire passes,
//! blocks mid-stream, or refuses a request on `POST /v1/responses`.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `tests/sdk/openai_responses.py <scenario>` (harness: tests/common/sdk.rs). `#[ignore]`d like
//! every SDK test; `tests/run` runs them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::Reply;
use common::openai_responses::{text_stream, tool_call_stream, whole_response};
use common::sdk::{
    assert_cancelled, assert_no_leak, assert_openai_forwarded, assert_openai_stream_blocked,
    long_tail, points_inside, Harness, Sdk, BANNED, INPUT_MESSAGE, OUTPUT_MESSAGE, PIECE_DELAY,
    REDACT_PACK, TOOL_NAME, WAIT,
};
use serde_json::{json, Value};

// ---- upstream bodies ----

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

fn assert_bad_request(report: &Value, message: &str) {
    assert_eq!(report["exception"], json!("BadRequestError"), "{report:#}");
    assert_eq!(report["status_code"], json!(400), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(report["type"], json!("guardrail_violation"), "{report:#}");
    assert_eq!(report["body"]["message"], json!(message), "{report:#}");
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
    let sdk = Sdk::openai_responses();
    let body = text_stream(&CLEAN_TEXTS);
    let points = points_inside(&body, &["data:", "event:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "clean_stream").await;

    let full = CLEAN_TEXTS.concat();
    assert_eq!(report["text"], json!(full), "{report:#}");
    assert_eq!(report["done_texts"], json!([full]), "{report:#}");
    assert_eq!(report["status"], json!("completed"), "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/responses", true);
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_through_the_stream_helper_in_tiny_pieces() {
    let sdk = Sdk::openai_responses();
    let body = text_stream(&CLEAN_TEXTS);
    let h = Harness::start(Reply::sse_every(&body, 7, std::time::Duration::ZERO)).await;

    let report = h.run(&sdk, "clean_stream_helper").await;

    let full = CLEAN_TEXTS.concat();
    assert_eq!(report["text"], json!(full), "{report:#}");
    assert_eq!(report["final_output_text"], json!(full), "{report:#}");
    assert_eq!(report["final_status"], json!("completed"), "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/responses", true);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_raises_api_error_without_leaking() {
    let sdk = Sdk::openai_responses();
    let (reply, clean_prefix) = blocked_text_reply();
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "blocked_stream").await;

    assert_openai_stream_blocked(&report);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        clean_prefix,
        &report,
    );
    assert_eq!(report["done_texts"], json!([]), "{report:#}");
    assert_eq!(report["status"], Value::Null, "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/responses", true);
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_through_the_stream_helper_raises_api_error() {
    let sdk = Sdk::openai_responses();
    let (reply, clean_prefix) = blocked_text_reply();
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "blocked_stream_helper").await;

    assert_openai_stream_blocked(&report);
    assert_no_leak(
        report["text"].as_str().expect("text"),
        clean_prefix,
        &report,
    );
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_tool_arguments_raise_api_error_without_leaking() {
    let sdk = Sdk::openai_responses();
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

    assert_openai_stream_blocked(&report);
    let yielded = report["arguments"]["0"].as_str().unwrap_or("");
    assert_no_leak(yielded, clean_prefix, &report);
    let arguments = report["arguments"].as_object().expect("arguments object");
    assert!(
        arguments.keys().all(|k| k == "0"),
        "only output item 0 exists: {report:#}"
    );
    assert_openai_forwarded(&h.mock, "/v1/responses", true);
    let sent = h.mock.requests()[0].body_json().expect("JSON body");
    assert_eq!(sent["tools"][0]["name"], json!(TOOL_NAME), "{sent}");
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn nonstream_block_raises_bad_request() {
    let sdk = Sdk::openai_responses();
    let reply = Reply::json(200, &whole_response("Here is the forbidden answer."));
    let h = Harness::start(reply).await;

    let report = h.run(&sdk, "nonstream_block").await;

    assert_bad_request(&report, OUTPUT_MESSAGE);
    assert_openai_forwarded(&h.mock, "/v1/responses", false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn input_block_raises_bad_request_before_the_upstream_call() {
    let sdk = Sdk::openai_responses();
    let h = Harness::start(Reply::sse(&text_stream(&["never sent"]))).await;

    let report = h.run(&sdk, "input_block").await;

    assert_bad_request(&report, INPUT_MESSAGE);
    assert_eq!(h.mock.request_count(), 0, "the upstream must not be called");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_nonstream_returns_the_output_text() {
    let sdk = Sdk::openai_responses();
    let content = "Hé ✓, forbiddenness is no word; secret-42 may be said.\n\"ok\"";
    let h = Harness::start(Reply::json(200, &whole_response(content))).await;

    let report = h.run(&sdk, "clean_nonstream").await;

    assert_eq!(report["output_text"], json!(content), "{report:#}");
    assert_eq!(report["status"], json!("completed"), "{report:#}");
    assert_eq!(report["id"], json!("resp_1"), "{report:#}");
    assert_openai_forwarded(&h.mock, "/v1/responses", false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn redacted_stream_is_masked_in_deltas_done_events_and_the_final_response() {
    let sdk = Sdk::openai_responses();
    let texts = [
        "Pay with 4111 11",
        "11 1111 1111 via pro",
        "ject bluebird, thanks.",
    ];
    let body = text_stream(&texts);
    let points = points_inside(&body, &["data:", "event:", "11 11", "blue"]);
    let h = Harness::start_with(Reply::sse_split(&body, &points, PIECE_DELAY), REDACT_PACK).await;

    let report = h.run(&sdk, "clean_stream_helper").await;

    let masked = "Pay with [REDACTED:credit_card] via project [codename], thanks.";
    assert_eq!(report["text"], json!(masked), "{report:#}");
    assert_eq!(report["done_texts"], json!([masked]), "{report:#}");
    assert_eq!(report["final_output_text"], json!(masked), "{report:#}");
    for raw in ["4111", "bluebird"] {
        assert!(
            !report.to_string().contains(raw),
            "{raw} reached the SDK: {report:#}"
        );
    }
    h.stop().await;
}
