//! MCP routes do bounded work per request and never answer the client in the server's name
//! (issue 49 items 6 and 9, docs/mcp.md "Bounded work" and "The server's requests"): a batch
//! over `limits.max_batch_messages` is refused unread and unforwarded; a batch's verdicts are
//! one audit line; a server request that fails its checks is dropped from what the client
//! sees and answered to the server, on the session, with its JSON-RPC error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{MockUpstream, RecordedRequest, Reply};
use common::protocols::{mcp_sse as sse, sse_messages};
use common::proxy::{send, start_config, Answer, Proxy};
use http::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const PACK: &str = r#"
validators:
  - id: banned-words
    type: banned_words
    params: { words: ["forbidden"], direction: both }
  - id: shadow
    type: content_excludes
    mode: monitor
    params: { patterns: ["apple"] }
"#;

const BLOCKED: i64 = -32010;
const INVALID_REQUEST: i64 = -32600;

async fn proxy_for(mock: &MockUpstream, extra: &str) -> Proxy {
    let routes = format!(
        "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}/mcp\"\n{extra}",
        mock.base_url()
    );
    start_config("", PACK, &routes).await
}

async fn post(p: &Proxy, body: &str) -> Answer {
    let h = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", "sess-7"),
        ("mcp-protocol-version", "2025-03-26"),
    ];
    send(p.addr(), "POST", "/mcp", body.to_owned(), &h).await
}

fn call(id: usize, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":text}}})
}

fn batch(calls: &[Value]) -> String {
    Value::Array(calls.to_vec()).to_string()
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The audit line is written when the request's checker goes, just after the answer.
async fn settled_audit(path: &Path, at_least: usize) -> Vec<Value> {
    for _ in 0..100 {
        let lines = audit_lines(path);
        if lines.len() >= at_least {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    audit_lines(path)
}

#[tokio::test]
async fn a_batch_over_the_cap_is_refused_unchecked_and_unforwarded() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mock = MockUpstream::start(|r| {
        let n = r.body_json().and_then(|v| v.as_array().map(Vec::len));
        let answers: Vec<Value> = (0..n.unwrap_or(1))
            .map(|i| json!({"jsonrpc":"2.0","id":i,"result":{"content":[{"type":"text","text":"ok"}]}}))
            .collect();
        Reply::json(200, &Value::Array(answers).to_string())
    })
    .await;
    let extra = format!(
        "limits: {{ max_batch_messages: 4 }}\naudit:\n  path: \"{}\"\n",
        log.display()
    );
    let p = proxy_for(&mock, &extra).await;
    // Five messages, the last one violating: refused for its size before anything is read.
    let mut calls: Vec<Value> = (0..4).map(|i| call(i, "hello")).collect();
    calls.push(call(4, "say forbidden"));
    let a = post(&p, &batch(&calls)).await;
    assert_eq!(a.status, 400, "{}", a.text());
    let error = a.json();
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], INVALID_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_batch_messages"),
        "{error}"
    );
    assert!(mock.requests().is_empty(), "nothing reached the server");
    // Nothing was checked, so nothing fired.
    assert!(audit_lines(&log).is_empty(), "{:?}", audit_lines(&log));
    // At the cap the batch is checked and forwarded.
    let a = post(&p, &batch(&calls[..4])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(
        mock.requests()[0]
            .body_json()
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // A server's batch over the cap is not relayed either.
    let over = MockUpstream::start(|_| {
        let answers: Vec<Value> = (0..5)
            .map(|i| json!({"jsonrpc":"2.0","id":i,"result":{}}))
            .collect();
        Reply::json(200, &Value::Array(answers).to_string())
    })
    .await;
    let p = proxy_for(&over, "limits: { max_batch_messages: 4 }\n").await;
    let a = post(&p, &call(0, "hello").to_string()).await;
    assert_eq!(a.json()["error"]["code"], -32012, "{}", a.text());
    assert_eq!(a.json()["id"], 0, "the one request waiting gets the error");
    assert!(a.text().contains("max_batch_messages"), "{}", a.text());
}

#[tokio::test]
async fn a_batchs_verdicts_are_one_audit_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mock = MockUpstream::start(|_| Reply::json(200, "[]")).await;
    let extra = format!("audit:\n  path: \"{}\"\n", log.display());
    let p = proxy_for(&mock, &extra).await;
    // Clean calls with one violation at the end: one line, the violation's.
    let mut calls: Vec<Value> = (0..60).map(|i| call(i, "hello")).collect();
    calls.push(call(60, "say forbidden"));
    let a = post(&p, &batch(&calls)).await;
    assert_eq!(a.status, 200);
    let answers = a.json();
    let answers = answers.as_array().unwrap();
    assert_eq!(
        answers.len(),
        61,
        "each request of the batch gets its error"
    );
    assert_eq!(answers[60]["error"]["code"], BLOCKED);
    assert!(mock.requests().is_empty());
    let lines = settled_audit(&log, 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["validator"], "banned-words");
    assert!(lines[0].get("count").is_none(), "{}", lines[0]);
    // Many verdicts of two kinds (monitor hits on every call, blocks on half): still one line
    // for the request, which counts them all.
    let calls: Vec<Value> = (0..40)
        .map(|i| match i % 2 {
            0 => call(i, "an apple"),
            _ => call(i, "an apple, forbidden"),
        })
        .collect();
    let a = post(&p, &batch(&calls)).await;
    assert_eq!(a.status, 200);
    let lines = settled_audit(&log, 2).await;
    assert_eq!(lines.len(), 2, "one more line: {lines:?}");
    let line = &lines[1];
    let mut counts: Vec<(String, u64)> = std::iter::once(line)
        .chain(line["others"].as_array().into_iter().flatten())
        .map(|g| {
            (
                g["validator"].as_str().unwrap().to_owned(),
                g.get("count").and_then(Value::as_u64).unwrap_or(1),
            )
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        vec![("banned-words".to_owned(), 20), ("shadow".to_owned(), 40)],
        "{line}"
    );
}

#[tokio::test]
async fn requests_of_a_batch_with_the_same_id_are_refused() {
    let mock = MockUpstream::start(|_| Reply::json(200, "[]")).await;
    let p = proxy_for(&mock, "").await;
    let a = post(&p, &batch(&[call(1, "a"), call(1, "b")])).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], INVALID_REQUEST);
    assert!(mock.requests().is_empty());
}

