//! `protocol: a2a` routes: guardwire in front of an A2A agent.
//!
//! The fast tests script the agent (tests/common/mock_upstream.rs): a banned phrase split
//! between two appended chunks of a streamed artifact never reaches the client, at any byte
//! split of the stream; blocks are JSON-RPC errors for the call's id; blocked calls are never
//! forwarded; the agent card comes back with guardwire's URLs. The ignored tests put a real
//! `a2a-sdk` agent (tests/a2a/agent.py) behind guardwire and drive it with the real `a2a-sdk`
//! client (tests/a2a/client.py), which resolves the card through guardwire.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::proxy::{send, start_config, Answer};
use common::sdk::client_output;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

/// Names the validator in its default message ("blocked by guardrail 'banned-phrase'"), and
/// nothing of the phrase.
const PACK: &str = "validators:\n  - id: banned-phrase\n    type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
const WAIT: Duration = Duration::from_secs(10);
const BLOCKED: i64 = -32090;

fn routes(upstream: &str) -> String {
    format!(
        "routes:\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{upstream}\"\n"
    )
}

fn sse(events: &[Value]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

fn result(id: &str, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A 1.0 stream: the task, artifact `a` in appended `chunks` with one chunk of artifact `b`
/// between its first two, then the completed status.
fn artifact_stream(id: &str, chunks: &[&str]) -> String {
    artifact_stream_aside_after(id, chunks, 0)
}

/// [`artifact_stream`] with the aside after chunk `aside_after` (after the last: the
/// artifacts do not interleave; past it: no aside).
fn artifact_stream_aside_after(id: &str, chunks: &[&str], aside_after: usize) -> String {
    let mut events = vec![result(
        id,
        json!({"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
    )];
    for (i, c) in chunks.iter().enumerate() {
        let mut update = json!({"taskId": "t1", "contextId": "c1",
            "artifact": {"artifactId": "a", "parts": [{"text": c}]}});
        if i > 0 {
            update["append"] = json!(true);
        }
        if i + 1 == chunks.len() {
            update["lastChunk"] = json!(true);
        }
        events.push(result(id, json!({ "artifactUpdate": update })));
        if i == aside_after {
            events.push(result(
                id,
                json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1",
                    "artifact": {"artifactId": "b", "parts": [{"text": "an aside"}]}}}),
            ));
        }
    }
    events.push(result(
        id,
        json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}}}}),
    ));
    sse(&events)
}

fn call(method: &str, id: &str, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}}})
    .to_string()
}

async fn post(addr: SocketAddr, body: String, split: Option<usize>) -> Answer {
    let split = split.map(|s| s.to_string()).unwrap_or_default();
    send(
        addr,
        "POST",
        "/agent/a2a",
        body,
        &[("content-type", "application/json"), ("x-split", &split)],
    )
    .await
}

