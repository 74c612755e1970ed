//! Policy selection: configured routes (Azure deployment paths, an OpenAI-compatible server under
//! a prefix) with their own packs, and client keys that pick packs, authenticate (401 in each
//! provider's shape) and are swapped for the provider key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::proxy::*;
use serde_json::json;

const PACK: &str =
    "validators:\n  - id: base\n    type: banned_words\n    params: { words: [alpha] }\n";

fn write_pack(dir: &std::path::Path, name: &str, word: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("validators:\n  - id: {name}\n    type: banned_words\n    params: {{ words: [{word}], direction: both }}\n"),
    )
    .unwrap();
    path.display().to_string()
}

/// A mock answering every chat request with `text`.
async fn chat_mock(text: &'static str) -> MockUpstream {
    MockUpstream::start(move |_| Reply::sse(&openai_chat_stream(&[text]))).await
}

#[tokio::test]
async fn routes_send_path_prefixes_to_their_upstream_with_their_packs() {
    let dir = tempfile::tempdir().unwrap();
    let strict = write_pack(dir.path(), "strict", "beta");
    let azure = chat_mock("beta is fine here").await;
    let vllm = chat_mock("beta is not fine here").await;
    let default = chat_mock("hello").await;
    let extra = format!(
        r#"
routes:
  - name: azure
    protocol: openai_chat
    path_prefix: /openai/deployments/
    upstream: "{}"
  - name: vllm
    protocol: openai_chat
    path_prefix: /vllm/
    strip_prefix: /vllm
    upstream: "{}"
    packs: ["{strict}"]
"#,
        azure.base_url(),
        vllm.base_url()
    );
    let proxy = start_proxy(&default.base_url(), PACK, &extra).await;
    let path = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21";
    let a = send(
        proxy.addr(),
        "POST",
        path,
        STREAM_REQUEST,
        &[("api-key", "az")],
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(a.text().contains("beta is fine"), "{}", a.text());
    let seen = &azure.requests()[0];
    assert_eq!(seen.path_and_query, path);
    // Without client keys configured, the client's own credentials pass through.
    assert_eq!(seen.header("api-key"), Some("az"));

    let a = send(
        proxy.addr(),
        "POST",
        "/vllm/v1/chat/completions",
        STREAM_REQUEST,
        &[],
    )
    .await;
    assert!(
        a.text().contains("blocked by guardrail 'strict'"),
        "{}",
        a.text()
    );
    assert_eq!(vllm.requests()[0].path_and_query, "/v1/chat/completions");

    // The standard path keeps the top-level packs.
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert!(a.text().contains("hello"), "{}", a.text());
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_blocked_total{validator="strict",phase="stream",route="vllm"}"#),
        "{m}"
    );
    assert!(
        m.lines().any(
            |l| l.starts_with(r#"guardwire_requests_total{route="azure","#)
                && l.contains(r#"status="200""#)
        ),
        "{m}"
    );
}

#[tokio::test]
async fn bad_routes_are_config_errors_naming_the_route() {
    for (yaml, needle) in [
        ("routes: [{name: a, protocol: soap, path_prefix: /x/, upstream: \"http://127.0.0.1:1\"}]", "routes[0] (a): protocol"),
        ("routes: [{name: openai_chat, protocol: gemini, path_prefix: /x/, upstream: \"http://127.0.0.1:1\"}]", "routes[0] (openai_chat): name"),
        ("routes: [{name: a, protocol: gemini, path_prefix: x, upstream: \"http://127.0.0.1:1\"}]", "path_prefix"),
        ("routes: [{name: a, protocol: gemini, path_prefix: /x/, upstream: \"ftp://h\"}]", "routes[0] (a): upstream"),
        ("keys: [{id: k}]", "keys[0] (k): exactly one of key_env and key"),
        ("keys: [{id: k, key_env: GUARDWIRE_TEST_SURELY_UNSET}]", "GUARDWIRE_TEST_SURELY_UNSET is not set"),
    ] {
        let e = guardwire::config::Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.contains(needle), "{yaml}: {e}");
    }
}

#[tokio::test]
async fn client_keys_authenticate_pick_packs_and_are_swapped_for_the_provider_key() {
    std::env::set_var("GUARDWIRE_TEST_PROVIDER_KEY", "sk-provider-secret");
    let dir = tempfile::tempdir().unwrap();
    let strict = write_pack(dir.path(), "team-b-pack", "beta");
    let audit = dir.path().join("audit.jsonl");
    let mock = MockUpstream::start(|req| {
        if req.path_and_query.contains("Content") {
            let frame = json!({"candidates":[{"content":{"role":"model","parts":[{"text":"beta"}]},"index":0}]});
            Reply::sse(format!("data: {frame}\n\n").as_bytes())
        } else {
            Reply::sse(&openai_chat_stream(&["beta"]))
        }
    })
    .await;
    let extra = format!(
        r#"
keys:
  - id: team-a
    key: gw-team-a
    upstream_key_env: GUARDWIRE_TEST_PROVIDER_KEY
  - id: team-b
    key: gw-team-b
    packs: ["{strict}"]
audit:
  path: "{}"
"#,
        audit.display()
    );
    let proxy = start_proxy_all(&mock.base_url(), PACK, &extra).await;

    // No key, or a wrong one: 401 in each provider's shape, before the provider is called.
    let addr = proxy.addr();
    let chat = |key: &'static str| async move {
        let headers: Vec<(&str, &str)> = if key.is_empty() {
            vec![]
        } else {
            vec![("authorization", key)]
        };
        send(
            addr,
            "POST",
            "/v1/chat/completions",
            STREAM_REQUEST,
            &headers,
        )
        .await
    };
    let a = chat("").await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["code"], "invalid_api_key");
    assert_eq!(chat("Bearer gw-team-").await.status, 401);
    let a = send(
        proxy.addr(),
        "POST",
        "/v1/messages",
        r#"{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("x-api-key", "nope")],
    )
    .await;
    assert_eq!(
        (a.status.as_u16(), a.json()["error"]["type"].as_str()),
        (401, Some("authentication_error"))
    );
    let a = send(
        proxy.addr(),
        "POST",
        "/v1beta/models/g:generateContent",
        r#"{"contents":[{"parts":[{"text":"hi"}]}]}"#,
        &[],
    )
    .await;
    assert_eq!(
        (a.status.as_u16(), a.json()["error"]["status"].as_str()),
        (401, Some("UNAUTHENTICATED"))
    );
    assert_eq!(mock.request_count(), 0);

    // team-a: the provider key replaces the client's, whatever header or parameter it came in.
    let a = chat("Bearer gw-team-a").await;
    assert!(a.text().contains("beta"), "{}", a.text());
    let seen = &mock.requests()[0];
    assert_eq!(
        seen.header("authorization"),
        Some("Bearer sk-provider-secret")
    );
    let a = send(
        proxy.addr(),
        "POST",
        "/v1beta/models/g:streamGenerateContent?alt=sse&key=gw-team-a",
        r#"{"contents":[{"parts":[{"text":"hi"}]}]}"#,
        &[],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = &mock.requests()[1];
    assert_eq!(
        seen.path_and_query,
        "/v1beta/models/g:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen.header("x-goog-api-key"), Some("sk-provider-secret"));
    assert_eq!(seen.header("authorization"), None);

    // team-b has its own pack; without an upstream key, no key goes upstream at all.
    let a = chat("Bearer gw-team-b").await;
    assert!(
        a.text().contains("blocked by guardrail 'team-b-pack'"),
        "{}",
        a.text()
    );
    let seen = &mock.requests()[2];
    assert_eq!(seen.header("authorization"), None);

    // The key's packs also judge its requests before the provider is called.
    let asks_beta = STREAM_REQUEST.replace("\"hi\"", "\"say beta\"");
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        asks_beta.clone(),
        &[("authorization", "Bearer gw-team-b")],
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        asks_beta,
        &[("authorization", "Bearer gw-team-a")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());

    let log = std::fs::read_to_string(&audit).unwrap();
    let line: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(line["key_id"], "team-b");
    for secret in ["gw-team-a", "gw-team-b", "sk-provider-secret"] {
        assert!(!log.contains(secret), "{log}");
    }
}

/// A configured route serves its protocol's operation only: any other path under its prefix
/// (a vLLM server's `/v1/audio/speech`, say) would pass with no check in either
/// direction, so it answers 404 in the protocol's shape and never reaches the upstream — unless
/// the route lists it in `passthrough_paths`, which forwards it unchecked, any method.
#[tokio::test]
async fn routes_serve_only_their_protocols_operation_and_listed_passthrough_paths() {
    let vllm = MockUpstream::start(|req| {
        if req.path_and_query == "/v1/models" {
            Reply::json(200, r#"{"object":"list","data":[{"id":"m"}]}"#)
        } else {
            Reply::sse(&openai_chat_stream(&["fine"]))
        }
    })
    .await;
    let extra = format!(
        "routes:\n  - {{ name: vllm, protocol: openai_chat, path_prefix: /vllm/, strip_prefix: /vllm, upstream: \"{}\", passthrough_paths: [/v1/models] }}\n",
        vllm.base_url()
    );
    let proxy = start_proxy(&vllm.base_url(), PACK, &extra).await;
    let completions = json!({"model": "m", "prompt": "say something", "stream": true}).to_string();
    for path in [
        // Empty and dot segments: an upstream merging them would run another operation.
        "/vllm/v1/chat//completions",
        "/vllm/v1/chat/./completions",
        "/vllm/v1/audio/speech",
        "/vllm/v1/responses",
        "/vllm/v1/chat/completions/x",
    ] {
        let a = send(
            proxy.addr(),
            "POST",
            path,
            completions.clone(),
            &[("content-type", "application/json")],
        )
        .await;
        assert_eq!(
            a.status,
            http::StatusCode::NOT_FOUND,
            "{path}: {}",
            a.text()
        );
        assert_eq!(a.json()["error"]["code"], "not_found", "{path}");
        assert!(a.text().contains("passthrough_paths"), "{}", a.text());
    }
    assert_eq!(
        vllm.request_count(),
        0,
        "nothing unchecked reached the upstream"
    );

    let a = send(proxy.addr(), "GET", "/vllm/v1/models", "", &[]).await;
    assert_eq!(a.status, http::StatusCode::OK, "{}", a.text());
    assert_eq!(a.json()["data"][0]["id"], "m");
    let a = post_chat_to(proxy.addr(), "/vllm/v1/chat/completions").await;
    assert_eq!(a.body, openai_chat_stream(&["fine"]));
    let seen: Vec<(String, String)> = vllm
        .requests()
        .iter()
        .map(|r| (r.method.to_string(), r.path_and_query.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET".to_owned(), "/v1/models".to_owned()),
            ("POST".to_owned(), "/v1/chat/completions".to_owned())
        ]
    );

    let e = guardwire::config::Config::from_yaml(
        "routes: [{name: a, protocol: openai_chat, path_prefix: /a/, upstream: \"http://h\", passthrough_paths: [v1/models]}]",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("routes[0] (a): passthrough_paths"), "{e}");
}

async fn post_chat_to(addr: std::net::SocketAddr, path: &str) -> Answer {
    send(
        addr,
        "POST",
        path,
        STREAM_REQUEST,
        &[("content-type", "application/json")],
    )
    .await
}
