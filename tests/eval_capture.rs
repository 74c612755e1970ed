//! The body capture (`capture:`) end to end: guardwire in front of the mock upstream writes one
//! record per exchange — clean and violating, streamed and whole, blocked before the call —
//! and `guardwire eval --replay` of that file with the same pack gives the proxy's own
//! outcomes; and its bounds (sample, record size, rotation, no keys written).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::eval;
use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::proxy::{metrics, post_chat, send, start_proxy};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The replay example's config and pack (docs/evaluation.md): the pack the proxy runs here.
const CONFIG: &str = "examples/eval/replay.yaml";
const PACK: &str = "examples/eval/pack.yaml";

/// The answer the mock gives to a prompt: whole, or streamed in the pieces given.
fn answer_for(prompt: &str) -> Vec<&'static str> {
    match prompt {
        "What is the capital of France?" => vec!["Paris is the capital of France."],
        "Tell me about Lyon" => vec!["Lyon is a city ", "in France."],
        "What is the plan?" => vec!["The plan is project bluebird, launching soon."],
        // The codename split across two frames.
        "Any news?" => vec!["News: project blu", "ebird ships today."],
        "Contact?" => vec!["Write to jane@example.com ", "please."],
        _ => vec!["Something else entirely."],
    }
}

async fn mock() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap();
        let prompt = body["messages"][0]["content"].as_str().unwrap().to_owned();
        let pieces = answer_for(&prompt);
        // The provider's error answers: one naming the codename (in a key and a value), one
        // clean, one in a charset the checks decode.
        match prompt.as_str() {
            "Fail loudly" => {
                return Reply::json(
                    400,
                    r#"{"error":{"message":"no project \u0062luebird here","type":"invalid_request_error"}}"#,
                )
            }
            "Fail quietly" => {
                return Reply::json(429, r#"{"error":{"message":"slow down","type":"rate_limit"}}"#)
            }
            _ => {}
        }
        if body["stream"] == true {
            // A few bytes a read: the capture sees the stream as guardwire read it.
            Reply::sse_every(&openai_chat_stream(&pieces), 7, Duration::ZERO)
        } else {
            let whole = json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": pieces.concat()}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
            });
            Reply::json(200, &whole.to_string())
        }
    })
    .await
}

fn request(prompt: &str, stream: bool) -> String {
    json!({"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": prompt}]})
        .to_string()
}

/// The lines of `path` once there are `n` (records are written off the request path, when an
/// exchange's last part is done).
async fn lines(path: &Path, n: usize) -> Vec<Value> {
    for _ in 0..400 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n {
            return text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{}: fewer than {n} records: {:?}",
        path.display(),
        std::fs::read_to_string(path)
    );
}

/// A record's body, written as a string (`key`), read as the JSON it holds.
fn body_json(record: &Value, key: &str) -> Value {
    serde_json::from_str(
        record[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}: {record}")),
    )
    .unwrap()
}

fn replay(file: &Path, out: &Path) -> (i32, String) {
    let (file, out) = (file.to_str().unwrap(), out.to_str().unwrap());
    eval(&["--config", CONFIG, "--replay", file, "--json", out])
}