/// The JSON-RPC error `body` (a whole answer, or the data of an SSE `event: error`) carries.
fn rpc_error(body: &str) -> Value {
    let data = match body.rfind("event: error\ndata: ") {
        Some(at) => body[at + "event: error\ndata: ".len()..].trim(),
        None => body.trim(),
    };
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn a_phrase_split_between_appended_chunks_never_leaks_at_any_byte_split() {
    let body = artifact_stream("req-7", &["Here is the forbid", "den fruit, take it."]);
    let agent = common::protocols::split_mock(body.clone()).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    for split in std::iter::once(None).chain((1..body.len()).map(Some)) {
        let a = post(
            proxy.addr(),
            call("SendStreamingMessage", "req-7", "hi"),
            split,
        )
        .await;
        let text = a.text();
        assert_eq!(a.status, 200, "{text}");
        assert!(!text.contains("forbid"), "split {split:?} leaked: {text}");
        assert!(
            !text.contains("den fruit"),
            "split {split:?} leaked: {text}"
        );
        assert!(
            !text.contains("done"),
            "split {split:?}: released after the block"
        );
        let e = rpc_error(&text);
        assert_eq!(e["id"], "req-7", "{text}");
        assert_eq!(e["error"]["code"], BLOCKED, "{text}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("banned-phrase"),
            "{text}"
        );
        // What came before the phrase went out; what followed it waited, and was dropped.
        assert!(
            text.contains("TASK_STATE_SUBMITTED"),
            "split {split:?}: {text}"
        );
        assert!(!text.contains("an aside"), "split {split:?}: {text}");
        assert!(
            text.ends_with("\n\n"),
            "the error frame ends the stream: {text}"
        );
    }
}

/// The a2a-sdk appends an appended chunk's parts to the artifact's and joins them with a line
/// break: a phrase whose words are two chunks reads `forbidden\nfruit` to its client.
#[tokio::test]
async fn a_phrase_whose_words_are_two_appended_chunks_never_leaks_at_any_byte_split() {
    let body = artifact_stream("req-8", &["Here is the forbidden", "fruit, take it."]);
    let agent = common::protocols::split_mock(body.clone()).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    for split in std::iter::once(None).chain((1..body.len()).map(Some)) {
        let a = post(
            proxy.addr(),
            call("SendStreamingMessage", "req-8", "hi"),
            split,
        )
        .await;
        let text = a.text();
        assert!(
            !text.contains("forbidden"),
            "split {split:?} leaked: {text}"
        );
        assert!(!text.contains("fruit"), "split {split:?} leaked: {text}");
        assert_eq!(rpc_error(&text)["error"]["code"], BLOCKED, "{text}");
    }
}

#[tokio::test]
async fn a_clean_stream_and_a_clean_task_pass_byte_for_byte() {
    let body = artifact_stream("s1", &["Here is the forbid", "dingly good fruit."]);
    let agent = common::protocols::split_mock(body.clone()).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    for split in [None, Some(40), Some(body.len() / 2)] {
        let a = post(
            proxy.addr(),
            call("SendStreamingMessage", "s1", "hi"),
            split,
        )
        .await;
        assert_eq!(a.status, 200);
        assert_eq!(a.text(), body);
    }
    let task = result(
        "w1",
        json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "all "}, {"text": "good"}]}]}}),
    )
    .to_string();
    let agent = MockUpstream::start({
        let task = task.clone();
        move |_| Reply::json(200, &task)
    })
    .await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendMessage", "w1", "hi"), None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), task);
}

#[tokio::test]
async fn whole_answers_block_a_phrase_split_between_parts_of_an_artifact() {
    for (method, id, answer) in [
        (
            "SendMessage",
            json!("w2"),
            json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "a", "parts": [{"text": "the forbid"}, {"text": "den fruit"}]}]}}),
        ),
        // The SDK joins parts with a line break: `forbidden\nfruit` (before the fix only
        // the parts run together were read, `forbiddenfruit`).
        (
            "SendMessage",
            json!("w3"),
            json!({"message": {"messageId": "m2", "role": "ROLE_AGENT",
                "parts": [{"text": "forbidden"}, {"text": "fruit"}]}}),
        ),
        (
            "message/send",
            json!(3),
            json!({"kind": "message", "messageId": "m", "role": "agent",
                "parts": [{"kind": "text", "text": "a forbidden fruit"}]}),
        ),
        (
            "tasks/get",
            json!(4),
            json!({"kind": "task", "id": "t", "status": {"state": "completed",
                "message": {"kind": "message", "parts": [{"kind": "text", "text": "forbidden fruit"}]}}}),
        ),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": id, "result": answer}).to_string();
        let agent = MockUpstream::start(move |_| Reply::json(200, &body)).await;
        let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method,
            "params": {"message": {"messageId": "m1", "role": "user", "parts": [{"text": "hi"}]}, "id": "t"}})
        .to_string();
        let a = post(proxy.addr(), req, None).await;
        assert_eq!(a.status, 200, "{method}");
        assert!(!a.text().contains("fruit"), "{method}: {}", a.text());
        let e = a.json();
        assert_eq!(e["id"], id, "{method}");
        assert_eq!(e["error"]["code"], BLOCKED, "{method}");
        assert_eq!(e["error"]["data"][0]["reason"], "CONTENT_BLOCKED");
    }
}

