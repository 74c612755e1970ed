//! Tenants apart (issue 49, item 7), through the proxy: what one client key (or one client
//! address) does cannot take what another needs.
//! - Request-body bytes are taken as they arrive, never from an announced length, and each key
//!   (and, when set, each client address) has a share of the budget: a tenant announcing or
//!   sending huge bodies gets 429 in the provider's shape while other tenants are proxied.
//! - MCP session state has a quota per key: one key making many sessions evicts only its own,
//!   so another key's session checks still decide with its history.
//! - Session counts do not depend on how much history is kept: a session longer than its
//!   history's byte bound is still counted exactly.
//! - Judge breakers are kept per key: judge timeouts one key's inputs provoke open its own
//!   breaker, never another key's.
//!
//! No timing assertions: every wait is for a condition, within a generous bound.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{Chunk, MockUpstream, Reply};
use common::proxy::{metrics, post_chat_as, start_config, start_proxy, Proxy, PLAIN_REQUEST};
use futures_util::StreamExt;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far longer than any wait here should take.
const BOUND: Duration = Duration::from_secs(30);

/// Polls `check` until it returns true; panics naming `what` after [`BOUND`].
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the metric line starting with `series ` in `/metrics`, if any.
async fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let text = metrics(addr).await;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn chat_answer() -> Reply {
    Reply::json(
        200,
        &json!({"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}).to_string(),
    )
}

const KEYS: &str = "keys:\n  - { id: a, key: gw-a }\n  - { id: b, key: gw-b }\n";

// ---- request-body bytes ----

/// A raw HTTP/1.1 chat request from `source` (a 127/8 address), with client key `key`,
/// announcing `len` body bytes of which `sent` are sent; the connection is left open.
async fn slow_body(
    addr: SocketAddr,
    source: [u8; 4],
    key: Option<&str>,
    len: usize,
    sent: usize,
) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind to a 127/8 source address (Linux)");
    let mut sock = socket.connect(addr).await.unwrap();
    let auth = key.map_or(String::new(), |k| format!("authorization: Bearer {k}\r\n"));
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\n{auth}content-length: {len}\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(&vec![b' '; sent]).await.unwrap();
    sock
}

/// What the server answered on `sock` (its head and whatever body came), read until the
/// server closes or [`BOUND`] passes.
async fn answer_on(sock: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            if body.ends_with('}') || head.contains("content-length: 0") {
                return text;
            }
        }
        match tokio::time::timeout_at(deadline, sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return text,
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no answer in time; so far: {text}"),
        }
    }
}

