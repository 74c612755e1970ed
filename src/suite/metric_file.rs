//! `--metric-file FILE.yaml`: the metrics of a run that take parameters (G-Eval, the
//! trajectory graders, PromptKit's cross-variant assertions), any metric with its own
//! threshold or judge, and the judge judged metrics use. Read whole and checked before the
//! config is loaded or any case read; every problem names the file, the entry and the key.
//!
//! ```yaml
//! judge: quality                # a `judges:` entry (optional with exactly one configured)
//! metrics:
//!   - {metric: groundedness, threshold: 0.6}
//!   - metric: g_eval
//!     name: correctness
//!     criteria: "The answer states the same facts as the expected output."
//!     evaluation_steps: ["List the facts of the expected output", "Check each in the answer"]
//!     evaluation_params: [input, actual_output, expected_output]
//!     strict_mode: false
//!   - {metric: max_steps, max: 5}
//!   - {metric: golden_path, match: in_order}
//! ```

use super::deterministic::Matches;
use super::judged::{self, Param};
use super::metrics::{Asked, Metric};
use super::trajectory::{self, Grader, Outcome, PathMatch};
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The largest metric file read.
const MAX_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    judge: Option<String>,
    metrics: Vec<Entry>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Entry {
    metric: String,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default)]
    judge: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    criteria: Option<String>,
    #[serde(default)]
    evaluation_steps: Option<Vec<String>>,
    #[serde(default)]
    evaluation_params: Option<Vec<String>>,
    #[serde(default)]
    strict_mode: Option<bool>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    texts: Option<Vec<String>>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    times: Option<u64>,
    #[serde(rename = "match", default)]
    path_match: Option<String>,
    /// `outcome_equivalent`'s `metric` param in PromptKit (renamed: `metric` names the entry).
    #[serde(default)]
    compare: Option<String>,
    /// `directional`'s `check`.
    #[serde(default)]
    check: Option<String>,
    /// `matches`' regex (Puck's `matches`).
    #[serde(default)]
    pattern: Option<String>,
}

/// What the file asks for.
pub struct MetricFile {
    pub judge: Option<String>,
    pub asked: Vec<Asked>,
}

