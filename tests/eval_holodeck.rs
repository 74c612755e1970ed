//! `guardwire eval --holodeck agent.yaml`: the real binary runs a HoloDeck agent file — its
//! test cases sent through guardwire to the mock model upstream started here (the agent's
//! instructions, model and sampling defaults in every request; a multi-turn test carrying its
//! conversation), its evaluations scored with HoloDeck's rules (thresholds and their absence,
//! the turn > test case > agent precedence, metrics skipped when their inputs are missing,
//! 1–5 scores over 5, equality, numeric with response_path) on a scripted judge; and what it
//! cannot run refused before anything is sent, naming the file and the key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, RecordedRequest, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_guardwire");

fn eval(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("eval")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("GUARDWIRE_EVAL_KEY")
        .output()
        .unwrap();
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

fn last_user(req: &RecordedRequest) -> String {
    let body = req.body_json().unwrap_or(Value::Null);
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The agent's model: answers by the last user message.
async fn model() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap_or(Value::Null);
        let text = match last_user(req).as_str() {
            "What is the capital of France?" => "paris".to_owned(),
            "How much is 6 times 7?" => r#"{"answer": {"value": 42.0000001}}"#.to_owned(),
            "Where do we ship?" => "We ship to France and Spain.".to_owned(),
            "Name the codename" => "It is project bluebird.".to_owned(),
            "My name is Ada." => "Hello Ada.".to_owned(),
            // The second turn sees the first and the answer it got.
            "What is my name?" => {
                let m = &body["messages"];
                if m[1]["content"] == "My name is Ada." && m[2]["content"] == "Hello Ada." {
                    "Your name is Ada.".to_owned()
                } else {
                    "I do not know.".to_owned()
                }
            }
            other => format!("unexpected prompt {other:?}"),
        };
        Reply::json(200, &whole(&text))
    })
    .await
}

/// The judge: 1–5 verdicts; groundedness 4 (HoloDeck's 0.8, guardwire's own scale 0.75),
/// the G-Eval 5 when the answer names Ada, else 2.
async fn judge() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap_or(Value::Null);
        let prompt = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let criteria = prompt.split("\n\nCriteria: ").nth(1).unwrap_or_default();
        let score = if criteria.starts_with("Groundedness") {
            4
        } else if criteria.starts_with("Remembers") {
            if prompt.contains("Ada") {
                5
            } else {
                2
            }
        } else {
            1
        };
        let reply = json!({"score": score, "reason": "scripted"}).to_string();
        Reply::json(
            200,
            &json!({"id": "j", "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]})
            .to_string(),
        )
    })
    .await
}

fn write_config(dir: &Path, model: &str, judge: &str) -> String {
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"{model}\"\npacks: [\"examples/eval/pack.yaml\"]\njudges:\n  - name: quality\n    protocol: openai_chat\n    base_url: \"{judge}\"\n    model: gpt-4o\n    timeout_ms: 5000\n"
        ),
    )
    .unwrap();
    config.display().to_string()
}

const AGENT: &str = r#"
name: support-agent
description: Answers customer questions.
model:
  provider: openai
  name: gpt-4o-mini
  temperature: 0.0
instructions:
  inline: "You are a concise support agent."
evaluations:
  model: {provider: openai, name: gpt-4o}
  metrics:
    - {type: standard, metric: bleu}
    - {metric: rouge, threshold: 0.99}
    - {metric: groundedness, threshold: 0.8}
    - {type: rag, metric_type: faithfulness}
test_cases:
  - name: capital
    input: What is the capital of France?
    ground_truth: Paris
    evaluations:
      - {metric: equality, case_insensitive: true}
  - name: arithmetic
    input: How much is 6 times 7?
    ground_truth: "42"
    evaluations:
      - {metric: numeric, response_path: answer.value}
      - {metric: equality, response_path: answer.missing}
  - name: shipping
    input: Where do we ship?
    ground_truth: We ship to France, Spain and Italy.
    retrieval_context: ["Orders ship to France and Spain."]
    evaluations:
      - {metric: bleu}
      - {metric: rouge, threshold: 0.99}
      - {metric: groundedness, threshold: 0.8}
  - name: no-ground-truth
    input: Where do we ship?
  - name: codename
    input: Name the codename
    ground_truth: none
  - name: memory
    turns:
      - input: My name is Ada.
      - input: What is my name?
        evaluations:
          - type: geval
            name: remembers
            criteria: "Remembers the user's name from earlier in the conversation."
            evaluation_steps: ["Check the name the answer gives"]
            evaluation_params: [input, actual_output]
