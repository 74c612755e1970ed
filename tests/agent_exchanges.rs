//! MCP tool calls and A2A messages are exchanges like model calls for the audit log and the
//! evals: an MCP block and an A2A block each write an audit line naming the route, the
//! protocol and the validator; an A2A exchange and an MCP `tools/call` (its arguments the
//! answer, its result the input, JSON or SSE) reach the pack's evals (their metric under the
//! route's label, their audit line). Servers and agents are scripted
//! (tests/common/mock_upstream.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{sse_data_frames, MockUpstream, Reply};
use common::proxy::{metrics, send, start_config};
use serde_json::Value;
use std::time::Duration;

const PACK: &str = r#"
validators:
  - id: banned-words
    type: banned_words
    params: { words: ["forbidden"], direction: both }
evals:
  - {id: short, type: max_length, trigger: every_turn, params: {max: 5}}
"#;

const MCP_RESULT: &str =
    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"5"}],"isError":false}}"#;
const A2A_ANSWER: &str = r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"r","parts":[{"text":"a long enough answer"}]}}}"#;

fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn mcp_and_a2a_blocks_and_evals_are_audited_with_route_and_protocol() {
    let upstream = MockUpstream::start(|req| {
        if req.path_and_query.starts_with("/mcp") {
            Reply::json(200, MCP_RESULT)
        } else {
            Reply::json(200, A2A_ANSWER)
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let base = upstream.base_url();
    let config = format!(
        "audit: {{path: \"{}\"}}\nroutes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{base}/mcp\"\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{base}\"\n",
        audit.display()
    );
    let proxy = start_config("", PACK, &config).await;
    let mcp = |body: &'static str| {
        send(
            proxy.addr(),
            "POST",
            "/mcp",
            body.to_owned(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
        )
    };
    let a2a = |body: &'static str| {
        send(
            proxy.addr(),
            "POST",
            "/agent/a2a",
            body.to_owned(),
            &[("content-type", "application/json")],
        )
    };
    // An MCP tool call whose arguments the pack blocks.
    let a = mcp(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"the forbidden word"}}}"#).await;
    assert!(a.text().contains("banned-words"), "{}", a.text());
    // An A2A message the pack blocks, and a clean one (which the eval fails: too long).
    let a = a2a(r#"{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a forbidden wish"}]}}}"#).await;
    assert!(a.text().contains("banned-words"), "{}", a.text());
    let a = a2a(r#"{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#).await;
    assert_eq!(a.text(), A2A_ANSWER);
    assert_eq!(
        upstream.request_count(),
        1,
        "blocked calls are not forwarded"
    );

    // The A2A exchanges reach the evals under the route's label (the blocked one too, as a
    // turn blocked before the call).
    let want = "guardwire_eval_results_total{eval=\"short\",route=\"agent\",result=\"fail\"} ";
    let mut m = String::new();
    let eval_audited = |l: &Value| l["mode"] == "eval" && l["result"] == "fail";
    for _ in 0..200 {
        m = metrics(proxy.addr()).await;
        if m.lines().any(|l| l.starts_with(want)) && audit_lines(&audit).iter().any(eval_audited) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(m.lines().any(|l| l.starts_with(want)), "no {want} in:\n{m}");

    let lines = audit_lines(&audit);
    let block = |route: &str| {
        lines
            .iter()
            .find(|l| l["route"] == route && l["mode"] == "enforce")
            .unwrap_or_else(|| panic!("no block of route {route} in {lines:#?}"))
    };
    let mcp_block = block("tools");
    assert_eq!(mcp_block["protocol"], "mcp", "{mcp_block}");
    assert_eq!(mcp_block["validator"], "banned-words", "{mcp_block}");
    // Tool-call arguments are data leaving: the `response` phase (docs/mcp.md).
    assert_eq!(mcp_block["phase"], "response", "{mcp_block}");
    let a2a_block = block("agent");
    assert_eq!(a2a_block["protocol"], "a2a", "{a2a_block}");
    assert_eq!(a2a_block["validator"], "banned-words", "{a2a_block}");
    let eval = lines
        .iter()
        .find(|l| eval_audited(l))
        .unwrap_or_else(|| panic!("no failing eval line in {lines:#?}"));
    assert_eq!(eval["route"], "agent", "{eval}");
    assert_eq!(eval["protocol"], "a2a", "{eval}");
    assert_eq!(eval["validator"], "short", "{eval}");
    for l in &lines {
        assert!(
            !l.to_string().contains("forbidden"),
            "matched text in the audit: {l}"
        );
    }
}

/// The pack above with evals of the MCP call: of its arguments (the answer), of its result
/// (the input), and of the blocks.
fn mcp_eval_pack() -> String {
    format!(
        "{PACK}  - {{id: args-city, type: banned_words, trigger: every_turn, metric: {{name: mcp_args_clean}}, params: {{words: [\"paris\"]}}}}
  - {{id: result-weather, type: banned_words, trigger: every_turn, params: {{words: [\"sunny\"], direction: input}}}}
  - {{id: no-blocks, type: guardrail_triggered, trigger: every_turn, params: {{guardrail: banned-words, should_trigger: false}}}}
"
    )
}

/// The value of the metric line that starts with `prefix`.
fn metric_value(m: &str, prefix: &str) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn an_mcp_tool_call_is_a_turn_for_the_evals() {
    // The server's result names the weather of the city asked; over SSE for Oslo.
    let upstream = MockUpstream::start(|req| {
        let body = req.body_json().unwrap();
        let city = body["params"]["arguments"]["city"].as_str().unwrap_or("");
        let weather = if city == "oslo" { "sunny" } else { "cloudy" };
        let result = serde_json::json!({"jsonrpc": "2.0", "id": body["id"],
            "result": {"content": [{"type": "text", "text": format!("{weather} in {city}")}]}})
        .to_string();
        match city {
            "oslo" => Reply::sse(&sse_data_frames(&[&result])),
            _ => Reply::json(200, &result),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let config = format!(
        "audit: {{path: \"{}\"}}\nroutes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}/mcp\"\n",
        audit.display(),
        upstream.base_url()
    );
    let proxy = start_config("", &mcp_eval_pack(), &config).await;
    for (id, city) in [(1, "paris"), (2, "oslo"), (3, "forbidden")] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"weather","arguments":{{"city":"{city}"}}}}}}"#
        );
        let a = send(
            proxy.addr(),
            "POST",
            "/mcp",
            body,
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-session-id", "s1"),
            ],
        )
        .await;
        assert_eq!(
            a.text().contains("banned-words"),
            city == "forbidden",
            "{}",
            a.text()
        );
    }
    assert_eq!(
        upstream.request_count(),
        2,
        "the blocked call is not forwarded"
    );

    // Three turns: Paris's arguments fail `args-city`, Oslo's streamed result fails
    // `result-weather`, and the blocked call (a turn without a result) fails `no-blocks`.
    let result = |eval: &str, r: &str| {
        format!("guardwire_eval_results_total{{eval=\"{eval}\",route=\"tools\",result=\"{r}\"}} ")
    };
    let want = [
        (result("args-city", "fail"), 1.0),
        (result("args-city", "pass"), 2.0),
        (result("result-weather", "fail"), 1.0),
        (result("result-weather", "pass"), 2.0),
        (result("no-blocks", "fail"), 1.0),
        (result("no-blocks", "pass"), 2.0),
    ];
    let mut m = String::new();
    for _ in 0..200 {
        m = metrics(proxy.addr()).await;
        if want.iter().all(|(k, v)| metric_value(&m, k) == Some(*v)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (k, v) in &want {
        assert_eq!(metric_value(&m, k), Some(*v), "{k} in:\n{m}");
    }
    assert!(
        m.contains("guardwire_eval_mcp_args_clean{route=\"tools\"} 1"),
        "the eval's own metric, passed by the last call:\n{m}"
    );
    let lines = audit_lines(&audit);
    let evals: Vec<&Value> = lines.iter().filter(|l| l["mode"] == "eval").collect();
    // The three evals above and the pack's `short`, on each of the three turns.
    assert_eq!(evals.len(), 12, "{lines:#?}");
    for l in &evals {
        assert_eq!(l["route"], "tools", "{l}");
        assert_eq!(l["protocol"], "mcp", "{l}");
    }
    assert!(
        evals
            .iter()
            .any(|l| l["validator"] == "result-weather" && l["result"] == "fail"),
        "{evals:#?}"
    );
}
