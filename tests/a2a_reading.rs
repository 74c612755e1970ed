//! `protocol: a2a` routes read every value as the agent's SDK reads it (issue 49, items 4 and
//! 5), against a scripted agent (tests/common/mock_upstream.rs):
//!
//! - no exemption by position: a `contextId` (or any id, kind or media type) that holds a
//!   phrase is text to the checks; one in the shape of an identifier still meets the secret
//!   and PII patterns — in calls and in answers, under every `unknown_content` setting for
//!   the places A2A's schema names;
//! - the spellings the SDKs read (snake_case names, `null` lists) are decoded: a snake_case
//!   answer is checked like a camelCase one, even with `unknown_content: pass`; a result
//!   object guardwire cannot read fails closed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::proxy::{send, start_config, Answer};
use common::sdk::client_output;
use serde_json::{json, Value};
use std::net::SocketAddr;

const PACK: &str = "validators:\n  - id: banned-phrase\n    type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n  - id: api-key\n    type: regex\n    params: { pattern: 'sk-[a-z0-9]{16}', expect_match: false, direction: both }\n";
const BLOCKED: i64 = -32090;
const SETTINGS: [&str; 3] = ["scan", "block", "pass"];

fn routes(upstream: &str, unknown: &str) -> String {
    format!(
        "routes:\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{upstream}\"\n    unknown_content: {unknown}\n"
    )
}

async fn post(addr: SocketAddr, body: String) -> Answer {
    send(
        addr,
        "POST",
        "/agent/a2a",
        body,
        &[("content-type", "application/json")],
    )
    .await
}

fn rpc_error(body: &str) -> Value {
    let data = match body.rfind("event: error\ndata: ") {
        Some(at) => body[at + "event: error\ndata: ".len()..].trim(),
        None => body.trim(),
    };
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const HELLO: &str = r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"r1","role":"ROLE_AGENT","parts":[{"text":"hello"}]}}}"#;

fn send_message(message: Value) -> String {
    json!({"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": {"message": message}})
        .to_string()
}

#[tokio::test]
async fn a_phrase_or_a_secret_at_a_place_of_structure_never_reaches_the_agent() {
    for unknown in SETTINGS {
        let agent = MockUpstream::start(|_| Reply::json(200, HELLO)).await;
        let proxy = start_config("", PACK, &routes(&agent.base_url(), unknown)).await;
        for message in [
            json!({"messageId": "m1", "contextId": "the forbidden fruit", "role": "ROLE_USER", "parts": [{"text": "hi"}]}),
            json!({"message_id": "m1", "context_id": "the forbidden fruit", "parts": [{"text": "hi"}]}),
            json!({"messageId": "m1", "referenceTaskIds": ["forbidden fruit"], "parts": [{"text": "hi"}]}),
            json!({"messageId": "ctx-sk-0123456789abcdef", "parts": [{"text": "hi"}]}),
            json!({"messageId": "m1", "extensions": ["https://x/sk-0123456789abcdef"], "parts": [{"text": "hi"}]}),
        ] {
            let a = post(proxy.addr(), send_message(message.clone())).await;
            let e = a.json();
            assert_eq!(e["error"]["code"], BLOCKED, "{unknown}: {message}: {e}");
            assert!(!a.text().contains("forbidden"), "{}", a.text());
        }
        assert_eq!(agent.request_count(), 0, "{unknown}: nothing was forwarded");
        // Identifiers that hold neither pass, and so does the clean call.
        let clean = json!({"messageId": "forbidden-fruit-1", "contextId": "ctx-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let a = post(proxy.addr(), send_message(clean)).await;
        assert_eq!(
            a.json()["result"]["message"]["parts"][0]["text"],
            "hello",
            "{unknown}"
        );
        assert_eq!(agent.request_count(), 1);
    }
}

#[tokio::test]
async fn a_snake_case_answer_is_checked_under_every_setting() {
    let answers = [
        // The phrase in a snake_case status update's message: decoded, not left unchecked.
        r#"{"jsonrpc":"2.0","id":"1","result":{"status_update":{"task_id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"message_id":"m","parts":[{"text":"the forbidden fruit"}]}}}}}"#,
        // In an artifact, with a null list beside it.
        r#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","history":null,"artifacts":[{"artifact_id":"a","parts":[{"text":"the forbidden fruit"}]}]}}}"#,
        // A secret in an answer's context id.
        r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"context_id":"sk-0123456789abcdef","parts":[{"text":"hi"}]}}}"#,
        // A phrase as the task's id.
        r#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"the forbidden fruit","status":{"state":"TASK_STATE_COMPLETED"}}}}"#,
    ];
    for unknown in SETTINGS {
        for answer in answers {
            let agent = MockUpstream::start(move |_| Reply::json(200, answer)).await;
            let proxy = start_config("", PACK, &routes(&agent.base_url(), unknown)).await;
            let call = send_message(json!({"messageId": "m1", "parts": [{"text": "hi"}]}));
            let a = post(proxy.addr(), call).await;
            assert!(
                !a.text().contains("forbidden") && !a.text().contains("sk-0123"),
                "{unknown}: {}",
                a.text()
            );
            let e = rpc_error(&a.text());
            assert_eq!(e["error"]["code"], BLOCKED, "{unknown}: {answer}: {e}");
        }
    }
}

