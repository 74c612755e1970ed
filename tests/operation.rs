//! Operating limits: the concurrency cap, readiness during a drain, and the drain deadline that
//! ends open streams with the protocol's error frame.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{
    openai_chat_stream, openai_chat_stream_with_usage, Chunk, MockUpstream, Reply,
};
use common::proxy::*;
use std::time::Duration;

/// A stream that sends its first frames, then stays open.
fn open_stream() -> (Vec<u8>, Reply) {
    let mut head = openai_chat_stream(&["still ", "thinking"]);
    head.truncate(head.len() - "data: [DONE]\n\n".len());
    let reply = Reply::chunks(200, vec![Chunk::now(head.clone())])
        .with_header("content-type", "text/event-stream")
        .then_hang();
    (head, reply)
}

#[tokio::test]
async fn over_the_concurrency_limit_answers_503_with_retry_after() {
    let (_, reply) = open_stream();
    let mock = MockUpstream::start(move |req| {
        if req.body_str().contains("hang") {
            reply.clone()
        } else {
            Reply::sse(&openai_chat_stream(&["ok"]))
        }
    })
    .await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "limits: { max_concurrent_requests: 1 }",
    )
    .await;
    let addr = proxy.addr();
    // Hold the only slot with a stream that stays open.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let held = client
        .request(
            http::Request::post(format!("http://{addr}/v1/chat/completions"))
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    STREAM_REQUEST.replace("hi", "hang"),
                )))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let a = post_chat(addr, STREAM_REQUEST).await;
    assert_eq!(a.status, 503);
    assert_eq!(a.headers["retry-after"], "1");
    assert_eq!(a.json()["error"]["code"], "overloaded");
    // Ending the held stream frees the slot.
    drop(held);
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
    let mut ok = false;
    for _ in 0..100 {
        if post_chat(addr, STREAM_REQUEST).await.status == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "the slot was never released");
}

#[tokio::test]
async fn the_drain_deadline_ends_open_streams_with_an_error_frame() {
    drain_deadline("").await;
}

/// The same with `server.runtime: per_core`: the deadline reaches the worker threads' streams.
#[tokio::test]
async fn the_drain_deadline_ends_open_streams_of_per_core_workers() {
    drain_deadline("server: { runtime: per_core, workers: 2 }\n").await;
}

async fn drain_deadline(extra: &str) {
    let (head, reply) = open_stream();
    let mock = MockUpstream::start(move |_| reply.clone()).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", extra).await;
    let addr = proxy.addr();
    let ready = send(addr, "GET", "/readyz", "", &[]).await;
    assert_eq!(ready.status, 200);
    let stream = tokio::spawn(async move { post_chat(addr, STREAM_REQUEST).await });
    mock.wait_for_requests(1, Duration::from_secs(10)).await;
    let gateway = std::sync::Arc::clone(&proxy.server.gateway);
    gateway.begin_drain();
    // Readiness is false while requests are still served.
    assert_eq!(send(addr, "GET", "/readyz", "", &[]).await.status, 503);
    proxy.server.shutdown(Duration::from_millis(300)).await;
    let a = stream.await.unwrap();
    let text = a.text();
    assert!(
        text.starts_with(std::str::from_utf8(&head).unwrap()),
        "{text}"
    );
    assert!(text.ends_with("\"code\":\"shutting_down\"}}\n\n"), "{text}");
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
}

