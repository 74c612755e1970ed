//! A pack's `evals:` entries: an eval's own fields (id, trigger, sampling, `when`, `metric`,
//! `threshold`), then its check, read like a validator's.

use super::params::{as_bool, as_string};
use super::{parse_validator, PackError};
use crate::policy::compile::evals::EvalDef;
use crate::policy::evals::{EvalHead, EvalMetric, MetricKind, Trigger, When};
use crate::policy::judged::CheckRefs;
use crate::policy::Threshold;
use serde_json::{Map, Value};

/// PromptKit's default share of sampled turns or sessions, in percent.
const DEFAULT_SAMPLE_PERCENTAGE: f64 = 5.0;

/// One `evals:` entry; `None` when it is disabled (after validation).
pub(super) fn parse_eval(
    file: &str,
    index: usize,
    entry: &Value,
    refs: &CheckRefs,
) -> Result<Option<EvalDef>, PackError> {
    let type_name = entry.get("type").and_then(Value::as_str).unwrap_or("");
    let at = |message: String| PackError {
        file: file.to_owned(),
        location: format!("evals[{index}] (type: {type_name}): "),
        message,
    };
    let Value::Object(fields) = entry else {
        return Err(at("an eval must be a mapping".into()));
    };
    // The check's own keys go to the validator parser; the eval's are read here.
    let mut check = Map::new();
    let (mut id, mut trigger, mut percentage) = (None, None, None);
    let (mut when, mut metric, mut threshold) = (When::default(), None, None);
    let mut expect_passed = None;
    for (key, value) in fields {
        match key.as_str() {
            "type" | "params" | "enabled" | "message" | "on_error" => {
                check.insert(key.clone(), value.clone());
            }
            "id" => match value.as_str() {
                Some(s) if !s.trim().is_empty() => id = Some(s.to_owned()),
                _ => return Err(at("`id` must be a non-empty string".into())),
            },
            "trigger" => trigger = Some(value.as_str().unwrap_or("").to_owned()),
            "sample_percentage" => match value.as_f64() {
                Some(p) if (0.0..=100.0).contains(&p) => percentage = Some(p),
                _ => return Err(at("`sample_percentage` must be a number from 0 to 100".into())),
            },
            "when" => when = parse_when(value).map_err(&at)?,
            "metric" => metric = Some(parse_metric(value).map_err(&at)?),
            "threshold" => {
                let (t, passed) = parse_threshold(value).map_err(&at)?;
                threshold = Some(t);
                expect_passed = passed;
            }
            // Documentation and PromptKit's scheduling groups: nothing to run.
            "description" | "groups" => {}
            other => {
                return Err(at(format!(
                    "unknown key `{other}` (expected id, type, trigger, params, sample_percentage, metric, threshold, when, enabled, message, on_error, description, groups)"
                )))
            }
        }
    }
    if type_name == "assertion" || type_name == "guardrail" {
        let (inner, t) = unwrap_assertion(&check, type_name).map_err(&at)?;
        check = inner;
        if t.min_score.is_some() || t.max_score.is_some() {
            threshold = Some(t);
        }
    }
    let id =
        id.ok_or_else(|| at("missing `id` (every eval needs one: it labels its metrics)".into()))?;
    let percentage = percentage.unwrap_or(DEFAULT_SAMPLE_PERCENTAGE);
    let trigger = match trigger.as_deref() {
        None => return Err(at("missing `trigger` (every_turn, sample_turns, sample_sessions, on_session_complete, on_conversation_complete, on_workflow_step)".into())),
        Some("every_turn") => Trigger::EveryTurn,
        Some("on_workflow_step") => Trigger::WorkflowStep,
        Some("sample_turns") => Trigger::SampleTurns(percentage),
        Some("sample_sessions") => Trigger::SampleSessions(percentage),
        Some("on_session_complete" | "on_conversation_complete") => Trigger::SessionComplete,
        Some(other) => return Err(at(format!("`trigger`: unknown trigger `{other}` (expected every_turn, sample_turns, sample_sessions, on_session_complete, on_conversation_complete, on_workflow_step)"))),
    };
    let (validator, def, enabled) =
        parse_validator(file, "evals", index, &Value::Object(check), refs)?;
    if let Some(c) = def.judged() {
        if c.parallel || c.window.is_some() {
            return Err(at(
                "params 'parallel' and 'window' place a validator on the request path; an eval runs off it"
                    .into(),
            ));
        }
    }
    if !enabled {
        return Ok(None);
    }
    Ok(Some(EvalDef {
        eval: EvalHead {
            id,
            trigger,
            when,
            metric,
            threshold,
            expect_passed,
        },
        validator,
        check: def,
    }))
}