pub fn load(path: &Path) -> Result<MetricFile, String> {
    let at = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("--metric-file {at}: {e}"))?
        .len();
    if size > MAX_BYTES {
        return Err(format!("--metric-file {at}: larger than {MAX_BYTES} bytes"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("--metric-file {at}: {e}"))?;
    parse(&text).map_err(|e| format!("--metric-file {at}: {e}"))
}

pub fn parse(text: &str) -> Result<MetricFile, String> {
    let file: File = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let asked = file
        .metrics
        .into_iter()
        .enumerate()
        .map(|(i, e)| entry(e).map_err(|err| format!("metrics[{i}]: {err}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MetricFile {
        judge: file.judge,
        asked,
    })
}

/// The keys of `e` that are set, by name.
fn set_keys(e: &Entry) -> Vec<&'static str> {
    let mut k = Vec::new();
    let mut add = |name, set: bool| {
        if set {
            k.push(name)
        }
    };
    add("judge", e.judge.is_some());
    add("name", e.name.is_some());
    add("criteria", e.criteria.is_some());
    add("evaluation_steps", e.evaluation_steps.is_some());
    add("evaluation_params", e.evaluation_params.is_some());
    add("strict_mode", e.strict_mode.is_some());
    add("max", e.max.is_some());
    add("tools", e.tools.is_some());
    add("texts", e.texts.is_some());
    add("tool", e.tool.is_some());
    add("times", e.times.is_some());
    add("match", e.path_match.is_some());
    add("compare", e.compare.is_some());
    add("check", e.check.is_some());
    add("pattern", e.pattern.is_some());
    k
}

fn entry(e: Entry) -> Result<Asked, String> {
    let m = e.metric.as_str();
    let allowed: &[&str] = match m {
        "g_eval" | "geval" => &[
            "judge",
            "name",
            "criteria",
            "evaluation_steps",
            "evaluation_params",
            "strict_mode",
        ],
        "max_steps" | "max_tokens" | "max_duration_ms" | "max_cost_usd" => &["max"],
        "tool_sequence" => &["tools"],
        "output_sequence" => &["texts"],
        "tool_called" => &["tool", "times"],
        "tool_not_called" => &["tool"],
        "golden_path" => &["match"],
        "outcome_equivalent" => &["compare"],
        "directional" => &["check"],
        "matches" => &["pattern"],
        _ if judged::Kind::by_name(m).is_some() => &["judge"],
        _ => &[],
    };
    if let Some(k) = set_keys(&e).into_iter().find(|k| !allowed.contains(k)) {
        return Err(format!(
            "metric {m}: key {k} does not apply (its keys: threshold{}{})",
            if allowed.is_empty() { "" } else { ", " },
            allowed.join(", ")
        ));
    }
    let need = |v: Option<String>, key: &str| {
        v.filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("metric {m}: {key} is required"))
    };
    let named = |grader| {
        Metric::Trajectory(Arc::new(trajectory::Spec {
            name: m.to_owned(),
            grader,
        }))
    };
    let whole = |v: Option<f64>| -> Result<u64, String> {
        match v {
            Some(x) if x >= 0.0 && x.fract() == 0.0 && x < 1e15 => Ok(x as u64),
            _ => Err(format!("metric {m}: max is a whole number, 0 or more")),
        }
    };
    let metric = match m {
        "g_eval" | "geval" => {
            let params = e
                .evaluation_params
                .unwrap_or_default()
                .iter()
                .map(|p| {
                    Param::by_name(p).ok_or_else(|| {
                        format!(
                            "metric g_eval: evaluation_params: {p:?} is not one of {}",
                            judged::PARAM_NAMES
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let name = need(e.name, "name")?;
            let mut spec = judged::Spec::g_eval(
                &name,
                &need(e.criteria, "criteria")?,
                e.evaluation_steps.unwrap_or_default(),
                params,
                e.strict_mode.unwrap_or(false),
            )?;
            spec.judge = e.judge;
            Metric::Judged(Arc::new(spec))
        }
        "max_steps" => named(Grader::MaxSteps(whole(e.max)?)),
        "max_tokens" => named(Grader::MaxTokens(whole(e.max)?)),
        "max_duration_ms" => named(Grader::MaxDurationMs(whole(e.max)?)),
        "max_cost_usd" => match e.max {
            Some(x) if x.is_finite() && x >= 0.0 => named(Grader::MaxCostUsd(x)),
            _ => return Err(format!("metric {m}: max is a number, 0 or more")),
        },
        "tool_sequence" | "output_sequence" => {
            let list = if m == "tool_sequence" { e.tools } else { e.texts }
                .filter(|l| !l.is_empty() && l.iter().all(|s| !s.is_empty()))
                .ok_or_else(|| {
                    format!(
                        "metric {m}: {} is a list of at least one non-empty string",
                        if m == "tool_sequence" { "tools" } else { "texts" }
                    )
                })?;
            named(if m == "tool_sequence" {
                Grader::ToolSequence(list)
            } else {
                Grader::OutputSequence(list)
            })
        }
        "tool_called" => named(Grader::ToolCalled {
            name: need(e.tool, "tool")?,
            times: e.times,
        }),
        "tool_not_called" => named(Grader::ToolNotCalled(need(e.tool, "tool")?)),
        "golden_path" => named(Grader::GoldenPath(
            match need(e.path_match, "match")?.as_str() {
                "exact" => PathMatch::Exact,
                "in_order" => PathMatch::InOrder,
                "any_order" => PathMatch::AnyOrder,
                other => {
                    return Err(format!(
                        "metric golden_path: match {other:?} is exact, in_order or any_order"
                    ))
                }
            },
        )),
        "outcome_equivalent" => named(Grader::OutcomeEquivalent(
            match need(e.compare, "compare")?.as_str() {
                "tool_calls" => Outcome::ToolCalls,
                "content_hash" => Outcome::ContentHash,
                "final_state" => return Err(
                    "metric outcome_equivalent: compare final_state is not available offline (a case records no state); use tool_calls or content_hash".into(),
                ),
                other => {
                    return Err(format!(
                        "metric outcome_equivalent: compare {other:?} is tool_calls or content_hash"
                    ))
                }
            },
        )),
        "directional" => match need(e.check, "check")?.as_str() {
            "same_tool_calls" => named(Grader::OutcomeEquivalent(Outcome::ToolCalls)),
            check @ ("same_outcome" | "similar_content") => {
                return Err(format!(
                    "metric directional: check {check} is not available in this build (same_tool_calls is)"
                ))
            }
            other => {
                return Err(format!(
                    "metric directional: check {other:?} is same_tool_calls, same_outcome or similar_content"
                ))
            }
        },
        "matches" => Metric::Matches(Arc::new(
            Matches::new(&need(e.pattern, "pattern")?).map_err(|err| format!("metric matches: {err}"))?,
        )),
        "satisfies" | "output_matches" => {
            return Err(format!(
                "metric {m}: Puck's {m} takes an Elixir function as its predicate; a metric file holds no code (matches takes a regex)"
            ))
        }
        _ => {
            let mut metric = Metric::by_name(m).ok_or_else(|| format!("unknown metric {m:?}"))?;
            if let (Metric::Judged(spec), Some(j)) = (&mut metric, e.judge) {
                Arc::make_mut(spec).judge = Some(j);
            }
            metric
        }
    };
    let min = match e.threshold {
        None => metric.default_min(),
        Some(t) if (0.0..=1.0).contains(&t) => t,
        Some(t) => return Err(format!("metric {m}: threshold {t} is not from 0 to 1")),
    };
    let strict = matches!(&metric, Metric::Judged(s) if s.strict_mode);
    // DeepEval: strict mode sets the threshold to 1.
    Ok(Asked::new(metric, if strict { 1.0 } else { min }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_are_checked_key_by_key() {
        let f = parse(
            "judge: q\nmetrics:\n  - {metric: groundedness, threshold: 0.6}\n  - {metric: g_eval, name: c, criteria: x, evaluation_params: [input, expected_output], strict_mode: true, threshold: 0.2}\n  - {metric: max_steps, max: 3}\n  - {metric: golden_path, match: any_order}\n",
        )
        .unwrap();
        assert_eq!(f.judge.as_deref(), Some("q"));
        let names: Vec<&str> = f.asked.iter().map(|a| a.metric.name()).collect();
        assert_eq!(names, ["groundedness", "c", "max_steps", "golden_path"]);
        assert_eq!(f.asked[0].min, 0.6);
        assert_eq!(f.asked[1].min, 1.0, "strict mode sets the threshold to 1");
        for (yaml, want) in [
            ("metrics: [{metric: max_steps}]", "max is a whole number"),
            (
                "metrics: [{metric: max_steps, max: 2, tools: [a]}]",
                "key tools does not apply",
            ),
            (
                "metrics: [{metric: g_eval, criteria: x}]",
                "name is required",
            ),
            (
                "metrics: [{metric: g_eval, name: n, criteria: x, evaluation_params: [output]}]",
                "evaluation_params: \"output\"",
            ),
            (
                "metrics: [{metric: outcome_equivalent, compare: final_state}]",
                "not available offline",
            ),
            (
                "metrics: [{metric: directional, check: similar_content}]",
                "not available in this build",
            ),
            (
                "metrics: [{metric: bleu, judge: q}]",
                "key judge does not apply",
            ),
            ("metrics: [{metric: blue}]", "unknown metric"),
            ("metrics: [{metric: matches}]", "pattern is required"),
            (
                "metrics: [{metric: matches, pattern: \"(\"}]",
                "does not compile",
            ),
            ("metrics: [{metric: satisfies}]", "takes an Elixir function"),
            ("metrics: [{metric: rouge, threshold: 2}]", "threshold 2"),
            ("metrics: [{metric: rouge, colour: red}]", "unknown field"),
            (
                "metrics: [{metric: golden_path, match: fuzzy}]",
                "exact, in_order or any_order",
            ),
        ] {
            let e = parse(yaml).err().unwrap();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }
}
