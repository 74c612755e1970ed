//! `protocol: a2a` routes: what the fallback reads besides message and artifact texts.
//!
//! - The agent card's own texts (name, description, skills, provider, unknown fields) are
//!   checked as input with the route's packs before the card is served: a violating card is
//!   refused, never served in part.
//! - Ids, kinds and states are structure only where A2A's schema puts them: inside a data part,
//!   `metadata` or an unknown field every string is text, and so is every key of a data part.
//!
//! The agent is scripted (tests/common/mock_upstream.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::proxy::{send, start_config, Answer};
use serde_json::{json, Value};
use std::net::SocketAddr;

const PACK: &str = "validators:\n  - id: banned-phrase\n    type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
const BLOCKED: i64 = -32090;

fn routes(upstream: &str, extra: &str) -> String {
    format!(
        "routes:\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{upstream}\"\n{extra}"
    )
}

async fn get_card(addr: SocketAddr) -> Answer {
    send(
        addr,
        "GET",
        "/agent/.well-known/agent-card.json",
        String::new(),
        &[("host", "gw.test:8080")],
    )
    .await
}

fn card(base: &str, extra: Value) -> Value {
    let mut card = json!({
        "name": "Billing agent",
        "description": "Answers billing questions.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "provider": {"organization": "Acme", "url": "https://acme.example"},
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "refunds", "name": "Refunds", "description": "Refunds an invoice.",
            "tags": ["billing"], "examples": ["refund invoice 42"]}],
    });
    for (k, v) in extra.as_object().unwrap() {
        card[k] = v.clone();
    }
    card
}

/// Serves `card` (with the agent's base URL) at the well-known path.
async fn agent_with_card(card_of: fn(&str) -> Value) -> MockUpstream {
    MockUpstream::start(move |req| {
        let base = format!("http://{}", req.header("host").unwrap_or("agent"));
        Reply::json(200, &card_of(&base).to_string())
    })
    .await
}

#[tokio::test]
async fn a_card_whose_texts_violate_the_packs_is_refused() {
    let poisoned: [fn(&str) -> Value; 7] = [
        |b| card(b, json!({"name": "the forbidden fruit agent"})),
        |b| card(b, json!({"description": "Ask for the forbidden fruit."})),
        |b| {
            card(
                b,
                json!({"skills": [{"id": "s", "name": "x", "description": "eat the forbidden fruit", "tags": []}]}),
            )
        },
        |b| {
            card(
                b,
                json!({"skills": [{"id": "s", "name": "x", "description": "d", "tags": ["forbidden fruit"]}]}),
            )
        },
        |b| {
            card(
                b,
                json!({"skills": [{"id": "s", "name": "x", "description": "d", "examples": ["give me the forbidden fruit"]}]}),
            )
        },
        |b| {
            card(
                b,
                json!({"provider": {"organization": "Forbidden Fruit Inc"}}),
            )
        },
        // An unknown field, even under a key that is structure elsewhere.
        |b| card(b, json!({"x-notes": {"id": "forbidden fruit"}})),
    ];
    for (i, card_of) in poisoned.into_iter().enumerate() {
        let agent = agent_with_card(card_of).await;
        let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
        let a = get_card(proxy.addr()).await;
        let text = a.text();
        assert_eq!(a.status, 400, "card {i}: {text}");
        assert!(
            !text.to_ascii_lowercase().contains("fruit"),
            "card {i}: {text}"
        );
        let e = a.json();
        assert_eq!(e["id"], Value::Null, "card {i}: {text}");
        assert_eq!(e["error"]["code"], BLOCKED, "card {i}: {text}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("banned-phrase"),
            "card {i}: {text}"
        );
        // Counted as an input block of the route.
        let m = common::proxy::metrics(proxy.addr()).await;
        let blocks = m
            .lines()
            .find(|l| {
                l.starts_with("guardwire_blocked_total{")
                    && l.contains("route=\"agent\"")
                    && l.contains("phase=\"input\"")
            })
            .unwrap_or_else(|| panic!("card {i}: no input block in:\n{m}"));
        assert!(blocks.ends_with(" 1"), "{blocks}");
    }
    // A clean card is served (rewritten).
    let agent = agent_with_card(|b| card(b, json!({}))).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
    let a = get_card(proxy.addr()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["skills"][0]["examples"][0], "refund invoice 42");
}

/// A card with a key twice is refused: the client's reader may keep the copy guardwire's
/// rewrite dropped (here an interface that goes around guardwire).
#[tokio::test]
async fn a_card_with_a_key_twice_is_refused() {
    let agent = MockUpstream::start(|req| {
        let base = format!("http://{}", req.header("host").unwrap_or("agent"));
        let clean = card(&base, json!({})).to_string();
        let around = r#"{"supportedInterfaces":[{"url":"http://elsewhere.example/a2a","protocolBinding":"JSONRPC"}],"#;
        Reply::json(200, &format!("{around}{}", &clean[1..]))
    })
    .await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
    let a = get_card(proxy.addr()).await;
    let text = a.text();
    assert_eq!(a.status, 502, "{text}");
    assert!(!text.contains("elsewhere"), "{text}");
    assert_eq!(a.json()["error"]["code"], -32093, "{text}");
}

