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
//! `response` / `response_sse`, as in a replay file. For the trajectory graders: the tools
//! called (`tool_calls`, else those of a whole recorded `response`), the totals
//! (`trajectory: {steps, tokens, duration_ms, cost_usd}`), the golden path (`expected_tools`)
//! and, for cross-variant assertions, `variant_of` (the id of the case this one varies).

use super::metrics::{Metric, Needs, Scored, Scorer};
use super::needs::CaseView;
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
    expected_tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    trajectory: Option<Trajectory>,
    #[serde(default)]
    variant_of: Option<String>,
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

pub use super::needs::{ToolCall, Trajectory};

/// One case, read and checked.
#[derive(Clone)]
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
    /// The tools called, in order; `None`: not recorded (a streamed answer without
    /// `tool_calls`).
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The golden tool path.
    pub expected_tools: Option<Vec<ToolCall>>,
    pub trajectory: Trajectory,
    /// The id of the case this one is a variant of.
    pub variant_of: Option<String>,
    /// The exchange as a replay line (what the packs check; what a live run sends).
    pub(super) exchange: Vec<u8>,
    /// The metrics scored on this case, by index in the run's [`Scorer::asked`]; `None`: all
    /// (a HoloDeck test case may name its own).
    pub metrics: Option<Vec<usize>>,
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
    /// The text a blocking validator matched, when known (highlighted in the HTML report).
    pub blocked_span: Option<String>,
    /// One per metric asked for, in the order asked.
    pub scores: Vec<MetricResult>,
    /// What a live run observed (`None` for a case checked offline).
    pub observed: Option<super::observed::Observed>,
}

/// One metric on one case.
pub struct MetricResult {
    /// Which of the run's metrics ([`Scorer::asked`]) this is.
    pub asked: usize,
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
    /// The judge's reasons (a judged metric) or the grader's account (a trajectory grader),
    /// whether it passed or not.
    pub reasoning: Option<String>,
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
                        // A base (named by another case's variant_of) counts: checked below.
                        // A live run makes the answer, its tool calls and totals.
                        let made_live = live
                            && matches!(
                                need,
                                Needs::Output
                                    | Needs::ToolCalls
                                    | Needs::Steps
                                    | Needs::Tokens
                                    | Needs::Duration
                            );
                        if need != Needs::Variant && !made_live && !case.has(need) {
                            errors.push(format!(
                                "line {n}: case {:?}: metric {} needs {}, which the case lacks",
                                case.id,
                                m.name(),
                                need.as_str()
                            ));
                        }
                    }
                }
                cases.push(case);
            }
            Err(e) => errors.push(format!("line {n}: {e}")),
        }
    }
    let cross: Vec<&Metric> = metrics
        .iter()
        .filter(|m| m.needs().contains(&Needs::Variant))
        .collect();
    let ids: std::collections::HashSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let bases: std::collections::HashSet<&str> = cases
        .iter()
        .filter_map(|c| c.variant_of.as_deref())
        .collect();
    for c in &cases {
        if c.variant_of.is_none() && !bases.contains(c.id.as_str()) {
            for m in &cross {
                errors.push(format!(
                    "line {}: case {:?}: metric {} needs variant_of (or a case that is its variant), which the case lacks",
                    c.line,
                    c.id,
                    m.name()
                ));
            }
        }
        if let Some(base) = &c.variant_of {
            if base == &c.id || !ids.contains(base.as_str()) {
                errors.push(format!(
                    "line {}: case {:?}: variant_of {base:?} names no other case of the file",
                    c.line, c.id
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

impl Case {
    /// The case as the judged metrics and trajectory graders read it.
    pub fn view(&self) -> CaseView<'_> {
        CaseView {
            id: &self.id,
            input: &self.input,
            output: self.output.as_deref(),
            expected: self.expected.as_deref(),
            context: self.context.as_deref(),
            tool_calls: self.tool_calls.as_deref(),
            expected_tools: self.expected_tools.as_deref(),
            trajectory: &self.trajectory,
        }
    }

    /// Whether the case carries what `need` names.
    pub fn has(&self, need: Needs) -> bool {
        let t = &self.trajectory;
        match need {
            Needs::GroundTruth => self.expected.is_some(),
            Needs::Context => self.context.as_ref().is_some_and(|c| !c.is_empty()),
            Needs::Output => self.output.is_some(),
            Needs::ToolCalls => self.tool_calls.is_some(),
            Needs::ExpectedTools => self.expected_tools.is_some(),
            Needs::Steps => t.steps.is_some(),
            Needs::Tokens => t.tokens.is_some(),
            Needs::Duration => t.duration_ms.is_some(),
            Needs::Cost => t.cost_usd.is_some(),
            Needs::Variant => self.variant_of.is_some(),
        }
    }
}

/// The most tool calls a case lists.
const MAX_TOOL_CALLS: usize = 4096;

/// A `tool_calls` or `expected_tools` list: names, or `{"name", "arguments"}` objects
/// (arguments as an object or its JSON text).
fn tool_list(v: Vec<Value>, key: &str) -> Result<Vec<ToolCall>, String> {
    if v.len() > MAX_TOOL_CALLS {
        return Err(format!("{key}: more than {MAX_TOOL_CALLS} calls"));
    }
    v.into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(name) if !name.is_empty() => Ok(ToolCall {
                name,
                arguments: None,
            }),
            Value::Object(mut o) => {
                let name = match o.remove("name") {
                    Some(Value::String(n)) if !n.is_empty() => n,
                    _ => return Err(format!("{key}[{i}]: name is a non-empty string")),
                };
                let arguments = match o.remove("arguments") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(text)) => {
                        Some(serde_json::from_str(&text).map_err(|_| {
                            format!("{key}[{i}]: arguments, as a text, is not JSON")
                        })?)
                    }
                    Some(v) => Some(v),
                };
                if let Some(k) = o.keys().next() {
                    return Err(format!(
                        "{key}[{i}]: unknown key {k} (known: name, arguments)"
                    ));
                }
                Ok(ToolCall { name, arguments })
            }
            _ => Err(format!(
                "{key}[{i}]: a tool name or {{\"name\", \"arguments\"}}"
            )),
        })
        .collect()
}