#[tokio::test]
async fn a_blocked_message_never_reaches_the_agent() {
    const HELLO: &str = r#"{"jsonrpc":"2.0","id":"5","result":{"message":{"messageId":"r","parts":[{"text":"hi"}]}}}"#;
    let agent = MockUpstream::start(|_| Reply::json(200, HELLO)).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    for (method, id) in [
        ("SendMessage", "1"),
        ("SendStreamingMessage", "2"),
        ("message/send", "3"),
        ("message/stream", "4"),
    ] {
        // Split between two parts: read as one text, as the agent reads it.
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "give me the forbidden"}, {"text": " fruit"}]}}})
        .to_string();
        let a = post(proxy.addr(), req, None).await;
        assert_eq!(a.status, 200, "{method}: {}", a.text());
        let e = a.json();
        assert_eq!(e["id"], id);
        assert_eq!(e["error"]["code"], BLOCKED, "{method}");
    }
    // Refused before forwarding: push notifications, the extended card, files guardwire cannot
    // read or fetch (unknown_content, stored_context), and what is not JSON-RPC 2.0.
    for req in [
        r#"{"jsonrpc":"2.0","id":9,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"http://127.0.0.1:1/hook"}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"GetExtendedAgentCard","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"parts":[{"raw":"JVBERi0=","mediaType":"application/pdf"}]}}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{"parts":[{"kind":"file","file":{"uri":"http://127.0.0.1:1/f.txt"}}]}}}"#,
        r#"{"id":9,"method":"SendMessage"}"#,
    ] {
        let a = post(proxy.addr(), req.into(), None).await;
        assert_eq!(a.status, 200, "{req}");
        let e = a.json();
        assert_eq!(e["id"], 9, "{req}");
        assert_eq!(e["error"]["code"], -32600, "{req}");
    }
    let a = post(proxy.addr(), "not json".into(), None).await;
    assert_eq!(a.json()["id"], Value::Null);
    assert_eq!(agent.request_count(), 0, "nothing was forwarded");
    // Counted like any exchange's blocks, under the route's label.
    let m = common::proxy::metrics(proxy.addr()).await;
    let blocks = m
        .lines()
        .find(|l| {
            l.starts_with("guardwire_blocked_total{")
                && l.contains("route=\"agent\"")
                && l.contains("phase=\"input\"")
        })
        .unwrap_or_else(|| panic!("no input blocks of route agent in:\n{m}"));
    assert!(blocks.ends_with(" 4"), "{blocks}");
    // A clean call goes through.
    let a = post(proxy.addr(), call("SendMessage", "5", "hello"), None).await;
    assert_eq!(a.text(), HELLO);
    assert_eq!(agent.request_count(), 1);
}

