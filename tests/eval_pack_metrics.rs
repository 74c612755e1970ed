//! BLEU, ROUGE and METEOR as pack eval types, end to end: scored on live turns through the
//! proxy (the eval's results and its own metric on `/metrics`), as assertions of a scenario
//! run by `guardwire eval --scenario`, and refused at config load (`guardwire check`) when
//! METEOR has no readable WordNet. And the cross-variant graders (`outcome_equivalent`,
//! `directional`) in a live run: the variants' answers compared once all of them ran.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::run;
use common::mock_upstream::{openai_chat_stream, sse_data_frames, MockUpstream, Reply};
use common::proxy::{metrics, post_chat, start_proxy};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A WordNet of a few synsets in the database files' format (`car` and `auto` are synonyms).
fn tiny_wordnet(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    let h = "  1 This is a test WordNet.\n";
    write(
        "data.noun",
        &format!("{h}00000100 06 n 02 car 0 auto 0 000 | a vehicle\n"),
    );
    write(
        "index.noun",
        &format!("{h}auto n 1 0 1 0 00000100  \ncar n 1 0 1 0 00000100  \n"),
    );
    write(
        "data.verb",
        &format!("{h}00000100 38 v 02 begin 0 start 0 000 | get going\n"),
    );
    write(
        "index.verb",
        &format!("{h}begin v 1 0 1 0 00000100  \nstart v 1 0 1 0 00000100  \n"),
    );
    write(
        "data.adj",
        &format!("{h}00000100 00 a 01 big(a) 0 000 | of size\n"),
    );
    write("index.adj", &format!("{h}big a 1 0 1 0 00000100  \n"));
    write(
        "data.adv",
        &format!("{h}00000100 02 r 01 fast 0 000 | quickly\n"),
    );
    write("index.adv", &format!("{h}fast r 1 0 1 0 00000100  \n"));
    for pos in ["noun", "verb", "adj", "adv"] {
        write(&format!("{pos}.exc"), "");
    }
}

fn whole(text: &str) -> String {
    json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}})
    .to_string()
}

fn tool_call_stream(name: &str) -> Vec<u8> {
    const P: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":"#;
    let frames = [
        format!(
            r#"{P}{{"role":"assistant","tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"{name}","arguments":"{{}}"}}}}]}},"finish_reason":null}}]}}"#
        ),
        format!(r#"{P}{{}},"finish_reason":"tool_calls"}}]}}"#),
    ];
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut out = sse_data_frames(&refs);
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// The mock: answers by the last user message.
async fn upstream() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        let stream = body["stream"] == true;
        match last.as_str() {
            "What colour is the car?" if stream => Reply::sse_every(
                &openai_chat_stream(&["The car ", "is red."]),
                5,
                Duration::from_millis(1),
            ),
            "What colour is the car?" => Reply::json(200, &whole("The car is red.")),
            "book a flight" | "please book me a flight" => Reply::sse(&tool_call_stream("book")),
            "book it now" => Reply::json(200, &whole("Done.")),
            "capital of France" | "France's capital" => Reply::json(200, &whole("Paris")),
            "down" => Reply::json(503, r#"{"error":{"message":"overloaded","type":"server"}}"#),
            other => Reply::json(200, &whole(&format!("unexpected prompt {other:?}"))),
        }
    })
    .await
}

const PACK: &str = r#"
evals:
  - id: bleu_exact
    type: bleu
    trigger: every_turn
    params: {reference: ["The car is red.", "Something else entirely."]}
    metric: {name: car_bleu, type: gauge}
  - id: bleu_far
    type: bleu
    trigger: every_turn
    params: {reference: "A blue boat sails away.", threshold: 0.5}
  - id: rouge_system
    type: rouge
    trigger: every_turn
    params: {context_roles: [system], variant: rouge1}
    metric: {name: car_rouge, type: gauge, labels: {team: qa}}
  - id: rouge_tools
    type: rouge
    trigger: every_turn
    params: {context_tools: [search]}
  - id: meteor_auto
    type: meteor
    trigger: every_turn
    params: {reference: "The auto is red."}
    metric: {name: car_meteor, type: gauge}
"#;

fn result(eval: &str, result: &str, n: u32) -> String {
    format!(
        "guardwire_eval_results_total{{eval=\"{eval}\",route=\"openai_chat\",result=\"{result}\"}} {n}"
    )
}