fn counter(metrics: &str, result: &str) -> u64 {
    let name = format!("guardwire_capture_records_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&name))
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_capture_replays_to_the_proxys_own_verdicts() {
    let upstream = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capture.jsonl");
    let pack = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PACK)).unwrap();
    let extra = format!("capture:\n  path: \"{}\"\n", file.display());
    let proxy = start_proxy(&upstream.base_url(), &pack, &extra).await;

    // (prompt, streamed, released by the proxy)
    let traffic = [
        ("What is the capital of France?", false, true),
        ("Tell me about Lyon", true, true),
        ("What is the plan?", false, false),
        ("Any news?", true, false),
        ("Contact?", true, true),
        ("my key is sk-abcdefghijklmnopqrstuvwxyz0123", false, false),
        ("Fail loudly", false, false),
        ("Fail quietly", false, true),
    ];
    for (prompt, stream, released) in traffic {
        // Every request with the same client-chosen request id (two tenants may choose alike).
        let a = send(
            proxy.addr(),
            "POST",
            "/v1/chat/completions",
            request(prompt, stream),
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer sk-client"),
                ("x-request-id", "req-0001"),
            ],
        )
        .await;
        let text = a.text();
        let passed = (a.status == 200 && !text.contains("\"error\"")) || text.contains("slow down");
        assert_eq!(passed, released, "{prompt}: {} {text}", a.status);
    }
    // The request with a key in its prompt was blocked before the call.
    assert_eq!(upstream.request_count(), traffic.len() - 1);

    let records = lines(&file, traffic.len()).await;
    assert_eq!(records.len(), traffic.len());
    let raw = std::fs::read_to_string(&file).unwrap();
    // No header is written: neither the client's key nor any header name.
    assert!(!raw.contains("sk-client"), "{raw}");
    assert!(!raw.to_ascii_lowercase().contains("authorization"), "{raw}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the capture is readable by others: {mode:o}"
        );
    }
    let by_prompt = |p: &str| {
        records
            .iter()
            .find(|r| body_json(r, "request_body")["messages"][0]["content"] == p)
            .unwrap_or_else(|| panic!("no record of {p}: {raw}"))
    };
    // A stream is recorded as the upstream sent it (the raw SSE), not as relayed.
    let lyon = by_prompt("Tell me about Lyon");
    assert_eq!(
        lyon["response_sse"].as_str().unwrap().as_bytes(),
        openai_chat_stream(&answer_for("Tell me about Lyon"))
    );
    assert_eq!(lyon["route"], "openai_chat");
    assert_eq!(lyon["protocol"], "openai_chat");
    assert_eq!(lyon["path"], "/v1/chat/completions");
    assert_eq!(lyon["metadata"]["outcome"], "ok");
    // The client's request, not the one sent upstream (which asked for usage).
    assert!(
        body_json(lyon, "request_body")
            .get("stream_options")
            .is_none(),
        "{lyon}"
    );
    let plan = by_prompt("What is the plan?");
    assert_eq!(plan["metadata"]["outcome"], "blocked");
    assert_eq!(plan["metadata"]["status"], 400);
    assert_eq!(plan["metadata"]["verdicts"][0]["validator"], "codenames");
    assert!(
        body_json(plan, "response_body")["choices"].is_array(),
        "{plan}"
    );
    let news = by_prompt("Any news?");
    assert_eq!(news["metadata"]["outcome"], "blocked");
    let key = by_prompt("my key is sk-abcdefghijklmnopqrstuvwxyz0123");
    assert!(key.get("response_body").is_none() && key.get("response_sse").is_none());
    assert_eq!(key["metadata"]["verdicts"][0]["phase"], "input");
    let contact = by_prompt("Contact?");
    assert_eq!(contact["metadata"]["verdicts"][0]["mode"], "redact");
    // Each record has an id of its own; the client's request id is metadata.
    let ids: std::collections::HashSet<_> =
        records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), records.len(), "{raw}");
    assert!(
        records
            .iter()
            .all(|r| r["metadata"]["request_id"] == "req-0001"),
        "{raw}"
    );
    // An error answer is recorded as checked, and replays to the proxy's verdict.
    let loud = by_prompt("Fail loudly");
    assert_eq!(loud["metadata"]["outcome"], "blocked", "{loud}");
    assert_eq!(loud["metadata"]["upstream_status"], 400);
    assert!(
        loud["response_body"].as_str().unwrap().contains("luebird"),
        "{loud}"
    );

    let m = metrics(proxy.addr()).await;
    assert_eq!(counter(&m, "written"), traffic.len() as u64, "{m}");
    assert_eq!(counter(&m, "queue_full"), 0);

    // The replay of the capture, with the same pack: the proxy's outcomes, counted.
    let out = dir.path().join("replay.json");
    let (code, text) = replay(&file, &out);
    assert_eq!(code, 0, "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["exchanges"], 8, "{r}");
    assert_eq!(r["passed"], 4, "{r}");
    assert_eq!(r["blocked"], 4, "{r}");
    assert_eq!(r["refused"], 0, "{r}");
    assert_eq!(r["redacted"], 1, "{r}");
    assert_eq!(r["request_only"], 1, "{r}");
    assert_eq!(r["invalid"], 0, "{r}");
    let blocked_by = |id: &str| {
        r["by_validator"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["validator"] == id)
            .unwrap_or_else(|| panic!("no {id} in {r}"))["blocked"]
            .clone()
    };
    assert_eq!(blocked_by("no-api-keys"), 1, "{r}");
    assert_eq!(blocked_by("codenames"), 3, "{r}");
}