/// PromptKit's `type: assertion` and `type: guardrail` wrappers (runtime/evals/wrappers.go):
/// the eval `eval_type` with the params `eval_params`, passing when its score is at least
/// `min_score` and at most `max_score` (neither: a score of 1, the default threshold); a
/// guardrail also takes `action` (PromptKit records it with the verdict; default `block`).
/// An eval that gives no score counts as failed either way here (`error`), PromptKit's
/// guardrail reading (fail closed). The wrapped check, and the threshold.
fn unwrap_assertion(
    check: &Map<String, Value>,
    wrapper: &str,
) -> Result<(Map<String, Value>, Threshold), String> {
    let params = match check.get("params") {
        Some(Value::Object(p)) => p,
        _ => {
            return Err(format!(
                "a `type: {wrapper}` needs `params` with `eval_type`"
            ))
        }
    };
    let mut threshold = Threshold::default();
    let mut inner = check.clone();
    let mut eval_type = None;
    inner.insert("params".into(), Value::Object(Map::new()));
    for (key, value) in params {
        match key.as_str() {
            "action" if wrapper == "guardrail" => {
                if !value.is_string() {
                    return Err("param 'action': a string (block, the default, or another action name)".into());
                }
            }
            "eval_type" => match value.as_str() {
                Some(t) if !t.is_empty() && t != "assertion" && t != "guardrail" => {
                    eval_type = Some(t.to_owned())
                }
                _ => return Err("param 'eval_type': the type of the eval it wraps, a string".into()),
            },
            "eval_params" => match value {
                Value::Object(p) => {
                    inner.insert("params".into(), Value::Object(p.clone()));
                }
                Value::Null => {}
                _ => return Err("param 'eval_params': a mapping".into()),
            },
            "min_score" | "max_score" => {
                let Some(v) = value.as_f64() else {
                    return Err(format!("param '{key}': a number"));
                };
                match key.as_str() {
                    "min_score" => threshold.min_score = Some(v),
                    _ => threshold.max_score = Some(v),
                }
            }
            other => {
                return Err(format!(
                    "param '{other}': unknown (a `type: {wrapper}` takes eval_type, eval_params, min_score, max_score{})",
                    if wrapper == "guardrail" { ", action" } else { "" }
                ))
            }
        }
    }
    let eval_type =
        eval_type.ok_or("param 'eval_type': missing (the type of the eval it wraps)")?;
    inner.insert("type".into(), Value::String(eval_type));
    Ok((inner, threshold))
}

fn parse_when(value: &Value) -> Result<When, String> {
    let Value::Object(m) = value else {
        return Err("`when` must be a mapping".into());
    };
    let mut when = When::default();
    for (key, v) in m {
        match key.as_str() {
            "tool_called" => {
                when.tool_called =
                    Some(as_string(v).ok_or("`when.tool_called` must be a string")?)
            }
            "tool_called_pattern" => {
                let p = as_string(v).ok_or("`when.tool_called_pattern` must be a string")?;
                let re = regex_automata::meta::Regex::new(&p)
                    .map_err(|e| format!("`when.tool_called_pattern`: {e}"))?;
                when.tool_called_pattern = Some(re);
            }
            "any_tool_called" => {
                when.any_tool_called =
                    as_bool(v).ok_or("`when.any_tool_called` must be true or false")?
            }
            "min_tool_calls" => {
                when.min_tool_calls = v
                    .as_u64()
                    .ok_or("`when.min_tool_calls` must be a whole number ≥ 0")?
            }
            other => {
                return Err(format!(
                    "`when`: unknown key `{other}` (expected tool_called, tool_called_pattern, any_tool_called, min_tool_calls)"
                ))
            }
        }
    }
    Ok(when)
}

/// A Prometheus metric or label name.
fn is_prometheus_name(name: &str, colons: bool) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
}

