//! `guardwire eval --cases` with judged metrics and trajectory graders: the real binary
//! against a scripted LLM judge on 127.0.0.1 (OpenAI Chat shaped, with log probabilities for
//! G-Eval's weighting). Scores are computed from the judge's answers (per chunk and per
//! sentence for DeepEval's contextual metrics), thresholds fail the exit status, the judge's
//! reasons reach the JSON and HTML reports, and a metric whose case lacks a parameter is
//! refused before any judge call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::eval;
use common::mock_upstream::{MockUpstream, RecordedRequest, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

/// The prompt's user message: "Content to evaluate: … Criteria: …".
fn prompt(req: &RecordedRequest) -> String {
    let body = req.body_json().unwrap_or(Value::Null);
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The content part of a prompt (before the criteria).
fn content(p: &str) -> &str {
    p.split("\n\nCriteria: ").next().unwrap_or(p)
}

/// The text between `start` and `end` in `p` (to its end without `end`).
fn between<'a>(p: &'a str, start: &str, end: &str) -> &'a str {
    let rest = p.split_once(start).map_or("", |(_, r)| r);
    rest.split(end).next().unwrap_or(rest)
}

/// DeepEval's list-of-verdicts replies (contextual metrics) and G-Eval's steps: the judge's
/// reply text, or `None` for a "Content to evaluate" verdict prompt.
fn list_answer(p: &str) -> Option<String> {
    let verdict = |yes: bool, reason: String, statement: Option<&str>| {
        let mut v = json!({"verdict": if yes { "yes" } else { "no" }, "reason": reason});
        if let Some(s) = statement {
            v["statement"] = json!(s);
        }
        v
    };
    if p.starts_with("Given an evaluation criteria") {
        let criteria = between(p, "Evaluation Criteria:\n", "\n");
        if criteria.starts_with("NOSTEPS") {
            return Some("I cannot list steps for that.".into());
        }
        return Some(
            json!({"steps": [format!("Check the city named ({})", criteria.len()), "Compare it with the question"]})
                .to_string(),
        );
    }
    if p.starts_with("Based on the input and context") {
        // Relevancy: the node's statements (its sentences), relevant when about Paris.
        let node = between(p, "\n\nContext:\n", "\n\nJSON:");
        if node.contains("GARBLED") {
            return Some(r#"{"verdicts": [{"statement": "x", "verdict": "perhaps"}]}"#.into());
        }
        let verdicts: Vec<Value> = node
            .split_inclusive(". ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                verdict(
                    s.contains("Paris"),
                    format!("about Paris: {}", s.contains("Paris")),
                    Some(s),
                )
            })
            .collect();
        return Some(json!({ "verdicts": verdicts }).to_string());
    }
    if p.starts_with("Given the input, expected output, and retrieval context") {
        let nodes = p
            .split_once("):\n")
            .map_or("", |(_, r)| r)
            .split("\n\nJSON:")
            .next()
            .unwrap_or_default();
        let mut verdicts: Vec<Value> = nodes
            .lines()
            .map(|l| {
                verdict(
                    l.contains("Paris"),
                    format!("node useful: {}", l.contains("Paris")),
                    None,
                )
            })
            .collect();
        if between(p, "Expected output:\n", "\n\n").contains("MISCOUNT") {
            verdicts.pop();
        }
        return Some(json!({ "verdicts": verdicts }).to_string());
    }
    // DeepEval's faithfulness and answer relevancy: lists of truths, claims and statements
    // (the sentences shown), then a verdict per numbered claim or statement.
    let sentences_of = |text: &str| -> Vec<String> {
        text.split_inclusive(". ")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if p.starts_with("Based on the given text, please generate") {
        let truths = sentences_of(between(p, "\n\nText:\n", "\n\nJSON:"));
        return Some(json!({ "truths": truths }).to_string());
    }
    if p.starts_with("Based on the given text, please extract") {
        let claims = sentences_of(between(p, "\n\nAI Output:\n", "\n\nJSON:"));
        return Some(json!({ "claims": claims }).to_string());
    }
    if p.starts_with("Given the text, breakdown") {
        let statements = sentences_of(between(p, "\n\nText:\n", "\n\nJSON:"));
        return Some(json!({ "statements": statements }).to_string());
    }
    let numbered = |section: &str| -> Vec<String> {
        between(p, section, "\n\nJSON:")
            .lines()
            .map(|l| l.split_once(". ").map_or(l, |(_, r)| r).to_owned())
            .collect()
    };
    if p.starts_with("Based on the given claims") {
        // Against truths about Paris: Lyon contradicts them, wine and the Louvre they do not say.
        let verdicts: Vec<Value> = numbered("numbered below):\n")
            .iter()
            .map(|c| match c {
                c if c.contains("Lyon") => {
                    json!({"verdict": "no", "reason": "the capital is Paris"})
                }
                c if c.contains("Paris") => json!({"verdict": "yes"}),
                _ => json!({"verdict": "idk", "reason": "not in the context"}),
            })
            .collect();
        return Some(json!({ "verdicts": verdicts }).to_string());
    }
    if p.starts_with("For the provided list of statements") {
        // Relevant to "What is the capital of France?": what names a capital.
        let verdicts: Vec<Value> = numbered("numbered below):\n")
            .iter()
            .map(|s| match s.contains("capital") {
                true => json!({"verdict": "yes"}),
                false => json!({"verdict": "no", "reason": "not about the capital"}),
            })
            .collect();
        return Some(json!({ "verdicts": verdicts }).to_string());
    }
    if p.starts_with("For EACH sentence") {
        let verdicts: Vec<Value> = between(p, "Expected Output:\n", "\n\nRetrieval Context:")
            .lines()
            .map(|l| {
                verdict(
                    l.contains("Paris"),
                    format!("attributable: {}", l.contains("Paris")),
                    None,
                )
            })
            .collect();
        return Some(json!({ "verdicts": verdicts }).to_string());
    }
    None
}