#[tokio::test]
async fn a_result_object_guardwire_cannot_read_fails_closed_even_with_pass() {
    // `parts` as a string: no SDK reads it as a message; guardwire does not relay it.
    let answer =
        r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"parts":"the forbidden fruit"}}}"#;
    let agent = MockUpstream::start(move |_| Reply::json(200, answer)).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "pass")).await;
    let a = post(
        proxy.addr(),
        send_message(json!({"messageId": "m1", "parts": [{"text": "hi"}]})),
    )
    .await;
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    assert_eq!(
        rpc_error(&a.text())["error"]["code"],
        -32093,
        "{}",
        a.text()
    );
}

fn python() -> String {
    std::env::var("GUARDWIRE_SDK_PYTHON")
        .expect("GUARDWIRE_SDK_PYTHON: the SDK venv's python (run tests/run once)")
}

/// The real `a2a-sdk` client: a `context_id` holding the banned phrase is refused before the
/// agent sees it; an answer in snake_case — which the SDK reads, as the direct case shows — is
/// checked through guardwire; and so is a phrase split between a task's two artifacts, which
/// the SDK's `get_stream_response_text` joins; and so are the answers the SDK reads otherwise
/// than a plain decoder would (review 14): a `result` beside an empty `error` (the SDK reads
/// the result), and an SSE comment whose U+2028 the SDK's line reader breaks at (a `data:`
/// after it is an event to the SDK; to guardwire the stream is malformed).
#[tokio::test]
#[ignore = "needs the SDK venv (GUARDWIRE_SDK_PYTHON); tests/run runs it"]
async fn the_a2a_sdk_reads_what_guardwire_checks() {
    const SNAKE: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"message":{"message_id":"r1","context_id":"c1","role":"ROLE_AGENT","parts":[{"text":"the forbidden fruit"}]}}}"#;
    const CLEAN: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"message":{"messageId":"r1","role":"ROLE_AGENT","parts":[{"text":"hello"}]}}}"#;
    const ARTIFACTS: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a1","parts":[{"text":"the forbidden"}]},{"artifactId":"a2","parts":[{"text":"fruit"}]}]}}}"#;
    const FALSY: &str = r#"{"jsonrpc":"2.0","id":ID,"error":{},"result":{"message":{"messageId":"r1","role":"ROLE_AGENT","parts":[{"text":"the forbidden"},{"text":"fruit"}]}}}"#;
    let agent = MockUpstream::start(|req| {
        let base = format!("http://{}", req.header("host").unwrap_or("agent"));
        if req.path_and_query.starts_with("/.well-known/") {
            return Reply::json(
                200,
                &json!({"name": "a", "description": "d", "version": "1", "supportedInterfaces": [
                    {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                    "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
                    "defaultOutputModes": ["text/plain"], "skills": []})
                .to_string(),
            );
        }
        let call = req.body_json().unwrap_or_default();
        let id = call["id"].to_string();
        let asked = req.body_str();
        if asked.contains("COMMENT") {
            let event = FALSY.replace("ID", &id).replace(r#""error":{},"#, "");
            let body = format!(": keepalive\u{2028}data: {event}\n\n");
            return Reply::sse(body.as_bytes());
        }
        let answer = if asked.contains("LEAK") {
            SNAKE
        } else if asked.contains("FALSY") {
            FALSY
        } else if asked.contains("ARTIFACTS") {
            ARTIFACTS
        } else {
            CLEAN
        };
        Reply::json(200, &answer.replace("ID", &id))
    })
    .await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "pass")).await;
    let gw = format!("http://{}/agent", proxy.addr());
    let direct = agent.base_url();
    let stdout = client_output(python(), move |c| {
        c.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/a2a_reading/client.py"
        ))
        .arg(gw)
        .arg(direct);
    })
    .await;
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
    let context = case("context through");
    assert!(
        context["error"].as_str().unwrap().contains("banned-phrase"),
        "{context}"
    );
    assert!(
        agent
            .requests()
            .iter()
            .all(|r| !r.body_str().contains("forbidden")),
        "the phrase reached the agent"
    );
    let direct = case("snake direct");
    assert_eq!(
        direct["text"], "the forbidden fruit",
        "the SDK reads snake_case: {direct}"
    );
    let through = case("snake through");
    assert!(
        through["error"].as_str().unwrap().contains("banned-phrase"),
        "{through}"
    );
    assert!(
        !through["text"].as_str().unwrap().contains("forbidden"),
        "{through}"
    );
    let direct = case("artifacts direct");
    assert_eq!(
        direct["text"], "the forbidden\nfruit",
        "the SDK joins the artifacts: {direct}"
    );
    let through = case("artifacts through");
    assert!(
        through["error"].as_str().unwrap().contains("banned-phrase"),
        "{through}"
    );
    assert_eq!(through["text"], "", "{through}");
    for name in ["falsy", "comment"] {
        let direct = case(&format!("{name} direct"));
        assert!(
            direct["text"].as_str().unwrap().contains("forbidden"),
            "the SDK reads the answer: {direct}"
        );
        let through = case(&format!("{name} through"));
        assert!(through["error"].is_string(), "{through}");
        assert!(
            !through["text"].as_str().unwrap().contains("forbidden"),
            "{through}"
        );
    }
}
