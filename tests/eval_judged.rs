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

/// What the scripted judge answers: (score, reason, G-Eval alternatives as (digit, logprob)).
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
    if criteria.starts_with("The retrieved chunk holds") {
        let chunk = c.split("Retrieved chunk:\n").nth(1).unwrap_or_default();
        let yes = chunk.contains("capital");
        return (
            f64::from(u8::from(yes)),
            format!("chunk relevant: {yes}"),
            vec![],
        );
    }
    if criteria.starts_with("The retrieved chunk was useful") {
        let chunk = c.split("Retrieved chunk:\n").nth(1).unwrap_or_default();
        let yes = chunk.contains("Paris");
        return (
            f64::from(u8::from(yes)),
            format!("chunk useful: {yes}"),
            vec![],
        );
    }
    if criteria.starts_with("The sentence") {
        let sentence = c.split("Sentence:\n").nth(1).unwrap_or_default();
        let yes = sentence.contains("Paris");
        return (
            f64::from(u8::from(yes)),
            format!("attributable: {yes}"),
            vec![],
        );
    }
    if criteria.starts_with("STRICT") {
        let yes = c.contains("Actual output:\nParis");
        return (f64::from(u8::from(yes)), "strict verdict".into(), vec![]);
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
        let (score, reason, alternatives) = answer(&prompt(req));
        let text = json!({"score": score, "reason": reason}).to_string();
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
    // One chunk of two is about the capital; the useful one is ranked second: 1/2.
    let r = metric(&report, "paris", "contextual_relevancy");
    assert!(near(&r["score"], 0.5), "{r}");
    assert!(
        r["reasoning"]
            .as_str()
            .unwrap()
            .contains("chunk 2: relevant: chunk relevant: true"),
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
    // 2 cases x (groundedness, relevance, strict, correctness) + relevancy 3 chunks +
    // precision 3 chunks + recall 3 sentences, less one: both cases ask whether the same
    // chunk is relevant to the same question, which the judge's verdict cache answers.
    assert_eq!(prompts.len(), 8 + 3 + 3 + 3 - 1, "{prompts:#?}");

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