/// Redact-mode validators mask a match across appended chunks. When an artifact grows after
/// another began, the joined text is read again whole and its matches lie in text already
/// sent: they cannot be masked, so the answer ends with an error (fail closed).
#[tokio::test]
async fn redactions_mask_text_across_appended_chunks() {
    const REDACT: &str = "validators:\n  - id: codename\n    type: content_excludes\n    mode: redact\n    mask: \"[codename]\"\n    params: { patterns: [\"bluebird\"] }\n";
    let interleaved = artifact_stream("r1", &["project blue", "bird is on"]);
    let agent = MockUpstream::start(move |_| Reply::sse(interleaved.as_bytes())).await;
    let proxy = start_config("", REDACT, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendStreamingMessage", "r1", "hi"), None).await;
    let text = a.text();
    assert!(!text.contains("blue") && !text.contains("bird"), "{text}");
    assert!(!text.contains("TASK_STATE_COMPLETED"), "{text}");
    assert!(rpc_error(&text)["error"]["code"].is_i64(), "{text}");
    let body = artifact_stream_aside_after("r1", &["project blue", "bird is on"], 1);
    let agent = common::protocols::split_mock(body.clone()).await;
    let proxy = start_config("", REDACT, &routes(&agent.base_url())).await;
    for split in [None, Some(body.len() / 3), Some(body.len() / 2)] {
        let a = post(
            proxy.addr(),
            call("SendStreamingMessage", "r1", "hi"),
            split,
        )
        .await;
        let text = a.text();
        assert!(!text.contains("blue") && !text.contains("bird"), "{text}");
        assert!(text.contains("[codename]"), "{text}");
        assert!(
            text.contains("TASK_STATE_COMPLETED"),
            "the stream went on: {text}"
        );
        // Every event is still JSON-RPC the SDK reads.
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let v: Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["id"], "r1");
        }
    }
}

#[tokio::test]
async fn a_block_cancels_the_agents_stream() {
    let body = artifact_stream("c1", &["the forbidden", " fruit"]);
    let agent = MockUpstream::start(move |_| Reply::sse(body.as_bytes()).then_hang()).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendStreamingMessage", "c1", "hi"), None).await;
    assert_eq!(rpc_error(&a.text())["error"]["code"], BLOCKED);
    assert!(
        agent.wait_for_cancelled(1, WAIT).await,
        "the agent's stream was not dropped"
    );
}

#[tokio::test]
async fn a_stream_cut_short_before_the_task_ends_is_an_error() {
    let full = artifact_stream("x1", &["all ", "good"]);
    let cut = &full[..full.rfind("data: ").unwrap()];
    let agent = MockUpstream::start({
        let cut = cut.to_owned();
        move |_| Reply::sse(cut.as_bytes())
    })
    .await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendStreamingMessage", "x1", "hi"), None).await;
    let e = rpc_error(&a.text());
    assert_eq!(e["id"], "x1");
    assert_eq!(e["error"]["code"], -32093, "{}", a.text());
}

/// An agent's error answer (a non-2xx status) is its text too: it never reaches the client
/// unchecked, as a call or as the card.
/// JSON readers disagree on which copy of a key counts (serde_json keeps the last, others the
/// first): a call or an answer with an object holding a key twice is refused, as on MCP routes.
#[tokio::test]
async fn a_key_twice_is_refused_in_calls_and_answers() {
    // Clean copies both: only the duplicate is wrong (the first event is fine).
    const WHOLE: &str = r#"{"jsonrpc":"2.0","id":"d1","result":{"message":{"messageId":"r1","messageId":"r2","parts":[{"text":"ok"}]}}}"#;
    const FIRST: &str = r#"{"jsonrpc":"2.0","id":"d2","result":{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}}"#;
    const TWICE: &str = r#"{"jsonrpc":"2.0","id":"d2","result":{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m2","role":"ROLE_AGENT","parts":[{"text":"done","text":"done twice"}]}}}}}"#;
    let agent = MockUpstream::start(|req| {
        if req.body_str().contains("SendStreamingMessage") {
            Reply::sse(format!("data: {FIRST}\n\ndata: {TWICE}\n\n").as_bytes())
        } else {
            Reply::json(200, WHOLE)
        }
    })
    .await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    // The agent's reader may take the first copy, which the checks never read.
    let req = r#"{"jsonrpc":"2.0","id":"c1","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"give me the forbidden fruit","te\u0078t":"hello"}]}}}"#;
    let a = post(proxy.addr(), req.into(), None).await;
    let e = a.json();
    assert_eq!(e["id"], "c1", "{e}");
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    assert_eq!(agent.request_count(), 0, "nothing was forwarded");

    let a = post(proxy.addr(), call("SendMessage", "d1", "hi"), None).await;
    assert_eq!(a.status, 200);
    let e = a.json();
    assert_eq!(e["id"], "d1", "{e}");
    assert_eq!(e["error"]["code"], -32093, "{e}");
    assert!(!a.text().contains("r2"), "{}", a.text());

    let a = post(proxy.addr(), call("SendStreamingMessage", "d2", "hi"), None).await;
    let text = a.text();
    assert!(text.contains("TASK_STATE_WORKING"), "{text}");
    assert!(
        !text.contains("done"),
        "the event with a key twice is not relayed: {text}"
    );
    let e = rpc_error(&text);
    assert_eq!(e["id"], "d2", "{e}");
    assert_eq!(e["error"]["code"], -32093, "{e}");
}

