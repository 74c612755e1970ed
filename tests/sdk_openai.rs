//! Conformance with the official OpenAI Python SDK: what an application using `openai` sees when
//! guardwire passes, blocks mid-stream, or refuses a request.
//!
//! Each test scripts a mock upstream, starts guardwire in front of it and runs
//! `tests/sdk/openai_chat.py <scenario>` with `$GUARDWIRE_SDK_PYTHON`, the interpreter of the
//! venv that `tests/run` builds from `tests/sdk/requirements.txt`. The tests are `#[ignore]`d so
//! a plain `cargo test` works without Python; `tests/run` runs them with `--include-ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::mock_upstream::{openai_chat_stream, sse_data_frames, MockUpstream, Reply};
use guardwire::config::Config;
use guardwire::server::RunningServer;
use serde_json::{json, Value};
use tempfile::NamedTempFile;

const BANNED: &str = "forbidden";
const OUTPUT_MESSAGE: &str = "The answer used a banned word.";
const INPUT_MESSAGE: &str = "The prompt contained a secret.";
const PACK: &str = r#"
name: sdk-conformance
validators:
  - id: no-forbidden
    type: banned_words
    message: "The answer used a banned word."
    params: { words: ["forbidden"] }
  - id: no-secrets-in-prompts
    type: regex
    message: "The prompt contained a secret."
    params: { pattern: "secret-\\d+", expect_match: false, direction: input }
"#;
const WAIT: Duration = Duration::from_secs(10);
/// Between two pieces of an upstream body: enough for each piece to travel on its own.
const PIECE_DELAY: Duration = Duration::from_millis(3);

// ---- harness ----

/// The interpreter of the SDK venv; without it these tests fail (never pass silently).
fn sdk_python() -> PathBuf {
    match std::env::var_os("GUARDWIRE_SDK_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "GUARDWIRE_SDK_PYTHON is not set. These tests drive the official OpenAI Python SDK \
             from the venv that `tests/run` creates: run `tests/run` (or, after it ran once, \
             `GUARDWIRE_SDK_PYTHON=$PWD/target/sdk-venv/bin/python cargo test --test sdk_openai \
             -- --include-ignored`)."
        ),
    }
}

struct Harness {
    mock: MockUpstream,
    server: RunningServer,
    _pack: NamedTempFile,
}

impl Harness {
    /// A mock answering every request with `reply`, and guardwire in front of it.
    async fn start(reply: Reply) -> Harness {
        let mock = MockUpstream::start(move |_| reply.clone()).await;
        let mut pack = tempfile::Builder::new()
            .prefix("guardwire-sdk-pack-")
            .suffix(".yaml")
            .tempfile()
            .expect("create pack tempfile");
        pack.write_all(PACK.as_bytes()).expect("write pack");
        pack.flush().expect("flush pack");
        let pack_path = pack.path().to_str().expect("utf-8 temp path");
        // JSON strings are YAML strings: quoting this way survives any character in the path.
        let yaml = format!(
            "listen: \"127.0.0.1:0\"\nupstreams:\n  openai: {}\npacks: [{}]\n",
            Value::from(mock.base_url()),
            Value::from(pack_path),
        );
        let config = Config::from_yaml(&yaml).expect("test config parses");
        let server = guardwire::server::start(config)
            .await
            .expect("guardwire starts");
        Harness {
            mock,
            server,
            _pack: pack,
        }
    }

    /// Runs one scenario of the SDK script against this guardwire; its JSON report.
    async fn run_sdk(&self, python: PathBuf, scenario: &str) -> Value {
        run_sdk(python, self.server.addr, scenario).await
    }

    async fn stop(self) {
        self.server.shutdown(Duration::from_secs(1)).await;
    }
}