/// The tool calls and token usage of a whole recorded answer, decoded by its protocol
/// (`None` when it does not decode: the packs' check reports that).
fn recorded_calls(protocol: Option<&str>, body: &[u8]) -> Option<(Vec<ToolCall>, Option<u64>)> {
    let p = crate::protocol::by_name(protocol.unwrap_or("openai_chat"))?;
    let mut deltas = Vec::new();
    p.decode_response(body, &mut deltas).ok()?;
    let mut calls = Vec::new();
    let mut tokens = None;
    for d in &deltas {
        match d {
            crate::delta::Delta::ToolCallStart { name, .. } => calls.push(ToolCall {
                name: name.to_string(),
                arguments: None,
            }),
            crate::delta::Delta::Usage {
                input_tokens,
                output_tokens,
                ..
            } if input_tokens.is_some() || output_tokens.is_some() => {
                tokens = Some(input_tokens.unwrap_or(0) + output_tokens.unwrap_or(0));
            }
            _ => {}
        }
    }
    Some((calls, tokens))
}

fn read_case(raw: &str, n: u64) -> Result<Case, String> {
    let l: Line =
        serde_json::from_str(raw).map_err(|e| super::line_error(&e, "not a case", None))?;
    let id = super::line_id(l.id, n);
    let expected_tools = l
        .expected_tools
        .map(|v| tool_list(v, "expected_tools"))
        .transpose()
        .map_err(|e| format!("case {id:?}: {e}"))?;
    let mut tool_calls = l
        .tool_calls
        .map(|v| tool_list(v, "tool_calls"))
        .transpose()
        .map_err(|e| format!("case {id:?}: {e}"))?;
    let mut trajectory = l.trajectory.unwrap_or_default();
    if tool_calls.is_none() && l.actual_output.is_some() {
        // A text answer, recorded as such: no tool was called.
        tool_calls = Some(Vec::new());
    }
    if let Some(raw) = &l.response {
        if let Some((calls, tokens)) = recorded_calls(l.protocol.as_deref(), raw.get().as_bytes()) {
            tool_calls.get_or_insert(calls);
            if trajectory.tokens.is_none() {
                trajectory.tokens = tokens;
            }
        }
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
        tool_calls,
        expected_tools,
        trajectory,
        variant_of: l.variant_of,
        exchange: Value::Object(exchange).to_string().into_bytes(),
        metrics: None,
    })
}

/// For cross-variant assertions, each case's related cases, by index in `all`: a variant's
/// base (`variant_of`), a base's variants (in file order).
pub fn relations(all: &[Case]) -> Vec<Vec<usize>> {
    let mut by_id: std::collections::HashMap<&str, usize> = Default::default();
    let mut variants: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (i, c) in all.iter().enumerate() {
        by_id.entry(c.id.as_str()).or_insert(i);
        if let Some(b) = &c.variant_of {
            variants.entry(b.as_str()).or_default().push(i);
        }
    }
    all.iter()
        .map(|c| match &c.variant_of {
            Some(b) => by_id.get(b.as_str()).copied().into_iter().collect(),
            None => variants.get(c.id.as_str()).cloned().unwrap_or_default(),
        })
        .collect()
}

