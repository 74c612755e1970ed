//! The agent routes read `upstream` one way: `path_prefix` is where guardwire serves the
//! upstream URL. An `a2a` route written like an `mcp` route (no `strip_prefix`) serves the
//! agent's card and JSON-RPC endpoint under its prefix, from the agent's base URL; an `mcp`
//! route forwards its prefix to the endpoint URL as it is. (An a2a route without
//! `strip_prefix` used to answer its own card path "GET is not allowed here; use POST".)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::proxy::{send, start_config};
use serde_json::{json, Value};

const PACK: &str = "validators:\n  - id: banned\n    type: banned_words\n    params: { words: [\"forbidden\"], direction: both }\n";

#[tokio::test]
async fn a2a_and_mcp_routes_serve_their_upstream_at_path_prefix() {
    let upstream = MockUpstream::start(|req| {
        let host = req.header("host").unwrap_or("agent").to_owned();
        match req.path_and_query.as_str() {
            "/base/.well-known/agent-card.json" => Reply::json(
                200,
                &json!({"name": "billing", "supportedInterfaces": [
                    {"url": format!("http://{host}/base/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
                .to_string(),
            ),
            "/base/a2a" => Reply::json(
                200,
                &json!({"jsonrpc": "2.0", "id": "1", "result": {"message": {
                    "messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "paid"}]}}})
                .to_string(),
            ),
            "/tools/mcp" => Reply::json(
                200,
                &json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}).to_string(),
            ),
            other => Reply::json(404, &json!({"unexpected path": other}).to_string()),
        }
    })
    .await;
    let base = upstream.base_url();
    let routes = format!(
        "routes:\n  - name: billing\n    protocol: a2a\n    path_prefix: /agents/billing\n    upstream: \"{base}/base\"\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp/tools\n    upstream: \"{base}/tools/mcp\"\n"
    );
    let proxy = start_config("", PACK, &routes).await;

    let card = send(
        proxy.addr(),
        "GET",
        "/agents/billing/.well-known/agent-card.json",
        "",
        &[("host", "gw.test:8080")],
    )
    .await;
    assert_eq!(card.status, 200, "{}", card.text());
    assert_eq!(
        card.json()["supportedInterfaces"][0]["url"],
        "http://gw.test:8080/agents/billing/a2a"
    );

    let call = json!({"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "pay the bill"}]}}});
    let a = send(
        proxy.addr(),
        "POST",
        "/agents/billing/a2a",
        call.to_string(),
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["result"]["message"]["parts"][0]["text"], "paid");

    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let m = send(
        proxy.addr(),
        "POST",
        "/mcp/tools",
        list.to_string(),
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ],
    )
    .await;
    assert_eq!(m.status, 200, "{}", m.text());
    assert_eq!(m.json()["result"]["tools"], Value::Array(vec![]));

    let paths: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| r.path_and_query.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/base/.well-known/agent-card.json",
            "/base/a2a",
            "/tools/mcp"
        ]
    );
}

#[test]
fn an_a2a_strip_prefix_that_is_not_the_whole_prefix_is_refused_naming_the_fix() {
    let e = guardwire::config::Config::from_yaml(
        "routes:\n  - name: billing\n    protocol: a2a\n    path_prefix: /agents/billing\n    strip_prefix: /agents\n    upstream: \"http://127.0.0.1:9\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("routes[0] (billing): strip_prefix") && e.contains("leave strip_prefix out"),
        "{e}"
    );
}
