//! One entry of a HoloDeck metrics list — `type: standard`, `geval`, `rag` (HoloDeck's
//! `EvaluationMetric`, `GEvalMetric`, `RAGMetric`), `code` refused — checked as HoloDeck's
//! models check it and turned into a metric with HoloDeck's pass rule.

use super::provider::{check_provider, Judges, Provider};
use crate::suite::deterministic::{Equality, Numeric, ResponsePath};
use crate::suite::judged::{self, Kind, Param, Spec};
use crate::suite::metrics::{Asked, Metric};
use serde::Deserialize;
use serde_norway::Value as Yaml;
use std::sync::Arc;

/// `type: standard` (the default), HoloDeck's `EvaluationMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Standard {
    #[serde(rename = "type", default)]
    _kind: Option<String>,
    metric: String,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    scale: Option<i64>,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default)]
    fail_on_error: bool,
    #[serde(default)]
    retry_on_failure: Option<i64>,
    #[serde(default)]
    timeout_ms: Option<i64>,
    #[serde(default)]
    custom_prompt: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    strip_whitespace: bool,
    #[serde(default)]
    strip_punctuation: bool,
    #[serde(default = "default_absolute_tolerance")]
    absolute_tolerance: f64,
    #[serde(default)]
    relative_tolerance: f64,
    #[serde(default)]
    accept_percent: bool,
    #[serde(default)]
    accept_thousands_separators: bool,
    #[serde(default)]
    response_path: Option<String>,
}

fn yes() -> bool {
    true
}

fn default_absolute_tolerance() -> f64 {
    1e-6
}

/// `type: geval`, HoloDeck's `GEvalMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GEval {
    #[serde(rename = "type")]
    _kind: String,
    name: String,
    criteria: String,
    #[serde(default)]
    evaluation_steps: Option<Vec<String>>,
    #[serde(default)]
    evaluation_params: Option<Vec<String>>,
    #[serde(default)]
    strict_mode: bool,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    fail_on_error: bool,
}

/// `type: rag`, HoloDeck's `RAGMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rag {
    #[serde(rename = "type")]
    _kind: String,
    metric_type: String,
    #[serde(default = "half")]
    threshold: f64,
    #[serde(default = "yes")]
    include_reason: bool,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    fail_on_error: bool,
}

fn half() -> f64 {
    0.5
}