#[tokio::test]
async fn a_thousand_abandoned_streams_are_all_cancelled_upstream() {
    let (_, reply) = open_stream();
    let mock = MockUpstream::start(move |_| reply.clone()).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators:\n  - type: banned_words\n    params: { words: [x] }\n",
        "",
    )
    .await;
    let addr = proxy.addr();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    const N: usize = 1000;
    let mut tasks = Vec::new();
    for _ in 0..N {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let resp = client
                .request(
                    http::Request::post(format!("http://{addr}/v1/chat/completions"))
                        .body(http_body_util::Full::new(bytes::Bytes::from(
                            STREAM_REQUEST,
                        )))
                        .unwrap(),
                )
                .await
                .unwrap();
            // Read the first frame, then walk away.
            let mut body = resp.into_body();
            use http_body_util::BodyExt;
            let first = body.frame().await.unwrap().unwrap();
            assert!(first.is_data());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    drop(client);
    assert!(
        mock.wait_for_cancelled(N, Duration::from_secs(30)).await,
        "only {} of {N} upstream requests were cancelled",
        mock.cancelled_count()
    );
    let m = metrics(addr).await;
    let mut in_flight = u64::MAX;
    for _ in 0..100 {
        in_flight = metrics(addr)
            .await
            .lines()
            .find_map(|l| l.strip_prefix("guardwire_streams_in_flight "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(u64::MAX);
        if in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(in_flight, 0, "streams left open:\n{m}");
    assert_eq!(mock.concurrent_open(), 0);
}

#[tokio::test]
async fn an_upstream_reset_mid_stream_ends_with_an_error_frame() {
    // The upstream announces a body length it never sends: the connection breaks mid-body.
    let mut body = openai_chat_stream(&["partial"]);
    body.truncate(body.len() - "data: [DONE]\n\n".len());
    let sent = body.clone();
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, vec![Chunk::now(sent.clone())])
            .with_header("content-type", "text/event-stream")
            .with_header("content-length", "100000")
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    let text = a.text();
    assert!(
        text.starts_with(std::str::from_utf8(&body).unwrap()),
        "{text}"
    );
    assert!(
        text.ends_with("\"code\":\"upstream_unavailable\"}}\n\n"),
        "{text}"
    );
    assert!(metrics(proxy.addr())
        .await
        .contains(r#"guardwire_upstream_errors_total{route="openai_chat",kind="reset"} 1"#));
}

#[tokio::test]
async fn invalid_utf8_from_the_upstream_ends_with_an_error_frame() {
    let mut body = openai_chat_stream(&["fine"]);
    body.truncate(body.len() - "data: [DONE]\n\n".len());
    body.extend_from_slice(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n",
    );
    let mock = MockUpstream::start(move |_| Reply::sse(&body)).await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", "").await;
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    let text = a.text();
    assert!(text.contains("fine"));
    assert!(
        !text.contains('\u{fffd}'),
        "the invalid frame is not relayed"
    );
    assert!(
        text.ends_with("\"code\":\"upstream_unavailable\"}}\n\n"),
        "{text}"
    );
}

/// Streams `chunks` from a mock through a proxy without validators, under `timeouts`.
async fn paced_stream(chunks: Vec<Chunk>, timeouts: &str) -> (MockUpstream, Proxy, String) {
    let mock = MockUpstream::start(move |_| {
        Reply::chunks(200, chunks.clone()).with_header("content-type", "text/event-stream")
    })
    .await;
    let proxy = start_proxy(&mock.base_url(), "validators: []\n", timeouts).await;
    let text = post_chat(proxy.addr(), STREAM_REQUEST).await.text();
    (mock, proxy, text)
}

#[tokio::test]
async fn the_idle_limit_counts_from_the_last_chunk_not_from_the_start() {
    // 12 chunks 50 ms apart: 600 ms in all, far past idle_ms, but never 200 ms without a chunk.
    let mut chunks: Vec<Chunk> = (0..12)
        .map(|i| {
            let frame = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"part{i} \"}}}}]}}\n\n"
            );
            Chunk::new(frame.into_bytes(), Duration::from_millis(50))
        })
        .collect();
    chunks.push(Chunk::now(b"data: [DONE]\n\n".to_vec()));
    let (_mock, _proxy, text) = paced_stream(chunks, "timeouts: { idle_ms: 200 }").await;
    assert!(text.contains("part11 "), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test]
async fn a_stream_that_never_ends_is_cut_at_the_total_timeout() {
    // A chunk every 50 ms is never idle, but the exchange may not last past total_ms.
    let frame =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"more \"}}]}\n\n".to_vec();
    let chunks = (0..400)
        .map(|_| Chunk::new(frame.clone(), Duration::from_millis(50)))
        .collect();
    let (mock, proxy, text) =
        paced_stream(chunks, "timeouts: { idle_ms: 10000, total_ms: 400 }").await;
    assert!(text.contains("more "), "{text}");
    assert!(
        text.ends_with("\"code\":\"upstream_timeout\"}}\n\n"),
        "{text}"
    );
    assert!(metrics(proxy.addr())
        .await
        .contains(r#"guardwire_upstream_errors_total{route="openai_chat",kind="total"} 1"#));
    assert!(mock.wait_for_cancelled(1, Duration::from_secs(10)).await);
}

#[tokio::test]
async fn a_slow_client_head_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["ok"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "timeouts: { client_header_ms: 200 }",
    )
    .await;
    let mut conn = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    // Half a request head, then nothing (slowloris).
    conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "the connection was left open");
    assert_eq!(mock.request_count(), 0);
}

#[tokio::test]
async fn the_audit_log_has_one_line_per_verdict_and_never_the_matched_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let pack = r#"
validators:
  - id: no-fruit
    type: banned_words
    params: { words: ["forbidden fruit"] }
  - id: shadow
    type: content_excludes
    mode: monitor
    params: { patterns: ["apple"] }
  - id: mask
    type: content_excludes
    mode: redact
    params: { patterns: ["pear"] }
"#;
    let mock = MockUpstream::start(|req| {
        // Prompt words are not hex, so a random request id in the log cannot contain them.
        let text = if req.body_str().contains("naughty") {
            "an apple, a pear and the forbidden fruit"
        } else {
            "an apple and a pear"
        };
        Reply::sse(&openai_chat_stream(&[text]))
    })
    .await;
    let proxy = start_proxy(
        &mock.base_url(),
        pack,
        &format!("audit:\n  path: \"{}\"\n", log.display()),
    )
    .await;
    let ok = post_chat(proxy.addr(), &STREAM_REQUEST.replace("\"hi\"", "\"good\"")).await;
    assert!(ok.text().contains("[REDACTED:mask]"), "{}", ok.text());
    let bad = post_chat(
        proxy.addr(),
        &STREAM_REQUEST.replace("\"hi\"", "\"naughty\""),
    )
    .await;
    assert!(bad.text().contains("content_blocked"), "{}", bad.text());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["validator"].as_str().unwrap().to_owned(),
                l["mode"].as_str().unwrap().to_owned(),
                l["phase"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for expected in [
        ("shadow", "monitor", "stream"),
        ("mask", "redact", "stream"),
        ("no-fruit", "enforce", "stream"),
    ] {
        let e = (
            expected.0.to_owned(),
            expected.1.to_owned(),
            expected.2.to_owned(),
        );
        assert!(seen.contains(&e), "{expected:?} not in {seen:?}");
    }
    for l in &lines {
        assert_eq!(l["route"], "openai_chat");
        assert!(l["request_id"].as_str().is_some_and(|r| !r.is_empty()));
        assert!(l["ts"].as_str().unwrap().ends_with('Z'));
        assert!(l["type"].as_str().is_some());
    }
    for secret in ["apple", "pear", "forbidden fruit", "good", "naughty"] {
        assert!(
            !text.contains(secret),
            "the audit log holds {secret:?}: {text}"
        );
    }
}

#[tokio::test]
async fn with_include_match_the_audit_log_names_what_matched() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let pack = r#"
validators:
  - id: no-fruit
    type: banned_words
    params: { words: ["forbidden fruit"], direction: both }
  - id: mails
    type: pii
    mode: redact
    params: { types: [email] }
"#;
    let mock = MockUpstream::start(|_| {
        Reply::sse(&openai_chat_stream(&[
            "mail ann@exa",
            "mple.org, the forbid",
            "den fruit!",
        ]))
    })
    .await;
    let proxy = start_proxy(
        &mock.base_url(),
        pack,
        &format!(
            "audit:\n  path: \"{}\"\n  include_match: true\n",
            log.display()
        ),
    )
    .await;
    post_chat(proxy.addr(), STREAM_REQUEST).await;
    let a = post_chat(
        proxy.addr(),
        &STREAM_REQUEST.replace("\"hi\"", "\"the Forbidden Fruit?\""),
    )
    .await;
    assert_eq!(a.status, 400);
    let text = std::fs::read_to_string(&log).unwrap();
    let matched: Vec<(String, String)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|l| {
            (
                l["validator"].as_str().unwrap().to_owned(),
                l["matched"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(
        matched.contains(&("mails".into(), "ann@example.org".into())),
        "{text}"
    );
    assert!(
        matched.contains(&("no-fruit".into(), "forbidden fruit".into())),
        "{text}"
    );
    assert!(
        matched.contains(&("no-fruit".into(), "Forbidden Fruit".into())),
        "{text}"
    );
}

/// `/metrics` speaks Prometheus' text format 0.0.4 unless the scraper asks for OpenMetrics, and
/// the text format passes promtool's linter (`promtool check metrics`: help text, types, names)
/// both before any traffic (every series the config can produce is there, at zero) and with
/// counters, a histogram and gauges populated.
#[tokio::test]
#[ignore = "needs promtool (Debian package prometheus; tests/run installs it)"]
async fn metrics_pass_promtool_and_openmetrics_is_served_when_asked_for() {
    let promtool = std::env::var_os("GUARDWIRE_PROMTOOL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "promtool".into());
    let lint = |body: &str| {
        let mut child = std::process::Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", promtool.display()));
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {}\n{}{}\n{body}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let scrape = |addr, accept: &'static str| async move {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let mut headers = vec![("authorization", auth.as_str())];
        if !accept.is_empty() {
            headers.push(("accept", accept));
        }
        send(addr, "GET", "/metrics", bytes::Bytes::new(), &headers).await
    };
    // The answer ends with the provider's usage (5 tokens in, 9 out).
    let answer = openai_chat_stream_with_usage(&["card 4111 1111 1111 1111 ok"], 5, 9);
    let mock = MockUpstream::start(move |_| Reply::sse(&answer)).await;
    let pack = ONE_OF_EACH_MODE_PACK;
    let extra = "limits: { max_concurrent_requests: 77 }\n\
                 prices: { gpt-4o: { input_per_mtok: 2.5, output_per_mtok: 10.0 } }\n\
                 metrics: { models: [llama-3] }";
    let proxy = start_proxy(&mock.base_url(), pack, extra).await;

    let fresh = scrape(proxy.addr(), "").await;
    assert_eq!(
        fresh.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let fresh = fresh.text();
    for series in [
        "guardwire_build_info{version=\"",
        "guardwire_max_concurrent_requests 77\n",
        "guardwire_requests_in_flight 0\n",
        "guardwire_config_last_reload_successful 1\n",
        "guardwire_config_reload_total{result=\"failure\"} 0\n",
        "guardwire_upstream_errors_total{route=\"openai_chat\",kind=\"connect\"} 0\n",
        "guardwire_holdback_exceeded_total{route=\"openai_chat\"} 0\n",
        "guardwire_blocked_total{validator=\"no-forbidden\",phase=\"input\",route=\"openai_chat\"} 0\n",
        "guardwire_redactions_total{validator=\"cards\",phase=\"stream\",route=\"openai_chat\"} 0\n",
        "guardwire_monitor_hits_total{validator=\"watch-ok\",phase=\"stream\",route=\"openai_chat\"} 0\n",
        "process_resident_memory_bytes ",
        "process_start_time_seconds ",
    ] {
        assert!(fresh.contains(series), "{series} missing:\n{fresh}");
    }
    // Routes without an upstream never count anything: no series.
    assert!(!fresh.contains("route=\"gemini\""), "{fresh}");
    let hash = fresh
        .lines()
        .find(|l| l.starts_with("guardwire_config_hash "))
        .unwrap();
    assert_ne!(hash, "guardwire_config_hash 0", "{fresh}");
    lint(&fresh);

    let blocked = STREAM_REQUEST.replace("\"content\":\"", "\"content\":\"forbidden ");
    assert_ne!(
        blocked, STREAM_REQUEST,
        "the request must carry the banned word"
    );
    assert_eq!(post_chat(proxy.addr(), &blocked).await.status, 400);
    let a = post_chat(proxy.addr(), STREAM_REQUEST).await;
    assert!(a.text().contains("[REDACTED:credit_card]"), "{}", a.text());
    // The stream's own figures are counted when its body is dropped, which may come just
    // after the client read its end.
    let mut body = String::new();
    for _ in 0..100 {
        body = scrape(proxy.addr(), "").await.text();
        if body.contains("guardwire_tokens_total") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for series in [
        "guardwire_blocked_total{validator=\"no-forbidden\",phase=\"input\",route=\"openai_chat\"} 1\n",
        "guardwire_redactions_total{validator=\"cards\",phase=\"stream\",route=\"openai_chat\"} 1\n",
        "guardwire_monitor_hits_total{validator=\"watch-ok\",phase=\"stream\",route=\"openai_chat\"} 1\n",
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"input\",source=\"provider\"} 5\n",
        "guardwire_tokens_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",kind=\"output\",source=\"provider\"} 9\n",
        // (5 × 2.5 + 9 × 10) / 1e6 USD
        "guardwire_spend_usd_total{route=\"openai_chat\",model=\"gpt-4o\",key_id=\"none\",source=\"provider\"} 0.0001025\n",
        // Both requests (the blocked one too) and the stream: overhead and duration.
        "guardwire_latency_overhead_seconds_count{route=\"openai_chat\",model=\"gpt-4o\"} 2\n",
        "guardwire_request_duration_seconds_count{route=\"openai_chat\",model=\"gpt-4o\"} 2\n",
        "guardwire_upstream_response_seconds_count{route=\"openai_chat\",model=\"gpt-4o\"} 1\n",
        "guardwire_upstream_first_token_seconds_count{route=\"openai_chat\",model=\"gpt-4o\"} 1\n",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
    lint(&body);

    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let om = scrape(proxy.addr(), accept).await;
    assert_eq!(
        om.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let om = om.text();
    assert!(
        om.contains("# TYPE guardwire_blocked counter") && om.ends_with("# EOF\n"),
        "{om}"
    );
}

/// The overhead histogram's count for the chat route.
fn overhead_count(metrics: &str) -> u64 {
    // Summed over the `model` label.
    let series = "guardwire_latency_overhead_seconds_count{route=\"openai_chat\",";
    metrics
        .lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next())
        .map(|n| n.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test]
async fn the_overhead_is_observed_for_every_outcome() {
    // A provider error relayed as it came, and a request refused before the call.
    let mock =
        MockUpstream::start(|_| Reply::json(429, r#"{"error":{"message":"slow down"}}"#)).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "limits: { max_request_bytes: 200 }",
    )
    .await;
    assert_eq!(post_chat(proxy.addr(), PLAIN_REQUEST).await.status, 429);
    assert_eq!(overhead_count(&metrics(proxy.addr()).await), 1);
    let big = PLAIN_REQUEST.replace("\"hi\"", &format!("\"{}\"", "x".repeat(300)));
    assert_eq!(post_chat(proxy.addr(), &big).await.status, 413);
    assert_eq!(overhead_count(&metrics(proxy.addr()).await), 2);

    // An upstream that cannot be reached.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let unreachable = format!("http://127.0.0.1:{port}");
    let proxy = start_proxy(&unreachable, "validators: []\n", "").await;
    assert_eq!(post_chat(proxy.addr(), PLAIN_REQUEST).await.status, 502);
    assert_eq!(overhead_count(&metrics(proxy.addr()).await), 1);
}

#[tokio::test]
async fn without_a_token_metrics_are_served_only_on_the_operators_listener() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["hi"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "admin: { listen: \"127.0.0.1:0\" }",
    )
    .await;
    let (main, ops) = (proxy.addr(), proxy.server.admin_addr.unwrap());
    assert_eq!(post_chat(main, STREAM_REQUEST).await.status, 200);
    // The clients' listener: neither metrics nor the admin endpoints, whatever is presented,
    // and the refusal says where they are.
    for path in ["/metrics", "/admin/reload", "/admin/anything"] {
        for method in ["GET", "POST"] {
            for headers in [&[][..], &[("authorization", "Bearer x")][..]] {
                let r = send(main, method, path, Bytes::new(), headers).await;
                assert_eq!(r.status, 404, "{method} {path}");
                assert!(r.text().contains("admin.listen"), "{}", r.text());
                assert!(!r.text().contains("guardwire_"), "{}", r.text());
            }
        }
    }
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(
            send(main, "GET", probe, Bytes::new(), &[]).await.status,
            200
        );
    }
    // The operators' listener: metrics (counting the request above), the hash of the config;
    // reload stays off without a token.
    let m = send(ops, "GET", "/metrics", Bytes::new(), &[]).await;
    assert_eq!(m.status, 200);
    assert!(
        m.text()
            .contains("guardwire_requests_total{route=\"openai_chat\""),
        "{}",
        m.text()
    );
    assert!(m.text().contains("guardwire_config_hash "), "{}", m.text());
    let r = send(ops, "POST", "/admin/reload", Bytes::new(), &[]).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn with_admin_listen_metrics_and_reload_move_to_the_operators_listener() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["hi"]))).await;
    let proxy = start_proxy(
        &mock.base_url(),
        "validators: []\n",
        "admin: { listen: \"127.0.0.1:0\", token: s3cret }",
    )
    .await;
    let (main, ops) = (proxy.addr(), proxy.server.admin_addr.unwrap());
    assert_ne!(main, ops);
    let bearer = [("authorization", "Bearer s3cret")];
    // The operators' listener: metrics, reload (routed to it: this one has no file to re-read),
    // probes; nothing else.
    let m = send(ops, "GET", "/metrics", Bytes::new(), &[]).await;
    assert_eq!(m.status, 200);
    assert!(m.text().contains("guardwire_build_info"), "{}", m.text());
    let r = send(ops, "POST", "/admin/reload", Bytes::new(), &bearer).await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("not started from a config file"),
        "{}",
        r.text()
    );
    assert_eq!(
        send(ops, "GET", "/readyz", Bytes::new(), &[]).await.status,
        200
    );
    let proxied = send(ops, "POST", "/v1/chat/completions", STREAM_REQUEST, &[]).await;
    assert_eq!(proxied.status, 404);
    assert_eq!(mock.request_count(), 0);
    // The main listener: metrics and reload only with the token; probes and traffic as before.
    for headers in [&[][..], &[("authorization", "Bearer s3cre")][..]] {
        let m = send(main, "GET", "/metrics", Bytes::new(), headers).await;
        assert_eq!(m.status, 401);
        assert_eq!(m.headers["www-authenticate"], "Bearer");
        assert!(!m.text().contains("guardwire_"), "{}", m.text());
        let r = send(main, "POST", "/admin/reload", Bytes::new(), headers).await;
        assert_eq!(r.status, 401);
    }
    let m = send(main, "GET", "/metrics", Bytes::new(), &bearer).await;
    assert_eq!(m.status, 200);
    assert!(m.text().contains("guardwire_build_info"), "{}", m.text());
    let r = send(main, "POST", "/admin/reload", Bytes::new(), &bearer).await;
    assert!(
        r.status == 400 && r.text().contains("not started from a config file"),
        "{}",
        r.text()
    );
    assert_eq!(
        send(main, "GET", "/healthz", Bytes::new(), &[])
            .await
            .status,
        200
    );
    assert_eq!(post_chat(main, STREAM_REQUEST).await.status, 200);
}