#[tokio::test]
async fn a_cards_unknown_fields_follow_unknown_content() {
    let unknown: fn(&str) -> Value = |b| card(b, json!({"x-notes": "forbidden fruit"}));
    let agent = agent_with_card(unknown).await;
    // pass: unknown fields are not read; known ones still are.
    let proxy = start_config(
        "",
        PACK,
        &routes(&agent.base_url(), "    unknown_content: pass\n"),
    )
    .await;
    let a = get_card(proxy.addr()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let agent2 = agent_with_card(|b| card(b, json!({"name": "forbidden fruit"}))).await;
    let proxy2 = start_config(
        "",
        PACK,
        &routes(&agent2.base_url(), "    unknown_content: pass\n"),
    )
    .await;
    assert_eq!(get_card(proxy2.addr()).await.status, 400);
    // block: a card with an unknown field is refused, whatever it says.
    let clean_unknown: fn(&str) -> Value = |b| card(b, json!({"x-notes": "hello"}));
    let agent3 = agent_with_card(clean_unknown).await;
    let proxy3 = start_config(
        "",
        PACK,
        &routes(&agent3.base_url(), "    unknown_content: block\n"),
    )
    .await;
    let a = get_card(proxy3.addr()).await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(a.text().contains("unknown_content"), "{}", a.text());
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

fn send_message(id: &str, parts: Value, extra: Value) -> String {
    let mut params = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts}});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": params}).to_string()
}

#[tokio::test]
async fn structural_keys_inside_data_metadata_and_unknown_fields_are_text_in_calls() {
    const HELLO: &str = r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"r","parts":[{"text":"hi"}]}}}"#;
    let agent = MockUpstream::start(|_| Reply::json(200, HELLO)).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
    let bad = [
        send_message("1", json!([{"data": {"type": "forbidden fruit"}}]), json!({})),
        send_message("1", json!([{"data": {"id": "forbidden fruit"}}]), json!({})),
        send_message("1", json!([{"data": {"forbidden fruit": 1}}]), json!({})),
        send_message("1", json!([{"data": [{"status": "forbidden fruit"}]}]), json!({})),
        send_message(
            "1",
            json!([{"text": "hi", "metadata": {"role": "forbidden fruit"}}]),
            json!({}),
        ),
        send_message(
            "1",
            json!([{"text": "hi"}]),
            json!({"metadata": {"model": "forbidden fruit"}}),
        ),
        send_message(
            "1",
            json!([{"text": "hi"}]),
            json!({"extra": {"created": "forbidden fruit"}}),
        ),
        // An unknown method's params are text, whatever their keys.
        json!({"jsonrpc": "2.0", "id": "1", "method": "x/custom", "params": {"id": "forbidden fruit"}})
            .to_string(),
    ];
    for req in bad {
        let a = post(proxy.addr(), req.clone()).await;
        let e = a.json();
        assert_eq!(e["error"]["code"], BLOCKED, "{req}: {}", a.text());
    }
    assert_eq!(agent.request_count(), 0, "nothing was forwarded");
    // Ids, roles and kinds in their places are not text; a clean data part passes.
    let clean = send_message(
        "1",
        json!([{"kind": "data", "data": {"type": "invoice", "id": 42}}]),
        json!({"metadata": {"k": "v"}}),
    );
    let a = post(proxy.addr(), clean).await;
    assert_eq!(a.text(), HELLO);
    assert_eq!(agent.request_count(), 1);
}

#[tokio::test]
async fn structural_keys_inside_data_metadata_and_unknown_fields_are_text_in_answers() {
    let answers = [
        json!({"message": {"messageId": "r", "parts": [{"data": {"id": "forbidden fruit"}}]}}),
        json!({"message": {"messageId": "r", "parts": [{"data": {"forbidden fruit": true}}]}}),
        json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"kind": "forbidden fruit"}}]}]}}),
        json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "metadata": {"state": "forbidden fruit"}}}),
        json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED", "extra": {"messageId": "forbidden fruit"}}}}),
        // 0.3 shape.
        json!({"kind": "message", "messageId": "r", "parts": [{"kind": "data", "data": {"contextId": "forbidden fruit"}}]}),
        // Inline files read in the charset they declare (valid UTF-8 spelling the phrase in a
        // 7-bit charset: ISO-2022-JP's fullwidth letters, UTF-7).
        json!({"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{
            "raw": "dGhlIBskQiNmI28jciNiI2kjZCNkI2UjbhsoQiBmcnVpdA==",
            "mediaType": "text/plain; charset=iso-2022-jp"}]}}),
        json!({"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{
            "raw": "dGhlICtBR1lBYndCeUFHSUFhUUJrQUdRQVpRQnUtIGZydWl0",
            "mediaType": "text/plain; charset=utf-7"}]}}),
    ];
    for (i, answer) in answers.into_iter().enumerate() {
        let body = json!({"jsonrpc": "2.0", "id": "1", "result": answer}).to_string();
        let agent = MockUpstream::start({
            let body = body.clone();
            move |_| Reply::json(200, &body)
        })
        .await;
        let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
        let a = post(
            proxy.addr(),
            send_message("1", json!([{"text": "hi"}]), json!({})),
        )
        .await;
        let text = a.text();
        assert!(!text.contains("fruit"), "answer {i}: {text}");
        assert_eq!(a.json()["error"]["code"], BLOCKED, "answer {i}: {text}");
    }
    // Streamed: a data part's key in a status update.
    let events = [
        json!({"jsonrpc": "2.0", "id": "s", "result": {"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}}),
        json!({"jsonrpc": "2.0", "id": "s", "result": {"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "m", "role": "ROLE_AGENT",
                "parts": [{"data": {"taskId": "forbidden fruit"}}]}}}}}),
    ];
    let sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let agent = MockUpstream::start(move |_| Reply::sse(sse.as_bytes())).await;
    let proxy = start_config("", PACK, &routes(&agent.base_url(), "")).await;
    let req = json!({"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}})
    .to_string();
    let a = post(proxy.addr(), req).await;
    let text = a.text();
    assert!(!text.contains("fruit"), "{text}");
    assert!(text.contains("event: error"), "{text}");
    assert!(text.contains(&BLOCKED.to_string()), "{text}");
}