#[tokio::test]
async fn a_request_cannot_write_a_record_of_its_own() {
    let upstream = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capture.jsonl");
    let pack = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PACK)).unwrap();
    let extra = format!("capture:\n  path: \"{}\"\n", file.display());
    let proxy = start_proxy(&upstream.base_url(), &pack, &extra).await;
    // Valid JSON whose white space is line breaks, carrying a whole record of a clean exchange
    // between them: copied raw, it was a line of its own, replayed as a pass.
    let forged = json!({"id": "forged", "route": "openai_chat", "protocol": "openai_chat",
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}]}});
    let body = format!(
        "{{\"model\": \"gpt-4o\", \"stream\": false, \"messages\": [{{\"role\": \"user\", \"content\": \"What is the plan?\"}}], \"x\":\n{forged}\r\n}}"
    );
    let a = post_chat(proxy.addr(), &body).await;
    assert_eq!(a.status, 400, "{}", a.text());
    // One write of the whole record: once a line is there, all of its lines are.
    let records = lines(&file, 1).await;
    let raw = std::fs::read_to_string(&file).unwrap();
    assert_eq!(raw.lines().count(), 1, "{raw}");
    assert_eq!(records[0]["request_body"], body);
    let out = dir.path().join("replay.json");
    let (code, text) = replay(&file, &out);
    assert_eq!(code, 0, "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["exchanges"], 1, "{r}");
    assert_eq!(r["blocked"], 1, "{r}");
    assert_eq!(r["invalid"], 0, "{r}");
    assert!(!r.to_string().contains("forged"), "{r}");
}

