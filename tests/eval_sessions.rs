//! Sessions of the packs' `evals:` through guardwire: `cost_budget` summed over a session's
//! turns (PromptKit sums the conversation's costs), `on_session_complete` and
//! `sample_sessions` run once per session — when the client ends it (the session-end header;
//! an MCP `DELETE`) or when it idles — on one replica (in process) and across two replicas
//! sharing a real `redis-server` (the ignored test; `tests/run` installs it), where each
//! session's evals run exactly once whichever replica saw its turns. A `cost_budget`
//! validator holds a session to its budget the same way, on one replica and on two.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::proxy::{metrics, send, start_config, Proxy};
use common::redis::RedisServer;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

const PACK: &str = r#"
name: sessions
validators:
  - type: banned_words
    params: {words: [forbidden]}
evals:
  - id: spend_turn
    type: cost_budget
    trigger: every_turn
    params: {max_total_tokens: 40}
  - id: spend_session
    type: cost_budget
    trigger: on_session_complete
    params: {max_cost_usd: 40}
  - id: greeted
    type: contains
    trigger: on_session_complete
    params: {patterns: [ok]}
  - id: sampled
    type: contains
    trigger: sample_sessions
    sample_percentage: 100
    params: {patterns: [ok]}
"#;

/// A price of $1 per token, so a session's spend in USD is its tokens.
const PRICES: &str = "prices:\n  m: {input_per_mtok: 1000000, output_per_mtok: 1000000}\n";

/// A whole answer that reports 10 input and 5 output tokens.
fn whole_answer() -> Reply {
    Reply::json(
        200,
        &json!({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}})
        .to_string(),
    )
}

/// Every answer reports 10 input and 5 output tokens.
async fn upstream() -> MockUpstream {
    MockUpstream::start(|_| whole_answer()).await
}

async fn replica(up: &MockUpstream, redis: Option<&str>) -> Proxy {
    let state = redis
        // A generous round trip: a store that times out leaves a turn's spend unknown, and
        // these tests are about what is counted, not how fast (a loaded CI box).
        .map(|url| format!("state: {{url: \"{url}\", timeout_ms: 2000}}\n"))
        .unwrap_or_default();
    start_config(
        &format!("  openai: \"{}\"\n", up.base_url()),
        PACK,
        &format!("{state}{PRICES}evals: {{session_idle_ms: 1000}}\n"),
    )
    .await
}

/// One turn of `session`; `end`: the client ends the session with it.
async fn turn(addr: SocketAddr, session: &str, end: bool) {
    let body = json!({"model":"m","messages":[{"role":"user","content":"hello"}]});
    let mut headers = vec![
        ("content-type", "application/json"),
        ("x-session-id", session),
    ];
    if end {
        headers.push(("x-session-end", "true"));
    }
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        body.to_string(),
        &headers,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
}

/// `guardwire_eval_results_total` of `eval` and `result`, summed over `addrs`.
async fn results(addrs: &[SocketAddr], eval: &str, result: &str) -> u64 {
    results_on(addrs, "openai_chat", eval, result).await
}

/// The same on `route`.
async fn results_on(addrs: &[SocketAddr], route: &str, eval: &str, result: &str) -> u64 {
    let line = format!(
        "guardwire_eval_results_total{{eval=\"{eval}\",route=\"{route}\",result=\"{result}\"}} "
    );
    let mut n = 0;
    for a in addrs {
        let m = metrics(*a).await;
        n += m
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |v| v.parse::<u64>().unwrap());
    }
    n
}