#[tokio::test]
async fn announcing_large_bodies_costs_a_tenant_nothing_and_others_are_proxied() {
    let mock = MockUpstream::start(|_| chat_answer()).await;
    let extra =
        format!("limits: {{ max_request_bytes: 1000, max_buffered_request_bytes: 2000 }}\n{KEYS}");
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", &extra).await;
    let addr = proxy.addr();
    // Tenant a announces two bodies of the largest size and sends 10 bytes of each: together
    // they announce the whole budget.
    let _slow = [
        slow_body(addr, [127, 0, 0, 1], Some("gw-a"), 1000, 10).await,
        slow_body(addr, [127, 0, 0, 1], Some("gw-a"), 1000, 10).await,
    ];
    eventually(
        "a's bodies hold what they sent, not what they announced",
        || async { metric(addr, "guardwire_buffered_request_bytes").await == Some(20.0) },
    )
    .await;
    // Tenant b is proxied meanwhile.
    for _ in 0..3 {
        let r = post_chat_as(addr, "gw-b", PLAIN_REQUEST).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    assert_eq!(mock.request_count(), 3);
}

#[tokio::test]
async fn a_key_over_its_share_of_body_bytes_gets_429_while_other_keys_are_proxied() {
    let mock = MockUpstream::start(|_| chat_answer()).await;
    let extra = format!(
        "limits: {{ max_request_bytes: 1000, max_buffered_request_bytes: 2000, max_buffered_request_bytes_per_key: 1000 }}\n{KEYS}"
    );
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", &extra).await;
    let addr = proxy.addr();
    // Tenant a sends 600 bytes of a body, then 600 of another: the second passes its share.
    let _first = slow_body(addr, [127, 0, 0, 1], Some("gw-a"), 1000, 600).await;
    eventually("a's first body holds its bytes", || async {
        metric(addr, "guardwire_buffered_request_bytes").await == Some(600.0)
    })
    .await;
    let mut second = slow_body(addr, [127, 0, 0, 1], Some("gw-a"), 1000, 600).await;
    let answer = answer_on(&mut second).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("rate_limit_exceeded"), "{answer}");
    assert_eq!(
        metric(
            addr,
            "guardwire_rejected_total{reason=\"max_buffered_request_bytes_per_key\"}"
        )
        .await,
        Some(1.0)
    );
    // Tenant b, meanwhile, is proxied; tenant a too, within its share.
    let r = post_chat_as(addr, "gw-b", PLAIN_REQUEST).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = post_chat_as(addr, "gw-a", PLAIN_REQUEST).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        mock.request_count(),
        2,
        "the refused body never went upstream"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_client_address_over_its_share_of_body_bytes_gets_429_while_others_are_proxied() {
    let mock = MockUpstream::start(|_| chat_answer()).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "limits: { max_request_bytes: 1000, max_buffered_request_bytes: 4000, max_buffered_request_bytes_per_client_address: 1000 }\n",
    )
    .await;
    let addr = proxy.addr();
    let hog = [127, 0, 0, 2];
    let _first = slow_body(addr, hog, None, 1000, 600).await;
    eventually("the first body holds its bytes", || async {
        metric(addr, "guardwire_buffered_request_bytes").await == Some(600.0)
    })
    .await;
    let mut second = slow_body(addr, hog, None, 1000, 600).await;
    let answer = answer_on(&mut second).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("rate_limit_exceeded"), "{answer}");
    // Another address sends a whole body of the largest size meanwhile.
    let mut other = slow_body(addr, [127, 0, 0, 3], None, PLAIN_REQUEST.len() + 900, 900).await;
    other.write_all(PLAIN_REQUEST.as_bytes()).await.unwrap();
    let answer = answer_on(&mut other).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        metric(
            addr,
            "guardwire_rejected_total{reason=\"max_buffered_request_bytes_per_client_address\"}"
        )
        .await,
        Some(1.0)
    );
}

// ---- MCP sessions ----

const SESSION_PACK: &str = r#"
validators:
  - id: anti-patterns
    type: tool_anti_pattern
    params:
      patterns:
        - { sequence: [read_secret, send_email], message: "No mail after reading a secret." }
  - { id: call-count, type: tool_call_count, params: { max: 40 } }
  - { id: no-polling, type: tool_no_repeat, params: { tools: [poll], max_repeats: 25 } }
"#;

const BLOCKED: i64 = -32010;

async fn mcp_proxy(upstream: &str, extra: &str) -> Proxy {
    let routes = format!(
        "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{upstream}\"\n{extra}"
    );
    start_config("", SESSION_PACK, &routes).await
}

/// A scripted MCP server: a result for every call.
async fn mcp_server() -> MockUpstream {
    MockUpstream::start(|r| {
        let id = r
            .body_json()
            .map(|v| v["id"].clone())
            .unwrap_or(Value::Null);
        Reply::json(
            200,
            &json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}).to_string(),
        )
    })
    .await
}

/// A `tools/call` of `tool` in `session`, with client key `key`; the JSON-RPC answer.
async fn call_as(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
    key: Option<&str>,
    session: &str,
    tool: &str,
    args: Value,
) -> Value {
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":tool,"arguments":args}})
        .to_string();
    let mut req = http::Request::post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session);
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let resp = client
        .request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&body)))
}

fn http_client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn assert_blocked(v: &Value, validator: &str) {
    assert_eq!(v["error"]["code"], BLOCKED, "{v}");
    assert_eq!(v["error"]["data"]["validator"], validator, "{v}");
}

#[tokio::test]
async fn one_key_making_many_sessions_does_not_evict_another_keys_session() {
    let mock = mcp_server().await;
    let p = mcp_proxy(&format!("{}/mcp", mock.base_url()), KEYS).await;
    let (addr, client) = (p.addr(), http_client());
    // Key b's session reads a secret.
    let v = call_as(
        &client,
        addr,
        Some("gw-b"),
        "b-session",
        "read_secret",
        json!({}),
    )
    .await;
    assert!(v["result"].is_object(), "{v}");
    // Key a makes more sessions than guardwire holds in all (4096), one call each.
    let made = futures_util::stream::iter(0..4200)
        .map(|i| {
            let client = client.clone();
            async move {
                let s = format!("a-{i}");
                call_as(&client, addr, Some("gw-a"), &s, "add", json!({})).await
            }
        })
        .buffer_unordered(16)
        .filter(|v| std::future::ready(v["result"].is_object()))
        .count()
        .await;
    assert_eq!(made, 4200);
    // Key b's session still has its history: its check decides with it.
    let v = call_as(
        &client,
        addr,
        Some("gw-b"),
        "b-session",
        "send_email",
        json!({}),
    )
    .await;
    assert_blocked(&v, "anti-patterns");
    // Key a's oldest sessions were its own to lose: a's first session forgot its call, so the
    // same pattern there is not completed.
    let v = call_as(&client, addr, Some("gw-a"), "a-0", "read_secret", json!({})).await;
    assert!(v["result"].is_object(), "{v}");
}

