//! Header hygiene over real sockets: what of a client's request head reaches the upstream (each
//! protocol's allowlist, `forward_headers`, the client's account only with its own credential),
//! 415 for bodies guardwire cannot read as JSON, and logs that never quote a malformed frame.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::proxy::*;
use serde_json::json;

const PACK: &str =
    "validators:\n  - id: base\n    type: banned_words\n    params: { words: [alpha] }\n";

const ANTHROPIC_REQUEST: &str =
    r#"{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
const GEMINI_REQUEST: &str = r#"{"contents":[{"parts":[{"text":"hi"}]}]}"#;

/// A mock answering every protocol with a clean whole answer.
async fn mock() -> MockUpstream {
    MockUpstream::start(|req| {
        if req.path_and_query.contains("generateContent") {
            Reply::json(
                200,
                &json!({"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP","index":0}]}).to_string(),
            )
        } else if req.path_and_query.contains("messages") {
            Reply::json(
                200,
                &json!({"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"}).to_string(),
            )
        } else {
            Reply::sse(&openai_chat_stream(&["ok"]))
        }
    })
    .await
}

/// Headers every SDK-like client below sends, besides its protocol's own.
const NOISE: [(&str, &str); 5] = [
    ("x-forwarded-for", "10.1.2.3"),
    ("cookie", "session=1"),
    ("x-internal-team", "search"),
    ("anthropic-beta", "from-the-wrong-protocol"),
    ("content-type", "application/json"),
];

fn with_noise<'a>(own: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    own.iter().copied().chain(NOISE).collect()
}

/// The names of the headers the upstream saw, but for those every request gets from the
/// connection or from guardwire itself.
fn seen_names(mock: &MockUpstream, i: usize) -> Vec<String> {
    let mut names: Vec<String> = mock.requests()[i]
        .headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| {
            !matches!(
                k.as_str(),
                "host" | "content-length" | "accept-encoding" | "x-request-id"
            )
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn each_protocol_forwards_its_sdks_headers_and_nothing_else() {
    let mock = mock().await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "forward_headers: []").await;
    let addr = proxy.addr();
    // Without keys the client's own credential goes upstream, and the account it names.
    let openai = [
        ("authorization", "Bearer sk-client"),
        ("openai-organization", "org-1"),
        ("openai-project", "proj-1"),
        ("openai-beta", "assistants=v2"),
        ("x-stainless-lang", "python"),
        ("x-stainless-retry-count", "0"),
        ("user-agent", "OpenAI/Python 1.99"),
        ("accept", "application/json"),
    ];
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST,
        &with_noise(&openai),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        seen_names(&mock, 0),
        [
            "accept",
            "authorization",
            "content-type",
            "openai-beta",
            "openai-organization",
            "openai-project",
            "user-agent",
            "x-stainless-lang",
            "x-stainless-retry-count",
        ]
    );
    assert_eq!(
        mock.requests()[0].header("openai-organization"),
        Some("org-1")
    );

    let anthropic = [
        ("x-api-key", "sk-ant-client"),
        ("anthropic-version", "2023-06-01"),
        ("x-stainless-arch", "x64"),
        ("openai-organization", "org-1"),
    ];
    let own: Vec<(&str, &str)> = anthropic
        .into_iter()
        .chain(NOISE.into_iter().filter(|(k, _)| *k != "anthropic-beta"))
        .chain([("anthropic-beta", "prompt-caching-2024-07-31")])
        .collect();
    let a = send(addr, "POST", "/v1/messages", ANTHROPIC_REQUEST, &own).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        seen_names(&mock, 1),
        [
            "anthropic-beta",
            "anthropic-version",
            "content-type",
            "x-api-key",
            "x-stainless-arch",
        ]
    );

    let gemini = [
        ("x-goog-api-key", "g-client"),
        ("x-goog-api-client", "google-genai-sdk/1.0 gl-python/3.12"),
        ("x-stainless-lang", "python"),
    ];
    let a = send(
        addr,
        "POST",
        "/v1beta/models/g:generateContent",
        GEMINI_REQUEST,
        &with_noise(&gemini),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        seen_names(&mock, 2),
        ["content-type", "x-goog-api-client", "x-goog-api-key"]
    );
}

