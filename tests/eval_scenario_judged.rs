//! `guardwire eval --scenario` with judged assertions (`llm_judge`): each turn's verdict is
//! asked of the config's judge — a scripted one on 127.0.0.1, the same mock also answering the
//! turns as the upstream — as the packs' evals ask it, and passes at the assertion's
//! `min_score`; a judged assertion naming no configured judge is refused before any request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::eval;
use common::mock_upstream::{MockUpstream, Reply};
use serde_json::json;

fn whole(text: &str) -> String {
    json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
    .to_string()
}

/// The upstream of the turns, and the judge (`model: judge-model`): the judge scores 0.1 an
/// answer that says no, else 0.9.
async fn mock() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = req.body_json().unwrap();
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        if body["model"] == "judge-model" {
            let (score, reason) = if last.contains("No weekend") {
                (0.1, "no opening days given")
            } else {
                (0.9, "gives the opening days")
            };
            let verdict = json!({"score": score, "reason": reason}).to_string();
            return Reply::json(200, &whole(&verdict));
        }
        let answer = if last.contains("weekend") {
            "No weekend support, sorry."
        } else {
            "We are open Monday to Friday."
        };
        Reply::json(200, &whole(answer))
    })
    .await
}

const SCENARIO: &str = r#"apiVersion: promptkit.altairalabs.ai/v1alpha1
kind: Scenario
metadata:
  name: judged-hours
spec:
  turns:
    - role: user
      content: "When are you open?"
      assertions:
        - type: llm_judge
          params: {judge: quality, criteria: "The answer gives the opening days", min_score: 0.7}
          message: "Should give the opening days"
    - role: user
      content: "Do you offer weekend support?"
      assertions:
        - type: llm_judge
          params: {judge: quality, criteria: "The answer gives the opening days", min_score: 0.7}
          message: "Should give the opening days"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judged_assertions_ask_the_configured_judge_turn_by_turn() {
    let mock = mock().await;
    let config = format!(
        "listen: \"127.0.0.1:9\"\nupstreams:\n  openai: \"{0}\"\npacks: [\"examples/eval/pack.yaml\"]\njudges:\n  - name: quality\n    protocol: openai_chat\n    base_url: \"{0}\"\n    model: judge-model\n    timeout_ms: 5000\n",
        mock.base_url()
    );
    let (code, r, out) = common::binary::scenario_report(&config, SCENARIO).await;
    assert_eq!(code, 0, "{out}");
    let assertion = |n: usize| {
        let case = r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == format!("judged-hours#turn{n}"))
            .unwrap_or_else(|| panic!("no turn {n} in {r}"));
        case["live"]["assertions"][0].clone()
    };
    let (t1, t2) = (assertion(1), assertion(2));
    assert_eq!(t1["passed"], true, "{t1}");
    assert_eq!(t2["passed"], false, "{t2}");
    assert_eq!(t2["message"], "Should give the opening days", "{t2}");
    // The judge was asked once a turn, about the answer the client received.
    let judged: Vec<String> = mock
        .requests()
        .iter()
        .filter(|q| q.body_json().unwrap()["model"] == "judge-model")
        .map(|q| q.body_str())
        .collect();
    assert_eq!(judged.len(), 2, "{judged:?}");
    assert!(
        judged[0].contains("We are open Monday to Friday."),
        "{}",
        judged[0]
    );
    assert!(judged[1].contains("No weekend support"), "{}", judged[1]);

    // A judged assertion naming a judge the config lacks: refused at load, nothing sent.
    let before = mock.request_count();
    let dir = tempfile::tempdir().unwrap();
    let (config_path, bad) = (dir.path().join("g.yaml"), dir.path().join("bad.yaml"));
    std::fs::write(&config_path, &config).unwrap();
    std::fs::write(&bad, SCENARIO.replacen("judge: quality", "judge: nope", 1)).unwrap();
    let (code, out) = eval(&[
        "--config",
        config_path.to_str().unwrap(),
        "--scenario",
        bad.to_str().unwrap(),
        "--model",
        "m",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("bad.yaml: spec.turns[0].assertions[0]"),
        "{out}"
    );
    assert!(out.contains("nope"), "{out}");
    assert_eq!(mock.request_count(), before);
}