"#;

fn case_of<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} in {report}"))
}

/// (metric, score, passed) of a case, in order.
fn scores(case: &Value) -> Vec<(String, Option<f64>, bool)> {
    case["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["metric"].as_str().unwrap().to_owned(),
                m["score"].as_f64(),
                m["passed"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holodeck_agent_runs_as_written_and_scores_as_holodeck() {
    let (model, judge) = (model().await, judge().await);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &model.base_url(), &judge.base_url());
    let agent = dir.path().join("agent.yaml");
    std::fs::write(&agent, AGENT).unwrap();
    let report = dir.path().join("report.json");
    let (code, out) = eval(&[
        "--config",
        &config,
        "--holodeck",
        agent.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("agent \"support-agent\": 3 of 6 test cases passed"),
        "{out}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();

    // Every request as the agent's model gets it: the instructions, the model, HoloDeck's
    // max_tokens default (1000) and the file's temperature.
    let requests = model.requests();
    assert_eq!(requests.len(), 7, "six tests, one of two turns");
    for req in &requests {
        let b = req.body_json().unwrap();
        assert_eq!(b["model"], "gpt-4o-mini");
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(
            b["messages"][0]["content"],
            "You are a concise support agent."
        );
        assert_eq!(b["temperature"], 0.0);
        assert_eq!(b["max_tokens"], 1000);
    }

    // The test case's own list replaces the agent's: equality only, case folded.
    assert_eq!(
        scores(case_of(&r, "capital")),
        [("equality".to_owned(), Some(1.0), true)]
    );
    // numeric on the JSON leaf (42.0000001 within 1e-6 of 42); a missing path fails the
    // metric with HoloDeck's reason.
    let arithmetic = case_of(&r, "arithmetic");
    assert_eq!(
        scores(arithmetic)[0],
        ("numeric".to_owned(), Some(1.0), true)
    );
    assert_eq!(scores(arithmetic)[1], ("equality".to_owned(), None, false));
    assert!(arithmetic["metrics"][1]["reason"]
        .as_str()
        .unwrap()
        .contains("key \"missing\" not found (available: [\"value\"])"));

    // bleu without a threshold is reported and passes; rouge misses 0.99; groundedness 4 of 5
    // is HoloDeck's 0.8 and passes 0.8 (guardwire's own scale would give 0.75).
    let shipping = scores(case_of(&r, "shipping"));
    assert_eq!(shipping.len(), 3);
    assert_eq!(shipping[0].0, "bleu");
    assert!(
        shipping[0].1.unwrap() < 0.99 && shipping[0].2,
        "{shipping:?}"
    );
    assert_eq!(shipping[1].0, "rouge");
    assert!(!shipping[1].2);
    assert_eq!(shipping[2], ("groundedness".to_owned(), Some(0.8), true));

    // No ground truth, no retrieval context: the agent's metrics that need them are not run
    // (all of them here), and the test passes on its answer alone.
    assert_eq!(scores(case_of(&r, "no-ground-truth")), []);

    // A block by the pack: the test fails, no metric runs on it.
    let codename = case_of(&r, "codename");
    assert_eq!(codename["pack"]["passed"], false);
    assert_eq!(scores(codename), []);

    // Multi-turn: the second turn carries the first, and its own metric (the judge sees the
    // answer that remembered the name).
    assert_eq!(scores(case_of(&r, "memory (turn 1)")), []);
    assert_eq!(
        scores(case_of(&r, "memory (turn 2)")),
        [("remembers".to_owned(), Some(1.0), true)]
    );
    assert_eq!(
        case_of(&r, "memory (turn 2)")["output"],
        "Your name is Ada."
    );
    // Judge calls: groundedness once (shipping), the G-Eval once; faithfulness never ran.
    assert_eq!(judge.requests().len(), 2);
}

#[test]
fn what_holodeck_runs_elsewhere_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"http://127.0.0.1:9\"\njudges:\n  - name: quality\n    protocol: openai_chat\n    base_url: \"http://127.0.0.1:9\"\n    model: gpt-4o\n",
    )
    .unwrap();
    let head = "name: a\nmodel: {provider: openai, name: m}\ninstructions: {inline: hi}\n";
    for (body, want) in [
        ("tools: [{name: search, type: vectorstore}]\ntest_cases: [{input: q}]", "tools: the agent's own tools"),
        ("test_cases: [{input: q, files: [{path: a.pdf, type: pdf}]}]", "test_cases[0].files: file inputs"),
        ("test_cases: [{input: q, expected_tools: [search]}]", "test_cases[0].expected_tools"),
        ("evaluations: {metrics: [{type: code, grader: \"m:f\"}]}\ntest_cases: [{input: q}]", "evaluations.metrics[0]: type code runs a Python grader"),
        ("evaluations: {metrics: [{metric: similarity}]}\ntest_cases: [{input: q}]", "evaluations.metrics[0].metric: \"similarity\" is not one of"),
        ("evaluations: {metrics: [{metric: bleu, colour: red}]}\ntest_cases: [{input: q}]", "unknown field `colour`"),
        ("evaluations: {metrics: [{type: geval, name: n, criteria: c, threshold: 1.5}]}\ntest_cases: [{input: q}]", "evaluations.metrics[0].threshold: threshold must be between 0.0 and 1.0"),
        ("evaluations: {model: {provider: openai, name: gpt-5}, metrics: [{metric: coherence}]}\ntest_cases: [{input: q}]", "evaluations.model: model \"gpt-5\" is no judge's model in the config (judges: quality (gpt-4o))"),
        ("evaluations: {metrics: [{metric: bleu, retry_on_failure: 5}]}\ntest_cases: [{input: q}]", "retry_on_failure must be between 1 and 3"),
        ("test_cases: [{input: q, turns: [{input: r}]}]", "cannot also set top-level [\"input\"]"),
        ("test_cases: [{name: x}]", "test_cases[0]: test case requires either `input`"),
        ("response_format: {type: object}\ntest_cases: [{input: q}]", "response_format: structured output"),
        ("widget: 1\ntest_cases: [{input: q}]", "unknown field `widget`"),
        ("evaluations: {metrics: []}\ntest_cases: [{input: q}]", "metrics must have at least one metric"),
    ] {
        let agent = dir.path().join("agent.yaml");
        std::fs::write(&agent, format!("{head}{body}\n")).unwrap();
        let (code, out) = eval(&[
            "--config",
            config.to_str().unwrap(),
            "--holodeck",
            agent.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{body}: {out}");
        assert!(out.contains(want), "{body}: {out}");
        assert!(out.contains("agent.yaml"), "{body}: the file is named: {out}");
    }
    // The instructions from a file beside the agent.yaml; a missing one is named.
    let agent = dir.path().join("agent.yaml");
    std::fs::write(
        &agent,
        "name: a\nmodel: {provider: anthropic, name: m}\ninstructions: {file: prompts/system.md}\ntest_cases: [{input: q}]\n",
    )
    .unwrap();
    let (code, out) = eval(&[
        "--config",
        config.to_str().unwrap(),
        "--holodeck",
        agent.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("instructions.file: ") && out.contains("prompts/system.md"),
        "{out}"
    );
    // Not with the flags of other runs.
    let (code, out) = eval(&[
        "--config",
        config.to_str().unwrap(),
        "--holodeck",
        agent.to_str().unwrap(),
        "--metric",
        "bleu",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not with --metric"), "{out}");
}

/// examples/holodeck/ as docs/evaluation.md shows it: its agent file against an upstream that
/// answers as examples/echo_upstream.rs does ("You said: <the last user message>").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agent_file_runs_as_documented() {
    let echo = MockUpstream::start(|req| {
        Reply::json(200, &whole(&format!("You said: {}", last_user(req))))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string("examples/holodeck/config.yaml").unwrap();
    assert!(example.contains("http://127.0.0.1:8081"));
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        example.replace("http://127.0.0.1:8081", &echo.base_url()),
    )
    .unwrap();
    let (code, out) = eval(&[
        "--config",
        config.to_str().unwrap(),
        "--holodeck",
        "examples/holodeck/agent.yaml",
    ]);
    assert_eq!(code, 0, "{out}");
    let docs = std::fs::read_to_string("docs/evaluation.md").unwrap();
    // The report's table and verdicts, as the docs print them.
    for line in out.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        assert!(
            docs.contains(line),
            "not in docs/evaluation.md: {line:?}\n{out}"
        );
    }
    assert!(
        out.contains("agent \"echo-agent\": 3 of 5 test cases passed"),
        "{out}"
    );
}