/// What the scripted judge answers to a verdict prompt: (score, reason, G-Eval alternatives
/// as (digit, logprob)).
fn answer(p: &str) -> (f64, String, Vec<(&'static str, f64)>) {
    let c = content(p);
    let criteria = p.split("\n\nCriteria: ").nth(1).unwrap_or_default();
    if criteria.starts_with("Groundedness") {
        return if c.contains("Response:\nLyon") {
            (2.0, "Lyon is not in the context".into(), vec![])
        } else {
            (5.0, "every claim is in chunk 1".into(), vec![])
        };
    }
    if criteria.starts_with("Relevance") {
        return (4.0, "answers the question".into(), vec![]);
    }
    if criteria.starts_with("STRICT") {
        let yes = c.contains("Actual output:\nParis");
        return (f64::from(u8::from(yes)), "strict verdict".into(), vec![]);
    }
    if criteria.starts_with("STEPLESS") {
        // 5 only when the generated steps are shown.
        let steps = criteria.contains("\n\nEvaluation steps:\n1. Check the city named (");
        return (
            if steps { 5.0 } else { 1.0 },
            format!("steps shown: {steps}"),
            vec![],
        );
    }
    if criteria.starts_with("CORRECT") {
        // 4 at 60 %, 3 at 40 %: G-Eval's weighted score is 3.6, (3.6 - 1) / 4 = 0.65.
        return (
            4.0,
            "mostly correct".into(),
            vec![(" 4", 0.6f64.ln()), (" 3", 0.4f64.ln())],
        );
    }
    (1.0, format!("unexpected prompt: {criteria}"), vec![])
}

async fn judge() -> MockUpstream {
    MockUpstream::start(move |req| {
        let p = prompt(req);
        let (text, alternatives) = match list_answer(&p) {
            Some(text) => (text, Vec::new()),
            None => {
                let (score, reason, alternatives) = answer(&p);
                (json!({"score": score, "reason": reason}).to_string(), alternatives)
            }
        };
        let mut choice = json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"});
        if !alternatives.is_empty() {
            let tokens: Vec<Value> = ["{\"", "score", "\":", " 4", ",", " \"reason\": \"mostly correct\"}"]
                .iter()
                .map(|t| {
                    let top: Vec<Value> = if *t == " 4" {
                        alternatives
                            .iter()
                            .map(|(d, lp)| json!({"token": d, "logprob": lp}))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    json!({"token": t, "logprob": 0, "top_logprobs": top})
                })
                .collect();
            choice["logprobs"] = json!({"content": tokens});
        }
        Reply::json(
            200,
            &json!({"id": "j", "object": "chat.completion", "choices": [choice]}).to_string(),
        )
    })
    .await
}

/// The example config with one judge at `base_url`.
fn config(dir: &Path, base_url: &str) -> String {
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/eval/replay.yaml"),
    )
    .unwrap();
    let text = format!(
        "{example}\njudges:\n  - name: quality\n    protocol: openai_chat\n    base_url: \"{base_url}\"\n    model: judge-model\n    logprobs: true\n    timeout_ms: 5000\n"
    );
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn metric<'a>(report: &'a Value, case: &str, metric: &str) -> &'a Value {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == case)
        .and_then(|c| {
            c["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == metric)
        })
        .unwrap_or_else(|| panic!("no {metric} on {case} in {report}"))
}

fn near(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() < 1e-9)
}

