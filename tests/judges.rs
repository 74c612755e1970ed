//! Judged checks end to end: a scripted LLM judge (OpenAI- and Anthropic-shaped) on every path
//! to a verdict (pass, fail, malformed, past the deadline, 429 then success, 500s opening the
//! breaker), each placement (before the call, parallel with it, a whole answer, a held
//! stream, at every byte split), `rest_eval` against Python's own HTTP server and `exec`
//! handlers as real subprocesses (one hangs and is killed at its deadline).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{
    openai_chat_stream, sse_data_frames, Chunk, MockUpstream, RecordedRequest, Reply,
};
use common::proxy::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const JUDGE_KEY_ENV: &str = "GW_TEST_JUDGE_KEY";

/// The text a judge was asked to evaluate (PromptKit's user message).
fn judged_text(req: &RecordedRequest) -> String {
    let body = req.body_json().unwrap_or(Value::Null);
    let user = match body["messages"].as_array() {
        // OpenAI: the system message, then the user's; Anthropic: the user's only.
        Some(m) => m
            .last()
            .map(|m| m["content"].as_str().unwrap_or("").to_owned()),
        None => None,
    };
    user.unwrap_or_default()
}

/// What the scripted judge answers, by what the text under judgment holds.
fn verdict_for(text: &str, calls: usize) -> Option<(u16, String, Duration)> {
    let verdict = |score: f64| {
        json!({"score": score, "pass": score >= 0.5, "reason": "scripted", "label": "x"})
            .to_string()
    };
    Some(if text.contains("EVIL") {
        (200, verdict(0.1), Duration::ZERO)
    } else if text.contains("LATE") {
        (200, verdict(0.1), Duration::from_secs(1))
    } else if text.contains("MALFORMED") {
        (200, "I would rather not say.".into(), Duration::ZERO)
    } else if text.contains("SLOW") {
        (200, verdict(0.9), Duration::from_secs(30))
    } else if text.contains("FLAKY") && calls == 1 {
        return Some((429, String::new(), Duration::ZERO));
    } else if text.contains("DOWN") {
        return Some((500, String::new(), Duration::ZERO));
    } else if text.contains("TOOLONG") {
        // What a judge answers to an input over its context window.
        return Some((400, String::new(), Duration::ZERO));
    } else {
        (200, verdict(0.9), Duration::ZERO)
    })
}

/// A scripted judge speaking OpenAI Chat Completions.
async fn openai_judge() -> MockUpstream {
    let calls = Arc::new(AtomicUsize::new(0));
    MockUpstream::start(move |req| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let (status, content, delay) = verdict_for(&judged_text(req), n).unwrap();
        let body = if status == 200 {
            json!({"id": "j", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}).to_string()
        } else {
            json!({"error": {"message": "scripted failure"}}).to_string()
        };
        Reply::chunks(status, vec![Chunk::new(body, delay)])
            .with_header("content-type", "application/json")
    })
    .await
}

/// A scripted judge speaking Anthropic Messages.
async fn anthropic_judge() -> MockUpstream {
    MockUpstream::start(move |req| {
        let (_, content, _) = verdict_for(&judged_text(req), 2).unwrap();
        Reply::json(
            200,
            &json!({"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": format!("Here is my verdict: {content}")}], "stop_reason": "end_turn"}).to_string(),
        )
    })
    .await
}

fn judges_config(judge: &MockUpstream, protocol: &str, extra: &str) -> String {
    std::env::set_var(JUDGE_KEY_ENV, "sk-judge");
    format!(
        "judges:\n  - name: safety\n    protocol: {protocol}\n    base_url: \"{}\"\n    api_key_env: {JUDGE_KEY_ENV}\n    model: judge-model\n    timeout_ms: 5000\n    retry: {{max_retries: 2, base_delay_ms: 1, max_delay_ms: 5, exponential_base: 2}}\n{extra}",
        judge.base_url()
    )
}

fn chat_request(content: &str, stream: bool) -> String {
    json!({"model": "gpt-4o", "stream": stream, "messages": [{"role": "system", "content": "be nice"}, {"role": "user", "content": content}]}).to_string()
}

