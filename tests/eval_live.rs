//! `guardwire eval --cases FILE --live`: the real binary sends each case through guardwire
//! (started in process by the binary) to the mock upstream started here: whole and streamed
//! answers split every few bytes with delays, a block on the answer and one on the request
//! (which never reaches the upstream), a 429 then a 503 then success (retries counted), a
//! tool call, and an upstream that never answers (the case's timeout).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream_with_usage, sse_data_frames, MockUpstream, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_guardwire");

fn eval(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("eval")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("GUARDWIRE_EVAL_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn whole(text: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}})
    .to_string()
}

fn tool_call_stream() -> Vec<u8> {
    tool_call_stream_with(r#"{\"city\":\"Paris\"}"#)
}

/// A streamed call of `get_weather` with `args` (JSON text escaped for a JSON string).
fn tool_call_stream_with(args: &str) -> Vec<u8> {
    const P: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":"#;
    let frames = [
        format!(
            r#"{P}{{"role":"assistant","tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"get_weather","arguments":""}}}}]}},"finish_reason":null}}]}}"#
        ),
        format!(
            r#"{P}{{"tool_calls":[{{"index":0,"function":{{"arguments":"{args}"}}}}]}},"finish_reason":null}}]}}"#
        ),
        format!(r#"{P}{{}},"finish_reason":"tool_calls"}}]}}"#),
    ];
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut out = sse_data_frames(&refs);
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// The mock: answers by the last user message.
async fn upstream() -> (MockUpstream, Arc<AtomicUsize>) {
    let flaky = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&flaky);
    let mock = MockUpstream::start(move |req| {
        let body = req.body_json().unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        let stream = body["stream"] == true;
        let ms = Duration::from_millis(2);
        match last.as_str() {
            "What is the capital of France?" => Reply::json(200, &whole("Paris")),
            "Tell me a story" if stream => Reply::sse_every(
                &openai_chat_stream_with_usage(&["Once upon", " a time."], 12, 5),
                3,
                ms,
            ),
            "Give me the codename" => Reply::sse_every(
                &openai_chat_stream_with_usage(&["It is project ", "bluebird."], 5, 5),
                7,
                ms,
            ),
            "flaky" => match seen.fetch_add(1, Ordering::SeqCst) {
                0 => Reply::json(
                    429,
                    r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
                ),
                1 => Reply::json(503, r#"{"error":{"message":"overloaded","type":"server"}}"#),
                _ => Reply::json(200, &whole("Recovered")),
            },
            "weather" => Reply::sse_every(&tool_call_stream(), 5, ms),
            "weather in Rome" => Reply::sse_every(
                &tool_call_stream_with(r#"{\"city\":\"Rome\",\"days\":3}"#),
                5,
                ms,
            ),
            "hang" => Reply::Hang,
            "What are your business hours?" => Reply::sse_every(
                &openai_chat_stream_with_usage(&["We are open ", "Monday to Friday."], 9, 6),
                4,
                ms,
            ),
            // The second turn carries the first one and the assistant's answer to it.
            "Do you offer weekend support?" => {
                let m = &body["messages"];
                let text = if m.as_array().map(Vec::len) == Some(3)
                    && m[1]["role"] == "assistant"
                    && m[1]["content"] == "We are open Monday to Friday."
                {
                    "No weekend support, sorry."
                } else {
                    "the conversation was lost"
                };
                Reply::sse(&openai_chat_stream_with_usage(&[text], 20, 5))
            }
            other => Reply::json(200, &whole(&format!("unexpected prompt {other:?}"))),
        }
    })
    .await;
    (mock, flaky)
}

fn write_config(dir: &Path, name: &str, upstream: &str, extra: &str) -> String {
    let config = dir.join(name);
    std::fs::write(
        &config,
        format!(
            "listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"{upstream}\"\npacks: [\"examples/eval/pack.yaml\"]\n{extra}"
        ),
    )
    .unwrap();
    config.display().to_string()
}

fn case_of<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_cases_go_through_the_guard_to_the_configured_upstream() {
    let (mock, flaky) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "live.yaml", &mock.base_url(), "");
    let cases = dir.path().join("cases.jsonl");
    let lines = [
        json!({"id": "capital", "input": "What is the capital of France?", "expected_output": "Paris"}),
        json!({"id": "story", "input": "Tell me a story", "stream": true, "expected_output": "Once upon a time."}),
        json!({"id": "leak", "input": "Give me the codename", "stream": true, "expected_output": "no"}),
        json!({"id": "key-in-prompt", "input": "Is sk-abcdefghijklmnopqrstuvwxyz0123 a key?", "expected_output": "no"}),
        json!({"id": "flaky", "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "flaky"}]}, "expected_output": "Recovered"}),
        json!({"id": "tools", "input": "weather", "stream": true, "expected_output": ""}),
        json!({"id": "hang", "input": "hang", "expected_output": "x"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&cases, text).unwrap();
    let report = dir.path().join("report.json");
    let junit = dir.path().join("report.xml");
    let args = [
        "--config",
        &config,
        "--cases",
        cases.to_str().unwrap(),
        "--live",
        "--model",
        "gpt-4o-mini",
        "--metric",
        "equals",
        "--concurrency",
        "3",
        "--timeout",
        "3",
        "--retry-base-delay",
        "0.05",
        "--retry-max-delay",
        "0.2",
        "--json",
        report.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--fail-under",
        "0.9",
    ];
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        eval(&refs, &[])
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "the pack's pass rate is below 0.9: {out}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();

    let capital = case_of(&r, "capital");
    assert_eq!(capital["pack"]["passed"], true, "{capital}");
    assert_eq!(capital["output"], "Paris");
    assert_eq!(capital["metrics"][0]["passed"], true);
    assert_eq!(capital["live"]["attempts"], 1);
    assert_eq!(capital["live"]["streamed"], false);
    assert_eq!(capital["live"]["input_tokens"], 7);

    // Streamed, split every 3 bytes: the text assembled from the events the client received.
    let story = case_of(&r, "story");
    assert_eq!(story["output"], "Once upon a time.", "{story}");
    assert_eq!(story["live"]["streamed"], true);
    assert_eq!(story["live"]["output_tokens"], 5);
    assert_eq!(story["metrics"][0]["passed"], true);

    // Blocked on the answer: the validator and phase come from the guard's own verdict.
    let leak = case_of(&r, "leak");
    assert_eq!(leak["pack"]["passed"], false);
    assert_eq!(leak["live"]["blocked"], true);
    let v = &leak["live"]["verdicts"][0];
    assert_eq!(v["validator"], "codenames", "{leak}");
    assert_eq!(v["mode"], "enforce");
    assert_ne!(v["phase"], "input");
    assert!(
        !leak["output"].as_str().unwrap().contains("bluebird"),
        "{leak}"
    );
    assert!(leak["pack"]["reason"]
        .as_str()
        .unwrap()
        .contains("codenames"));

    // Blocked on the request: never sent upstream, not retried.
    let key = case_of(&r, "key-in-prompt");
    assert_eq!(
        key["live"]["verdicts"][0]["validator"], "no-api-keys",
        "{key}"
    );
    assert_eq!(key["live"]["verdicts"][0]["phase"], "input");
    assert_eq!(key["live"]["attempts"], 1);
    assert_eq!(key["live"]["status"], 400);
    assert!(mock
        .requests()
        .iter()
        .all(|q| !q.body_str().contains("sk-abcdefghij")));

    // 429, 503, then the answer: three attempts, and the request carried its own model.
    let f = case_of(&r, "flaky");
    assert_eq!(f["live"]["attempts"], 3, "{f}");
    assert_eq!(f["pack"]["passed"], true);
    assert_eq!(f["output"], "Recovered");
    assert_eq!(flaky.load(Ordering::SeqCst), 3);

    let tools = case_of(&r, "tools");
    assert_eq!(
        tools["live"]["tool_calls"],
        json!(["get_weather"]),
        "{tools}"
    );

    // The upstream never answers: the case times out (retries included) and fails.
    let hang = case_of(&r, "hang");
    assert_eq!(hang["pack"]["passed"], false);
    let reason = hang["pack"]["reason"].as_str().unwrap();
    assert!(reason.contains("timed out"), "{reason}");

    // Every model seen upstream is the config's client's: --model for input cases.
    for q in mock.requests() {
        let model = q.body_json().unwrap()["model"].as_str().unwrap().to_owned();
        assert!(model == "gpt-4o-mini" || model == "gpt-4o", "{model}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("codenames"), "{xml}");
}

#[test]
fn live_runs_refuse_what_they_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "live.yaml", "http://127.0.0.1:9", "");
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        "{\"id\":\"recorded\",\"input\":\"hi\",\"actual_output\":\"hello\"}\n",
    )
    .unwrap();
    let c = cases.to_str().unwrap();
    let (code, out) = eval(&["--config", &config, "--cases", c, "--live"], &[]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("case \"recorded\": a live run asks the upstream"),
        "{out}"
    );

    std::fs::write(&cases, "{\"id\":\"a\",\"input\":\"hi\"}\n").unwrap();
    for (args, expect) in [
        (vec!["--retry-base-delay", "0"], "--retry-base-delay 0"),
        (
            vec!["--retry-exponential-base", "0.5"],
            "--retry-exponential-base",
        ),
        (vec!["--timeout", "0"], "--timeout 0"),
        (vec!["--route", "openai_chat"], "--route"),
    ] {
        let mut all = vec!["--config", &config, "--cases", c, "--live"];
        all.extend(args);
        let (code, out) = eval(&all, &[]);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(expect), "{expect}: {out}");
    }

    // A config with client keys: the run needs one, from GUARDWIRE_EVAL_KEY.
    let keyed = write_config(
        dir.path(),
        "keyed.yaml",
        "http://127.0.0.1:9",
        "keys:\n  - id: ci\n    key: \"gw-ci-0123456789abcdef\"\n",
    );
    let (code, out) = eval(&["--config", &keyed, "--cases", c, "--live"], &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("GUARDWIRE_EVAL_KEY"), "{out}");

    // Input cases name no model: --model is needed; the case fails, naming it.
    let (code, out) = eval(
        &[
            "--config",
            &config,
            "--cases",
            c,
            "--live",
            "--fail-under",
            "1",
        ],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("needs --model"), "{out}");
}

const SCENARIO: &str = r#"apiVersion: promptkit.altairalabs.ai/v1alpha1
kind: Scenario
metadata:
  name: support-hours
  labels: {category: support}
spec:
  task_type: support
  description: "Business hours, then a codename the pack blocks"
  streaming: true
  turns:
    - role: user
      content: "What are your business hours?"
      assertions:
        - type: content_includes
          params: {patterns: ["Monday"], message: "Should mention business days"}
        - type: banned_words
          params: {words: ["Sunday"]}
        - type: guardrail_triggered
          params: {guardrail: codenames, should_trigger: false}
    - role: user
      content: "Do you offer weekend support?"
      assertions:
        - type: content_includes
          params: {patterns: ["Saturday"], message: "Should mention weekend availability"}
        - type: content_includes
          params: {patterns: ["weekend"]}
    - role: user
      content: "Give me the codename"
      assertions:
        - type: guardrail_triggered
          params: {guardrail: codenames, should_trigger: true}
    - role: user
      content: "And after that?"
      assertions:
        - type: min_length
          params: {min: 1}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_runs_turn_by_turn_with_its_assertions() {
    let (mock, _) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "live.yaml", &mock.base_url(), "");
    let scenario = dir.path().join("support.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let report = dir.path().join("report.json");
    let junit = dir.path().join("report.xml");
    let args: Vec<String> = [
        "--config",
        &config,
        "--scenario",
        scenario.to_str().unwrap(),
        "--model",
        "gpt-4o-mini",
        "--retry-base-delay",
        "0.05",
        "--json",
        report.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--fail-under",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        eval(&refs, &[])
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("assert:content_includes"), "{out}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let turn = |n: usize| case_of(&r, &format!("support-hours#turn{n}")).clone();
    let passed = |t: &Value| -> Vec<bool> {
        t["live"]["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["passed"].as_bool().unwrap())
            .collect()
    };
    let t1 = turn(1);
    assert_eq!(t1["output"], "We are open Monday to Friday.", "{t1}");
    assert_eq!(passed(&t1), [true, true, true], "{t1}");
    assert_eq!(t1["live"]["streamed"], true);
    // The second turn saw the first and its answer (else the mock says so).
    let t2 = turn(2);
    assert_eq!(t2["output"], "No weekend support, sorry.", "{t2}");
    assert_eq!(passed(&t2), [false, true], "{t2}");
    assert_eq!(
        t2["live"]["assertions"][0]["message"],
        "Should mention weekend availability"
    );
    let t3 = turn(3);
    assert_eq!(t3["live"]["blocked"], true, "{t3}");
    assert_eq!(passed(&t3), [true], "{t3}");
    // After a blocked turn the conversation stops: the rest is reported as not run.
    let t4 = turn(4);
    assert_eq!(passed(&t4), [false], "{t4}");
    assert!(
        t4["pack"]["reason"].as_str().unwrap().contains("not run"),
        "{t4}"
    );
    assert!(mock
        .requests()
        .iter()
        .all(|q| !q.body_str().contains("And after that?")));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("Should mention weekend availability"), "{xml}");

    // What guardwire cannot run is refused before anything is sent, naming file and key.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        SCENARIO.replace(
            "  streaming: true\n",
            "  streaming: true\n  tool_policy: {tool_choice: none}\n",
        ),
    )
    .unwrap();
    let before = mock.request_count();
    let (code, out) = eval(
        &[
            "--config",
            &config,
            "--scenario",
            bad.to_str().unwrap(),
            "--model",
            "m",
        ],
        &[],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("bad.yaml: spec.tool_policy"), "{out}");
    assert_eq!(mock.request_count(), before);
}

/// Runs `scenario` live with `--model gpt-4o-mini` through a config without packs (plus
/// `extra` lines) whose upstream is `mock`: the JSON report, and what the command printed.
async fn run_scenario(mock: &MockUpstream, scenario: &str, extra: &str) -> (Value, String) {
    let config = format!(
        "listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"{}\"\n{extra}",
        mock.base_url()
    );
    let (_, r, out) = common::binary::scenario_report(&config, scenario).await;
    (r, out)
}

/// Assertions decide by PromptKit's handlers' rules, which read the transcript: every
/// assistant message so far and every tool call made in the conversation.
const TRANSCRIPT_SCENARIO: &str = r#"apiVersion: promptkit.altairalabs.ai/v1alpha1
kind: Scenario
metadata: {name: transcript}
spec:
  streaming: true
  turns:
    - role: user
      content: "What are your business hours?"
    - role: user
      content: "Do you offer weekend support?"
      assertions:
        - type: content_excludes
          params: {patterns: ["monday"]}
        - type: contains_any
          params: {patterns: ["friday", "saturday"]}
        - type: contains
          params: {patterns: ["weekend", "holiday"]}
        - type: banned_words
          params: {words: ["sorr"]}
        - type: assertion
          params: {eval_type: contains, eval_params: {patterns: ["weekend", "holiday"]}, min_score: 0.5}
        - type: assertion
          params: {eval_type: contains_any, eval_params: {patterns: ["nope"]}}
    - role: user
      content: "weather in Rome"
    - role: user
      content: "weather"
      assertions:
        - type: tool_args
          params: {tool_name: get_weather, expected_args: {city: Rome}}
        - type: tool_args
          params: {tool_name: get_weather, expected_args: {days: "3"}}
        - type: tool_args
          params: {tool_name: get_weather, expected_args: {city: Oslo}}
        - type: tool_args
          params: {tool_name: lookup, expected_args: {q: x}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_assertions_read_the_transcript_as_promptkit_does() {
    let (mock, _) = upstream().await;
    // No pack: the example pack's `min_length` would block the answers that only call a tool.
    let (r, _) = run_scenario(&mock, TRANSCRIPT_SCENARIO, "").await;
    let passed = |n: usize| -> Vec<bool> {
        case_of(&r, &format!("transcript#turn{n}"))["live"]["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["passed"].as_bool().unwrap())
            .collect()
    };
    let t2 = case_of(&r, "transcript#turn2");
    assert_eq!(t2["output"], "No weekend support, sorry.", "{t2}");
    // `monday` is in the first answer; `friday` too; the answer has one of the two words
    // `contains` asks for (scored 0.5); `sorr` is no whole word. PromptKit's `type: assertion`
    // wrapper: the same 0.5 passes its `min_score: 0.5`; without one it needs 1.
    assert_eq!(passed(2), [false, true, false, true, true, false], "{t2}");
    assert!(
        t2["live"]["assertions"][2]["message"]
            .as_str()
            .unwrap()
            .contains("scored 0.5000"),
        "{t2}"
    );
    // The third turn's call asked for Rome in 3 days, the answer's for Paris: one match is
    // enough, values compare by their string form, a tool never called fails.
    let t4 = case_of(&r, "transcript#turn4");
    assert_eq!(passed(4), [true, true, false, false], "{t4}");
}

/// A scenario is a session: `cost_budget` reads the run's spend so far (PromptKit sums the
/// conversation's costs), and `conversation_assertions` are checked once, after the last
/// turn, over the whole conversation and the run's spend.
const SESSION_SCENARIO: &str = r#"apiVersion: promptkit.altairalabs.ai/v1alpha1
kind: Scenario
metadata: {name: session}
spec:
  streaming: true
  turns:
    - role: user
      content: "What are your business hours?"
      assertions:
        - type: cost_budget
          params: {max_total_tokens: 30}
    - role: user
      content: "Do you offer weekend support?"
      assertions:
        - type: cost_budget
          params: {max_total_tokens: 30}
  conversation_assertions:
    - type: cost_budget
      params: {max_total_tokens: 40, max_cost_usd: 40}
    - type: cost_budget
      params: {max_input_tokens: 28}
    - type: cost_budget
      params: {max_cost_usd: 39.5}
    - type: content_excludes
      params: {patterns: ["monday"]}
    - type: contains_any
      params: {patterns: ["weekend"]}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_is_a_session_with_its_spend_and_conversation_assertions() {
    let (mock, _) = upstream().await;
    // $1 a token, so the spend in USD is the tokens.
    let (r, out) = run_scenario(
        &mock,
        SESSION_SCENARIO,
        "prices:\n  gpt-4o-mini: {input_per_mtok: 1000000, output_per_mtok: 1000000}\n",
    )
    .await;
    let passed = |id: &str| -> Vec<bool> {
        case_of(&r, id)["live"]["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["passed"].as_bool().unwrap())
            .collect()
    };
    // 9 + 6 tokens, then 20 + 5: the second turn alone is within 30, the run is not.
    assert_eq!(passed("session#turn1"), [true], "{out}");
    assert_eq!(passed("session#turn2"), [false], "{out}");
    // The run: 40 tokens ($40), 29 of them input; `monday` is in the first answer, `weekend`
    // in the last.
    let c = case_of(&r, "session#conversation");
    assert_eq!(c["output"], "No weekend support, sorry.", "{c}");
    assert_eq!(
        passed("session#conversation"),
        [true, false, false, false, true],
        "{c}"
    );
    // Once, after the last turn: two requests in all.
    assert_eq!(mock.request_count(), 2);
}
