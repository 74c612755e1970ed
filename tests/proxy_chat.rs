//! End-to-end tests of the OpenAI Chat Completions path: exact bytes on the wire.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, sse_data_frames, Chunk, MockUpstream, Reply};
use common::proxy::*;
use std::time::Duration;

const BANNED_PACK: &str = r#"
validators:
  - id: no-forbidden
    type: banned_words
    message: "Blocked: forbidden word."
    params: { words: ["forbidden fruit", "café"] }
  - id: no-ssn
    type: regex
    params: { pattern: "\\b\\d{3}-\\d{2}-\\d{4}\\b", expect_match: false }
  - id: no-secret-input
    type: content_excludes
    params: { patterns: ["top secret"], direction: input }
"#;

/// A mock that serves `body`, split at the byte offsets given in the `x-split` request header.
async fn split_mock(body: Vec<u8>) -> MockUpstream {
    MockUpstream::start(move |req| {
        let splits: Vec<usize> = req
            .header("x-split")
            .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default();
        Reply::sse_split(&body, &splits, Duration::ZERO)
    })
    .await
}

async fn post_split(addr: std::net::SocketAddr, splits: &str) -> Answer {
    send(
        addr,
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST.to_owned(),
        &[("content-type", "application/json"), ("x-split", splits)],
    )
    .await
}

#[tokio::test]
async fn clean_stream_is_byte_identical_at_every_split() {
    let body = openai_chat_stream(&[
        "Hello ",
        "wor",
        "ld, ",
        "un café? ",
        "No: ",
        "cafés and 123-45-678.",
    ]);
    let mock = split_mock(body.clone()).await;
    // "café" is banned (word boundary) but "cafés" is not, and "un café?"... is: use a clean text.
    let pack = BANNED_PACK.replace("\"café\"", "\"latte\"");
    let proxy = start_proxy(&mock.base_url(), &pack, "").await;
    for split in 0..body.len() {
        let a = post_split(proxy.addr(), &split.to_string()).await;
        assert_eq!(a.status, 200);
        assert_eq!(
            a.text(),
            String::from_utf8(body.clone()).unwrap(),
            "split at {split}"
        );
    }
    let every = post_split(
        proxy.addr(),
        &(1..body.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
    )
    .await;
    assert_eq!(every.body, body, "one byte per read");
    assert!(every.headers.contains_key("x-request-id"));
    assert_eq!(every.headers["content-type"], "text/event-stream");
}

/// The violating match is split across deltas; wherever the upstream stream is cut, the client
/// gets exactly the frames before the match, then the error frame — no byte of the match.
#[tokio::test]
async fn no_prefix_of_a_match_leaks_at_any_split_point() {
    let cases: &[(&[&str], usize)] = &[
        // (deltas, number of leading frames that are clean: role frame + clean deltas)
        (
            &["The answer is ", "the forb", "idden fr", "uit itself", "."],
            2,
        ),
        (&["un ca", "f", "é", " noir"], 1),
        (&["ssn: ", "123-4", "5-6789", " ok"], 2),
    ];
    for (deltas, clean_frames) in cases {
        let body = openai_chat_stream(deltas);
        let all = frames(&body);
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
        let msg = |text: &str| -> String {
            if text.contains("ssn") {
                "blocked by guardrail 'no-ssn'".into()
            } else {
                "Blocked: forbidden word.".into()
            }
        };
        let joined = deltas.concat();
        let mut expected: Vec<u8> = all[..*clean_frames].concat();
        expected.extend_from_slice(block_frame(&msg(&joined)).as_bytes());
        for split in 0..body.len() {
            for second in [split + 1, split + 7] {
                let a = post_split(proxy.addr(), &format!("{split},{second}")).await;
                assert_eq!(a.status, 200);
                assert_eq!(
                    a.text(),
                    String::from_utf8(expected.clone()).unwrap(),
                    "case {deltas:?} split at {split},{second}"
                );
                assert!(!a.text().contains("[DONE]"));
            }
        }
    }
}

#[tokio::test]
async fn a_block_cancels_the_upstream_request() {
    let head = openai_chat_stream(&["Now the forbidden", " fruit."]);
    // Drop the [DONE] and keep the upstream body open: only guardwire can end it.
    let head = head[..head.len() - "data: [DONE]\n\n".len()].to_vec();
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, vec![Chunk::now(head.clone())])
            .with_header("content-type", "text/event-stream")
            .then_hang()
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert!(a.text().ends_with(&block_frame("Blocked: forbidden word.")));
    assert!(
        mock.wait_for_cancelled(1, Duration::from_secs(10)).await,
        "upstream not cancelled"
    );
}