const RAG_CASES: &str = concat!(
    r#"{"id": "paris", "input": [{"role": "user", "content": "What is the capital of France?"}], "actual_output": "Paris", "expected_output": "Paris is the capital. It has the Louvre.", "retrieval_context": ["France has good wine.", "The capital of France is Paris."]}"#,
    "\n",
    r#"{"id": "lyon", "input": "What is the capital of France?", "actual_output": "Lyon", "expected_output": "Paris is the capital.", "retrieval_context": ["The capital of France is Paris."]}"#,
    "\n"
);

const METRIC_FILE: &str = "metrics:\n  - {metric: contextual_precision, threshold: 0.4}\n  - metric: g_eval\n    name: correctness\n    criteria: CORRECT answers match the expected output\n    evaluation_steps: [Compare the facts]\n    evaluation_params: [input, actual_output, expected_output]\n    threshold: 0.6\n  - metric: g_eval\n    name: strict\n    criteria: STRICT the answer is exactly right\n    evaluation_params: [actual_output]\n    strict_mode: true\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judged_metrics_score_from_the_judges_answers_and_fail_their_thresholds() {
    let judge = judge().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &judge.base_url());
    let cases = write(dir.path(), "cases.jsonl", RAG_CASES);
    let metrics = write(dir.path(), "metrics.yaml", METRIC_FILE);
    let json_out = dir.path().join("report.json");
    let html_out = dir.path().join("report.html");
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric",
        "groundedness:0.5",
        "--metric",
        "relevance",
        "--metric",
        "contextual_relevancy",
        "--metric",
        "contextual_recall:0.5",
        "--metric-file",
        &metrics,
        "--fail-under",
        "1",
        "--json",
        json_out.to_str().unwrap(),
        "--html",
        html_out.to_str().unwrap(),
    ]);
    // Lyon's groundedness (2 of 5: 0.25) and its strict G-Eval fail, under --fail-under 1:
    // status 1.
    assert_eq!(code, 1, "{text}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let g = metric(&report, "paris", "groundedness");
    assert!(near(&g["score"], 1.0) && g["passed"] == true, "{g}");
    assert_eq!(g["reasoning"], "every claim is in chunk 1");
    let g = metric(&report, "lyon", "groundedness");
    assert!(near(&g["score"], 0.25) && g["passed"] == false, "{g}");
    assert_eq!(g["reasoning"], "Lyon is not in the context");
    assert!(near(&metric(&report, "paris", "relevance")["score"], 0.75));
    // One statement of two is about Paris; the useful chunk is ranked second: 1/2.
    let r = metric(&report, "paris", "contextual_relevancy");
    assert!(near(&r["score"], 0.5), "{r}");
    assert_eq!(
        r["reasoning"],
        "chunk 1, statement 1: not relevant: France has good wine. (about Paris: false)\nchunk 2, statement 1: relevant: The capital of France is Paris. (about Paris: true)",
        "{r}"
    );
    assert!(near(
        &metric(&report, "paris", "contextual_precision")["score"],
        0.5
    ));
    assert!(near(
        &metric(&report, "lyon", "contextual_precision")["score"],
        1.0
    ));
    // Two sentences in the expected output, one holds Paris.
    assert!(near(
        &metric(&report, "paris", "contextual_recall")["score"],
        0.5
    ));
    assert!(near(
        &metric(&report, "lyon", "contextual_recall")["score"],
        1.0
    ));
    // G-Eval weighted by the score's log probabilities, the proxy's judge path.
    let c = metric(&report, "paris", "correctness");
    assert!(near(&c["score"], 0.65), "{c}");
    let s = metric(&report, "paris", "strict");
    assert!(near(&s["score"], 1.0) && near(&s["min"], 1.0), "{s}");
    let s = metric(&report, "lyon", "strict");
    assert!(near(&s["score"], 0.0) && s["passed"] == false, "{s}");
    let html = std::fs::read_to_string(&html_out).unwrap();
    assert!(
        html.contains("Lyon is not in the context"),
        "the judge's reasoning in the HTML"
    );
    // What the judge was shown: G-Eval's fields and steps, in the proxy's prompt.
    let prompts: Vec<String> = judge.requests().iter().map(prompt).collect();
    let geval = prompts
        .iter()
        .find(|p| p.contains("CORRECT") && p.contains("Lyon"))
        .unwrap();
    assert!(
        geval.contains("Input:\nWhat is the capital of France?"),
        "{geval}"
    );
    assert!(
        geval.contains("Expected output:\nParis is the capital."),
        "{geval}"
    );
    assert!(
        geval.contains("Evaluation steps:\n1. Compare the facts"),
        "{geval}"
    );
    let body = judge.requests()[0].body_json().unwrap();
    assert_eq!(body["model"], "judge-model");
    // The strict G-Eval has no steps: the judge wrote them once for the run, and both cases'
    // prompts show them.
    let strict: Vec<&String> = prompts
        .iter()
        .filter(|p| p.contains("STRICT the answer"))
        .collect();
    assert_eq!(strict.len(), 3, "{strict:#?}");
    assert!(
        strict[0].starts_with("Given an evaluation criteria"),
        "{strict:#?}"
    );
    assert!(strict[1..]
        .iter()
        .all(|p| p.contains("Evaluation steps:\n1. Check the city named (")));
    // 2 cases x (groundedness, relevance, strict, correctness) + relevancy: a call per chunk
    // (3) + precision and recall: a call per case (2 + 2) + the strict G-Eval's steps (1).
    assert_eq!(prompts.len(), 8 + 3 + 2 + 2 + 1, "{prompts:#?}");

    // The same with lower thresholds passes (the example pack blocks one of the answers: its
    // own assertion fails).
    let (_, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric",
        "groundedness:0.2",
        "--metric",
        "contextual_recall:0.5",
        "--fail-under",
        "1",
        "--json",
        json_out.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    for t in report["thresholds"].as_array().unwrap() {
        let passed = t["name"] != "pack.pass_rate";
        assert_eq!(t["passed"], passed, "{t}: {text}");
    }
}

const STATEMENT_CASES: &str = concat!(
    r#"{"id": "paris", "input": "What is the capital of France?", "actual_output": "Paris", "expected_output": "Paris is the capital. It has the Louvre.", "retrieval_context": ["France has good wine. It also has cheese.", "The capital of France is Paris. It is large."]}"#,
    "\n",
    r#"{"id": "ranks", "input": "Where is the Louvre?", "actual_output": "Paris", "expected_output": "The Louvre is in Paris.", "retrieval_context": ["Paris is in France.", "Cats purr.", "Paris has the Louvre."]}"#,
    "\n",
    r#"{"id": "garbled", "input": "What is the capital of France?", "actual_output": "Paris", "expected_output": "Paris MISCOUNT.", "retrieval_context": ["GARBLED node."]}"#,
    "\n"
);

const STEPLESS_METRICS: &str = "metrics:\n  - {metric: contextual_relevancy, threshold: 0.2}\n  - {metric: contextual_precision, threshold: 0.5}\n  - {metric: contextual_recall, threshold: 0.5}\n  - metric: g_eval\n    name: stepless\n    criteria: STEPLESS the answer names the right city\n    evaluation_params: [input, actual_output]\n  - metric: g_eval\n    name: nosteps\n    criteria: NOSTEPS anything\n";

/// DeepEval's contextual metrics judge each statement (relevancy), each node (precision, with
/// its rank weighting) and each sentence (recall) from the judge's lists of yes/no verdicts; a
/// list that cannot be read fails the metric on that case. G-Eval without steps asks the judge
/// for them once per metric and run, shows them in every case's prompt and in the reports; a
/// reply without steps fails the metric on every case, with no case judged without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextual_metrics_judge_each_statement_and_g_eval_writes_its_steps_once() {
    let judge = judge().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &judge.base_url());
    let cases = write(dir.path(), "cases.jsonl", STATEMENT_CASES);
    let metrics = write(dir.path(), "metrics.yaml", STEPLESS_METRICS);
    let json_out = dir.path().join("report.json");
    let html_out = dir.path().join("report.html");
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric-file",
        &metrics,
        "--fail-under",
        "1",
        "--json",
        json_out.to_str().unwrap(),
        "--html",
        html_out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{text}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let score = |case: &str, m: &str| metric(&report, case, m)["score"].clone();
    // Relevancy: 4 statements, 1 about Paris; 3 statements, 2 about Paris.
    assert!(near(&score("paris", "contextual_relevancy"), 0.25));
    assert!(near(&score("ranks", "contextual_relevancy"), 2.0 / 3.0));
    let r = metric(&report, "paris", "contextual_relevancy");
    assert!(
        r["reasoning"]
            .as_str()
            .unwrap()
            .contains("chunk 2, statement 2: not relevant: It is large. (about Paris: false)"),
        "{r}"
    );
    // Precision: useful at ranks 2 of 2; at ranks 1 and 3 of 3: (1/1 + 2/3) / 2.
    assert!(near(&score("paris", "contextual_precision"), 0.5));
    assert!(near(&score("ranks", "contextual_precision"), 5.0 / 6.0));
    let p = metric(&report, "ranks", "contextual_precision");
    assert_eq!(
        p["reasoning"],
        "chunk 1: useful: node useful: true\nchunk 2: not useful: node useful: false\nchunk 3: useful: node useful: true"
    );
    // Recall: one sentence of two attributable; one of one.
    assert!(near(&score("paris", "contextual_recall"), 0.5));
    assert!(near(&score("ranks", "contextual_recall"), 1.0));
    assert!(near(&score("garbled", "contextual_recall"), 1.0));
    // Replies that are no list of verdicts: the metric fails on that case, saying why.
    let g = metric(&report, "garbled", "contextual_relevancy");
    assert!(g["score"].is_null() && g["passed"] == false, "{g}");
    assert!(
        g["reason"].as_str().unwrap().contains(
            "metric contextual_relevancy: judge quality: malformed: verdict 1: `verdict` is not \"yes\" or \"no\""
        ),
        "{g}"
    );
    let g = metric(&report, "garbled", "contextual_precision");
    assert!(g["score"].is_null() && g["passed"] == false, "{g}");
    assert!(
        g["reason"]
            .as_str()
            .unwrap()
            .contains("malformed: the reply has 0 verdicts, not 1"),
        "{g}"
    );
    // G-Eval: the generated steps shown on every case (the judge scores 5 only with them).
    for case in ["paris", "ranks", "garbled"] {
        let s = metric(&report, case, "stepless");
        assert!(near(&s["score"], 1.0), "{s}");
        let n = metric(&report, case, "nosteps");
        assert!(n["score"].is_null() && n["passed"] == false, "{n}");
        assert_eq!(
            n["reason"],
            "metric nosteps: the judge's evaluation steps could not be had: judge quality: malformed: the reply holds no JSON object"
        );
    }
    let assertion = |name: &str| {
        report["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()
            .clone()
    };
    let a = assertion("stepless");
    assert_eq!(a["evaluation_steps_generated"], true, "{a}");
    let steps = a["evaluation_steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{a}");
    assert!(steps[0]
        .as_str()
        .unwrap()
        .starts_with("Check the city named ("));
    let a = assertion("nosteps");
    assert!(
        a["evaluation_steps_error"]
            .as_str()
            .unwrap()
            .contains("the reply holds no JSON object"),
        "{a}"
    );
    let html = std::fs::read_to_string(&html_out).unwrap();
    assert!(
        html.contains("stepless: evaluation steps"),
        "steps in the HTML"
    );
    assert!(html.contains("<li>Compare it with the question</li>"));
    assert!(html.contains("the reply holds no JSON object"));
    // Calls: the steps once per G-Eval metric for the run (not per case), what the step prompt
    // shows, and no case judged by the G-Eval whose steps could not be had.
    let prompts: Vec<String> = judge.requests().iter().map(prompt).collect();
    let step_prompts: Vec<&String> = prompts
        .iter()
        .filter(|p| p.starts_with("Given an evaluation criteria"))
        .collect();
    assert_eq!(step_prompts.len(), 2, "{step_prompts:#?}");
    assert!(
        step_prompts[0].contains("how you should judge the Input and Actual output, generate 3-4")
            && step_prompts[0]
                .contains("Evaluation Criteria:\nSTEPLESS the answer names the right city\n"),
        "{}",
        step_prompts[0]
    );
    assert!(!prompts.iter().any(|p| p.contains("Criteria: NOSTEPS")));
    // Relevancy a call per node (2 + 3 + 1), precision and recall one per case (3 + 3), the
    // steps (2), the stepless G-Eval per case (3), less one: "garbled" asks what "paris" asked
    // (the same question and answer), which the judge's verdict cache answers.
    assert_eq!(prompts.len(), 6 + 3 + 3 + 2 + 3 - 1, "{prompts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_case_without_a_metrics_parameter_or_judge_is_refused_before_any_call() {
    let judge = judge().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &judge.base_url());
    let cases = write(
        dir.path(),
        "cases.jsonl",
        &format!(
            "{RAG_CASES}{}\n",
            r#"{"id": "bare", "input": "hi", "actual_output": "hello"}"#
        ),
    );
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric",
        "contextual_precision",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("case \"bare\": metric contextual_precision needs expected_output")
            && text.contains("case \"bare\": metric contextual_precision needs context"),
        "{text}"
    );
    let metrics = write(
        dir.path(),
        "m.yaml",
        "metrics:\n  - {metric: g_eval, name: ctx, criteria: x, evaluation_params: [retrieval_context]}\n",
    );
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric-file",
        &metrics,
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("case \"bare\": metric ctx needs context"),
        "{text}"
    );
    let metrics = write(
        dir.path(),
        "j.yaml",
        "judge: nope\nmetrics: [{metric: fluency}]\n",
    );
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric-file",
        &metrics,
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("judge \"nope\" is not in the config's judges: (quality)"),
        "{text}"
    );
    // Without any judge configured.
    let (code, text) = eval(&[
        "--config",
        "examples/eval/replay.yaml",
        "--cases",
        &cases,
        "--metric",
        "fluency",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("metric fluency: which judge?"), "{text}");
    assert!(
        judge.requests().is_empty(),
        "no judge call before the checks"
    );
}

