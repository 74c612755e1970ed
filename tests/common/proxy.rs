//! Starting guardwire in process against a mock upstream, and a plain HTTP client for tests.

use bytes::Bytes;
use guardwire::config::Config;
use guardwire::server::RunningServer;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;

pub struct Proxy {
    pub server: RunningServer,
    _dir: tempfile::TempDir,
}

impl Proxy {
    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }
}

/// Starts guardwire on 127.0.0.1:0 with one pack (YAML text) and `extra` config lines.
pub async fn start_proxy(openai_upstream: &str, pack_yaml: &str, extra: &str) -> Proxy {
    start_config(
        &format!("  openai: \"{openai_upstream}\"\n"),
        pack_yaml,
        extra,
    )
    .await
}

/// Like [`start_proxy`], with every provider's upstream pointing at `upstream`.
pub async fn start_proxy_all(upstream: &str, pack_yaml: &str, extra: &str) -> Proxy {
    let upstreams = ["openai", "anthropic", "gemini"]
        .map(|p| format!("  {p}: \"{upstream}\"\n"))
        .concat();
    start_config(&upstreams, pack_yaml, extra).await
}

/// The admin token of proxies started here (unless `extra` sets `admin:` itself), so that
/// [`metrics`] can scrape the clients' listener.
pub const ADMIN_TOKEN: &str = "gw-test-admin-token";

/// Starts guardwire on 127.0.0.1:0 with `upstreams:` lines (none: no provider configured),
/// one pack (YAML text) and `extra` config lines (routes, limits, …); with the test
/// [`ADMIN_TOKEN`] unless `extra` configures `admin:`.
pub async fn start_config(upstream_lines: &str, pack_yaml: &str, extra: &str) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack.yaml");
    std::fs::write(&pack, pack_yaml).unwrap();
    let upstreams = if upstream_lines.is_empty() {
        String::new()
    } else {
        format!("upstreams:\n{upstream_lines}")
    };
    // `x-split` tells the mock upstream where to cut its answer (protocols::split_mock); like
    // any header outside a protocol's allowlist, it reaches the upstream only when configured.
    let forward = if extra.contains("forward_headers:") {
        ""
    } else {
        "forward_headers: [x-split]\n"
    };
    let admin = if extra.contains("admin:") {
        String::new()
    } else {
        format!("admin: {{ token: {ADMIN_TOKEN} }}\n")
    };
    let yaml = format!(
        "listen: \"127.0.0.1:0\"\n{upstreams}packs: [\"{}\"]\n{forward}{admin}{extra}\n",
        pack.display()
    );
    let config = Config::from_yaml(&yaml).unwrap();
    let server = guardwire::server::start(config).await.unwrap();
    Proxy { server, _dir: dir }
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(req.body(Full::new(body.into())).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn post_chat(addr: SocketAddr, body: &str) -> Answer {
    post_chat_as(addr, "sk-client", body).await
}

/// A chat request sent with the client key `key`.
pub async fn post_chat_as(addr: SocketAddr, key: &str, body: &str) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        addr,
        "POST",
        "/v1/chat/completions",
        body.to_owned(),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

/// Sends chat request `body` over HTTP/1.1 from a socket with a tiny receive buffer (2 KiB),
/// and never reads from it: a client that stopped reading.
#[allow(dead_code)]
pub async fn never_reading_client(addr: SocketAddr, body: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let mut sock = socket.connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: guardwire\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(body.as_bytes()).await.unwrap();
    sock
}

pub const STREAM_REQUEST: &str =
    r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
pub const PLAIN_REQUEST: &str = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;

/// The chat error frame guardwire sends on a block.
pub fn block_frame(message: &str) -> String {
    format!(
        "data: {{\"error\":{{\"message\":{},\"type\":\"guardrail_violation\",\"param\":null,\"code\":\"content_blocked\"}}}}\n\n",
        serde_json::to_string(message).unwrap()
    )
}

/// Splits an SSE body into its frames (each with its blank line).
pub fn frames(body: &[u8]) -> Vec<Vec<u8>> {
    let s = body;
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < s.len() {
        if s[i] == b'\n' && s[i + 1] == b'\n' {
            out.push(s[start..i + 2].to_vec());
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < s.len() {
        out.push(s[start..].to_vec());
    }
    out
}

/// `/metrics` from the clients' listener of a proxy started here (with [`ADMIN_TOKEN`]).
pub async fn metrics(addr: SocketAddr) -> String {
    metrics_with_token(addr, ADMIN_TOKEN).await
}

/// `/metrics` from the clients' listener, with admin token `token`; panics on a refusal.
pub async fn metrics_with_token(addr: SocketAddr, token: &str) -> String {
    let auth = format!("Bearer {token}");
    let a = send(
        addr,
        "GET",
        "/metrics",
        Bytes::new(),
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "/metrics: {}", a.text());
    a.text()
}

/// A pack with one validator of each mode: `no-forbidden` blocks the word on input,
/// `cards` redacts credit card numbers, `watch-ok` monitors the word `ok`.
#[allow(dead_code)]
pub const ONE_OF_EACH_MODE_PACK: &str =
    "validators:\n  - id: no-forbidden\n    type: banned_words\n    \
    params: { words: [forbidden], direction: input }\n  \
    - id: cards\n    type: pii\n    mode: redact\n    params: { types: [credit_card] }\n  \
    - id: watch-ok\n    type: banned_words\n    mode: monitor\n    params: { words: [ok] }\n";