#[tokio::test]
async fn tool_call_arguments_are_checked_like_text() {
    let frames_json = [
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ssn\": \"123-"}}]},"finish_reason":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"45-6789\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ];
    let mut body = sse_data_frames(&frames_json);
    body.extend_from_slice(b"data: [DONE]\n\n");
    let all = frames(&body);
    let mock = split_mock(body).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = post_split(proxy.addr(), "").await;
    let mut expected = all[0].clone();
    expected.extend_from_slice(block_frame("blocked by guardrail 'no-ssn'").as_bytes());
    assert_eq!(a.text(), String::from_utf8(expected).unwrap());
}

#[tokio::test]
async fn a_second_choice_is_checked_too() {
    let body = sse_data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"content":"fine"}},{"index":1,"delta":{"content":"the forbidden "}}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"fruit"}}]}"#,
    ]);
    let mock = split_mock(body).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    // Asked for two choices: the second is read as its own.
    let two = STREAM_REQUEST.replacen('{', "{\"n\":2,", 1);
    let headers = [("content-type", "application/json"), ("x-split", "")];
    let a = send(proxy.addr(), "POST", "/v1/chat/completions", two, &headers).await;
    assert_eq!(a.text(), block_frame("Blocked: forbidden word."));
    // Asked for one: a second choice answers nothing asked (an app reading `choices[0]` by
    // position would join it to the first): the stream ends as malformed, none of it relayed.
    let a = post_split(proxy.addr(), "").await;
    assert!(a.text().contains("upstream_error"), "{}", a.text());
    assert!(
        !a.text().contains("fine") && !a.text().contains("forbidden"),
        "{}",
        a.text()
    );
}