#[tokio::test]
async fn an_agents_error_answer_is_not_relayed() {
    let agent = MockUpstream::start(|_| Reply::json(500, r#"{"detail":"forbidden fruit"}"#)).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendMessage", "e1", "hi"), None).await;
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    let e = rpc_error(&a.text());
    assert_eq!(e["id"], "e1");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("HTTP 500"),
        "{e}"
    );
    let card = send(
        proxy.addr(),
        "GET",
        "/agent/.well-known/agent-card.json",
        String::new(),
        &[],
    )
    .await;
    assert!(!card.text().contains("forbidden"), "{}", card.text());
}

#[tokio::test]
async fn the_agent_card_names_guardwire_and_other_gets_are_refused() {
    let agent = MockUpstream::start(|req| {
        let base = format!("http://{}", req.header("host").unwrap_or("agent"));
        match req.path_and_query.as_str() {
            "/.well-known/agent-card.json" => Reply::json(
                200,
                &json!({"name": "a", "supportedInterfaces": [
                    {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": format!("{base}/grpc"), "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
                    "capabilities": {"streaming": true, "pushNotifications": true}})
                .to_string(),
            ),
            "/.well-known/agent.json" => Reply::json(
                200,
                &json!({"name": "a", "url": format!("{base}/a2a"), "protocolVersion": "0.3.0",
                    "additionalInterfaces": [{"url": format!("{base}/a2a"), "transport": "JSONRPC"}]})
                .to_string(),
            ),
            _ => Reply::json(200, "{\"secret\":true}"),
        }
    })
    .await;
    let extra = format!(
        "{}  - name: public\n    protocol: a2a\n    path_prefix: /pub\n    strip_prefix: /pub\n    upstream: \"{}\"\n    public_url: \"https://agents.example.com/billing\"\n",
        routes(&agent.base_url()),
        agent.base_url()
    );
    let proxy = start_config("", PACK, &extra).await;
    let get = |path: &'static str| send(proxy.addr(), "GET", path, "", &[("host", "gw.test:8080")]);
    let card = get("/agent/.well-known/agent-card.json").await;
    assert_eq!(card.status, 200, "{}", card.text());
    let card = card.json();
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": "http://gw.test:8080/agent/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    let old = get("/agent/.well-known/agent.json").await.json();
    assert_eq!(old["url"], "http://gw.test:8080/agent/a2a");
    assert_eq!(
        old["additionalInterfaces"][0]["url"],
        "http://gw.test:8080/agent/a2a"
    );
    let public = get("/pub/.well-known/agent-card.json").await.json();
    assert_eq!(
        public["supportedInterfaces"][0]["url"],
        "https://agents.example.com/billing/a2a"
    );
    let before = agent.request_count();
    let other = get("/agent/.well-known/other.json").await;
    assert_eq!(other.status, 404, "{}", other.text());
    let other = get("/agent/a2a").await;
    assert_eq!(other.status, 405, "{}", other.text());
    assert!(!other.text().contains("secret"));
    assert_eq!(
        agent.request_count(),
        before,
        "refused GETs are not forwarded"
    );
}

// ---- the real SDK ----

struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> String {
    std::env::var("GUARDWIRE_SDK_PYTHON")
        .expect("GUARDWIRE_SDK_PYTHON: the SDK venv's python (run tests/run once)")
}

/// A real `a2a-sdk` agent behind guardwire (a 1.0 card under `/agent`, a 0.3 one under
/// `/agent03`), driven by the real `a2a-sdk` client through the cards guardwire serves.
#[tokio::test]
#[ignore = "needs the SDK venv (GUARDWIRE_SDK_PYTHON); tests/run runs it"]
async fn the_a2a_sdk_client_and_agent_through_guardwire() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("agent.jsonl");
    let mut child = std::process::Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/a2a/agent.py"))
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().expect("the agent prints its port");
    let _agent = Kill(child);
    let upstream = format!("http://127.0.0.1:{port}");
    let extra = format!(
        "{}  - name: agent03\n    protocol: a2a\n    path_prefix: /agent03\n    strip_prefix: /agent03\n    upstream: \"{upstream}/v03\"\n",
        routes(&upstream)
    );
    let proxy = start_config("", PACK, &extra).await;
    let gw = format!("http://{}", proxy.addr());
    let stdout = client_output(python(), move |c| {
        c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/a2a/client.py"))
            .arg(format!("{gw}/agent"))
            .arg(format!("{gw}/agent03"));
    })
    .await;
    println!("{stdout}");
    let cases: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let case = |name: &str| {
        cases
            .iter()
            .find(|c| c["case"] == name)
            .unwrap_or_else(|| panic!("no case {name}: {stdout}"))
            .clone()
    };
    for version in ["v1", "v03"] {
        let card = case(&format!("{version} card"));
        let urls = card["urls"].as_array().unwrap();
        assert!(!urls.is_empty());
        for u in urls {
            assert!(
                u.as_str()
                    .unwrap()
                    .starts_with(&format!("http://{}/", proxy.addr())),
                "{card}"
            );
        }
        for streaming in ["streamed", "whole"] {
            let clean = case(&format!("{version} {streaming} clean"));
            assert_eq!(clean["error"], Value::Null, "{clean}");
            assert_eq!(clean["text"], "hello from the agent", "{clean}");
            let leak = case(&format!("{version} {streaming} leak"));
            assert!(
                leak["error"].as_str().unwrap().contains("banned-phrase"),
                "{leak}"
            );
            assert!(!leak["text"].as_str().unwrap().contains("forbid"), "{leak}");
            assert!(!leak["error"].as_str().unwrap().contains("fruit"), "{leak}");
            let input = case(&format!("{version} {streaming} banned input"));
            assert!(
                input["error"].as_str().unwrap().contains("banned-phrase"),
                "{input}"
            );
        }
    }
    for version in ["v1", "v03"] {
        let get = case(&format!("{version} get clean"));
        assert_eq!(get["error"], Value::Null, "{get}");
        assert_eq!(get["text"], "hello from the agent", "{get}");
    }
    let list = case("v1 list");
    assert!(
        list["error"].as_str().unwrap().contains("banned-phrase"),
        "{list}"
    );
    assert!(!list["error"].as_str().unwrap().contains("fruit"), "{list}");
    // The agent's own record: every call came through guardwire's routes, the clean and the
    // leaking ones arrived, and no banned message ever did.
    let record = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Value> = record
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|c: &Value| c["method"] == "POST")
        .collect();
    assert!(
        !record.contains("forbidden"),
        "a banned message reached the agent: {record}"
    );
    let methods: Vec<&str> = calls
        .iter()
        .filter_map(|c| c["body"]["method"].as_str())
        .collect();
    // Sent: clean and leak, streamed and whole, two more whole clean ones on 1.0 and one on
    // 0.3; the banned messages never; then the reads.
    for (m, n) in [
        ("SendStreamingMessage", 2),
        ("SendMessage", 4),
        ("message/stream", 2),
        ("message/send", 3),
        ("GetTask", 1),
        ("tasks/get", 1),
        ("ListTasks", 1),
    ] {
        assert_eq!(
            methods.iter().filter(|x| **x == m).count(),
            n,
            "{m}: {methods:?}"
        );
    }
}

/// protobuf's JSON reader (the a2a-sdk's) takes an enum by name or by number: a stream whose
/// final status says `"state": 3` (TASK_STATE_COMPLETED) has ended, not been cut; a number the
/// enum does not have is no state, and a stream that stops there fails closed.
#[tokio::test]
async fn task_states_by_number_end_a_stream_as_their_names_do() {
    for (state, complete) in [
        ("3", true),
        ("8", true),
        ("\"TASK_STATE_COMPLETED\"", true),
        ("99", false),
        ("2", false),
    ] {
        let body = artifact_stream("n1", &["all ", "good"]).replace(
            "\"state\":\"TASK_STATE_COMPLETED\"",
            &format!("\"state\":{state}"),
        );
        assert!(body.contains(&format!("\"state\":{state}")));
        let agent = MockUpstream::start({
            let body = body.clone();
            move |_| Reply::sse(body.as_bytes())
        })
        .await;
        let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
        let a = post(proxy.addr(), call("SendStreamingMessage", "n1", "hi"), None).await;
        assert_eq!(a.status, 200);
        if complete {
            assert_eq!(a.text(), body, "state {state}");
        } else {
            let e = rpc_error(&a.text());
            assert_eq!(e["error"]["code"], -32093, "state {state}: {}", a.text());
        }
    }
}

/// Verdicts of one agent answer are one audit line, however many parts and chunks fired: a
/// stream of 200 appended chunks, each redacted, writes one line with the count (not 200
/// lines). Each part is read twice (run on, and apart: `READ_APART`) in its artifact's text
/// and again in the artifacts' joined text, so a match inside one part is counted by all four
/// readings: 800.
#[tokio::test]
async fn an_answers_verdicts_are_one_audit_line() {
    const REDACT: &str = "validators:\n  - id: codename\n    type: content_excludes\n    mode: redact\n    mask: \"[codename]\"\n    params: { patterns: [\"bluebird\"] }\n";
    let chunks: Vec<&str> = std::iter::repeat_n("a bluebird. ", 200).collect();
    let body = artifact_stream_aside_after("many", &chunks, chunks.len());
    let agent = common::protocols::split_mock(body).await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let extra = format!("audit: {{path: \"{}\"}}\n", audit.display());
    let proxy = start_config("", REDACT, &format!("{}{extra}", routes(&agent.base_url()))).await;
    let a = post(
        proxy.addr(),
        call("SendStreamingMessage", "many", "hi"),
        None,
    )
    .await;
    let text = a.text();
    assert!(
        !text.contains("bluebird") && text.contains("TASK_STATE_COMPLETED"),
        "{text}"
    );
    drop(proxy);
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if !lines.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["validator"], "codename", "{lines:?}");
    assert_eq!(lines[0]["count"], 800, "{lines:?}");
}

/// Appended chunks without an `artifactId` continue each other, as the SDKs read a missing id
/// as the empty one (protobuf's default): a phrase whose words are two such chunks is found
/// (before the fix each chunk was an artifact of its own).
#[tokio::test]
async fn chunks_without_an_artifact_id_continue_each_other() {
    let events = [
        result(
            "n1",
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"parts": [{"text": "the forbidden"}]}}}),
        ),
        result(
            "n1",
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true,
            "artifact": {"parts": [{"text": "fruit"}]}}}),
        ),
        result(
            "n1",
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}}),
        ),
    ];
    let body = sse(&events);
    let agent = common::protocols::split_mock(body).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url())).await;
    let a = post(proxy.addr(), call("SendStreamingMessage", "n1", "hi"), None).await;
    let text = a.text();
    assert!(!text.contains("fruit"), "{text}");
    assert_eq!(rpc_error(&text)["error"]["code"], BLOCKED, "{text}");
}