async fn run_sdk(python: PathBuf, addr: SocketAddr, scenario: &str) -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = manifest.join("tests/sdk/openai_chat.py");
    let base_url = format!("http://{addr}/v1");
    let scenario = scenario.to_owned();
    let label = format!("{} {} {scenario}", python.display(), script.display());
    let output = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .arg(&scenario)
            .current_dir(manifest)
            // A clean environment: no proxies, no OPENAI_* settings leaking into the client.
            .env_clear()
            .env("GUARDWIRE_BASE_URL", &base_url)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUTF8", "1");
        for name in ["PATH", "LD_LIBRARY_PATH", "TMPDIR"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.output()
    })
    .await
    .expect("SDK runner task")
    .unwrap_or_else(|e| panic!("could not run `{label}`: {e} (run tests/run to build the venv)"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = format!(
        "`{label}` ({})\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    assert!(output.status.success(), "SDK scenario failed: {context}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one JSON object on stdout: {context}"
    );
    let report: Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {context}"));
    assert_eq!(report["ok"], json!(true), "{context}");
    // Shown for failing tests (and with --nocapture).
    eprintln!("{label}: {report}");
    report
}

// ---- upstream bodies ----

/// Byte offsets inside every occurrence of each needle (after its first byte and at its middle),
/// so the upstream's body frames split words, `data:` field names and UTF-8 characters.
fn points_inside(body: &[u8], needles: &[&str]) -> Vec<usize> {
    let mut points = Vec::new();
    for needle in needles {
        let n = needle.as_bytes();
        assert!(n.len() >= 2, "needle {needle:?} too short to split");
        let mut from = 0;
        while let Some(i) = body[from..].windows(n.len()).position(|w| w == n) {
            let at = from + i;
            points.push(at + 1);
            points.push(at + n.len() / 2);
            from = at + 1;
        }
    }
    assert!(!points.is_empty(), "no needle of {needles:?} in the body");
    points
}

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

/// Many more pieces after the violation: a long answer the upstream is still producing.
fn long_tail(n: usize) -> Vec<String> {
    (0..n).map(|i| format!(" and more words ({i})")).collect()
}

// ---- assertions ----

/// The SDK saw guardwire's mid-stream error event as `openai.APIError` with its fields.
fn assert_stream_blocked(report: &Value) {
    assert_eq!(report["exception"], json!("APIError"), "{report:#}");
    assert_eq!(report["code"], json!("content_blocked"), "{report:#}");
    assert_eq!(report["type"], json!("guardrail_violation"), "{report:#}");
    assert_eq!(report["message"], json!(OUTPUT_MESSAGE), "{report:#}");
}

/// `yielded` holds nothing at or after the position of the banned word: it is `clean_prefix`
/// or a prefix of it (frames may be held back whole), so not even a first character of the
/// banned word reached the application.
fn assert_no_leak(yielded: &str, clean_prefix: &str, report: &Value) {
    assert!(
        clean_prefix.starts_with(yielded),
        "the application received {yielded:?}, which is not a prefix of the clean text \
         {clean_prefix:?} before {BANNED:?}: {report:#}"
    );
}

/// The one request the mock saw was the SDK's, forwarded unchanged to the same path.
fn assert_forwarded(mock: &MockUpstream, stream: bool) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    let r = &requests[0];
    assert_eq!(r.path_and_query, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer test-key"));
    let body = r.body_json().expect("upstream request body is JSON");
    assert_eq!(body["model"], json!("gpt-4o"));
    assert_eq!(body["stream"].as_bool().unwrap_or(false), stream, "{body}");
}

// ---- tests ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_reaches_the_sdk_byte_for_byte() {
    let python = sdk_python();
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

    let report = h.run_sdk(python, "clean_stream").await;

    assert_eq!(report["text"], json!(texts.concat()), "{report:#}");
    assert_eq!(report["finish_reasons"], json!(["stop"]), "{report:#}");
    assert_forwarded(&h.mock, true);
    assert!(h.mock.wait_for_completed(1, WAIT).await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn clean_stream_in_tiny_pieces_reaches_the_sdk() {
    let python = sdk_python();
    let texts = ["Every ", "piece ", "arrives, ", "forbiddenness ", "or not."];
    let body = openai_chat_stream(&texts);
    let h = Harness::start(Reply::sse_every(&body, 5, Duration::from_millis(1))).await;

    let report = h.run_sdk(python, "clean_stream").await;

    assert_eq!(report["text"], json!(texts.concat()), "{report:#}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_raises_api_error_without_leaking() {
    let python = sdk_python();
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

    let report = h.run_sdk(python, "blocked_stream").await;

    assert_stream_blocked(&report);
    let yielded = report["text"].as_str().expect("text");
    assert_no_leak(yielded, clean_prefix, &report);
    assert_forwarded(&h.mock, true);
    assert!(
        h.mock.wait_for_cancelled(1, WAIT).await,
        "the upstream request was not cancelled after the block"
    );
    assert_eq!(h.mock.completed_count(), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn blocked_stream_with_the_word_in_one_chunk() {
    let python = sdk_python();
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

    let report = h.run_sdk(python, "blocked_stream").await;

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
    let python = sdk_python();
    let clean_prefix = r#"{"query": "the archive of "#;
    let pieces = [
        r#"{"query": "#,
        r#""the archive of f"#,
        "orbid",
        r#"den lore", "limit": 3}"#,
    ];
    let body = tool_call_stream("search_archive", &pieces);
    let points = points_inside(&body, &["data:", "of f", "orbid", "den lo"]);
    let h = Harness::start(Reply::sse_split(&body, &points, PIECE_DELAY).then_hang()).await;

    let report = h.run_sdk(python, "blocked_tool_args").await;

    assert_stream_blocked(&report);
    let yielded = report["arguments"]["0"].as_str().unwrap_or("");
    assert_no_leak(yielded, clean_prefix, &report);
    let arguments = report["arguments"].as_object().expect("arguments object");
    assert!(
        arguments.keys().all(|k| k == "0"),
        "only tool call 0 exists: {report:#}"
    );
    assert_forwarded(&h.mock, true);
    let sent = h.mock.requests()[0].body_json().expect("JSON body");
    assert_eq!(
        sent["tools"][0]["function"]["name"],
        json!("search_archive"),
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
    let python = sdk_python();
    let reply = Reply::json(200, &chat_completion("Here is the forbidden answer."));
    let h = Harness::start(reply).await;

    let report = h.run_sdk(python, "nonstream_block").await;

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
    assert_forwarded(&h.mock, false);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn input_block_raises_bad_request_before_the_upstream_call() {
    let python = sdk_python();
    let h = Harness::start(Reply::sse(&openai_chat_stream(&["never sent"]))).await;

    let report = h.run_sdk(python, "input_block").await;

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
    let python = sdk_python();
    let content = "Hé ✓, forbiddenness is no word; secret-42 may be said.\n\"ok\"";
    let h = Harness::start(Reply::json(200, &chat_completion(content))).await;

    let report = h.run_sdk(python, "clean_nonstream").await;

    assert_eq!(report["content"], json!(content), "{report:#}");
    assert_eq!(report["finish_reason"], json!("stop"), "{report:#}");
    assert_eq!(report["id"], json!("chatcmpl-2"), "{report:#}");
    assert_forwarded(&h.mock, false);
    h.stop().await;
}
