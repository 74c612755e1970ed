//! What guardwire adds to an MCP `tools/call` (issue 37: at most 1 ms at the median), with the
//! realistic pack (benches/common/fixtures.rs: 1,000 banned words, 20 regexes, `max_length`,
//! `pii`): the same call sent to an MCP server directly and through guardwire, alternately,
//! over one keep-alive HTTP/1.1 connection each; p50 and p99 of both and their difference.
//!
//! All in process: the MCP server is the tests' scripted hyper server
//! (tests/common/mock_upstream.rs), which answers at once with a result of about 1.5 KB of text,
//! as JSON or as an SSE stream of one event; guardwire is `guardwire::server::start` with an MCP
//! route. The call carries an `Mcp-Session-Id`, so the session's tool history is read and
//! written on every call; its arguments are about 300 characters of text. The proxied call's
//! arguments are checked as output (banned words, regexes, PII), the result as input.
//!
//! Run: `cargo bench --bench mcp [-- --runs N]` (default 3,000 calls per path and answer kind,
//! after 300 of warm-up).
//!
//! Then bounded work (issue 49, docs/mcp.md "Bounded work"): batches at `limits.max_batch_messages`
//! (128 `tools/call`s, the last one violating, so every message is checked and the batch refused)
//! sent back to back by four clients for `--batch-secs` seconds (default 10), while a fifth
//! client asks `/healthz` every 10 ms: the batches' and `/healthz`'s latencies; and a batch of
//! 85,000 messages, over the cap, and the time to its refusal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, clippy::all)]
#[path = "../tests/common/mock_upstream.rs"]
mod mock_upstream;

mod common;

use bytes::Bytes;
use common::fixtures::{answer_deltas, realistic_pack};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mock_upstream::{MockUpstream, Reply};
use serde_json::json;
use std::time::{Duration, Instant};

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// One call's round trip; the answer must be the clean result.
async fn one(client: &Http, url: &str, body: &Bytes, expect: &str) -> Duration {
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", "bench-session")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Full::new(body.clone()))
        .unwrap();
    let started = Instant::now();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains(expect), "{text}");
    took
}

/// One POST of `body` (a batch) to `url`: its time and status.
async fn post(client: &Http, url: &str, body: &Bytes) -> (Duration, u16) {
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-03-26")
        .body(Full::new(body.clone()))
        .unwrap();
    let started = Instant::now();
    let resp = client.request(req).await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await.unwrap();
    (started.elapsed(), status)
}