#[tokio::test]
async fn a_session_longer_than_its_history_is_still_counted_exactly() {
    let mock = mcp_server().await;
    let p = mcp_proxy(&format!("{}/mcp", mock.base_url()), "").await;
    let (addr, client) = (p.addr(), http_client());
    // 2000-byte arguments: the history keeps about 16 calls (32 KiB), the count goes on.
    let args = json!({ "pad": "x".repeat(2000) });
    for i in 0..40 {
        let v = call_as(&client, addr, None, "long", "add", args.clone()).await;
        assert!(v["result"].is_object(), "call {i}: {v}");
    }
    let v = call_as(&client, addr, None, "long", "add", args.clone()).await;
    assert_blocked(&v, "call-count");
    // A run of one tool longer than the history: still counted to its end.
    for i in 0..25 {
        let v = call_as(&client, addr, None, "polling", "poll", args.clone()).await;
        assert!(v["result"].is_object(), "poll {i}: {v}");
    }
    let v = call_as(&client, addr, None, "polling", "poll", args.clone()).await;
    assert_blocked(&v, "no-polling");
    assert_eq!(
        mock.request_count(),
        65,
        "no refused call reached the server"
    );
}

// ---- judge breakers ----

/// A scripted LLM judge (OpenAI Chat Completions): a text with `SLOW` is answered long after
/// any deadline here; anything else passes at once.
async fn judge() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = String::from_utf8_lossy(&req.body).into_owned();
        let delay = match body.contains("SLOW") {
            true => Duration::from_secs(60),
            false => Duration::ZERO,
        };
        let verdict = json!({"score": 0.9, "pass": true, "reason": "scripted"}).to_string();
        let answer = json!({"id": "j", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}]}).to_string();
        Reply::chunks(200, vec![Chunk::new(answer, delay)])
            .with_header("content-type", "application/json")
    })
    .await
}

fn chat(content: &str) -> String {
    json!({"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}).to_string()
}

#[tokio::test]
async fn judge_timeouts_one_key_provokes_do_not_open_the_breaker_for_another() {
    std::env::set_var("GW_TENANTS_JUDGE_KEY", "sk-judge");
    let judge = judge().await;
    let upstream = MockUpstream::start(|_| chat_answer()).await;
    let config = format!(
        "judges:\n  - name: safety\n    protocol: openai_chat\n    base_url: \"{}\"\n    api_key_env: GW_TENANTS_JUDGE_KEY\n    model: judge-model\n    timeout_ms: 300\n    retry: {{max_retries: 0}}\n    breaker: {{failures: 2, open_ms: 600000}}\n{KEYS}",
        judge.base_url()
    );
    let pack = "validators:\n  - type: llm_judge\n    params: {criteria: 'The request is safe', direction: input}\n";
    let proxy = start_proxy(&upstream.base_url(), pack, &config).await;
    let addr = proxy.addr();
    // Key a sends inputs the judge is slow on: each times out and fails closed, past the
    // breaker's two failures.
    for _ in 0..3 {
        let r = post_chat_as(addr, "gw-a", &chat("SLOW down")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    }
    let m = metrics(addr).await;
    assert!(
        m.contains(r#"guardwire_judge_errors_total{judge="safety",kind="timeout"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judge_errors_total{judge="safety",kind="circuit_open"} 1"#),
        "a's own breaker opened: {m}"
    );
    // Key b's checks are still asked, and pass with their verdicts.
    let asked = judge.request_count();
    for i in 0..3 {
        let r = post_chat_as(addr, "gw-b", &chat(&format!("hello {i}"))).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    assert_eq!(judge.request_count(), asked + 3);
    // Key a's breaker stays open: its fine text is not asked about.
    let r = post_chat_as(addr, "gw-a", &chat("hello")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(judge.request_count(), asked + 3);
}