#[tokio::test]
async fn with_keys_the_client_picks_no_account_and_forward_headers_add_the_operators() {
    std::env::set_var("GUARDWIRE_TEST_HYGIENE_KEY", "sk-operator");
    let mock = mock().await;
    let extra = format!(
        r#"
forward_headers: [X-Internal-Team]
routes:
  - name: vllm
    protocol: openai_chat
    path_prefix: /vllm/
    strip_prefix: /vllm
    upstream: "{}"
    forward_headers: [x-forwarded-for, openai-organization]
keys:
  - id: team-a
    key: gw-team-a
    upstream_key_env: GUARDWIRE_TEST_HYGIENE_KEY
"#,
        mock.base_url()
    );
    let proxy = start_proxy_all(&mock.base_url(), PACK, &extra).await;
    let client = [
        ("authorization", "Bearer gw-team-a"),
        ("openai-organization", "org-of-the-operators-other-team"),
        ("openai-project", "proj-1"),
        ("openai-beta", "assistants=v2"),
    ];
    let headers = with_noise(&client);
    let a = send(
        proxy.addr(),
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST,
        &headers,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        seen_names(&mock, 0),
        [
            "authorization",
            "content-type",
            "openai-beta",
            "x-internal-team"
        ]
    );
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some("Bearer sk-operator")
    );
    // A route's own list replaces the top-level one; what the operator lists goes along.
    let a = send(
        proxy.addr(),
        "POST",
        "/vllm/v1/chat/completions",
        STREAM_REQUEST,
        &headers,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        seen_names(&mock, 1),
        [
            "authorization",
            "content-type",
            "openai-beta",
            "openai-organization",
            "x-forwarded-for",
        ]
    );
}

#[tokio::test]
async fn bodies_guardwire_cannot_read_as_json_get_415_in_the_providers_shape() {
    let mock = mock().await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let addr = proxy.addr();
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        "model=gpt-4o&messages=hi",
        &[("content-type", "application/x-www-form-urlencoded")],
    )
    .await;
    assert_eq!(a.status, 415);
    assert_eq!(a.json()["error"]["code"], "unsupported_media_type");
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("application/json"),
        "{}",
        a.text()
    );
    let a = send(
        addr,
        "POST",
        "/v1/messages",
        ANTHROPIC_REQUEST,
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
    )
    .await;
    assert_eq!(a.status, 415);
    assert_eq!(a.json()["type"], "error");
    assert_eq!(a.json()["error"]["type"], "invalid_request_error");
    let a = send(
        addr,
        "POST",
        "/v1beta/models/g:generateContent",
        GEMINI_REQUEST,
        &[("content-type", "text/plain")],
    )
    .await;
    assert_eq!(a.status, 415);
    assert_eq!(
        (
            a.json()["error"]["code"].as_u64(),
            a.json()["error"]["status"].as_str()
        ),
        (Some(415), Some("INVALID_ARGUMENT"))
    );
    assert_eq!(
        mock.request_count(),
        0,
        "nothing refused reaches the upstream"
    );

    // No Content-Type: read as JSON, and sent upstream as JSON.
    let a = send(addr, "POST", "/v1/chat/completions", STREAM_REQUEST, &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        mock.requests()[0].header("content-type"),
        Some("application/json")
    );
    let a = send(
        addr,
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST,
        &[("content-type", "application/json; charset=utf-8")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
}

#[tokio::test]
async fn a_malformed_frame_is_logged_by_kind_and_position_never_by_content() {
    const SECRET: &str = "sk-live-model-said-this-9f2c";
    let mock = MockUpstream::start(|_| {
        Reply::sse(format!("data: {{\"choices\":\"{SECRET}\"}}\n\n").as_bytes())
    })
    .await;
    let config = format!(
        "listen: \"127.0.0.1:0\"\nupstreams:\n  openai: \"{}\"\npacks: [config/packs/default.yaml]\nlog:\n  format: json\n",
        mock.base_url()
    );
    let (serve, _dir) = common::binary::serve(&config).await;
    let a = send(
        serve.addr,
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST,
        &[("content-type", "application/json")],
    )
    .await;
    assert!(!a.text().contains(SECRET), "{}", a.text());
    let lines = serve.stop().await;
    let warned: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("malformed upstream frame"))
        .collect();
    assert_eq!(warned.len(), 1, "{lines:#?}");
    assert!(warned[0].contains("line 1, column"), "{}", warned[0]);
    for line in &lines {
        assert!(!line.contains(SECRET), "{line}");
    }
}