/// Waits (up to 20 s) until every `(eval, result, n)` holds over `addrs`.
async fn until(addrs: &[SocketAddr], want: &[(&str, &str, u64)]) {
    for _ in 0..400 {
        let mut all = true;
        for (eval, result, n) in want {
            all &= results(addrs, eval, result).await == *n;
        }
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut got = Vec::new();
    for (eval, result, _) in want {
        got.push((eval, result, results(addrs, eval, result).await));
    }
    panic!("wanted {want:?}, got {got:?}");
}

/// Turns of one session over `addrs` in turn (the last ends it), then a session left to idle.
async fn sessions_end_once(addrs: &[SocketAddr]) {
    let at = |i: usize| addrs[i % addrs.len()];
    // Three turns of 15 tokens: the session has spent 15, 30, 45 after each.
    turn(at(0), "s-1", false).await;
    turn(at(1), "s-1", false).await;
    until(addrs, &[("spend_turn", "pass", 2)]).await;
    // Not ended yet: no session eval ran.
    for eval in ["spend_session", "greeted", "sampled"] {
        for r in ["pass", "fail", "error"] {
            assert_eq!(results(addrs, eval, r).await, 0, "{eval} {r}");
        }
    }
    turn(at(2), "s-1", true).await;
    // The third turn's spend is the session's (45 > 40), and the session evals ran once:
    // $45 over the $40 budget, the last answer greets.
    until(
        addrs,
        &[
            ("spend_turn", "fail", 1),
            ("spend_session", "fail", 1),
            ("greeted", "pass", 1),
            ("sampled", "pass", 1),
        ],
    )
    .await;

    // A session that idles: its evals run once `session_idle_ms` after its last turn, on one
    // replica only, however many look for it.
    turn(at(0), "s-2", false).await;
    turn(at(1), "s-2", false).await;
    until(
        addrs,
        &[
            ("spend_session", "pass", 1),
            ("greeted", "pass", 2),
            ("sampled", "pass", 2),
        ],
    )
    .await;
    // Every replica's sweep has passed a few times since: still once.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(results(addrs, "greeted", "pass").await, 2);
    assert_eq!(results(addrs, "spend_session", "fail").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_evals_run_once_when_it_ends_on_one_replica() {
    let up = upstream().await;
    let p = replica(&up, None).await;
    sessions_end_once(&[p.addr()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (tests/run installs it)"]
async fn a_session_spread_over_two_replicas_is_one_session() {
    let redis = RedisServer::start();
    let up = upstream().await;
    let a = replica(&up, Some(&redis.url())).await;
    let b = replica(&up, Some(&redis.url())).await;
    sessions_end_once(&[a.addr(), b.addr()]).await;
}

const AGENT_PACK: &str = r#"
name: agents
validators:
  - type: banned_words
    params: {words: [forbidden]}
evals:
  - {id: ended, type: guardrail_triggered, trigger: on_session_complete, params: {guardrail: banned_words, should_trigger: false}}
"#;

/// `ended`'s passes on `route`.
async fn ended(addr: SocketAddr, route: &str) -> u64 {
    results_on(&[addr], route, "ended", "pass").await
}

async fn until_ended(addr: SocketAddr, route: &str, n: u64) {
    for _ in 0..400 {
        if ended(addr, route).await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{route}: ended {} times, not {n}", ended(addr, route).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_delete_and_an_a2a_context_end_their_sessions() {
    let up = MockUpstream::start(|req| {
        if req.path_and_query.starts_with("/mcp") {
            let id = req.body_json().map(|b| b["id"].clone()).unwrap_or_default();
            Reply::json(
                200,
                &json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"5"}]}})
                    .to_string(),
            )
        } else {
            Reply::json(
                200,
                r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"r","parts":[{"text":"ok"}]}}}"#,
            )
        }
    })
    .await;
    let base = up.base_url();
    let p = start_config(
        "",
        AGENT_PACK,
        &format!("evals: {{session_idle_ms: 1000}}\nroutes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{base}/mcp\"\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    upstream: \"{base}\"\n"),
    )
    .await;
    let mcp = |method: &'static str, id: u32, session: Option<&'static str>| {
        let body = if method == "POST" {
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}).to_string()
        } else {
            String::new()
        };
        let addr = p.addr();
        async move {
            let mut headers = vec![
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ];
            if let Some(s) = session {
                headers.push(("mcp-session-id", s));
            }
            let a = send(addr, method, "/mcp", body, &headers).await;
            assert_eq!(a.status, 200, "{}", a.text());
        }
    };
    // Two calls of one session: it has not ended.
    mcp("POST", 1, Some("s-1")).await;
    mcp("POST", 2, Some("s-1")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ended(p.addr(), "tools").await, 0);
    // The client's DELETE ends it: its session evals run once, now.
    mcp("DELETE", 0, Some("s-1")).await;
    until_ended(p.addr(), "tools", 1).await;
    // A call without a session is a session that ends with it.
    mcp("POST", 3, None).await;
    until_ended(p.addr(), "tools", 2).await;

    // A2A: the session is the message's contextId, whatever the message's text.
    let a2a = |text: &'static str, end: bool| {
        let body = json!({"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","contextId":"ctx-1","role":"ROLE_USER","parts":[{"text":text}]}}}).to_string();
        let addr = p.addr();
        async move {
            let mut headers = vec![("content-type", "application/json")];
            if end {
                headers.push(("x-session-end", "1"));
            }
            let a = send(addr, "POST", "/agent/a2a", body, &headers).await;
            assert_eq!(a.status, 200, "{}", a.text());
        }
    };
    a2a("first question", false).await;
    a2a("another question", true).await;
    until_ended(p.addr(), "agent", 1).await;
    // Nothing is left to idle: both messages were the one session the second ended (and the
    // MCP session ended by its DELETE does not end again).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(ended(p.addr(), "agent").await, 1);
    assert_eq!(ended(p.addr(), "tools").await, 2);
}