/// One entry of a metrics list (discriminated by `type`, `standard` by default) as a metric
/// with HoloDeck's pass rule; `None` when `enabled: false`.
pub(super) fn metric(
    raw: &Yaml,
    key: &str,
    tagged: bool,
    default_model: Option<&Provider>,
    judges: &Judges<'_>,
) -> Result<Option<Asked>, String> {
    let has = |k: &str| raw.get(k).is_some();
    let kind = match raw.get("type") {
        Some(t) => t.as_str().unwrap_or("(not a string)"),
        None if tagged => {
            return Err(format!(
                "{key}.type: required in evaluations.metrics (standard, geval, rag or code): HoloDeck reads that list as a union discriminated by type"
            ))
        }
        // The member whose required keys the entry has, as pydantic's union finds it.
        None if has("metric") => "standard",
        None if has("metric_type") => "rag",
        None if has("grader") => "code",
        None if has("criteria") => "geval",
        None => "standard",
    };
    let parse_err = |e: serde_norway::Error| format!("{key}: {e}");
    let judge_of = |model: &Option<Provider>| -> Result<Option<String>, String> {
        if let Some(m) = model {
            check_provider(m, &format!("{key}.model"))?;
        }
        match model {
            Some(m) => judges.for_model(Some(m), &format!("{key}.model")),
            None => judges.for_model(default_model, "evaluations.model"),
        }
    };
    let in_unit = |t: f64| -> Result<f64, String> {
        if (0.0..=1.0).contains(&t) {
            Ok(t)
        } else {
            Err(format!(
                "{key}.threshold: threshold must be between 0.0 and 1.0"
            ))
        }
    };
    match kind {
        "standard" => {
            let m: Standard = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            if m.retry_on_failure.is_some_and(|r| !(1..=3).contains(&r)) {
                return Err(format!("{key}.retry_on_failure: retry_on_failure must be between 1 and 3"));
            }
            if m.timeout_ms.is_some_and(|t| t <= 0) {
                return Err(format!("{key}.timeout_ms: timeout_ms must be positive"));
            }
            if m.scale.is_some_and(|s| s <= 0) {
                return Err(format!("{key}.scale: scale must be positive"));
            }
            if m.custom_prompt.as_ref().is_some_and(|p| p.trim().is_empty()) {
                return Err(format!("{key}.custom_prompt: custom_prompt must be non-empty if provided"));
            }
            if m.absolute_tolerance < 0.0 || m.relative_tolerance < 0.0 {
                return Err(format!("{key}: absolute_tolerance and relative_tolerance are 0 or more"));
            }
            let _ = m.fail_on_error;
            let response_path = m
                .response_path
                .as_deref()
                .map(|p| ResponsePath::parse(p).map(Arc::new))
                .transpose()
                .map_err(|e| format!("{key}.response_path: {e}"))?;
            if !m.enabled {
                return Ok(None);
            }
            let (metric, unset) = match m.metric.as_str() {
                "bleu" => (Metric::Bleu, 0.0),
                "rouge" => (Metric::Rouge, 0.0),
                "meteor" => (Metric::Meteor, 0.0),
                "equality" => (
                    Metric::Equality(Arc::new(Equality {
                        case_insensitive: m.case_insensitive,
                        strip_whitespace: m.strip_whitespace,
                        strip_punctuation: m.strip_punctuation,
                    })),
                    1.0,
                ),
                "numeric" => (
                    Metric::Numeric(Arc::new(Numeric {
                        absolute_tolerance: m.absolute_tolerance,
                        relative_tolerance: m.relative_tolerance,
                        accept_percent: m.accept_percent,
                        accept_thousands_separators: m.accept_thousands_separators,
                    })),
                    1.0,
                ),
                name @ ("groundedness" | "relevance" | "coherence" | "fluency") => {
                    // `custom_prompt`, `scale`, `retry_on_failure` and `timeout_ms` are
                    // checked as HoloDeck checks them; its runner builds these evaluators
                    // from the model alone and uses none of them, nor does guardwire.
                    let kind = Kind::by_name(name).ok_or("unreachable")?;
                    let mut spec = Spec::plain(kind, name);
                    spec.over_five = true;
                    spec.judge = judge_of(&m.model)?;
                    // Without a threshold HoloDeck passes a score above 0: every score over 5.
                    (Metric::Judged(Arc::new(spec)), 0.0)
                }
                other => {
                    return Err(format!(
                        "{key}.metric: {other:?} is not one of groundedness, relevance, coherence, fluency, bleu, rouge, meteor, equality, numeric"
                    ))
                }
            };
            Ok(Some(Asked {
                metric,
                min: m.threshold.unwrap_or(unset),
                response_path,
            }))
        }
        "geval" => {
            let m: GEval = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            if m.name.trim().is_empty() {
                return Err(format!("{key}.name: name must be a non-empty string"));
            }
            if m.criteria.trim().is_empty() {
                return Err(format!("{key}.criteria: criteria must be a non-empty string"));
            }
            let params = m
                .evaluation_params
                .unwrap_or_else(|| vec!["actual_output".into()]);
            if params.is_empty() {
                return Err(format!("{key}.evaluation_params: evaluation_params must not be empty"));
            }
            let params = params
                .iter()
                .map(|p| {
                    Param::by_name(p).ok_or_else(|| {
                        format!(
                            "{key}.evaluation_params: {p:?} is not one of {}",
                            judged::PARAM_NAMES
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let threshold = m.threshold.map(in_unit).transpose()?;
            let _ = m.fail_on_error;
            if !m.enabled {
                return Ok(None);
            }
            let mut spec = Spec::g_eval(
                &m.name,
                &m.criteria,
                m.evaluation_steps.unwrap_or_default(),
                params,
                m.strict_mode,
            )
            .map_err(|e| format!("{key}: {e}"))?;
            spec.judge = judge_of(&m.model)?;
            // DeepEval's threshold is 0.5 when none is given; strict mode scores 1 or 0.
            let min = if m.strict_mode { 1.0 } else { threshold.unwrap_or(0.5) };
            Ok(Some(Asked::new(Metric::Judged(Arc::new(spec)), min)))
        }
        "rag" => {
            let m: Rag = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            let min = in_unit(m.threshold)?;
            let _ = (m.include_reason, m.fail_on_error);
            let name = m.metric_type.as_str();
            let kind = match name {
                "faithfulness" | "contextual_relevancy" | "contextual_precision"
                | "contextual_recall" | "answer_relevancy" => Kind::by_name(name).ok_or("unreachable")?,
                other => {
                    return Err(format!(
                        "{key}.metric_type: {other:?} is not one of faithfulness, contextual_relevancy, contextual_precision, contextual_recall, answer_relevancy"
                    ))
                }
            };
            if !m.enabled {
                return Ok(None);
            }
            let mut spec = Spec::plain(kind, name);
            spec.judge = judge_of(&m.model)?;
            Ok(Some(Asked::new(Metric::Judged(Arc::new(spec)), min)))
        }
        "code" => Err(format!(
            "{key}: type code runs a Python grader inside HoloDeck's process; guardwire runs no Python code"
        )),
        other => Err(format!(
            "{key}.type: {other:?} is not one of standard, geval, rag, code"
        )),
    }
}