/// Round 11: the headers of an answer reach the client (and its SDK: the MCP client keeps
/// `Mcp-Session-Id` and reads `WWW-Authenticate`), so they are checked as the answer is: a
/// banned word in a header's value, or a secret as a value or a name (HTTP lowercases
/// names), is the block — before
/// any of the answer is sent, streamed or whole, an error status too — on the LLM routes and
/// the MCP route; clean headers are relayed.
#[tokio::test]
async fn answer_headers_are_checked_before_they_are_relayed() {
    let pack = "validators:\n  - id: base\n    type: banned_words\n    params: { words: [alpha] }\n  - id: keys\n    type: regex\n    params: { pattern: \"AKIA[0-9A-Z]{16}|sk-abc123\", expect_match: false }\n";
    let up = MockUpstream::start(|req| {
        let (name, value) = match req.header("x-case") {
            Some("word") => (
                "www-authenticate",
                "Bearer error_description=\"the alpha key\"",
            ),
            Some("secret") => ("mcp-session-id", "AKIAABCDEFGHIJKLMNOP"),
            Some("name") => ("x-sk-abc123", "1"),
            _ => ("x-fine", "all good"),
        };
        let status = if req.header("x-error").is_some() {
            429
        } else {
            200
        };
        let reply = if req.path_and_query.starts_with("/mcp") {
            Reply::json(status, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        } else if status == 429 {
            Reply::json(status, r#"{"error":{"message":"slow down"}}"#)
        } else {
            Reply::sse(&openai_chat_stream(&["ok"]))
        };
        reply.with_header(name, value)
    })
    .await;
    let extra = format!(
        "forward_headers: [x-case, x-error]\nroutes:\n  - {{ name: tools, protocol: mcp, path_prefix: /mcp, upstream: \"{}/mcp\" }}\n",
        up.base_url()
    );
    let proxy = start_proxy(&up.base_url(), pack, &extra).await;
    let chat = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mcp = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for (path, body) in [("/v1/chat/completions", chat), ("/mcp", mcp)] {
        for error in [false, true] {
            for case in ["fine", "word", "secret", "name"] {
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("x-case", case),
                ];
                if error {
                    headers.push(("x-error", "1"));
                }
                let a = send(proxy.addr(), "POST", path, body.to_string(), &headers).await;
                let all = format!("{:?} {}", a.headers, a.text());
                if case == "fine" {
                    assert_eq!(a.headers["x-fine"], "all good", "{path} {error}: {all}");
                } else {
                    assert!(!all.contains("alpha key"), "{path} {case}: {all}");
                    assert!(
                        !all.contains("AKIAABCDEFGHIJKLMNOP"),
                        "{path} {case}: {all}"
                    );
                    assert!(!all.contains("sk-abc123"), "{path} {case}: {all}");
                    assert!(
                        all.contains("base") || all.contains("keys") || all.contains("locked"),
                        "{path} {case} {error}: {all}"
                    );
                }
            }
        }
    }
}
