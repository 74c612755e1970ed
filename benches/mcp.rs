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
        let dir = tempfile::tempdir().unwrap();
        let pack = dir.path().join("realistic.yaml");
        std::fs::write(&pack, realistic_pack(true, result_text.len())).unwrap();
        let yaml = format!(
            "listen: \"127.0.0.1:0\"\npacks: [\"{}\"]\nlog: {{level: error}}\nroutes:\n  - {{name: json, protocol: mcp, path_prefix: /json, upstream: \"{base}/json\"}}\n  - {{name: sse, protocol: mcp, path_prefix: /sse, upstream: \"{base}/sse\"}}\n",
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
    });
}