fn gauge(m: &str, prefix: &str) -> f64 {
    m.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{m}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn reference_evals_score_live_turns_through_the_proxy() {
    let mock = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let wordnet = dir.path().join("wordnet");
    tiny_wordnet(&wordnet);
    let proxy = start_proxy(
        &mock.base_url(),
        PACK,
        &format!("evals: {{wordnet_dir: \"{}\"}}\n", wordnet.display()),
    )
    .await;
    for stream in [false, true] {
        let body = json!({"model": "m", "stream": stream, "messages": [
            {"role": "system", "content": "The car is blue."},
            {"role": "user", "content": "What colour is the car?"}]});
        let r = post_chat(proxy.addr(), &body.to_string()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(
            r.text().contains("red."),
            "the answer is never changed: {}",
            r.text()
        );
    }
    let want = [
        result("bleu_exact", "pass", 2),
        result("bleu_far", "fail", 2),
        result("rouge_system", "pass", 2),
        // No tool result in the request: no reference, an error (never a pass).
        result("rouge_tools", "error", 2),
        result("meteor_auto", "pass", 2),
    ];
    let mut m = String::new();
    for _ in 0..400 {
        m = metrics(proxy.addr()).await;
        if want.iter().all(|w| m.lines().any(|l| l == w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in &want {
        assert!(m.lines().any(|l| l == w), "{w}:\n{m}");
    }
    // The eval's own metric: the score, the same for the whole and the streamed answer.
    let bleu = gauge(&m, "guardwire_eval_car_bleu{route=\"openai_chat\"} ");
    assert!((bleu - 1.0).abs() < 1e-9, "{bleu}");
    // rouge1 of "the car is red" against the system message "the car is blue": 3 of 4.
    let rouge = gauge(
        &m,
        "guardwire_eval_car_rouge{route=\"openai_chat\",team=\"qa\"} ",
    );
    assert!((rouge - 0.75).abs() < 1e-9, "{rouge}");
    // METEOR with WordNet's car/auto synonym: every word matched in one chunk, 1 − 0.5·(1/4)³.
    let meteor = gauge(&m, "guardwire_eval_car_meteor{route=\"openai_chat\"} ");
    assert!((meteor - 0.9921875).abs() < 1e-9, "{meteor}");
    assert!(
        m.contains("guardwire_eval_score_count{eval=\"bleu_far\",route=\"openai_chat\"} 2"),
        "{m}"
    );
}

#[test]
fn meteor_without_a_readable_wordnet_is_refused_at_config_load() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack.yaml");
    std::fs::write(
        &pack,
        "evals:\n  - {id: m, type: meteor, trigger: every_turn, params: {reference: x}}\n",
    )
    .unwrap();
    let config = dir.path().join("g.yaml");
    let missing = dir.path().join("no-wordnet");
    std::fs::write(
        &config,
        format!(
            "upstreams:\n  openai: \"http://127.0.0.1:9\"\npacks: [\"{}\"]\nevals: {{wordnet_dir: \"{}\"}}\n",
            pack.display(),
            missing.display()
        ),
    )
    .unwrap();
    let (code, out) = run(&["check", "--config", config.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(&pack.display().to_string())
            && out.contains("evals[0] (type: meteor)")
            && out.contains("METEOR needs WordNet 3.0")
            && out.contains("evals.wordnet_dir"),
        "{out}"
    );
    // Unknown params are refused the same way.
    std::fs::write(
        &pack,
        "evals:\n  - {id: b, type: bleu, trigger: every_turn, params: {reference: x, smoothing: floor}}\n",
    )
    .unwrap();
    let (code, out) = run(&["check", "--config", config.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("param 'smoothing': unknown param for `bleu`"),
        "{out}"
    );
}

fn config(dir: &Path, upstream: &str, extra: &str) -> String {
    let path = dir.join("live.yaml");
    std::fs::write(
        &path,
        format!("listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"{upstream}\"\n{extra}"),
    )
    .unwrap();
    path.display().to_string()
}

const SCENARIO: &str = r#"apiVersion: promptkit.altairalabs.ai/v1alpha1
kind: Scenario
metadata: {name: cars}
spec:
  streaming: true
  turns:
    - role: user
      content: "What colour is the car?"
      assertions:
        - type: bleu
          params: {reference: "The car is red."}
        - type: rouge
          params: {reference: "The car is blue.", variant: rouge1, threshold: 0.9}
          message: "Should say blue"
        - type: meteor
          params: {reference: "The auto is red."}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_asserts_with_reference_metrics() {
    let mock = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let wordnet = dir.path().join("wordnet");
    tiny_wordnet(&wordnet);
    let config = config(
        dir.path(),
        &mock.base_url(),
        &format!("evals: {{wordnet_dir: \"{}\"}}\n", wordnet.display()),
    );
    let (code, r, out) =
        common::binary::scenario_report(&std::fs::read_to_string(&config).unwrap(), SCENARIO).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("assert:rouge"), "{out}");
    let a = &r["cases"][0]["live"]["assertions"];
    assert_eq!(r["cases"][0]["output"], "The car is red.", "{r}");
    assert_eq!(a[0]["passed"], true, "{a}");
    assert_eq!(a[0]["message"], "bleu scored 1.0000", "{a}");
    assert_eq!(a[1]["passed"], false, "{a}");
    assert!(
        a[1]["message"]
            .as_str()
            .unwrap()
            .starts_with("Should say blue: rouge scored 0.7500 (rouge1 0.7500, "),
        "{a}"
    );
    assert_eq!(a[2]["passed"], true, "{a}");
    assert_eq!(a[2]["message"], "meteor scored 0.9922", "{a}");

    // Without a readable WordNet the scenario is refused before any turn is sent.
    let bad = config.replace("live.yaml", "bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace(&wordnet.display().to_string(), "/nonexistent/wordnet"),
    )
    .unwrap();
    let before = mock.request_count();
    let scenario = dir.path().join("cars.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let (code, out) = run(&[
        "eval",
        "--config",
        &bad,
        "--scenario",
        scenario.to_str().unwrap(),
        "--model",
        "m",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("cars.yaml: spec.turns[0].assertions[2]")
            && out.contains("evals.wordnet_dir: /nonexistent/wordnet"),
        "{out}"
    );
    assert_eq!(mock.request_count(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_variant_graders_compare_the_live_answers_of_variants() {
    let mock = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &mock.base_url(), "");
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        [
            r#"{"id": "book", "input": "book a flight"}"#,
            r#"{"id": "book-polite", "variant_of": "book", "input": "please book me a flight"}"#,
            r#"{"id": "book-rude", "variant_of": "book", "input": "book it now"}"#,
            r#"{"id": "cap", "input": "capital of France"}"#,
            r#"{"id": "cap-again", "variant_of": "cap", "input": "France's capital"}"#,
            r#"{"id": "cap-down", "variant_of": "cap", "input": "down"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let metric_file = dir.path().join("metrics.yaml");
    std::fs::write(
        &metric_file,
        "metrics:\n  - {metric: outcome_equivalent, compare: content_hash}\n  - {metric: directional, check: same_tool_calls}\n",
    )
    .unwrap();
    let report = dir.path().join("r.json");
    let (code, out) = common::binary::eval_off_workers(&[
        "--config",
        &config,
        "--cases",
        cases.to_str().unwrap(),
        "--live",
        "--model",
        "m",
        "--max-retries",
        "0",
        "--metric-file",
        metric_file.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
    ])
    .await;
    assert!(code == 0 || code == 1, "{out}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let score = |id: &str, metric: &str| -> (Value, String) {
        let case = r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no case {id}: {r}"));
        let m = case["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} on {id}: {case}"));
        (
            m["score"].clone(),
            m["reason"].as_str().unwrap_or("").to_owned(),
        )
    };
    for metric in ["outcome_equivalent", "directional"] {
        // The base against every variant: book-rude answered in text, not with the tool.
        assert_eq!(score("book", metric).0, json!(0.0), "{metric}: {r}");
        assert_eq!(score("book-polite", metric).0, json!(1.0), "{metric}: {r}");
        assert_eq!(score("book-rude", metric).0, json!(0.0), "{metric}: {r}");
        assert_eq!(score("cap-again", metric).0, json!(1.0), "{metric}: {r}");
        // No answer (a 503): nothing to compare, not scored — never two empty answers equal.
        let (s, reason) = score("cap-down", metric);
        assert_eq!(s, Value::Null, "{metric}: {r}");
        assert!(reason.contains("has no"), "{metric}: {reason}");
        assert_eq!(score("cap", metric).0, Value::Null, "{metric}: {r}");
    }
    // Each case was sent once, all of them before any comparison.
    assert_eq!(mock.request_count(), 6);
}