/// Runs one case: the packs, then every metric.
pub fn run(
    rt: &Runtime,
    forced_route: Option<&str>,
    case: &Case,
    related: &[&Case],
    scorer: &Scorer,
) -> CaseResult {
    let mut blocked_span = None;
    let pack = super::record::read(&case.exchange, case.line)
        .and_then(|ex| replay::check(rt, forced_route, &ex, case.line))
        .map(|o| match o.verdict {
            Verdict::Passed => None,
            Verdict::Blocked {
                stage,
                validator,
                message,
                matched,
            } => {
                blocked_span = matched.filter(|m| !m.is_empty());
                Some(format!(
                    "blocked at {} by {}: {message}",
                    stage.as_str(),
                    o.policy.validator(validator).label
                ))
            }
            Verdict::Refused { stage, reason } => {
                Some(format!("refused at {}: {reason}", stage.as_str()))
            }
        })
        .unwrap_or_else(Some);
    CaseResult {
        id: case.id.clone(),
        tags: case.tags.clone(),
        input: case.input.clone(),
        output: case.output.clone(),
        expected: case.expected.clone(),
        pack,
        blocked_span,
        scores: score_all(scorer, case, related),
        observed: None,
    }
}

/// Every metric asked for on one case (`related`: its base or its variants): the case's own
/// list, else all; under HoloDeck's rule ([`Scorer::skip_unmet`]) only those whose inputs the
/// case has, and none on an empty answer.
pub fn score_all(scorer: &Scorer, case: &Case, related: &[&Case]) -> Vec<MetricResult> {
    let all: Vec<usize> = match &case.metrics {
        Some(list) => list.clone(),
        None => (0..scorer.asked.len()).collect(),
    };
    if scorer.skip_unmet && case.output.as_deref().is_none_or(str::is_empty) {
        return Vec::new();
    }
    all.into_iter()
        .filter_map(|i| {
            let a = scorer.asked.get(i)?;
            if scorer.skip_unmet && !a.metric.needs().iter().all(|n| case.has(*n)) {
                return None;
            }
            Some(score(scorer, i, case, related))
        })
        .collect()
}

/// One metric (the run's `i`-th) on one case.
fn score(scorer: &Scorer, i: usize, case: &Case, related: &[&Case]) -> MetricResult {
    let a = &scorer.asked[i];
    let (m, min) = (&a.metric, a.min);
    let fail = |reason: String| MetricResult {
        asked: i,
        metric: m.clone(),
        min,
        score: None,
        passed: false,
        reason: Some(reason),
        detail: Vec::new(),
        reasoning: None,
    };
    // HoloDeck's `response_path`: the metric grades the answer's JSON leaf.
    let leaf;
    let case = match (&a.response_path, &case.output) {
        (Some(path), Some(output)) => match path.extract(output) {
            Ok(text) => {
                let mut c = case.clone();
                c.output = Some(text);
                leaf = c;
                &leaf
            }
            Err(e) => return fail(e),
        },
        _ => case,
    };
    let refs: Vec<&str> = case.expected.as_deref().into_iter().collect();
    let output = case.output.as_deref().unwrap_or_default();
    let scored = match m {
        Metric::Judged(spec) => scorer.judged(spec, &case.view()),
        Metric::Trajectory(spec) => {
            let related: Vec<CaseView<'_>> = related.iter().map(|c| c.view()).collect();
            super::trajectory::grade(spec, &case.view(), &related).map(|g| Scored {
                value: g.score,
                detail: Vec::new(),
                reasoning: Some(g.reason),
            })
        }
        _ => scorer.score(m, output, &refs),
    };
    match scored {
        Ok(scored) => {
            let score = scored.value;
            let passed = score >= min;
            let reason = (!passed).then(|| match m {
                Metric::Equals | Metric::Contains => format!(
                    "{} scored {score}: the output does not {} the expected output",
                    m.name(),
                    if *m == Metric::Equals {
                        "equal"
                    } else {
                        "contain"
                    }
                ),
                Metric::Equality(_) | Metric::Numeric(_) => format!(
                    "{} scored {score}: the output is not {} the ground truth",
                    m.name(),
                    if matches!(m, Metric::Equality(_)) {
                        "equal to"
                    } else {
                        "the number of"
                    }
                ),
                Metric::Matches(p) => format!(
                    "matches scored {score}: the output has no match of {:?}",
                    p.pattern
                ),
                Metric::Trajectory(_) => scored.reasoning.clone().unwrap_or_default(),
                _ => format!("{} scored {score:.4}, below {min}", m.name()),
            });
            MetricResult {
                asked: i,
                metric: m.clone(),
                min,
                score: Some(score),
                passed,
                reason,
                detail: scored.detail,
                reasoning: scored.reasoning,
            }
        }
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests;
