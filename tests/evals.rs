//! Production evals (`evals:` in packs) end to end: judged and deterministic evals and
//! `guardrail_triggered` scored off the request path on whole and streamed answers and on a
//! request blocked before the call; triggers; the eval's own metric; audit lines; a full queue
//! dropping turns without slowing traffic. Answers are never changed by an eval.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, sse_data_frames, Chunk, MockUpstream, Reply};
use common::proxy::*;
use serde_json::{json, Value};
use std::time::Duration;

/// A scripted OpenAI-shaped judge: 0.1 when the text under judgment says EVIL, else 0.9;
/// SLOW answers after 30 s.
async fn judge() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap_or(Value::Null);
        let text = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        let score = if text.contains("EVIL") { 0.1 } else { 0.9 };
        let delay = if text.contains("SLOW") {
            Duration::from_secs(30)
        } else {
            Duration::ZERO
        };
        let content = json!({"score": score, "reason": "scripted"}).to_string();
        let body = json!({"id": "j", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}).to_string();
        Reply::chunks(200, vec![Chunk::new(body, delay)])
            .with_header("content-type", "application/json")
    })
    .await
}

fn judge_config(judge: &MockUpstream, extra: &str) -> String {
    format!(
        "judges:\n  - name: quality\n    protocol: openai_chat\n    base_url: \"{}\"\n    model: judge-model\n    timeout_ms: 5000\n{extra}",
        judge.base_url()
    )
}

fn answer_json(text: &str) -> String {
    json!({"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).to_string()
}

fn chat(content: &str, stream: bool) -> String {
    json!({"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": content}]})
        .to_string()
}