/// Batches at the cap from four clients while `/healthz` is probed; then a batch over it.
async fn bounded(proxy: std::net::SocketAddr, secs: u64) {
    let query = answer_deltas(11, 12).concat();
    let mut calls: Vec<serde_json::Value> = (0..128)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"search_docs","arguments":{"query":query,"limit":5}}}))
        .collect();
    calls[127]["params"]["arguments"]["query"] = json!("send the confidential report");
    let at_cap = Bytes::from(serde_json::Value::Array(calls).to_string());
    let url = format!("http://{proxy}/json");
    let until = Instant::now() + Duration::from_secs(secs);
    let mut senders = Vec::new();
    for _ in 0..4 {
        let (url, body) = (url.clone(), at_cap.clone());
        senders.push(tokio::spawn(async move {
            let client: Http = Client::builder(TokioExecutor::new()).build_http();
            let mut took = Vec::new();
            while Instant::now() < until {
                let (t, status) = post(&client, &url, &body).await;
                assert_eq!(status, 200);
                took.push(t);
            }
            took
        }));
    }
    let probe: Http = Client::builder(TokioExecutor::new()).build_http();
    let health = format!("http://{proxy}/healthz");
    let mut healthz = Vec::new();
    while Instant::now() < until {
        let started = Instant::now();
        let resp = probe.get(health.parse().unwrap()).await.unwrap();
        let _ = resp.into_body().collect().await.unwrap();
        healthz.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut batches = Vec::new();
    for s in senders {
        batches.extend(s.await.unwrap());
    }
    batches.sort();
    healthz.sort();
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    println!();
    println!(
        "Bounded work: batches of 128 tools/calls ({} B, the last one blocked) from 4 clients for {secs} s, /healthz every 10 ms",
        at_cap.len()
    );
    println!("| what | n | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (what, xs) in [
        ("batch at the cap", &batches),
        ("/healthz meanwhile", &healthz),
    ] {
        println!(
            "| {what} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
            xs.len(),
            ms(percentile(xs, 0.5)),
            ms(percentile(xs, 0.99)),
            ms(*xs.last().unwrap())
        );
    }
    let one = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}).to_string();
    let over = Bytes::from(format!("[{}]", vec![one; 85_000].join(",")));
    let client: Http = Client::builder(TokioExecutor::new()).build_http();
    let mut refusals = Vec::new();
    for _ in 0..5 {
        let (t, status) = post(&client, &url, &over).await;
        assert_eq!(status, 400);
        refusals.push(t);
    }
    refusals.sort();
    println!(
        "| batch of 85,000 ({:.1} MB), over the cap: refused | {} | {:.1} ms | | {:.1} ms |",
        over.len() as f64 / 1e6,
        refusals.len(),
        ms(percentile(&refusals, 0.5)),
        ms(*refusals.last().unwrap())
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs this without `--bench`: return at once.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(3000, |v| v.parse().expect("a number"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let result_text = answer_deltas(7, 60).concat();
        let result = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":result_text}],"isError":false}}).to_string();
        let sse = format!("event: message\nid: 1\ndata: {result}\n\n");
        let (json_body, sse_body) = (result.clone(), sse);
        let server = MockUpstream::start(move |r| match r.path_and_query.as_str() {
            "/sse" => Reply::sse(sse_body.as_bytes()),
            _ => Reply::json(200, &json_body),
        })
        .await;
        let batch_secs = args
            .iter()
            .position(|a| a == "--batch-secs")
            .and_then(|i| args.get(i + 1))
            .map_or(10, |v| v.parse().expect("a number"));
        let dir = tempfile::tempdir().unwrap();
        let pack = dir.path().join("realistic.yaml");
        std::fs::write(&pack, realistic_pack(true, result_text.len())).unwrap();
        let yaml = format!(
            "listen: \"127.0.0.1:0\"\npacks: [\"{}\"]\nlog: {{level: error}}\nlimits: {{max_request_bytes: 33554432}}\nroutes:\n  - {{name: json, protocol: mcp, path_prefix: /json, upstream: \"{base}/json\"}}\n  - {{name: sse, protocol: mcp, path_prefix: /sse, upstream: \"{base}/sse\"}}\n",
            pack.display(),
            base = server.base_url()
        );
        let config = guardwire::config::Config::from_yaml(&yaml).unwrap();
        let proxy = guardwire::server::start(config).await.unwrap();
        let query = answer_deltas(11, 12).concat();
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_docs","arguments":{"query":query,"limit":5}}});
        let body = Bytes::from(call.to_string());
        let expect = &result_text[..200];
        let direct_client: Http = Client::builder(TokioExecutor::new()).build_http();
        let proxy_client: Http = Client::builder(TokioExecutor::new()).build_http();
        println!(
            "MCP tools/call, realistic pack ({} B of arguments, {} B result); {runs} calls per row, after {} of warm-up",
            body.len(),
            result.len(),
            runs / 10
        );
        println!("| answer | direct p50 | p99 | through guardwire p50 | p99 | added p50 | added p99 |");
        println!("|---|---|---|---|---|---|---|");
        for kind in ["json", "sse"] {
            let direct = format!("{}/{kind}", server.base_url());
            let proxied = format!("http://{}/{kind}", proxy.addr);
            let (mut d, mut p) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
            for i in 0..runs + runs / 10 {
                // Alternate which path goes first.
                let (a, b) = if i % 2 == 0 {
                    let a = one(&direct_client, &direct, &body, expect).await;
                    (a, one(&proxy_client, &proxied, &body, expect).await)
                } else {
                    let b = one(&proxy_client, &proxied, &body, expect).await;
                    (one(&direct_client, &direct, &body, expect).await, b)
                };
                if i >= runs / 10 {
                    d.push(a);
                    p.push(b);
                }
            }
            d.sort();
            p.sort();
            let us = |x: Duration| x.as_secs_f64() * 1e6;
            let (d50, d99, p50, p99) = (
                percentile(&d, 0.5),
                percentile(&d, 0.99),
                percentile(&p, 0.5),
                percentile(&p, 0.99),
            );
            println!(
                "| {kind} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {:+.0} µs | {:+.0} µs |",
                us(d50),
                us(d99),
                us(p50),
                us(p99),
                us(p50) - us(d50),
                us(p99) - us(d99)
            );
        }
        if batch_secs > 0 {
            bounded(proxy.addr, batch_secs).await;
        }
    });
}