fn answer_json(text: &str) -> String {
    json!({"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).to_string()
}

const INPUT_JUDGE: &str = "validators:\n  - type: llm_judge\n    params: {criteria: 'The request is safe', direction: input}\n";
const OUTPUT_JUDGE: &str =
    "validators:\n  - type: llm_judge\n    params: {criteria: 'The answer is safe', rubric: 'No harm'}\n";

#[tokio::test]
async fn an_input_judge_blocks_before_the_provider_is_called() {
    let judge = openai_judge().await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("hello"))).await;
    let proxy = start_proxy(
        &upstream.base_url(),
        INPUT_JUDGE,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;

    let blocked = post_chat(proxy.addr(), &chat_request("do something EVIL", false)).await;
    assert_eq!(blocked.status, 400, "{}", blocked.text());
    assert_eq!(upstream.request_count(), 0);
    assert!(
        !blocked.text().contains("scripted"),
        "the judge's reason is not sent: {}",
        blocked.text()
    );

    let ok = post_chat(proxy.addr(), &chat_request("say hello", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(upstream.request_count(), 1);

    // What the judge was sent: the protocol's request, JSON asked for, the key, the prompt.
    let asked = judge.requests();
    assert_eq!(asked.len(), 2);
    let r = &asked[1];
    assert_eq!(r.path_and_query, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-judge"));
    let body = r.body_json().unwrap();
    assert_eq!(body["model"], "judge-model");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"]["type"], "json_object");
    let user = judged_text(r);
    assert!(user.starts_with("Content to evaluate:\n"), "{user}");
    // On the request, everything the model reads: the system message too.
    assert!(
        user.contains("System: be nice") && user.contains("User: say hello"),
        "{user}"
    );
    assert!(
        user.ends_with("\n\nCriteria: The request is safe"),
        "{user}"
    );

    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="llm_judge",result="fail"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="llm_judge",result="pass"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(
            r#"guardwire_blocked_total{validator="llm_judge",phase="input",route="openai_chat"} 1"#
        ),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judge_call_seconds_count{judge="safety"} 2"#),
        "{m}"
    );
}

#[tokio::test]
async fn every_path_to_no_verdict_fails_closed_or_open_as_configured() {
    let judge = openai_judge().await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("hello"))).await;
    let pack = "validators:\n  - type: llm_judge\n    id: strict\n    params: {criteria: c, direction: input, timeout_ms: 300}\n";
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(
            &judge,
            "openai_chat",
            "    breaker: {failures: 100, open_ms: 60000}\n",
        ),
    )
    .await;
    for text in ["MALFORMED", "SLOW", "DOWN"] {
        let r = post_chat(proxy.addr(), &chat_request(text, false)).await;
        assert_eq!(r.status, 400, "{text}: {}", r.text());
    }
    assert_eq!(upstream.request_count(), 0);
    let m = metrics(proxy.addr()).await;
    for kind in ["malformed", "timeout", "status"] {
        assert!(
            m.contains(&format!(
                r#"guardwire_judge_errors_total{{judge="safety",kind="{kind}"}} 1"#
            )),
            "{kind}: {m}"
        );
    }
    // DOWN was tried three times (two retries); MALFORMED and SLOW once each.
    assert!(
        m.contains(r#"guardwire_judge_retries_total{judge="safety"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="strict",result="error"} 3"#),
        "{m}"
    );

    // 429, then a verdict: retried, and passed.
    let flaky = post_chat(proxy.addr(), &chat_request("FLAKY but fine", false)).await;
    assert_eq!(flaky.status, 200, "{}", flaky.text());

    // The same checks failing open let the request through.
    let judge = openai_judge().await;
    let pack = "validators:\n  - type: llm_judge\n    on_error: fail_open\n    params: {criteria: c, direction: input}\n";
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("MALFORMED", false)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post_chat(proxy.addr(), &chat_request("EVIL", false)).await;
    assert_eq!(
        r.status,
        400,
        "a verdict that fails is not an error: {}",
        r.text()
    );
}

#[tokio::test]
async fn failures_in_a_row_open_the_breaker() {
    let judge = openai_judge().await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("hello"))).await;
    let extra = "    retry: {max_retries: 0}\n    breaker: {failures: 2, open_ms: 60000}\n";
    let config = judges_config(&judge, "openai_chat", "").replace(
        "    retry: {max_retries: 2, base_delay_ms: 1, max_delay_ms: 5, exponential_base: 2}\n",
        extra,
    );
    let proxy = start_proxy(&upstream.base_url(), INPUT_JUDGE, &config).await;
    for _ in 0..2 {
        assert_eq!(
            post_chat(proxy.addr(), &chat_request("DOWN", false))
                .await
                .status,
            400
        );
    }
    assert_eq!(judge.request_count(), 2);
    // Open: the judge is not asked at all, even for a text it would pass.
    let r = post_chat(proxy.addr(), &chat_request("fine", false)).await;
    assert_eq!(r.status, 400);
    assert_eq!(judge.request_count(), 2);
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_judge_circuit_open{judge="safety"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judge_errors_total{judge="safety",kind="circuit_open"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn one_keys_flood_neither_opens_the_breaker_nor_starves_another_keys_checks() {
    let judge = openai_judge().await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("hello"))).await;
    let config = judges_config(&judge, "openai_chat", "")
        .replace("timeout_ms: 5000", "timeout_ms: 25000")
        .replace(
            "    retry: {max_retries: 2, base_delay_ms: 1, max_delay_ms: 5, exponential_base: 2}\n",
            "    retry: {max_retries: 0}\n    breaker: {failures: 2, open_ms: 60000}\n    \
             max_concurrency: 2\n    max_concurrency_per_key: 1\n    max_queue: 4\n",
        );
    let config = format!("{config}keys:\n  - {{id: a, key: gw-a}}\n  - {{id: b, key: gw-b}}\n");
    let proxy = start_proxy(&upstream.base_url(), INPUT_JUDGE, &config).await;
    let addr = proxy.addr();

    // Key a provokes replies that are no verdict, and refusals of its input, well past the
    // breaker's two failures: each of its requests fails closed...
    for text in ["MALFORMED", "TOOLONG", "MALFORMED", "TOOLONG", "MALFORMED"] {
        let r = post_chat_as(addr, "gw-a", &chat_request(text, false)).await;
        assert_eq!(r.status, 400, "{text}: {}", r.text());
    }
    // ...but the breaker stays closed: key b's checks are asked and keep their verdicts.
    let asked = judge.request_count();
    let r = post_chat_as(addr, "gw-b", &chat_request("hello 1", false)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post_chat_as(addr, "gw-b", &chat_request("EVIL 1", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(judge.request_count(), asked + 2);
    let m = metrics(addr).await;
    assert!(
        m.contains(r#"guardwire_judge_circuit_open{judge="safety"} 0"#)
            || !m.contains("guardwire_judge_circuit_open{"),
        "{m}"
    );
    assert!(!m.contains(r#"kind="circuit_open""#), "{m}");
    for (kind, n) in [("malformed", 3), ("status", 2)] {
        assert!(
            m.contains(&format!(
                r#"guardwire_judge_errors_total{{judge="safety",kind="{kind}"}} {n}"#
            )),
            "{kind}: {m}"
        );
    }
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="llm_judge",result="fail"} 1"#),
        "{m}"
    );

    // Key a floods with texts the judge is slow to answer: one runs (its share of the two
    // slots), four wait in the queue, the sixth is turned away.
    let mut flood = Vec::new();
    for i in 0..6 {
        flood.push(tokio::spawn(async move {
            post_chat_as(addr, "gw-a", &chat_request(&format!("SLOW {i}"), false)).await
        }));
    }
    for tries in 0.. {
        let m = metrics(addr).await;
        if m.contains(r#"guardwire_judge_queue_depth{judge="safety"} 4"#) {
            break;
        }
        assert!(tries < 1000, "key a's flood never filled its queue: {m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Key b is not behind a's flood: its checks run in its own share, with their verdicts.
    let r = post_chat_as(addr, "gw-b", &chat_request("hello 2", false)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post_chat_as(addr, "gw-b", &chat_request("EVIL 2", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let m = metrics(addr).await;
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="llm_judge",result="fail"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="llm_judge",result="pass"} 2"#),
        "{m}"
    );
    for f in flood {
        f.abort();
    }
}

#[tokio::test]
async fn a_whole_answer_is_judged_before_release_by_an_anthropic_shaped_judge() {
    let judge = anthropic_judge().await;
    let upstream = MockUpstream::start(|req| {
        let text = if req.body_str().contains("bad") {
            "an EVIL plan"
        } else {
            "a kind plan"
        };
        Reply::json(200, &answer_json(text))
    })
    .await;
    let proxy = start_proxy(
        &upstream.base_url(),
        OUTPUT_JUDGE,
        &judges_config(&judge, "anthropic_messages", ""),
    )
    .await;
    let ok = post_chat(proxy.addr(), &chat_request("good", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["choices"][0]["message"]["content"], "a kind plan");
    let blocked = post_chat(proxy.addr(), &chat_request("bad", false)).await;
    assert_eq!(blocked.status, 400, "{}", blocked.text());
    assert!(!blocked.text().contains("EVIL"));
    let r = &judge.requests()[1];
    assert_eq!(r.path_and_query, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-judge"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    let body = r.body_json().unwrap();
    assert!(body["system"].as_str().unwrap().contains("JSON"));
    assert_eq!(
        judged_text(r),
        "Content to evaluate:\nan EVIL plan\n\nCriteria: The answer is safe\n\nRubric: No harm"
    );
}

/// At each split: the "bad" answer leaks none of `leaks` and ends with the block frame; the
/// "good" one is released byte for byte as `good`.
async fn assert_split_verdicts(
    addr: std::net::SocketAddr,
    splits: &[usize],
    leaks: &[&str],
    good: &[u8],
) {
    for split in splits {
        let r = post_chat(addr, &chat_request(&format!("bad split {split}"), true)).await;
        assert_eq!(r.status, 200);
        let text = r.text();
        for piece in leaks {
            assert!(
                !text.contains(piece),
                "split {split}: leaked {piece:?}: {text}"
            );
        }
        assert!(
            text.ends_with(&block_frame("blocked by guardrail 'llm_judge'")),
            "split {split}: {text}"
        );
        let r = post_chat(addr, &chat_request(&format!("good split {split}"), true)).await;
        assert_eq!(
            r.body.as_ref(),
            good,
            "split {split}: released byte for byte"
        );
    }
}

#[tokio::test]
async fn a_judged_stream_leaks_nothing_at_any_split_and_is_released_whole_on_a_pass() {
    let judge = openai_judge().await;
    let bad = openai_chat_stream(&["Here is ", "an EV", "IL plan", " in full."]);
    let good = openai_chat_stream(&["Here is ", "a kind", " plan."]);
    let (bad_c, good_c) = (bad.clone(), good.clone());
    let upstream = MockUpstream::start(move |req| {
        let body = req.body_str();
        let split = body
            .split("split ")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1);
        let stream = if body.contains("bad") {
            &bad_c
        } else {
            &good_c
        };
        Reply::sse_every(stream, split, Duration::ZERO)
    })
    .await;
    let proxy = start_proxy(
        &upstream.base_url(),
        OUTPUT_JUDGE,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    assert_split_verdicts(
        proxy.addr(),
        &[1, 2, 3, 5, 8, 13, 21, 1000],
        &["Here is", "EV", "plan"],
        &good,
    )
    .await;
    // The judge saw the whole answer.
    let texts: Vec<String> = judge.requests().iter().map(judged_text).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("Here is an EVIL plan in full.")),
        "{texts:?}"
    );
}

#[tokio::test]
async fn a_windowed_stream_releases_each_sentence_once_judged_and_stops_at_the_failing_one() {
    let judge = openai_judge().await;
    let bad = openai_chat_stream(&["First sen", "tence. Second one is EV", "IL. Third", " one."]);
    let good = openai_chat_stream(&[
        "First sen",
        "tence. Second one",
        " is kind.\n\nThird",
        " one.",
    ]);
    let (bad_c, good_c) = (bad.clone(), good.clone());
    let upstream = MockUpstream::start(move |req| {
        let body = req.body_str();
        let split = body
            .split("split ")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1);
        if body.contains("late") {
            return Reply::sse(&openai_chat_stream(&[
                "First sentence. ",
                "Then LATE trouble. ",
                "More.",
            ]));
        }
        let stream = if body.contains("bad") {
            &bad_c
        } else {
            &good_c
        };
        Reply::sse_every(stream, split, Duration::ZERO)
    })
    .await;
    let pack = "validators:\n  - type: llm_judge\n    params: {criteria: 'The answer is safe', window: sentence}\n";
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    assert_split_verdicts(
        proxy.addr(),
        &[1, 2, 3, 7, 16, 1000],
        &["Second", "EV", "Third"],
        &good,
    )
    .await;
    // A sentence is released once judged, while a later one is still judged (its judge takes
    // a second to fail): the first reached the client, the failing one did not.
    let r = post_chat(proxy.addr(), &chat_request("late", true)).await;
    let text = r.text();
    assert!(text.contains("First sentence. "), "{text}");
    assert!(!text.contains("LATE") && !text.contains("More"), "{text}");
    assert!(
        text.ends_with(&block_frame("blocked by guardrail 'llm_judge'")),
        "{text}"
    );
    // Each window was judged on its own.
    let texts: Vec<String> = judge.requests().iter().map(judged_text).collect();
    for window in [
        "Content to evaluate:\nFirst sentence. \n\n",
        "Content to evaluate:\nSecond one is kind.\n\n\n\nCriteria",
        "Content to evaluate:\nThird one.\n\n",
    ] {
        assert!(
            texts.iter().any(|t| t.starts_with(window)),
            "{window:?} not in {texts:?}"
        );
    }
}

#[tokio::test]
async fn a_parallel_input_judge_overlaps_the_call_and_cancels_it_on_failure() {
    let judge = MockUpstream::start(|req| {
        let text = judged_text(req);
        let (score, delay) = if text.contains("EVIL") { (0.0, Duration::from_millis(500)) } else { (1.0, Duration::from_secs(2)) };
        let content = json!({"score": score}).to_string();
        Reply::chunks(200, vec![Chunk::new(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).to_string(), delay)])
            .with_header("content-type", "application/json")
    })
    .await;
    let upstream = MockUpstream::start(|req| {
        if req.body_str().contains("EVIL") {
            // The head and a first frame, then the model keeps thinking.
            Reply::chunks(200, vec![Chunk::now(&b"data: {}\n\n"[..])])
                .with_header("content-type", "text/event-stream")
                .then_hang()
        } else {
            Reply::sse(&openai_chat_stream(&["fine"]))
        }
    })
    .await;
    let pack = "validators:\n  - type: llm_judge\n    params: {criteria: c, direction: input, parallel: true}\n";
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;

    // The judge fails while the upstream is still answering: the call is cancelled, and
    // nothing of the answer reached the client.
    let r = post_chat(proxy.addr(), &chat_request("EVIL", true)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        upstream
            .wait_for_cancelled(1, Duration::from_secs(10))
            .await
    );

    // A passing judge that answers later than the upstream: the call started at once (the
    // upstream has the request while the judge still thinks), the answer waits for the verdict.
    let addr = proxy.addr();
    let answer = tokio::spawn(async move { post_chat(addr, &chat_request("fine", true)).await });
    assert!(upstream.wait_for_requests(2, Duration::from_secs(10)).await);
    assert_eq!(
        judge.completed_count(),
        1,
        "the second verdict is not in yet"
    );
    let r = answer.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.as_ref(), openai_chat_stream(&["fine"]).as_slice());
}

/// Python's HTTP server as the `rest_eval` endpoint; its request log.
struct RestServer {
    child: std::process::Child,
    port: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for RestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> String {
    std::env::var("GUARDWIRE_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn rest_server() -> RestServer {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let mut child = std::process::Command::new(python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/judges/rest_eval_server.py"
        ))
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the rest_eval server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    RestServer {
        child,
        port: line.trim().parse().unwrap(),
        log,
        _dir: dir,
    }
}

#[tokio::test]
async fn rest_eval_against_a_real_http_server() {
    let server = rest_server();
    std::env::set_var("GW_TEST_REST_TOKEN", "t0k3n");
    let upstream = MockUpstream::start(|req| {
        let text = if req.body_str().contains("bad") {
            "FORBIDDEN words"
        } else {
            "fine words"
        };
        Reply::json(200, &answer_json(text))
    })
    .await;
    let pack = format!(
        "validators:\n  - type: rest_eval\n    params:\n      url: 'http://127.0.0.1:{}/eval?v=1'\n      headers: {{Authorization: 'Bearer ${{GW_TEST_REST_TOKEN}}'}}\n      timeout: 10s\n      criteria: no forbidden words\n      include_tool_calls: true\n      extra: {{team: safety}}\n",
        server.port
    );
    let proxy = start_proxy(
        &upstream.base_url(),
        &pack,
        "pack_env: [GW_TEST_REST_TOKEN]\n",
    )
    .await;
    let ok = post_chat(proxy.addr(), &chat_request("good", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let blocked = post_chat(proxy.addr(), &chat_request("bad", false)).await;
    assert_eq!(blocked.status, 400, "{}", blocked.text());
    let log = std::fs::read_to_string(&server.log).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(first["path"], "/eval?v=1");
    assert_eq!(first["headers"]["authorization"], "Bearer t0k3n");
    let body = &first["body"];
    assert_eq!(body["current_output"], "fine words");
    assert_eq!(body["criteria"], "no forbidden words");
    // PromptKit nests `extra`; messages include the answer last.
    assert_eq!(body["extra"], json!({"team": "safety"}));
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "good"})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": "fine words"})
    );
    assert_eq!(body["tool_calls"], json!([]));
}

#[tokio::test]
async fn exec_handlers_run_as_subprocesses_and_are_killed_at_their_deadline() {
    guardwire::judge::supervisor::use_binary(env!("CARGO_BIN_EXE_guardwire").into());
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, input_file) = (dir.path().join("pid"), dir.path().join("input.json"));
    std::env::set_var("GW_TEST_EXEC_SECRET", "passed-on");
    std::env::set_var("GW_TEST_NOT_PASSED", "kept-out");
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("hello"))).await;
    let config = format!(
        "exec:\n  my_eval:\n    command: {}\n    args: ['{}/tests/judges/exec_eval.py']\n    env: ['PID_FILE={}', 'INPUT_FILE={}', GW_TEST_EXEC_SECRET]\n    timeout_ms: 1500\n",
        python(),
        env!("CARGO_MANIFEST_DIR"),
        pid_file.display(),
        input_file.display()
    );
    let pack =
        "validators:\n  - type: my_eval\n    params: {direction: input, threshold_words: [x]}\n";
    let proxy = start_proxy(&upstream.base_url(), pack, &config).await;

    let ok = post_chat(proxy.addr(), &chat_request("all fine", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let given: Value =
        serde_json::from_str(&std::fs::read_to_string(&input_file).unwrap()).unwrap();
    assert_eq!(given["check"]["type"], "my_eval");
    assert_eq!(given["check"]["params"], json!({"threshold_words": ["x"]}));
    assert!(given["check"]["content"]
        .as_str()
        .unwrap()
        .contains("User: all fine"));
    assert_eq!(given["check"]["context"]["turn_index"], 1);
    assert_eq!(given["env"]["GW_TEST_EXEC_SECRET"], "passed-on");
    assert!(
        given["env"].get("GW_TEST_NOT_PASSED").is_none(),
        "the child's environment is not guardwire's"
    );

    for text in ["FORBIDDEN", "CRASH"] {
        let r = post_chat(proxy.addr(), &chat_request(text, false)).await;
        assert_eq!(r.status, 400, "{text}: {}", r.text());
    }
    // A handler that hangs: the request is answered at the deadline and the process is gone.
    let r = post_chat(proxy.addr(), &chat_request("HANG", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the hung handler {pid} was killed");
    assert_eq!(upstream.request_count(), 1);
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_judge_errors_total{judge="exec:my_eval",kind="process"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"guardwire_judge_errors_total{judge="exec:my_eval",kind="timeout"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn config_errors_name_the_key() {
    for (yaml, expected) in [
        ("judges:\n  - {name: a, protocol: openai_completions, base_url: 'http://127.0.0.1:1', model: m}\n", "judges[0] (a): protocol"),
        ("judges:\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m, api_key_env: GW_TEST_SURELY_UNSET}\n", "judges[0] (a): api_key_env"),
        ("judges:\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m}\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m}\n", "judges[1] (a): name"),
        ("judges:\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m, retry: {base_delay_ms: 5000}}\n", "retry.base_delay_ms"),
        ("exec:\n  x: {command: ''}\n", "exec.x: command"),
        ("judges:\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m, max_concurrency_per_key: 0}\n", "judges[0] (a): max_concurrency_per_key: must be from 1 to max_concurrency (64)"),
        ("judges:\n  - {name: a, protocol: gemini, base_url: 'http://127.0.0.1:1', model: m, max_queue: 8, max_queue_per_key: 9}\n", "judges[0] (a): max_queue_per_key: must be from 1 to max_queue (8)"),
    ] {
        let e = guardwire::config::Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.contains(expected), "{yaml}: {e}");
    }
    let config = guardwire::config::Config::from_yaml("exec:\n  regex: {command: x}\n").unwrap();
    let e = guardwire::proxy::Runtime::build(config)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("exec.regex: the name is a check type"), "{e}");
}

/// A judge agent built with the official A2A SDK (`a2a-sdk`, in the SDK venv `tests/run`
/// builds: `$GUARDWIRE_SDK_PYTHON`); ignored by a plain `cargo test`, like the SDK tests.
#[tokio::test]
#[ignore = "needs the SDK venv (GUARDWIRE_SDK_PYTHON); tests/run runs it"]
async fn a2a_eval_against_an_a2a_sdk_agent() {
    use std::io::BufRead;
    let python = std::env::var("GUARDWIRE_SDK_PYTHON")
        .expect("GUARDWIRE_SDK_PYTHON: the SDK venv's python (run tests/run once)");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a2a.jsonl");
    let mut child = std::process::Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/judges/a2a_server.py"
        ))
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().expect("the agent prints its port");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _agent = Kill(child);

    std::env::set_var("GW_TEST_A2A_TOKEN", "a2a-s3cret");
    let upstream = MockUpstream::start(|req| {
        let text = if req.body_str().contains("bad") {
            "FORBIDDEN plans"
        } else {
            "kind plans"
        };
        Reply::json(200, &answer_json(text))
    })
    .await;
    let pack = format!(
        "validators:\n  - type: a2a_eval\n    params: {{agent_url: 'http://127.0.0.1:{port}', auth_token: '${{GW_TEST_A2A_TOKEN}}', criteria: 'no forbidden plans', timeout: 20s}}\n  - type: a2a_eval_session\n    mode: monitor\n    params: {{agent_url: 'http://127.0.0.1:{port}/', direction: input}}\n"
    );
    let proxy = start_proxy(
        &upstream.base_url(),
        &pack,
        "pack_env: [GW_TEST_A2A_TOKEN]\n",
    )
    .await;
    let ok = post_chat(proxy.addr(), &chat_request("good", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let blocked = post_chat(proxy.addr(), &chat_request("bad", false)).await;
    assert_eq!(blocked.status, 400, "{}", blocked.text());

    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sends: Vec<&Value> = lines.iter().filter(|l| l["path"] == "/a2a").collect();
    assert_eq!(sends.len(), 4, "two checks, two requests: {lines:?}");
    let output = sends
        .iter()
        .find(|l| l["authorization"] == "Bearer a2a-s3cret")
        .expect("the output check's call carries the expanded token");
    assert_eq!(output["body"]["method"], "message/send");
    let text = output["body"]["params"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("Criteria: no forbidden plans"), "{text}");
    assert!(
        text.contains("\"current_output\": \"kind plans\""),
        "{text}"
    );
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(r#"guardwire_judged_verdicts_total{validator="a2a_eval",result="fail"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(
            r#"guardwire_judged_verdicts_total{validator="a2a_eval_session",result="pass"} 2"#
        ),
        "{m}"
    );
}

#[tokio::test]
async fn cosine_similarity_against_a_reference_embedded_once() {
    // Embeddings: billing texts point one way, everything else the other.
    let embedder = MockUpstream::start(|req| {
        let body = req.body_json().unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let v = if t.as_str().unwrap().contains("billing") {
                    [1.0, 0.1]
                } else {
                    [0.0, 1.0]
                };
                json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        Reply::json(200, &json!({"object": "list", "data": data}).to_string())
    })
    .await;
    let upstream = MockUpstream::start(|req| {
        let text = if req.body_str().contains("weather") {
            "It is sunny."
        } else {
            "Your billing date moved."
        };
        Reply::json(200, &answer_json(text))
    })
    .await;
    let pack = "validators:\n  - type: cosine_similarity\n    params: {reference: 'questions about billing', min_similarity: 0.8}\n";
    let config = judges_config(&embedder, "openai_chat", "    embedding_model: emb-small\n");
    let proxy = start_proxy(&upstream.base_url(), pack, &config).await;
    let ok = post_chat(proxy.addr(), &chat_request("my invoice", false)).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let off = post_chat(proxy.addr(), &chat_request("the weather", false)).await;
    assert_eq!(off.status, 400, "{}", off.text());
    let asked = embedder.requests();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].path_and_query, "/v1/embeddings");
    assert_eq!(asked[0].body_json().unwrap()["model"], "emb-small");
    assert_eq!(
        asked[0].body_json().unwrap()["input"],
        json!(["questions about billing", "Your billing date moved."])
    );
    // The reference's embedding was kept: the second call embeds the answer only.
    assert_eq!(
        asked[1].body_json().unwrap()["input"],
        json!(["It is sunny."])
    );
}