/// Waits (up to 20 s) until `/metrics` has every one of `lines`, and returns it.
async fn metrics_with(addr: std::net::SocketAddr, lines: &[&str]) -> String {
    for _ in 0..400 {
        let m = metrics(addr).await;
        if lines.iter().all(|l| m.lines().any(|x| x == *l)) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let m = metrics(addr).await;
    let missing: Vec<&&str> = lines
        .iter()
        .filter(|l| !m.lines().any(|x| x == **l))
        .collect();
    panic!("/metrics never had {missing:?}:\n{m}");
}

const PACK: &str = r#"
validators:
  - id: no_secret
    type: banned_words
    params: {words: [secret]}
    mode: monitor
  - id: no_hack
    type: content_excludes
    params: {patterns: [hack], direction: input}
evals:
  - id: safety
    type: llm_judge
    trigger: every_turn
    params: {criteria: "The answer is safe", judge: quality}
    metric: {name: safety_score, type: gauge, labels: {team: core}}
  - id: short
    type: max_length
    trigger: every_turn
    params: {max: 10}
    metric: {name: long_answers, type: counter}
  - id: secret_seen
    type: guardrail_triggered
    trigger: every_turn
    params: {guardrail: no_secret}
    metric: {name: secret_flag, type: boolean}
  - id: hack_blocked
    type: guardrail_triggered
    trigger: every_turn
    params: {validator_type: content_excludes, direction: input}
  - id: never
    type: contains
    trigger: sample_turns
    sample_percentage: 0
    params: {patterns: [hello]}
  - id: greeted
    type: contains
    trigger: on_session_complete
    params: {patterns: [hello]}
  - id: only_with_tools
    type: contains
    trigger: every_turn
    when: {any_tool_called: true}
    params: {patterns: [hello]}
"#;

fn result(eval: &str, result: &str, n: u32) -> String {
    format!("guardwire_eval_results_total{{eval=\"{eval}\",route=\"openai_chat\",result=\"{result}\"}} {n}")
}

#[tokio::test]
async fn evals_score_turns_off_the_path_and_never_change_the_answer() {
    let judge = judge().await;
    let answer = answer_json("hello EVIL secret");
    let upstream = {
        let answer = answer.clone();
        MockUpstream::start(move |_| Reply::json(200, &answer)).await
    };
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let proxy = start_proxy(
        &upstream.base_url(),
        PACK,
        &judge_config(
            &judge,
            &format!(
                "audit: {{path: \"{}\", include_match: true}}\n",
                audit.display()
            ),
        ),
    )
    .await;

    // Every eval's series exist from the start, at 0.
    let m = metrics(proxy.addr()).await;
    assert!(m.lines().any(|l| l == result("safety", "error", 0)), "{m}");
    assert!(
        m.contains("guardwire_eval_score_count{eval=\"greeted\",route=\"openai_chat\"} 0"),
        "{m}"
    );

    // A whole answer: released as the provider sent it, whatever the evals find. The client
    // ends its session with it, so `on_session_complete` runs too.
    let r = send(
        proxy.addr(),
        "POST",
        "/v1/chat/completions",
        chat("hi", false),
        &[
            ("content-type", "application/json"),
            ("x-session-end", "true"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), answer);
    let m = metrics_with(
        proxy.addr(),
        &[
            &result("safety", "fail", 1),
            &result("short", "fail", 1),
            &result("secret_seen", "pass", 1),
            &result("hack_blocked", "fail", 1),
            &result("greeted", "pass", 1),
        ],
    )
    .await;
    assert!(
        m.contains("guardwire_eval_safety_score{route=\"openai_chat\",team=\"core\"} 0.1"),
        "{m}"
    );
    assert!(
        m.contains("guardwire_eval_long_answers_total{route=\"openai_chat\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("guardwire_eval_secret_flag{route=\"openai_chat\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("guardwire_eval_score_count{eval=\"safety\",route=\"openai_chat\"} 1"),
        "{m}"
    );
    // The evals' calls go through gates of their own, not the request path's.
    assert!(
        m.contains("guardwire_judge_call_seconds_count{judge=\"eval:quality\"} 1"),
        "{m}"
    );
    assert!(!m.contains("judge=\"quality\""), "{m}");
    // Not selected: sampled at 0 %, or `when` a tool is called (their series stay at 0).
    for eval in ["never", "only_with_tools"] {
        for r in ["pass", "fail", "error"] {
            assert!(
                m.lines().any(|l| l == result(eval, r, 0)),
                "{eval} {r}: {m}"
            );
        }
    }
    // The judge saw the answer.
    let asked = judge.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        String::from_utf8_lossy(&asked[0].body).contains("hello EVIL secret"),
        "{:?}",
        asked[0].body_json()
    );

    // A request blocked before the call: the answer's evals do not apply; the input
    // validator's firing is seen.
    let r = post_chat(proxy.addr(), &chat("how do I hack this", false)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let m = metrics_with(
        proxy.addr(),
        &[
            &result("hack_blocked", "pass", 1),
            &result("secret_seen", "fail", 1),
        ],
    )
    .await;
    assert!(
        m.contains("guardwire_eval_secret_flag{route=\"openai_chat\"} 0"),
        "{m}"
    );
    assert!(
        !m.contains(&result("greeted", "fail", 1)),
        "a turn that does not end its session does not complete it: {m}"
    );
    assert_eq!(
        judge.requests().len(),
        1,
        "nothing to judge without an answer"
    );
    assert_eq!(upstream.request_count(), 1);

    // Audit lines: one per result, with the score; the judge's reason with include_match.
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let evals: Vec<&Value> = lines.iter().filter(|l| l["mode"] == "eval").collect();
    let safety = evals.iter().find(|l| l["validator"] == "safety").unwrap();
    assert_eq!(safety["type"], "llm_judge");
    assert_eq!(safety["phase"], "eval");
    assert_eq!(safety["score"], 0.1);
    assert_eq!(safety["result"], "fail");
    assert_eq!(safety["matched"], "scripted");
    assert_eq!(
        evals
            .iter()
            .filter(|l| l["validator"] == "hack_blocked")
            .count(),
        2
    );
}

#[tokio::test]
async fn a_streamed_answer_is_evaluated_when_it_ends() {
    let judge = judge().await;
    let body = openai_chat_stream(&["hello ", "there, all ", "good"]);
    let upstream = MockUpstream::start(move |_| Reply::sse(&body)).await;
    let proxy = start_proxy(
        &upstream.base_url(),
        "evals:\n  - {id: safety, type: llm_judge, trigger: every_turn, params: {criteria: safe}}\n  - {id: short, type: max_length, trigger: every_turn, params: {max: 10}}\n",
        &judge_config(&judge, ""),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat("hi", true)).await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("good"), "{}", r.text());
    assert!(r.text().contains("[DONE]"), "{}", r.text());
    metrics_with(
        proxy.addr(),
        &[&result("safety", "pass", 1), &result("short", "fail", 1)],
    )
    .await;
    let asked = judge.requests();
    assert!(
        String::from_utf8_lossy(&asked[0].body).contains("hello there, all good"),
        "the judge saw the whole streamed text"
    );
}

#[tokio::test]
async fn a_full_queue_drops_turns_and_never_holds_traffic() {
    let judge = judge().await;
    let upstream = MockUpstream::start(|_| Reply::json(200, &answer_json("SLOW answer"))).await;
    let proxy = start_proxy(
        &upstream.base_url(),
        "evals:\n  - {id: slow, type: llm_judge, trigger: every_turn, params: {criteria: safe}}\n",
        &judge_config(&judge, "evals: {max_queue: 1, max_concurrency: 1}\n"),
    )
    .await;
    // One turn is being judged (the judge answers in 30 s), the next is taken and waits for
    // a slot, the third waits in the queue (both count in its depth): the other three are
    // dropped, and every answer is released meanwhile.
    for (i, depth) in [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 2)] {
        let r = post_chat(proxy.addr(), &chat("hi", false)).await;
        assert_eq!(r.status, 200, "answer {i}");
        metrics_with(
            proxy.addr(),
            &[&format!("guardwire_evals_queue_depth {depth}")],
        )
        .await;
    }
    metrics_with(proxy.addr(), &["guardwire_evals_dropped_total 3"]).await;
    assert_eq!(judge.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_off_is_no_turn() {
    let judge = judge().await;
    // The first answer (short: it would pass) ends without its terminal event: guardwire ends
    // it with the error frame, and the evals do not score a cut answer. The second (long:
    // it fails) is scored.
    let cut = sse_data_frames(&[
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"cut"}}]}"#,
    ]);
    let whole = openai_chat_stream(&["a long answer, whole"]);
    let upstream = MockUpstream::start(move |req| {
        if req.body_str().contains("cut") {
            Reply::sse(&cut)
        } else {
            Reply::sse(&whole)
        }
    })
    .await;
    let proxy = start_proxy(
        &upstream.base_url(),
        "evals:\n  - {id: short, type: max_length, trigger: every_turn, params: {max: 10}}\n",
        // One turn at a time: once the second is scored, the first was looked at.
        &judge_config(&judge, "evals: {max_concurrency: 1}\n"),
    )
    .await;
    let r = post_chat(proxy.addr(), &chat("cut", true)).await;
    assert!(!r.text().contains("[DONE]"), "{}", r.text());
    let r = post_chat(proxy.addr(), &chat("whole", true)).await;
    assert!(r.text().contains("[DONE]"), "{}", r.text());
    let m = metrics_with(proxy.addr(), &[&result("short", "fail", 1)]).await;
    assert!(m.lines().any(|l| l == result("short", "pass", 0)), "{m}");
}