fn parse_metric(value: &Value) -> Result<EvalMetric, String> {
    let Value::Object(m) = value else {
        return Err("`metric` must be a mapping".into());
    };
    let (mut name, mut kind, mut labels) = (None, MetricKind::Gauge, Vec::new());
    for (key, v) in m {
        match key.as_str() {
            "name" => {
                let n = as_string(v).ok_or("`metric.name` must be a string")?;
                // Exported as `guardwire_eval_<name>`; a name with that prefix keeps it once.
                let n = n
                    .strip_prefix("guardwire_eval_")
                    .map_or(n.clone(), str::to_owned);
                if crate::metrics::RESERVED_EVAL_METRICS
                    .iter()
                    .any(|r| n == *r || n.starts_with(&format!("{r}_")))
                {
                    return Err(format!(
                        "`metric.name`: `{n}` is guardwire's own (guardwire_eval_score, guardwire_eval_results and their series); pick another name"
                    ));
                }
                // The exposition adds these to a family's samples: a name ending so would
                // collide with another family's, and Prometheus would refuse the whole scrape.
                if let Some(suffix) = ["_total", "_bucket", "_sum", "_count", "_created", "_info"]
                    .iter()
                    .find(|s| n.ends_with(*s))
                {
                    return Err(format!(
                        "`metric.name`: `{n}` ends in `{suffix}`, which the exposition adds itself; drop it"
                    ));
                }
                if !is_prometheus_name(&n, true) {
                    return Err(format!(
                        "`metric.name`: `{n}` is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
                    ));
                }
                name = Some(n);
            }
            "type" => {
                kind = match v.as_str() {
                    Some("gauge") => MetricKind::Gauge,
                    Some("counter") => MetricKind::Counter,
                    Some("histogram") => MetricKind::Histogram,
                    Some("boolean") => MetricKind::Boolean,
                    _ => {
                        return Err(
                            "`metric.type` must be one of gauge, counter, histogram, boolean"
                                .into(),
                        )
                    }
                }
            }
            "labels" => {
                let Value::Object(l) = v else {
                    return Err("`metric.labels` must be a mapping of label names to values".into());
                };
                for (k, lv) in l {
                    if !is_prometheus_name(k, false) || k.starts_with("__") || k == "route" {
                        return Err(format!(
                            "`metric.labels`: `{k}` cannot be a label name (a Prometheus name, not `route`, which guardwire adds)"
                        ));
                    }
                    let value = match lv {
                        Value::String(s) => s.clone(),
                        Value::Number(_) | Value::Bool(_) => lv.to_string(),
                        _ => return Err(format!("`metric.labels.{k}` must be a string")),
                    };
                    labels.push((k.clone(), value));
                }
            }
            // PromptKit's value range, for dashboards: not exported.
            "range" => {}
            other => {
                return Err(format!(
                    "`metric`: unknown key `{other}` (expected name, type, labels, range)"
                ))
            }
        }
    }
    labels.sort();
    Ok(EvalMetric {
        name: name.ok_or("`metric.name` is required")?,
        kind,
        labels,
    })
}

fn parse_threshold(value: &Value) -> Result<(Threshold, Option<bool>), String> {
    let Value::Object(m) = value else {
        return Err("`threshold` must be a mapping".into());
    };
    let (mut t, mut passed) = (Threshold::default(), None);
    let score = |key: &str, v: &Value| match v.as_f64() {
        Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("`threshold.{key}` must be a number from 0 to 1")),
    };
    for (key, v) in m {
        match key.as_str() {
            "min_score" => t.min_score = Some(score(key, v)?),
            "max_score" => t.max_score = Some(score(key, v)?),
            "passed" => {
                passed = Some(as_bool(v).ok_or("`threshold.passed` must be true or false")?)
            }
            other => {
                return Err(format!(
                    "`threshold`: unknown key `{other}` (expected passed, min_score, max_score)"
                ))
            }
        }
    }
    Ok((t, passed))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_assertion_wrapper_unwraps_to_its_eval_and_threshold() {
        let check = |v: Value| v.as_object().unwrap().clone();
        let (inner, t) = unwrap_assertion(&check(json!({"type": "assertion",
            "params": {"eval_type": "contains", "eval_params": {"patterns": ["a"]}, "min_score": 0.5}})), "assertion")
        .unwrap();
        assert_eq!(inner["type"], "contains");
        assert_eq!(inner["params"], json!({"patterns": ["a"]}));
        assert_eq!((t.min_score, t.max_score), (Some(0.5), None));
        for (bad, why) in [
            (json!({"type": "assertion"}), "needs `params`"),
            (
                json!({"type": "assertion", "params": {}}),
                "'eval_type': missing",
            ),
            (
                json!({"type": "assertion", "params": {"eval_type": "assertion"}}),
                "'eval_type'",
            ),
            (
                json!({"type": "assertion", "params": {"eval_type": "x", "min_score": "high"}}),
                "'min_score': a number",
            ),
            (
                json!({"type": "assertion", "params": {"eval_type": "x", "action": "block"}}),
                "'action': unknown",
            ),
        ] {
            let e = unwrap_assertion(&check(bad.clone()), "assertion").unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // The guardrail wrapper: the same, and an `action`.
        let (inner, t) = unwrap_assertion(
            &check(
                json!({"type": "guardrail", "params": {"eval_type": "banned_words",
                "eval_params": {"words": ["x"]}, "max_score": 0.2, "action": "block"}}),
            ),
            "guardrail",
        )
        .unwrap();
        assert_eq!(inner["type"], "banned_words");
        assert_eq!((t.min_score, t.max_score), (None, Some(0.2)));
        let e = unwrap_assertion(
            &check(json!({"type": "guardrail", "params": {"eval_type": "x", "action": 1}})),
            "guardrail",
        )
        .unwrap_err();
        assert!(e.contains("'action': a string"), "{e}");
    }
}
