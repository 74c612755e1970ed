//! Usage on every stream: guardwire asks OpenAI-style upstreams for a stream's usage, keeps the
//! usage chunk from clients that did not ask, and counts tokens, spend and `cost_budget` on it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, MockUpstream, RecordedRequest, Reply};
use common::proxy::*;
use std::time::Duration;

/// What an OpenAI-like upstream streams: the answer, and when the request asks for usage,
/// `"usage":null` in every chunk and the usage-only chunk before `[DONE]` (7 in, 3 out).
fn openai_like(req: &RecordedRequest, texts: &[&str]) -> Vec<u8> {
    let plain = String::from_utf8(openai_chat_stream(texts)).unwrap();
    let asked = req
        .body_json()
        .is_some_and(|b| b["stream_options"]["include_usage"] == serde_json::Value::Bool(true));
    if !asked {
        return plain.into_bytes();
    }
    let with_nulls = plain.replace("}]}\n\n", "}],\"usage\":null}\n\n");
    with_nulls
        .replace(
            "data: [DONE]",
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\ndata: [DONE]",
        )
        .into_bytes()
}

async fn scrape_until(addr: std::net::SocketAddr, series: &str) -> String {
    let mut body = String::new();
    for _ in 0..100 {
        body = metrics(addr).await;
        if body.contains(series) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    body
}

const PRICES: &str = "prices: { gpt-4o: { input_per_mtok: 2.5, output_per_mtok: 10.0 } }";

#[tokio::test]
async fn a_stream_the_client_asked_nothing_of_is_counted_and_relayed_unchanged() {
    let mock = MockUpstream::start(|r| Reply::sse(&openai_like(r, &["Hello", " there"]))).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", PRICES).await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, 200);
    // Byte for byte what the upstream sends a client that does not ask.
    assert_eq!(
        a.text(),
        String::from_utf8(openai_chat_stream(&["Hello", " there"])).unwrap()
    );
    // The upstream was asked, every other member as the client sent it.
    let sent = mock.requests()[0].body_str();
    assert_eq!(
        sent,
        STREAM_REQUEST.trim_end_matches('}').to_owned()
            + ",\"stream_options\":{\"include_usage\":true}}"
    );
    let body = scrape_until(proxy.addr(), "guardwire_tokens_total").await;
    for series in [
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"input\",source=\"provider\"} 7\n",
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"output\",source=\"provider\"} 3\n",
        // (7 × 2.5 + 3 × 10) / 1e6 USD
        "guardwire_spend_usd_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",source=\"provider\"} 0.0000475\n",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
}

#[tokio::test]
async fn a_client_that_asked_gets_the_usage_chunk_as_before() {
    let mock = MockUpstream::start(|r| Reply::sse(&openai_like(r, &["Hello"]))).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", "").await;
    let request = r#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
    let a = post_chat(proxy.addr(), request).await;
    let fake = mock.requests()[0].clone();
    assert_eq!(fake.body_str(), request, "forwarded unchanged");
    assert_eq!(a.body, openai_like(&fake, &["Hello"]));
    assert!(a.text().contains("\"prompt_tokens\":7"), "{}", a.text());
}

#[tokio::test]
async fn the_route_switch_off_forwards_the_request_unchanged() {
    let mock = MockUpstream::start(|r| Reply::sse(&openai_like(r, &["Hello"]))).await;
    let routes = format!(
        "routes:\n  - name: vllm\n    protocol: openai_chat\n    path_prefix: /vllm\n    strip_prefix: /vllm\n    upstream: \"{}\"\n    request_usage: false\n",
        mock.base_url()
    );
    let proxy = start_config("", "validators: []\n", &routes).await;
    let a = send(
        proxy.addr(),
        "POST",
        "/vllm/v1/chat/completions",
        STREAM_REQUEST,
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(mock.requests()[0].body_str(), STREAM_REQUEST);
    assert_eq!(a.body, openai_chat_stream(&["Hello"]));
}

#[tokio::test]
async fn cost_budget_blocks_a_stream_over_budget_without_the_client_asking() {
    let pack =
        "validators:\n  - id: budget\n    type: cost_budget\n    params: { max_total_tokens: 5 }\n";
    let mock = MockUpstream::start(|r| Reply::sse(&openai_like(r, &["Hello"]))).await;
    let proxy = start_proxy(&mock.base_url(), pack, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert!(
        a.text()
            .ends_with(&block_frame("blocked by guardrail 'budget'")),
        "{}",
        a.text()
    );
    assert!(!a.text().contains("usage"), "{}", a.text());
}

#[tokio::test]
async fn an_answer_without_usage_is_estimated_and_labelled() {
    // An upstream that ignores `stream_options`, as some self-hosted servers do.
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["Hello", " there"]))).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", PRICES).await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.body, openai_chat_stream(&["Hello", " there"]));
    let body = scrape_until(proxy.addr(), "guardwire_tokens_total").await;
    for series in [
        // "hi"; "Hello there": o200k_base tokens.
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"input\",source=\"estimated\"} 1\n",
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"output\",source=\"estimated\"} 2\n",
        // (1 × 2.5 + 2 × 10) / 1e6 USD
        "guardwire_spend_usd_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",source=\"estimated\"} 0.0000225\n",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
    // cost_budget decides on the estimate: 3 tokens pass a budget of 5, not one of 2.
    for (max, blocked) in [(5, false), (2, true)] {
        let pack = format!(
            "validators:\n  - id: budget\n    type: cost_budget\n    params: {{ max_total_tokens: {max} }}\n"
        );
        let proxy = start_proxy(&mock.base_url(), &pack, "").await;
        let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
        let ends_blocked = a
            .text()
            .ends_with(&block_frame("blocked by guardrail 'budget'"));
        assert_eq!(ends_blocked, blocked, "{max}: {}", a.text());
    }
}

#[tokio::test]
async fn a_whole_answer_without_usage_is_estimated_too() {
    let answer = r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}]}"#;
    let mock = MockUpstream::start(move |_| Reply::json(200, answer)).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", PRICES).await;
    let a = post_chat(proxy.addr(), PLAIN_REQUEST).await;
    assert_eq!(a.text(), answer);
    // Not streamed: the request goes as it came.
    assert_eq!(mock.requests()[0].body_str(), PLAIN_REQUEST);
    let body = scrape_until(proxy.addr(), "guardwire_tokens_total").await;
    for series in [
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"input\",source=\"estimated\"} 1\n",
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"output\",source=\"estimated\"} 2\n",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
}

#[tokio::test]
async fn legacy_completions_streams_ask_for_usage_too() {
    const CHUNK: &str = r#"{"id":"c","object":"text_completion","choices":[{"index":0,"text":"Hello","finish_reason":"stop"}]}"#;
    let mock = MockUpstream::start(|r: &RecordedRequest| {
        let asked = r.body_json().is_some_and(|b| {
            b["stream_options"]["include_usage"] == serde_json::Value::Bool(true)
        });
        let usage = if asked {
            "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}}\n\n"
        } else {
            ""
        };
        Reply::sse(format!("data: {CHUNK}\n\n{usage}data: [DONE]\n\n").as_bytes())
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", PRICES).await;
    let a = send(
        proxy.addr(),
        "POST",
        "/v1/completions",
        r#"{"model":"gpt-4o","prompt":"Say hi","stream":true}"#,
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.text(), format!("data: {CHUNK}\n\ndata: [DONE]\n\n"));
    let body = scrape_until(proxy.addr(), "guardwire_tokens_total").await;
    assert!(
        body.contains("guardwire_tokens_total{route=\"openai_completions\",model=\"gpt-4o\",key_id=\"none\",kind=\"input\",source=\"provider\"} 4\n"),
        "{body}"
    );
}