#[test]
fn trajectory_graders_read_the_recorded_tool_calls_and_totals() {
    let dir = tempfile::tempdir().unwrap();
    let cases = write(
        dir.path(),
        "cases.jsonl",
        concat!(
            r#"{"id": "book", "input": "book a flight", "actual_output": "Booked.", "tool_calls": ["search", {"name": "book", "arguments": "{\"to\": \"LIS\"}"}], "expected_tools": ["search", {"name": "book", "arguments": {"to": "LIS"}}], "trajectory": {"steps": 3, "tokens": 900, "duration_ms": 1200, "cost_usd": 0.002}}"#,
            "\n",
            r#"{"id": "book-rephrased", "variant_of": "book", "input": "please book me a flight", "actual_output": "Done.", "tool_calls": ["book"], "expected_tools": ["search", "book"], "trajectory": {"steps": 6, "tokens": 2000, "duration_ms": 900, "cost_usd": 0.01}}"#,
            "\n",
            r#"{"id": "recorded", "variant_of": "book", "input": "x", "response": {"id": "c", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "search", "arguments": "{}"}}, {"id": "t2", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}, "expected_tools": ["book", "search"], "trajectory": {"steps": 2, "duration_ms": 10, "cost_usd": 0.0}}"#,
            "\n"
        ),
    );
    let metrics = write(
        dir.path(),
        "m.yaml",
        "metrics:\n  - {metric: max_steps, max: 4}\n  - {metric: max_tokens, max: 1000}\n  - {metric: max_duration_ms, max: 1000}\n  - {metric: max_cost_usd, max: 0.005}\n  - {metric: tool_sequence, tools: [search, book]}\n  - {metric: outcome_equivalent, compare: tool_calls}\n",
    );
    let out = dir.path().join("r.json");
    let (code, text) = eval(&[
        "--config",
        "examples/eval/replay.yaml",
        "--cases",
        &cases,
        "--metric",
        "golden_path_exact",
        "--metric",
        "golden_path_in_order",
        "--metric",
        "golden_path_any_order",
        "--metric-file",
        &metrics,
        "--fail-under",
        "1",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let s = |case: &str, m: &str| metric(&r, case, m)["score"].as_f64().unwrap();
    // The arguments expected are compared as JSON values.
    assert_eq!(s("book", "golden_path_exact"), 1.0);
    assert_eq!(s("book-rephrased", "golden_path_exact"), 0.0);
    assert_eq!(s("book-rephrased", "golden_path_any_order"), 0.0);
    assert_eq!(s("recorded", "golden_path_in_order"), 0.0);
    assert_eq!(s("recorded", "golden_path_any_order"), 1.0);
    assert_eq!(
        [s("book", "max_steps"), s("book-rephrased", "max_steps")],
        [1.0, 0.0]
    );
    // The recorded response's usage counts as the tokens.
    assert_eq!(s("recorded", "max_tokens"), 1.0);
    assert_eq!(s("book-rephrased", "max_tokens"), 0.0);
    assert_eq!(s("book", "max_duration_ms"), 0.0);
    assert_eq!(s("book-rephrased", "max_cost_usd"), 0.0);
    assert_eq!(s("book-rephrased", "tool_sequence"), 0.0);
    assert_eq!(s("recorded", "tool_sequence"), 1.0);
    let m = metric(&r, "book-rephrased", "golden_path_exact");
    assert_eq!(
        m["reason"],
        "tools called [book], expected [search, book] (exactly)"
    );
    assert_eq!(s("recorded", "outcome_equivalent"), 1.0);
    assert_eq!(s("book-rephrased", "outcome_equivalent"), 0.0);
    assert!(text.contains("book-rephrased"), "{text}");
    // A case that is neither a variant nor a base: refused before anything runs.
    let more = format!(
        "{}{}\n",
        std::fs::read_to_string(&cases).unwrap(),
        r#"{"id": "alone", "input": "x", "actual_output": "y"}"#
    );
    let (code, text) = eval(&[
        "--config",
        "examples/eval/replay.yaml",
        "--cases",
        &write(dir.path(), "more.jsonl", &more),
        "--metric-file",
        &write(
            dir.path(),
            "v.yaml",
            "metrics: [{metric: outcome_equivalent, compare: content_hash}]\n",
        ),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("case \"alone\": metric outcome_equivalent needs variant_of"),
        "{text}"
    );
    assert!(
        text.contains("case \"recorded\": metric outcome_equivalent needs actual_output"),
        "{text}"
    );
}

/// Opens `html` in headless Chromium: (the screenshot's bytes, the console lines logged).
fn chromium(html: &Path, dir: &Path) -> (Vec<u8>, Vec<String>) {
    let bin = std::env::var("GUARDWIRE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let png = dir.join(format!(
        "{}.png",
        html.file_stem().unwrap().to_string_lossy()
    ));
    let out = Command::new(&bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1280,2000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium-profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e} (tests/run installs Debian's chromium)"));
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{bin}: {log}");
    // Chromium logs what the page writes to its console (errors included) as CONSOLE lines.
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    (std::fs::read(&png).unwrap_or_default(), console)
}

/// The HTML report of the example cases (one answer blocked by a validator's match), opened in
/// headless Chromium: it renders (a PNG screenshot) without a console message, and the blocked
/// span is marked in the DOM. A page that logs an error is caught by the same check.
#[test]
#[ignore = "needs Chromium; tests/run installs it and runs this with --include-ignored"]
fn the_html_report_opens_in_headless_chromium_with_the_blocked_span_marked() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let (code, text) = eval(&[
        "--config",
        "examples/eval/replay.yaml",
        "--cases",
        "examples/eval/cases.jsonl",
        "--metric",
        "contains",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    let marked = page
        .split("<mark class=\"blocked\" title=\"blocked\">")
        .nth(1)
        .and_then(|rest| rest.split("</mark>").next())
        .unwrap_or_else(|| panic!("no blocked span marked: {page}"));
    assert!(
        marked.starts_with("sk-"),
        "the API key the pack blocked: {marked}"
    );
    let (png, console) = chromium(&html, dir.path());
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 1000,
        "{} bytes",
        png.len()
    );
    assert!(console.is_empty(), "console messages: {console:?}");
    // The check can fail: a page that logs an error.
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><script>console.error('broken')</script></body></html>",
    )
    .unwrap();
    let (_, console) = chromium(&bad, dir.path());
    assert!(console.iter().any(|l| l.contains("broken")), "{console:?}");
}

/// DeepEval's faithfulness (the answer's claims against the context's truths: yes, no or idk)
/// and answer relevancy (the answer's statements against the input), by their metric names:
/// the share of verdicts that are not "no".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faithfulness_and_answer_relevancy_count_every_verdict_but_no() {
    let judge = judge().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &judge.base_url());
    let cases = write(
        dir.path(),
        "cases.jsonl",
        concat!(
            r#"{"id": "mixed", "input": "What is the capital of France?", "actual_output": "Paris is the capital. Lyon is the capital. It has wine. It has the Louvre.", "retrieval_context": ["The capital of France is Paris."]}"#,
            "\n"
        ),
    );
    let json_out = dir.path().join("report.json");
    let (code, text) = eval(&[
        "--config",
        &config,
        "--cases",
        &cases,
        "--metric",
        "faithfulness",
        "--metric",
        "answer_relevancy",
        "--json",
        json_out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    // Claims: Paris yes, Lyon no, wine idk, Louvre idk: 3 of 4.
    let f = metric(&report, "mixed", "faithfulness");
    assert!(near(&f["score"], 0.75), "{f} {text}");
    assert!(
        f["reasoning"]
            .as_str()
            .unwrap()
            .contains("claim 2: no: Lyon is the capital. (the capital is Paris)"),
        "{f}"
    );
    // Statements: two name the capital, two do not: 2 of 4.
    let r = metric(&report, "mixed", "answer_relevancy");
    assert!(near(&r["score"], 0.5), "{r}");
    // Each truths, claims and statements call, then one verdicts call per metric.
    assert_eq!(judge.request_count(), 5);
}