#[tokio::test]
async fn input_violation_answers_400_and_never_reaches_upstream() {
    let mock = split_mock(openai_chat_stream(&["hi"])).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = post_chat(
        proxy.addr(),
        r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"this is TOP SECRET"}]}"#,
    )
    .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.headers["x-should-retry"], "false");
    assert_eq!(
        a.json(),
        serde_json::json!({"error":{"message":"blocked by guardrail 'no-secret-input'","type":"guardrail_violation","param":null,"code":"content_blocked"}})
    );
    assert_eq!(mock.request_count(), 0);
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_blocked_total{validator="no-secret-input",phase="input",route="openai_chat"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn non_streamed_responses_are_checked_whole() {
    let clean = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"all good"},"finish_reason":"stop"}]}"#;
    let bad = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the Forbidden Fruit"},"finish_reason":"stop"}]}"#;
    let mock = MockUpstream::start(move |req| {
        if req.body_str().contains("bad") {
            Reply::json(200, bad)
        } else {
            Reply::json(200, clean)
        }
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let ok = post_chat(proxy.addr(), PLAIN_REQUEST).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.text(), clean, "passed through unchanged");
    let blocked = post_chat(proxy.addr(), &PLAIN_REQUEST.replace("hi", "bad")).await;
    assert_eq!(blocked.status, 400);
    assert_eq!(blocked.headers["x-should-retry"], "false");
    assert_eq!(blocked.json()["error"]["code"], "content_blocked");
    assert!(!blocked.text().contains("Fruit"));
    let m = metrics(proxy.addr()).await;
    assert!(m.contains(r#"guardwire_blocked_total{validator="no-forbidden",phase="response",route="openai_chat"} 1"#), "{m}");
}

#[tokio::test]
async fn whole_response_checks_end_the_stream_with_the_error_frame() {
    let body = openai_chat_stream(&["no ticket ", "here"]);
    let all = frames(&body);
    let mock = split_mock(body).await;
    let pack = "validators:\n  - id: needs-ticket\n    type: regex\n    params: { pattern: 'ticket #\\d+' }\n";
    let proxy = start_proxy(&mock.base_url(), pack, "").await;
    let a = post_split(proxy.addr(), "").await;
    // Text was released as it streamed; the end is the error frame instead of [DONE].
    let mut expected = all[..all.len() - 1].concat();
    expected.extend_from_slice(block_frame("blocked by guardrail 'needs-ticket'").as_bytes());
    assert_eq!(a.text(), String::from_utf8(expected).unwrap());
}

#[tokio::test]
async fn monitor_mode_counts_but_never_blocks() {
    let body = openai_chat_stream(&["the forbidden ", "fruit is sweet"]);
    let mock = split_mock(body.clone()).await;
    let pack = "validators:\n  - id: shadow\n    type: banned_words\n    mode: monitor\n    params: { words: ['forbidden fruit'] }\n";
    let proxy = start_proxy(&mock.base_url(), pack, "").await;
    let a = post_split(proxy.addr(), "5").await;
    assert_eq!(a.body, body);
    let m = metrics(proxy.addr()).await;
    assert!(m.contains(r#"guardwire_monitor_hits_total{validator="shadow",phase="stream",route="openai_chat"} 1"#), "{m}");
}

#[tokio::test]
async fn headers_pass_through_minus_hop_by_hop() {
    let mock = MockUpstream::start(|_| {
        Reply::sse(&openai_chat_stream(&["ok"]))
            .with_header("x-upstream", "yes")
            .with_header("openai-processing-ms", "12")
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = send(
        proxy.addr(),
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST.to_owned(),
        &[
            ("authorization", "Bearer sk-abc"),
            ("openai-organization", "org-1"),
            ("x-request-id", "req-42"),
            ("te", "trailers"),
            ("accept-encoding", "gzip"),
        ],
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.headers["x-upstream"], "yes");
    assert_eq!(a.headers["x-request-id"], "req-42");
    let seen = &mock.requests()[0];
    assert_eq!(seen.header("authorization"), Some("Bearer sk-abc"));
    assert_eq!(seen.header("openai-organization"), Some("org-1"));
    assert_eq!(seen.header("x-request-id"), Some("req-42"));
    assert_eq!(seen.header("te"), None);
    assert_eq!(seen.header("accept-encoding"), Some("identity"));
    assert_eq!(seen.path_and_query, "/v1/chat/completions");
    // The client's bytes, and the stream's usage asked for (tests/usage.rs).
    assert_eq!(
        seen.body_str(),
        STREAM_REQUEST.trim_end_matches('}').to_owned()
            + ",\"stream_options\":{\"include_usage\":true}}",
        "request body forwarded unchanged but for the usage asked for"
    );
}

#[tokio::test]
async fn upstream_errors_pass_through_unchanged() {
    let err = r#"{"error":{"message":"Rate limit","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let mock =
        MockUpstream::start(move |_| Reply::json(429, err).with_header("retry-after", "3")).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, 429);
    assert_eq!(a.text(), err);
    assert_eq!(a.headers["retry-after"], "3");
}

#[tokio::test]
async fn bad_input_gets_the_openai_error_shape() {
    let mock = MockUpstream::start(|_| Reply::Hang).await;
    let proxy = start_proxy(
        &mock.base_url(),
        BANNED_PACK,
        "limits: { max_request_bytes: 1000 }\ntimeouts: { response_headers_ms: 300 }",
    )
    .await;
    let cases = [
        (
            post_chat(proxy.addr(), "{not json").await,
            400,
            "invalid_request",
        ),
        (
            send(proxy.addr(), "POST", "/v1/nowhere", "{}", &[]).await,
            404,
            "not_found",
        ),
        (
            post_chat(
                proxy.addr(),
                &format!("{{\"messages\":[],\"x\":\"{}\"}}", "a".repeat(2000)),
            )
            .await,
            413,
            "request_too_large",
        ),
        (
            post_chat(proxy.addr(), STREAM_REQUEST).await,
            504,
            "upstream_timeout",
        ),
        (
            send(proxy.addr(), "GET", "/v1/chat/completions", "", &[]).await,
            405,
            "method_not_allowed",
        ),
    ];
    for (a, status, code) in cases {
        assert_eq!(a.status, status, "{}", a.text());
        assert_eq!(a.json()["error"]["code"], code, "{}", a.text());
        assert!(a.json()["error"]["message"].is_string());
    }
    // A refused connection: nothing listens on the port of a dropped mock.
    let dead = MockUpstream::start(|_| Reply::Reset).await;
    let dead_url = dead.base_url();
    drop(dead);
    let proxy = start_proxy(&dead_url, BANNED_PACK, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, 502);
    assert_eq!(a.json()["error"]["code"], "upstream_unavailable");
    // The client is told why, naming the configured upstream (not only the log).
    let authority = dead_url.trim_start_matches("http://");
    let message = a.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with(&format!(
            "the upstream could not be reached: could not connect to {authority}: "
        )),
        "{message}"
    );
    // A name that does not resolve (`.invalid` never does, RFC 6761).
    let proxy = start_proxy("http://no-such-upstream.invalid:8000", BANNED_PACK, "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert_eq!(a.status, 502);
    let message = a.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with(
            "the upstream could not be reached: could not resolve no-such-upstream.invalid:8000: "
        ),
        "{message}"
    );
}

#[tokio::test]
async fn an_unconfigured_provider_answers_404() {
    let yaml = "listen: \"127.0.0.1:0\"\n";
    let server = guardwire::server::start(guardwire::config::Config::from_yaml(yaml).unwrap())
        .await
        .unwrap();
    let a = post_chat(server.addr, STREAM_REQUEST).await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn malformed_upstream_frames_end_the_stream_with_an_error_frame() {
    let mut body = openai_chat_stream(&["fine so far"]);
    body.truncate(body.len() - "data: [DONE]\n\n".len());
    body.extend_from_slice(b"data: {broken\n\n");
    let mock = split_mock(body.clone()).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let a = post_split(proxy.addr(), "").await;
    let text = a.text();
    assert!(text.contains("fine so far"));
    assert!(
        text.ends_with("\"code\":\"upstream_unavailable\"}}\n\n"),
        "{text}"
    );
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_upstream_errors_total{route="openai_chat",kind="malformed"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn metrics_and_health_endpoints() {
    let body = openai_chat_stream(&["the forbidden fruit"]);
    let mock = split_mock(body).await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
    let h = send(proxy.addr(), "GET", "/healthz", "", &[]).await;
    assert_eq!((h.status.as_u16(), h.text().as_str()), (200, "ok\n"));
    post_split(proxy.addr(), "3").await;
    let m = metrics(proxy.addr()).await;
    for needle in [
        r#"guardwire_requests_total{route="openai_chat",model="other",status="200"} 1"#,
        r#"guardwire_blocked_total{validator="no-forbidden",phase="stream",route="openai_chat"} 1"#,
        "guardwire_streams_in_flight 0",
        r#"guardwire_latency_overhead_seconds_count{route="openai_chat",model="other"} 1"#,
    ] {
        assert!(m.contains(needle), "missing {needle} in\n{m}");
    }
}

#[tokio::test]
async fn a_stalled_upstream_ends_the_stream_with_an_error_frame() {
    let mut head = openai_chat_stream(&["partial answer"]);
    head.truncate(head.len() - "data: [DONE]\n\n".len());
    let expected_prefix = head.clone();
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, vec![Chunk::now(head.clone())])
            .with_header("content-type", "text/event-stream")
            .then_hang()
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "timeouts: { idle_ms: 200 }").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    let text = a.text();
    assert!(text.starts_with(std::str::from_utf8(&expected_prefix).unwrap()));
    assert!(
        text.ends_with("\"code\":\"upstream_timeout\"}}\n\n"),
        "{text}"
    );
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
}

#[tokio::test]
async fn an_undecided_unbounded_pattern_fails_closed_at_the_holdback_limit() {
    let long = "x".repeat(400);
    let deltas: Vec<&str> = vec!["begin ", &long, &long, &long, " end"];
    let body = openai_chat_stream(&deltas);
    let all = frames(&body);
    let mock = split_mock(body).await;
    let pack = "validators:\n  - type: regex\n    params: { pattern: 'begin.*finish', expect_match: false }\n";
    let proxy = start_proxy(
        &mock.base_url(),
        pack,
        "limits: { max_holdback_bytes: 1000 }",
    )
    .await;
    let a = post_split(proxy.addr(), "").await;
    let text = a.text();
    // Only the role frame was safe; "begin" keeps everything after it undecided.
    assert!(text.starts_with(std::str::from_utf8(&all[0]).unwrap()));
    assert!(!text.contains("begin"), "{text}");
    assert!(
        text.ends_with("\"code\":\"holdback_exceeded\"}}\n\n"),
        "{text}"
    );
}

/// A whole answer over the size that is checked off the async worker (64 KiB, `offload.rs`):
/// the same verdicts as a small one — the banned phrase at its very end blocks it, a clean one
/// passes byte for byte — with the check run on the blocking pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_whole_answers_are_checked_off_the_worker_with_the_same_verdicts() {
    let filler = "All quiet on the river today. ".repeat(4_000);
    for (tail, blocked) in [
        ("and a forbidden fruit.", true),
        ("and nothing more.", false),
    ] {
        let content = format!("{filler}{tail}");
        let body = serde_json::json!({
            "id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]
        })
        .to_string();
        assert!(body.len() > 100_000);
        let mock = MockUpstream::start({
            let body = body.clone();
            move |_| Reply::json(200, &body)
        })
        .await;
        let proxy = start_proxy(&mock.base_url(), BANNED_PACK, "").await;
        let a = post_chat(
            proxy.addr(),
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
        )
        .await;
        if blocked {
            assert_eq!(a.status, 400, "{}", &a.text()[..200.min(a.text().len())]);
            assert!(!a.text().contains("forbidden fruit"));
        } else {
            assert_eq!(a.status, 200);
            assert_eq!(a.text(), body);
        }
    }
}

/// A request over the size that is checked off the async worker (64 KiB): BeforeCall on the
/// blocking pool gives the same verdicts — the banned phrase at its very end is refused before
/// the provider is called, a clean one goes upstream as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_requests_are_checked_off_the_worker_with_the_same_verdicts() {
    let pack = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: input }\n";
    let mock = MockUpstream::start(|_| {
        Reply::json(
            200,
            r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}"#,
        )
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), pack, "").await;
    let filler = "All <b>quiet</b> on the river today. ".repeat(3_000);
    for (tail, blocked) in [
        ("and a forbidden fruit.", true),
        ("and nothing more.", false),
    ] {
        let body = serde_json::json!({"model": "m",
            "messages": [{"role": "user", "content": format!("{filler}{tail}")}]})
        .to_string();
        assert!(body.len() > 100_000);
        let before = mock.request_count();
        let a = post_chat(proxy.addr(), &body).await;
        if blocked {
            assert_eq!(a.status, 400, "{}", &a.text()[..200.min(a.text().len())]);
            assert_eq!(mock.request_count(), before, "refused before the call");
        } else {
            assert_eq!(a.status, 200, "{}", a.text());
            assert_eq!(mock.request_count(), before + 1);
            assert_eq!(mock.requests().last().unwrap().body_str(), body);
        }
    }
}

/// A chat stream's structural strings (`id`, `system_fingerprint`, `obfuscation`, …) skip the
/// word and phrase checks but not the secret patterns — on the fast path too, where a frame
/// read in full skips the fallback: a key in the first chunk's `system_fingerprint`, or in a
/// later chunk's `id` that its template does not have, ends the stream before it reaches the
/// client; a clean stream with changing ids passes.
#[tokio::test]
async fn structural_strings_meet_the_secret_patterns_on_the_fast_path() {
    const KEY: &str = "sk-ABCDEFGHIJKLMNOPQRSTUVWX";
    let pack = "validators:\n  - id: no-keys\n    type: regex\n    params: { pattern: \"sk-[A-Za-z0-9]{24}\", expect_match: false }\n";
    let chunk = |id: &str, fp: &str, text: &str| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m",
                "system_fingerprint": fp, "choices": [{"index": 0, "delta": {"content": text}}]})
        )
    };
    for (chunks, leaks) in [
        (
            vec![chunk("c1", KEY, "Hello"), chunk("c1", KEY, " there")],
            true,
        ),
        (
            vec![
                chunk("c1", "fp", "Hello"),
                chunk("c1", "fp", " there"),
                chunk(KEY, "fp", " friend"),
            ],
            true,
        ),
        (
            vec![
                chunk("c1", "fp", "Hello"),
                chunk("c2", "fp", " there"),
                chunk("c3", "fp2", " friend"),
            ],
            false,
        ),
        // A tool call's id and a finish reason, read by the fast path as known strings
        // (before the fix no check read them).
        (
            vec![
                chunk("c1", "fp", "Hello"),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": KEY, "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": null}]})
                ),
            ],
            true,
        ),
        (
            vec![
                chunk("c1", "fp", "Hello"),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": KEY}]})
                ),
            ],
            true,
        ),
        // A later chunk of a call: its id without a name (no delta carries it), plain and
        // escaped, and a call with no function at all.
        (
            vec![
                chunk("c1", "fp", "Hello"),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "f", "arguments": ""}}]}, "finish_reason": null}]})
                ),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": KEY,
                            "function": {"arguments": "{}"}}]}, "finish_reason": null}]})
                ),
            ],
            true,
        ),
        (
            vec![
                chunk("c1", "fp", "Hello"),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": KEY}]}, "finish_reason": null}]})
                ),
            ],
            true,
        ),
        (
            vec![
                chunk("c1", "fp", "Hello"),
                format!(
                    "data: {}\n\n",
                    serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "KEY_ESCAPED",
                            "function": {"arguments": "{}"}}]}, "finish_reason": null}]})
                )
                .replace("KEY_ESCAPED", &KEY.replacen('A', "\\u0041", 1)),
            ],
            true,
        ),
    ] {
        let mut body: String = chunks.concat();
        body.push_str("data: [DONE]\n\n");
        let mock = MockUpstream::start({
            let body = body.clone();
            move |_| Reply::sse_every(body.as_bytes(), 1_000_000, Duration::ZERO)
        })
        .await;
        let proxy = start_proxy(&mock.base_url(), pack, "").await;
        let a = post_chat(
            proxy.addr(),
            r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        )
        .await;
        assert_eq!(a.status, 200);
        let text = a.text();
        assert!(!text.contains(KEY), "{text}");
        assert_eq!(
            text.contains("no-keys") || text.contains("\"error\""),
            leaks,
            "{text}"
        );
        if !leaks {
            assert!(text.contains("friend") && text.contains("[DONE]"), "{text}");
        }
    }
}