/// The errors guardwire POSTed to the server: (the message, the request's session header).
fn answers_to_server(reqs: &[RecordedRequest]) -> Vec<(Value, Option<String>)> {
    reqs.iter()
        .filter(|r| r.method == Method::POST)
        .filter_map(|r| {
            let v = r.body_json()?;
            v.get("error")?;
            Some((v, r.header("mcp-session-id").map(str::to_owned)))
        })
        .collect()
}

async fn wait_for_answers(mock: &MockUpstream, n: usize) -> Vec<(Value, Option<String>)> {
    for _ in 0..200 {
        let got = answers_to_server(&mock.requests());
        if got.len() >= n {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answers_to_server(&mock.requests())
}

#[tokio::test]
async fn a_blocked_server_request_is_dropped_and_answered_to_the_server() {
    // The server's request reuses the id of the client's call it answers on the same stream
    // (ids are per direction): an error with it would settle the client's call.
    let sampling = json!({"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"please say forbidden"}}],"maxTokens":10}});
    let roots = json!({"jsonrpc":"2.0","id":"r1","method":"roots/list","params":{"_meta":{"note":"forbidden"}}});
    let result = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],"isError":false}});
    let on_post = sse(&[sampling.clone(), result.clone()]);
    let on_get = sse(&[
        roots,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    ]);
    let mock = MockUpstream::start(move |r| {
        let is_answer = r.body_json().is_some_and(|v| v.get("error").is_some());
        match (r.method.clone(), is_answer) {
            (Method::GET, _) => Reply::sse(&on_get),
            (_, true) => Reply::chunks(202, Vec::new()),
            _ => Reply::sse(&on_post),
        }
    })
    .await;
    let p = proxy_for(&mock, "").await;
    let a = post(&p, &call(1, "hello").to_string()).await;
    let msgs = sse_messages(&a.body);
    assert_eq!(
        msgs,
        vec![result],
        "only the call's own result: {}",
        a.text()
    );
    assert!(!a.text().contains("forbidden"));
    let answered = wait_for_answers(&mock, 1).await;
    assert_eq!(answered.len(), 1, "{answered:?}");
    let (error, session) = &answered[0];
    assert_eq!(error["id"], 1);
    assert_eq!(error["error"]["code"], BLOCKED);
    assert_eq!(error["error"]["data"]["validator"], "banned-words");
    assert_eq!(
        session.as_deref(),
        Some("sess-7"),
        "on the client's session"
    );
    let posted = mock
        .requests()
        .into_iter()
        .find(|r| answers_to_server(std::slice::from_ref(r)).len() == 1)
        .unwrap();
    assert_eq!(posted.header("content-type"), Some("application/json"));
    assert_eq!(posted.header("mcp-protocol-version"), Some("2025-03-26"));
    assert_eq!(posted.path_and_query, "/mcp");
    // The GET stream's server request: dropped too, answered the same way.
    let a = send(
        p.addr(),
        "GET",
        "/mcp",
        Bytes::new(),
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", "sess-7"),
        ],
    )
    .await;
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 1, "{}", a.text());
    assert_eq!(msgs[0]["method"], "notifications/tools/list_changed");
    let answered = wait_for_answers(&mock, 2).await;
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert_eq!(answered[1].0["id"], "r1");
    assert_eq!(answered[1].1.as_deref(), Some("sess-7"));
}

