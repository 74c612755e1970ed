//! Cases (`--cases FILE.jsonl`): a test suite over recorded answers. Each case is checked by
//! the packs as an exchange (the assertion `pack`: released, not blocked or refused — through
//! [`super::replay::check`], the replay's code path) and scored by the metrics asked for
//! (`--metric`). Every case is read and every metric's parameters checked before any case
//! runs: a metric that needs an expected output on a case without one is an error naming both.
//!
//! A case, one JSON object a line:
//! `{"id", "input": "text" | [messages], "actual_output": "text", "expected_output" |
//! "ground_truth", "context" | "retrieval_context": [...], "tags": [...]}`; or, in place of
//! `input`/`actual_output`, a recorded exchange's `request` (+ `protocol`, `path`, `route`) and
//! `response` / `response_sse`, as in a replay file. Trajectory graders (`expected_tools`) are
//! not available in this build and refused.

use super::metrics::{Metric, Needs, Scorer};
use super::replay::{self, Verdict};
use crate::proxy::Runtime;
use serde::Deserialize;
use serde_json::{json, Value};

/// The largest cases file read (they are read whole, to check them before running).
pub const MAX_CASES_BYTES: u64 = 256 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    actual_output: Option<String>,
    #[serde(default, alias = "ground_truth")]
    expected_output: Option<String>,
    #[serde(default, alias = "retrieval_context")]
    context: Option<Vec<String>>,
    #[serde(default)]
    expected_tools: Option<Value>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    route: Option<String>,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    request: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    response: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    response_sse: Option<String>,
    /// Live runs: ask for a streamed answer (`"stream": true` in the request).
    #[serde(default)]
    stream: Option<bool>,
}

/// One case, read and checked.
pub struct Case {
    pub line: u64,
    pub id: String,
    pub tags: Vec<String>,
    pub expected: Option<String>,
    pub context: Option<Vec<String>>,
    pub output: Option<String>,
    /// The input as the reports show it: the text, or the messages or request as JSON.
    pub input: String,
    /// A recorded answer came with the case (`actual_output`, `response`, `response_sse`).
    pub(super) answered: bool,
    /// The exchange as a replay line (what the packs check; what a live run sends).
    pub(super) exchange: Vec<u8>,
}

/// How one case came out.
pub struct CaseResult {
    pub id: String,
    pub tags: Vec<String>,
    /// The input, answer and expected output as the reports show them.
    pub input: String,
    pub output: Option<String>,
    pub expected: Option<String>,
    /// The packs' verdict: `None` when released, else why not.
    pub pack: Option<String>,
    /// One per metric asked for, in the order asked.
    pub scores: Vec<MetricResult>,
    /// What a live run observed (`None` for a case checked offline).
    pub observed: Option<super::observed::Observed>,
}

