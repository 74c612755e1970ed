//! Conformance with the official `openai` npm package (Node.js): Chat Completions and Responses
//! streams through guardwire, clean and blocked.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `node tests/sdk/node/openai.mjs <scenario>` with `$GUARDWIRE_SDK_NODE`, next to the
//! node_modules that `tests/run` installs with `npm ci` (harness: tests/common/sdk.rs).
//! `#[ignore]`d like every SDK test; `tests/run` runs them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::openai_responses::text_stream as responses_stream;
use common::sdk::{
    assert_cancelled, assert_no_leak, assert_openai_stream_blocked, long_tail, points_inside,
    Harness, Sdk, PIECE_DELAY, WAIT,
};
use serde_json::json;

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

/// The clean text before the banned word of [`blocked_texts`].
const CLEAN_PREFIX: &str = "Hello there, this is ";

/// The banned word spans three pieces, the first ending in its first letter; a long tail
/// follows.
fn blocked_texts() -> Vec<String> {
    let mut texts: Vec<String> = ["Hello", " there, this is f", "orbid", "den lore"]
        .map(str::to_owned)
        .to_vec();
    texts.extend(long_tail(50));
    texts
}

/// `body`, split inside the banned word and the SSE field names; it never ends.
fn blocked_reply(body: &[u8]) -> Reply {
    let points = points_inside(body, &["data:", "is f", "orbid", "den lo"]);
    Reply::sse_split(body, &points, PIECE_DELAY).then_hang()
}

fn assert_forwarded(mock: &MockUpstream, path: &str) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    let r = &requests[0];
    assert_eq!(r.path_and_query, path);
    assert_eq!(r.header("authorization"), Some("Bearer test-key"));
    let body = r.body_json().expect("upstream request body is JSON");
    assert_eq!(body["stream"], json!(true), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn chat_clean_stream_reaches_the_sdk_byte_for_byte() {
    let sdk = Sdk::node_openai();
    let body = openai_chat_stream(&CLEAN_TEXTS);
    let points = points_inside(&body, &["data:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "chat_clean_stream").await;

    assert_eq!(report["text"], json!(CLEAN_TEXTS.concat()), "{report:#}");
    assert_eq!(report["finish_reasons"], json!(["stop"]), "{report:#}");
    assert_forwarded(&h.mock, "/v1/chat/completions");
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn chat_blocked_stream_throws_api_error_without_leaking() {
    let sdk = Sdk::node_openai();
    let texts = blocked_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let h = Harness::start(blocked_reply(&openai_chat_stream(&refs))).await;

    let report = h.run(&sdk, "chat_blocked_stream").await;

    assert_openai_stream_blocked(&report);
    assert_eq!(report["is_api_error"], json!(true), "{report:#}");
    assert_no_leak(
        report["text"].as_str().expect("text"),
        CLEAN_PREFIX,
        &report,
    );
    assert_eq!(report["finish_reasons"], json!([]), "{report:#}");
    assert_forwarded(&h.mock, "/v1/chat/completions");
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn responses_clean_stream_reaches_the_sdk_byte_for_byte() {
    let sdk = Sdk::node_openai();
    let body = responses_stream(&CLEAN_TEXTS);
    let points = points_inside(&body, &["data:", "event:", "forbidd", "é", "✓"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY)).await;

    let report = h.run(&sdk, "responses_clean_stream").await;

    assert_eq!(report["text"], json!(CLEAN_TEXTS.concat()), "{report:#}");
    assert_eq!(report["status"], json!("completed"), "{report:#}");
    assert_forwarded(&h.mock, "/v1/responses");
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn responses_clean_stream_through_the_stream_helper_in_tiny_pieces() {
    let sdk = Sdk::node_openai();
    let body = responses_stream(&CLEAN_TEXTS);
    let h = Harness::start(Reply::sse_every(&body, 7, std::time::Duration::ZERO)).await;

    let report = h.run(&sdk, "responses_clean_stream_helper").await;

    let full = CLEAN_TEXTS.concat();
    assert_eq!(report["text"], json!(full), "{report:#}");
    assert_eq!(report["final_output_text"], json!(full), "{report:#}");
    assert_eq!(report["status"], json!("completed"), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn responses_blocked_stream_throws_api_error_without_leaking() {
    let sdk = Sdk::node_openai();
    let texts = blocked_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let h = Harness::start(blocked_reply(&responses_stream(&refs))).await;

    let report = h.run(&sdk, "responses_blocked_stream").await;

    assert_openai_stream_blocked(&report);
    assert_eq!(report["is_api_error"], json!(true), "{report:#}");
    assert_no_leak(
        report["text"].as_str().expect("text"),
        CLEAN_PREFIX,
        &report,
    );
    assert_eq!(report["status"], json!(null), "{report:#}");
    assert_forwarded(&h.mock, "/v1/responses");
    assert_cancelled(&h.mock).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK node_modules: run tests/run"]
async fn responses_blocked_stream_through_the_stream_helper_throws_api_error() {
    let sdk = Sdk::node_openai();
    let texts = blocked_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let h = Harness::start(blocked_reply(&responses_stream(&refs))).await;

    let report = h.run(&sdk, "responses_blocked_stream_helper").await;

    assert_openai_stream_blocked(&report);
    assert_eq!(report["is_api_error"], json!(true), "{report:#}");
    assert_no_leak(
        report["text"].as_str().expect("text"),
        CLEAN_PREFIX,
        &report,
    );
    assert_cancelled(&h.mock).await;
    h.stop().await;
}