#[tokio::test]
async fn judges_see_the_strings_no_decoder_models() {
    let judge = openai_judge().await;
    // A field the chat decoder does not model carries the text: the judge must see it.
    let upstream = MockUpstream::start(|_| {
        Reply::json(
            200,
            &json!({"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine", "x_vendor_note": "an EVIL plan"}, "finish_reason": "stop"}]}).to_string(),
        )
    })
    .await;
    let proxy = start_proxy(
        &upstream.base_url(),
        OUTPUT_JUDGE,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("hi", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let text = judged_text(&judge.requests()[0]);
    assert!(
        text.contains("fine") && text.contains("an EVIL plan"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unmodelled_string_streamed_in_pieces_is_judged_whole() {
    let judge = openai_judge().await;
    // The same unknown field streams its text across frames, between two others: the judge
    // sees each field's text whole (a piece per line would hide the word).
    let body = sse_data_frames(&[
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"fine","x_note":"an EV"}}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"x_other":"unrelated"}}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"x_note":"IL plan"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let upstream = MockUpstream::start(move |_| Reply::sse(&body)).await;
    let proxy = start_proxy(
        &upstream.base_url(),
        OUTPUT_JUDGE,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("hi", true)).await;
    assert!(!r.text().contains("EV"), "{}", r.text());
    let text = judged_text(&judge.requests()[0]);
    assert!(text.contains("an EVIL plan\nunrelated"), "{text}");
}

#[tokio::test]
async fn rag_checks_judge_the_answer_against_the_context_the_request_carries() {
    let judge = openai_judge().await;
    let upstream = MockUpstream::start(|req| {
        let text = if req.body_str().contains("bad") {
            "Open 24/7, EVIL claim"
        } else {
            "Open 9 to 5"
        };
        Reply::json(200, &answer_json(text))
    })
    .await;
    let proxy = start_proxy(
        &upstream.base_url(),
        "validators:\n  - {type: faithfulness, params: {context_tools: [search], min_score: 0.7}}\n  - {type: answer_relevancy}\n",
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    let request = |question: &str| {
        json!({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": question},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Store hours: Mon-Fri 9am-5pm"},
            {"role": "tool", "tool_call_id": "c2", "content": "It is noon"}
        ]})
        .to_string()
    };
    let ok = post_chat(proxy.addr(), &request("When is the store open?")).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let blocked = post_chat(proxy.addr(), &request("bad: when is the store open?")).await;
    assert_eq!(blocked.status, 400, "{}", blocked.text());
    assert!(!blocked.text().contains("EVIL"));
    // Each check asked once per answer; faithfulness with the question, the search tool's
    // result only, and the answer.
    let asked: Vec<String> = judge.requests().iter().map(judged_text).collect();
    assert_eq!(asked.len(), 4, "{asked:#?}");
    let faithfulness = asked
        .iter()
        .find(|t| t.contains("Retrieved context") && t.contains("9 to 5"))
        .unwrap();
    assert!(faithfulness.starts_with(
        "Content to evaluate:\nQuestion:\nWhen is the store open?\n\nRetrieved context:\n[1] Store hours: Mon-Fri 9am-5pm\n\nAnswer:\nOpen 9 to 5\n\nCriteria: Every claim"
    ), "{faithfulness}");
    assert!(!faithfulness.contains("noon"), "{faithfulness}");
    let relevancy = asked
        .iter()
        .find(|t| !t.contains("Retrieved context") && t.contains("9 to 5"))
        .unwrap();
    assert!(
        relevancy.contains("Question:\nWhen is the store open?\n\nAnswer:\nOpen 9 to 5\n\nCriteria: The answer addresses the question"),
        "{relevancy}"
    );
}

#[tokio::test]
async fn a_g_eval_score_is_weighted_by_the_judges_log_probabilities() {
    // The judge says 4 (0.75 on the 0–1 scale, a pass), but gave 1 an 80 % chance: the
    // weighted score is 1.6 (0.15), a fail.
    let judge = MockUpstream::start(|req| {
        let body = req.body_json().unwrap();
        let asked_logprobs = body["logprobs"] == true && body["top_logprobs"] == 5;
        let token = |t: &str| json!({"token": t, "logprob": 0.0, "top_logprobs": []});
        let score_token = json!({"token": "4", "logprob": -1.609, "top_logprobs": [
            {"token": "1", "logprob": (0.8f64).ln()}, {"token": "4", "logprob": (0.2f64).ln()}]});
        let logprobs = if asked_logprobs {
            json!({"content": [token("{\""), token("score"), token("\": "), score_token, token("}")]})
        } else {
            Value::Null
        };
        Reply::json(
            200,
            &json!({"id": "j", "object": "chat.completion", "choices": [{"index": 0,
                "message": {"role": "assistant", "content": "{\"score\": 4}"},
                "logprobs": logprobs, "finish_reason": "stop"}]})
            .to_string(),
        )
    })
    .await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("a plan"))).await;
    let pack = "validators:\n  - type: llm_judge\n    params: {criteria: 'Helpful', scale: 1-5, evaluation_steps: ['Read it', 'Score it']}\n";
    // Without `logprobs: true` on the judge, none are asked for: its own score (4) passes.
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(&judge, "openai_chat", ""),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("hi", false)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        judge.requests()[0].body_json().unwrap().get("logprobs"),
        None
    );
    let proxy = start_proxy(
        &upstream.base_url(),
        pack,
        &judges_config(&judge, "openai_chat", "").replace(
            "    model: judge-model\n",
            "    model: judge-model\n    logprobs: true\n",
        ),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("hi", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let asked = &judge.requests()[1..];
    let body = asked[0].body_json().unwrap();
    assert_eq!(body["logprobs"], true);
    assert!(judged_text(&asked[0]).ends_with("Evaluation steps:\n1. Read it\n2. Score it"));
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("whole number from 1 (worst) to 5 (best)"));
}

#[tokio::test]
async fn a_stream_awaiting_its_verdict_still_ends_at_the_total_limit() {
    // The judge answers SLOW texts after 30 s (its own deadline: 5 s); the exchange may take
    // 1.5 s in all: the held answer ends with the error frame, nothing of it released.
    let judge = openai_judge().await;
    let body = openai_chat_stream(&["A SLOW ", "answer."]);
    let upstream = MockUpstream::start(move |_| Reply::sse(&body)).await;
    let proxy = start_proxy(
        &upstream.base_url(),
        OUTPUT_JUDGE,
        &judges_config(&judge, "openai_chat", "timeouts: {total_ms: 1500}\n"),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat_request("hi", true)).await;
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(!text.contains("SLOW"), "{text}");
    assert!(text.contains("total time allowed"), "{text}");
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains("guardwire_upstream_errors_total{route=\"openai_chat\",kind=\"total\"} 1"),
        "{m}"
    );
}