/// One metric on one case.
pub struct MetricResult {
    pub metric: Metric,
    /// The score the case needed.
    pub min: f64,
    /// `None`: not scored (the reason says why; the case fails the metric).
    pub score: Option<f64>,
    pub passed: bool,
    /// Why it failed or was not scored.
    pub reason: Option<String>,
    /// Every F-measure by name, for ROUGE.
    pub detail: Vec<(&'static str, f64)>,
}

/// Reads every case of `text` (a JSONL file's contents) and checks that each has what every
/// metric needs. `Err`: every problem found, by line and case.
pub fn read_all(text: &str, metrics: &[Metric]) -> Result<Vec<Case>, Vec<String>> {
    read_all_for(text, metrics, false)
}

/// Like [`read_all`]; `live`: the answers come from the run (a case needs no `actual_output`,
/// and may not bring one).
pub fn read_all_for(text: &str, metrics: &[Metric], live: bool) -> Result<Vec<Case>, Vec<String>> {
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match read_case(raw, n) {
            Ok(case) => {
                if live && (case.output.is_some() || case.answered) {
                    errors.push(format!(
                        "line {n}: case {:?}: a live run asks the upstream: actual_output, response and response_sse are for --cases without --live",
                        case.id
                    ));
                }
                for m in metrics {
                    for need in m.needs() {
                        let has = match need {
                            Needs::GroundTruth => case.expected.is_some(),
                            Needs::Context => case.context.as_ref().is_some_and(|c| !c.is_empty()),
                        };
                        if !has {
                            errors.push(format!(
                                "line {n}: case {:?}: metric {} needs {}, which the case lacks",
                                case.id,
                                m.name(),
                                need.as_str()
                            ));
                        }
                    }
                    if case.output.is_none() && !live {
                        errors.push(format!(
                            "line {n}: case {:?}: metric {} needs actual_output, which the case lacks",
                            case.id,
                            m.name()
                        ));
                    }
                }
                cases.push(case);
            }
            Err(e) => errors.push(format!("line {n}: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

fn read_case(raw: &str, n: u64) -> Result<Case, String> {
    let l: Line =
        serde_json::from_str(raw).map_err(|e| super::line_error(&e, "not a case", None))?;
    let id = super::line_id(l.id, n);
    if l.expected_tools.is_some() {
        return Err(format!(
            "case {id:?}: expected_tools: trajectory graders are not available in this build"
        ));
    }
    let mut exchange = serde_json::Map::new();
    exchange.insert("id".into(), json!(id));
    for (k, v) in [
        ("route", &l.route),
        ("protocol", &l.protocol),
        ("path", &l.path),
    ] {
        if let Some(v) = v {
            exchange.insert(k.into(), json!(v));
        }
    }
    let shown = match (&l.input, &l.request) {
        (Some(Value::String(text)), _) => text.clone(),
        (Some(v), _) => v.to_string(),
        (None, Some(raw)) => raw.get().to_owned(),
        (None, None) => String::new(),
    };
    let request: Value = match (l.input, l.request) {
        (Some(_), Some(_)) => return Err(format!("case {id:?}: input or request, not both")),
        (None, None) => return Err(format!("case {id:?}: no input (or request)")),
        (Some(Value::String(text)), None) => {
            json!({"model": "case", "messages": [{"role": "user", "content": text}]})
        }
        (Some(messages @ Value::Array(_)), None) => json!({"model": "case", "messages": messages}),
        (Some(_), None) => {
            return Err(format!(
                "case {id:?}: input is a text or a list of chat messages"
            ))
        }
        (None, Some(raw)) => serde_json::from_str(raw.get()).map_err(|e| e.to_string())?,
    };
    let mut request = request;
    if let (Some(stream), Some(body)) = (l.stream, request.as_object_mut()) {
        body.insert("stream".into(), json!(stream));
    }
    exchange.insert("request".into(), request);
    let answers = [
        l.actual_output.is_some(),
        l.response.is_some(),
        l.response_sse.is_some(),
    ];
    if answers.iter().filter(|a| **a).count() > 1 {
        return Err(format!(
            "case {id:?}: one of actual_output, response, response_sse"
        ));
    }
    let answered = answers.iter().any(|a| *a);
    if let Some(text) = &l.actual_output {
        exchange.insert(
            "response".into(),
            json!({"id": "case", "object": "chat.completion", "model": "case",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}),
        );
    }
    if let Some(raw) = l.response {
        let v: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        exchange.insert("response".into(), v);
    }
    if let Some(sse) = l.response_sse {
        exchange.insert("response_sse".into(), json!(sse));
    }
    Ok(Case {
        line: n,
        id,
        tags: l.tags,
        expected: l.expected_output,
        context: l.context,
        output: l.actual_output,
        input: shown,
        answered,
        exchange: Value::Object(exchange).to_string().into_bytes(),
    })
}

/// Runs one case: the packs, then every metric.
pub fn run(rt: &Runtime, forced_route: Option<&str>, case: &Case, scorer: &Scorer) -> CaseResult {
    let pack = super::record::read(&case.exchange, case.line)
        .and_then(|ex| replay::check(rt, forced_route, &ex, case.line))
        .map(|o| match o.verdict {
            Verdict::Passed => None,
            Verdict::Blocked {
                stage,
                validator,
                message,
            } => Some(format!(
                "blocked at {} by {}: {message}",
                stage.as_str(),
                o.policy.validator(validator).label
            )),
            Verdict::Refused { stage, reason } => {
                Some(format!("refused at {}: {reason}", stage.as_str()))
            }
        })
        .unwrap_or_else(Some);
    let output = case.output.as_deref().unwrap_or_default();
    let scores = score(scorer, output, case.expected.as_deref());
    CaseResult {
        id: case.id.clone(),
        tags: case.tags.clone(),
        input: case.input.clone(),
        output: case.output.clone(),
        expected: case.expected.clone(),
        pack,
        scores,
        observed: None,
    }
}

/// Every metric asked for on one answer (`expected`: the case's expected output).
pub fn score(scorer: &Scorer, output: &str, expected: Option<&str>) -> Vec<MetricResult> {
    let refs: Vec<&str> = expected.into_iter().collect();
    scorer
        .asked
        .iter()
        .map(|a| {
            let m = a.metric;
            match scorer.score(m, output, &refs) {
                Ok(scored) => {
                    let score = scored.value;
                    let passed = score >= a.min;
                    let reason = (!passed).then(|| match m {
                        Metric::Equals | Metric::Contains => format!(
                            "{} scored {score}: the output does not {} the expected output",
                            m.name(),
                            if m == Metric::Equals {
                                "equal"
                            } else {
                                "contain"
                            }
                        ),
                        _ => format!("{} scored {score:.4}, below {}", m.name(), a.min),
                    });
                    MetricResult {
                        metric: m,
                        min: a.min,
                        score: Some(score),
                        passed,
                        reason,
                        detail: scored.detail,
                    }
                }
                Err(e) => MetricResult {
                    metric: m,
                    min: a.min,
                    score: None,
                    passed: false,
                    reason: Some(e),
                    detail: Vec::new(),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parameters_are_checked_before_any_case_runs() {
        let text = "{\"id\":\"a\",\"input\":\"hi\",\"actual_output\":\"hello\",\"expected_output\":\"hello\"}\n\
                    {\"id\":\"b\",\"input\":\"hi\",\"actual_output\":\"hello\"}\n\
                    {\"id\":\"c\",\"input\":\"hi\"}\n";
        let errors = read_all(text, &[Metric::Equals]).err().unwrap();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("case \"b\": metric equals needs expected_output"));
        assert!(errors[2].contains("case \"c\": metric equals needs actual_output"));
        assert_eq!(read_all(text, &[]).unwrap().len(), 3);
        let tools = read_all("{\"input\":\"x\",\"expected_tools\":[\"a\"]}", &[])
            .err()
            .unwrap();
        assert!(
            tools[0].contains("not available in this build"),
            "{tools:?}"
        );
        let case = &read_all("{\"input\":[{\"role\":\"user\",\"content\":\"q\"}],\"ground_truth\":\"a\",\"retrieval_context\":[\"c\"]}", &[]).unwrap()[0];
        assert_eq!(case.expected.as_deref(), Some("a"));
        assert!(String::from_utf8_lossy(&case.exchange).contains("\"content\":\"q\""));
    }
}