#[tokio::test]
async fn a_capture_stays_within_its_bounds() {
    let upstream = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.jsonl");
    // Every second exchange; records over 2 KiB dropped; files of 3 KiB, one rotated kept.
    let extra = format!(
        "capture:\n  path: \"{}\"\n  sample: 0.5\n  max_record_bytes: 2048\n  max_file_bytes: 3072\n  max_files: 1\n",
        file.display()
    );
    let proxy = start_proxy(&upstream.base_url(), "validators: []\n", &extra).await;
    let long = "x".repeat(3000);
    // 12 exchanges: every second one sampled (from the second on); the first sampled one is
    // too large.
    for i in 0..12 {
        let prompt = if i == 1 {
            long.clone()
        } else {
            format!("What is the capital of France? {i}")
        };
        let a = post_chat(proxy.addr(), &request(&prompt, i % 3 == 0)).await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let mut written = 0;
    for _ in 0..400 {
        let m = metrics(proxy.addr()).await;
        written = counter(&m, "written");
        if written + counter(&m, "too_large") >= 6 {
            assert_eq!(counter(&m, "too_large"), 1, "{m}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(written, 5);
    let rotated = dir.path().join("c.jsonl.1");
    let (a, b) = (
        std::fs::read_to_string(&file).unwrap(),
        std::fs::read_to_string(&rotated).unwrap(),
    );
    assert!(!dir.path().join("c.jsonl.2").exists(), "max_files: 1");
    assert!(
        a.len() <= 3072 && b.len() <= 3072,
        "{} {}",
        a.len(),
        b.len()
    );
    // Rotated away: the oldest records, once the kept file was full again.
    let kept = a.lines().count() + b.lines().count();
    assert!((2..=5).contains(&kept), "{kept}: {b}\n{a}");
    for line in a.lines().chain(b.lines()) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(line.len() <= 2048, "{line}");
        assert!(!line.contains(&long), "the too large record was written");
        assert!(body_json(&v, "request_body")["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("What is the capital"));
    }
}

#[tokio::test]
async fn capture_settings_are_checked_at_load() {
    let upstream = mock().await;
    for (extra, says) in [
        ("capture:\n  path: c.jsonl\n  sample: 1.5\n", "capture.sample"),
        (
            "capture:\n  path: c.jsonl\n  routes: [nowhere]\n",
            "capture.routes[0]: `nowhere` is neither",
        ),
        (
            "routes:\n  - { name: tools, protocol: mcp, path_prefix: /mcp, upstream: \"http://127.0.0.1:9\" }\ncapture:\n  path: c.jsonl\n  routes: [openai_chat, tools]\n",
            "capture.routes[1]: `tools` is an MCP route",
        ),
        (
            "capture:\n  path: c.jsonl\n  max_record_bytes: 4096\n  max_file_bytes: 1024\n",
            "capture.max_file_bytes",
        ),
        ("capture:\n  path: c.jsonl\n  querue: 3\n", "querue"),
    ] {
        let yaml = format!(
            "upstreams:\n  openai: \"{}\"\n{extra}",
            upstream.base_url()
        );
        let err = guardwire::config::Config::from_yaml(&yaml).unwrap_err().to_string();
        assert!(err.contains(says), "{extra}: {err}");
    }
    // A file that cannot be opened stops the start, naming the key.
    let yaml = format!(
        "listen: \"127.0.0.1:0\"\nupstreams:\n  openai: \"{}\"\ncapture:\n  path: /nonexistent-dir/c.jsonl\n",
        upstream.base_url()
    );
    let config = guardwire::config::Config::from_yaml(&yaml).unwrap();
    let err = guardwire::server::start(config)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("capture.path: cannot open /nonexistent-dir/c.jsonl"),
        "{err}"
    );
}

/// An answer in UTF-16 is recorded as the text guardwire checked — decoded, in UTF-8 — not as
/// its wire bytes, so `eval --replay` decides on what the proxy decided on: the codename the
/// proxy blocked in a UTF-16 answer is blocked again on replay.
#[tokio::test]
async fn a_capture_records_the_answer_as_decoded() {
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "The plan is project bluebird, én route."}}]
    })
    .to_string();
    let utf16: Vec<u8> = answer
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    let upstream = MockUpstream::start(move |_| {
        Reply::chunks(
            200,
            utf16
                .chunks(5)
                .map(|c| common::mock_upstream::Chunk::now(c.to_vec()))
                .collect(),
        )
        .with_header("content-type", "application/json; charset=utf-16le")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capture.jsonl");
    let pack = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PACK)).unwrap();
    let extra = format!("capture:\n  path: \"{}\"\n", file.display());
    let proxy = start_proxy(&upstream.base_url(), &pack, &extra).await;
    let a = post_chat(proxy.addr(), &request("Hello", false)).await;
    assert_eq!(a.status, 400, "the proxy blocks the codename: {}", a.text());
    let records = lines(&file, 1).await;
    assert_eq!(records[0]["response_body"], answer, "{}", records[0]);
    assert!(
        records[0].get("response_body_base64").is_none(),
        "{}",
        records[0]
    );
    let out = dir.path().join("replay.json");
    let (code, text) = replay(&file, &out);
    assert_eq!(code, 0, "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["blocked"], 1, "{r}");
    assert_eq!(r["invalid"], 0, "{r}");
}