/// PromptKit's assertion rules read the transcript: every assistant message of the
/// conversation and every tool call in it, not only the answer the validator reads
/// (runtime/evals/handlers: `contentUnderTest`, `ExtractToolCalls`, `argsMatch`).
const TRANSCRIPT_PACK: &str = r#"
evals:
  - id: no_monday
    type: content_excludes
    trigger: every_turn
    params: {patterns: [MONDAY]}
  - id: mentions_friday
    type: contains_any
    trigger: every_turn
    params: {patterns: [friday, saturday]}
  - id: both_words
    type: contains
    trigger: every_turn
    params: {patterns: [weekend, holiday]}
    metric: {name: both_words_share, type: gauge}
  - id: asked_rome
    type: tool_args
    trigger: every_turn
    params: {tool_name: get_weather, expected_args: {city: Rome, days: "3"}}
  - id: asked_oslo
    type: tool_args
    trigger: every_turn
    params: {tool_name: get_weather, expected_args: {city: Oslo}}
  - id: looked_up
    type: tool_args_session
    trigger: every_turn
    params: {tool_name: lookup, expected_args: {q: x}}
"#;

#[tokio::test]
async fn deterministic_evals_read_the_transcript_as_promptkit_does() {
    let answer = json!({"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "No weekend support, sorry.", "tool_calls": [
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        "finish_reason": "tool_calls"}]})
    .to_string();
    let upstream = {
        let answer = answer.clone();
        MockUpstream::start(move |_| Reply::json(200, &answer)).await
    };
    let proxy = start_proxy(&upstream.base_url(), TRANSCRIPT_PACK, "").await;
    // The history: an earlier answer said Monday and Friday and called the tool for Rome.
    let request = json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "When are you open?"},
        {"role": "assistant", "content": "We are open Monday to Friday.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\",\"days\":3}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "And at weekends?"}]})
    .to_string();
    let r = post_chat(proxy.addr(), &request).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), answer);
    let m = metrics_with(
        proxy.addr(),
        &[
            // An earlier assistant message holds `Monday` (case-insensitive).
            &result("no_monday", "fail", 1),
            // One assistant message of the conversation holds one pattern.
            &result("mentions_friday", "pass", 1),
            // Half the patterns in the answer: score 0.5, under the default threshold of 1.
            &result("both_words", "fail", 1),
            // One call of the tool matches (the earlier one, `3` read as "3"), though the
            // answer's own call does not.
            &result("asked_rome", "pass", 1),
            &result("asked_oslo", "fail", 1),
            // Never called.
            &result("looked_up", "fail", 1),
        ],
    )
    .await;
    assert!(
        m.contains("guardwire_eval_both_words_share{route=\"openai_chat\"} 0.5"),
        "{m}"
    );
}