#[tokio::test]
async fn a_large_stream_event_is_checked_off_the_worker_the_same() {
    // Over the pool's threshold (64 KiB): checked on the blocking pool, with the same verdicts.
    let big = "a clean sentence. ".repeat(5000);
    let clean = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":big}]}});
    let dirty = json!({"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":format!("{big} forbidden")}]}});
    let events = [sse(std::slice::from_ref(&clean)), sse(&[dirty])];
    let mock = MockUpstream::start(move |r| {
        let id = r.body_json().map(|v| v["id"].clone()).unwrap_or_default();
        Reply::sse(&events[usize::from(id == 2)])
    })
    .await;
    let p = proxy_for(&mock, "limits: { max_frame_bytes: 4194304 }\n").await;
    let a = post(&p, &call(1, "hello").to_string()).await;
    assert_eq!(sse_messages(&a.body), vec![clean]);
    let a = post(&p, &call(2, "hello").to_string()).await;
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 1, "{}", a.text());
    assert_eq!(msgs[0]["id"], 2);
    assert_eq!(msgs[0]["error"]["code"], BLOCKED);
    assert!(!a.text().contains("forbidden"));
}

// ---- the official Python SDK on both sides (tests/mcp/sampling_*.py) ----

mod sdk {
    use super::*;
    use crate::common::sdk::client_output;
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};

    fn python() -> PathBuf {
        match std::env::var_os("GUARDWIRE_SDK_PYTHON") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => panic!(
                "GUARDWIRE_SDK_PYTHON (the SDK venv's python) is not set; see tests/common/sdk.rs"
            ),
        }
    }

    fn script(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/mcp")
            .join(name)
    }

    struct Server(Child);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[tokio::test]
    #[ignore = "needs the MCP Python SDK (GUARDWIRE_SDK_PYTHON)"]
    async fn a_blocked_sampling_request_never_settles_the_clients_own_call() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let _server = Server(
            Command::new(python())
                .arg(script("sampling_server.py"))
                .arg(port.to_string())
                .arg(log.path())
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut up = false;
        for _ in 0..1200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(up, "the MCP server did not start on port {port}");
        let routes = format!(
            "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"http://127.0.0.1:{port}/mcp\"\n"
        );
        let p = start_config("", PACK, &routes).await;
        let url = format!("http://{}/mcp", p.addr());
        let stdout = client_output(python(), move |c| {
            c.arg(script("sampling_client.py"))
                .arg(url)
                .env("PYTHONDONTWRITEBYTECODE", "1");
        })
        .await;
        let r: Value = serde_json::from_str(stdout.trim()).unwrap();
        // The call is settled by its own result, which says the server got guardwire's error
        // for the banned sampling request (whose id was the call's).
        let ask = r["ask"]["ok"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(ask.contains(r#"banned={"error": -32010}"#), "{r}");
        assert!(ask.contains(r#"clean={"ok": "hello"}"#), "{r}");
        // The client saw the clean request only.
        assert_eq!(r["seen"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(r["seen"][0]["texts"], json!(["say hello"]), "{r}");
        assert!(!r.to_string().contains("forbidden"), "{r}");
        let logged: Vec<Value> = std::fs::read_to_string(log.path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert_eq!(logged[0]["banned"]["error"], BLOCKED);
    }
}