const BUDGET_PACK: &str = r#"
name: budget
validators:
  - type: cost_budget
    params: {max_total_tokens: 40}
"#;

/// Whole answers of 15 tokens; a request with `"stream": true` is answered with a stream of
/// the same usage.
async fn budget_upstream() -> MockUpstream {
    MockUpstream::start(|req| {
        let streamed = req.body_json().is_some_and(|b| b["stream"] == json!(true));
        if streamed {
            Reply::sse(&common::mock_upstream::openai_chat_stream_with_usage(
                &["o", "k"],
                10,
                5,
            ))
        } else {
            whole_answer()
        }
    })
    .await
}

/// Exchanges whose spend each replica has added to its session, summed over `addrs`.
async fn spends_added(addrs: &[SocketAddr]) -> u64 {
    let mut n = 0;
    for a in addrs {
        n += metrics(*a)
            .await
            .lines()
            .filter(|l| {
                l.starts_with("guardwire_state_operation_duration_seconds_count{")
                    && l.contains("op=\"session_spend\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

/// One exchange of `session`, after the `done` earlier ones' spend is in their sessions (it
/// is added as an exchange ends, off the answer's path). Returns the status and the body.
async fn budget_turn(
    addrs: &[SocketAddr],
    at: usize,
    session: &str,
    streamed: bool,
    done: u64,
) -> (u16, String) {
    for _ in 0..400 {
        if spends_added(addrs).await >= done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        spends_added(addrs).await,
        done,
        "spends added before {session}"
    );
    let body =
        json!({"model":"m","stream":streamed,"messages":[{"role":"user","content":"hello"}]});
    let a = send(
        addrs[at % addrs.len()],
        "POST",
        "/v1/chat/completions",
        body.to_string(),
        &[
            ("content-type", "application/json"),
            ("x-session-id", session),
        ],
    )
    .await;
    (a.status.as_u16(), a.text())
}

/// `cost_budget` as a validator reads the session's totals, as PromptKit's guardrail reads
/// the conversation's: each exchange's usage is added to its session's; the exchange that
/// takes the session over its budget is blocked at its end, and a session already over it is
/// refused before the provider is called. Other sessions keep their own totals.
async fn a_session_is_held_to_its_budget(addrs: &[SocketAddr], up: &MockUpstream) {
    // 15, then 30 tokens: within 40.
    assert_eq!(budget_turn(addrs, 0, "s-1", false, 0).await.0, 200);
    let (status, body) = budget_turn(addrs, 1, "s-1", true, 1).await;
    assert_eq!(status, 200);
    assert!(!body.contains("error"), "{body}");
    // 45: over, blocked when its usage arrives (a whole answer is withheld).
    let (status, body) = budget_turn(addrs, 0, "s-1", false, 2).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("cost_budget"), "{body}");
    assert_eq!(up.request_count(), 3);
    // Over already: refused BeforeCall, whole or streamed; the provider is not called.
    for (i, streamed) in [false, true].into_iter().enumerate() {
        let (status, body) = budget_turn(addrs, i + 1, "s-1", streamed, 3).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("cost_budget"), "{body}");
    }
    assert_eq!(
        up.request_count(),
        3,
        "a session over its budget is not paid for again"
    );
    // Another session has its own total; a streamed exchange that goes over is ended with
    // the protocol's error frame.
    assert_eq!(budget_turn(addrs, 1, "s-2", true, 3).await.0, 200);
    assert_eq!(budget_turn(addrs, 0, "s-2", false, 4).await.0, 200);
    let (status, body) = budget_turn(addrs, 1, "s-2", true, 5).await;
    assert_eq!(status, 200, "the stream's head went out before its usage");
    assert!(body.contains("cost_budget"), "{body}");
    assert_eq!(up.request_count(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_validator_holds_a_session_to_its_budget() {
    let up = budget_upstream().await;
    let p = start_config(
        &format!("  openai: \"{}\"\n", up.base_url()),
        BUDGET_PACK,
        "",
    )
    .await;
    a_session_is_held_to_its_budget(&[p.addr()], &up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (tests/run installs it)"]
async fn a_cost_budget_validator_holds_a_session_over_two_replicas() {
    let redis = RedisServer::start();
    let up = budget_upstream().await;
    let state = format!("state: {{url: \"{}\", timeout_ms: 2000}}\n", redis.url());
    let upstreams = format!("  openai: \"{}\"\n", up.base_url());
    let a = start_config(&upstreams, BUDGET_PACK, &state).await;
    let b = start_config(&upstreams, BUDGET_PACK, &state).await;
    a_session_is_held_to_its_budget(&[a.addr(), b.addr()], &up).await;
}
