//! The judged metrics of `guardwire eval`: HoloDeck's AI-assisted metrics (groundedness,
//! relevance, coherence, fluency, similarity: 1–5, scaled to 0–1), DeepEval's contextual
//! relevancy, precision and recall (a verdict per chunk or per sentence, combined as DeepEval
//! does) and G-Eval (`criteria`, `evaluation_steps`, `evaluation_params`, `strict_mode`).
//!
//! Every verdict comes from a configured judge (`judges:`) through [`crate::judge::verdict`],
//! the proxy's own call (its prompt, protocol shapes, G-Eval log-probability weighting, cache,
//! retries, breaker and deadline), behind the `eval:` gates the packs' evals use. The
//! judge's reasons are kept with the score for the reports.

mod ask;

pub use ask::{query_of, sentences};

use super::needs::{CaseView, Needs};
use crate::delta::Conversation;
use crate::judge::{Answer, JudgeEnv, JudgeError, Subject};
use crate::policy::judged::{Judged, JudgedCheck, JudgedKind, LlmJudge};
use crate::proxy::Runtime;
use std::sync::Arc;

/// The most judge calls one metric makes on one case (a verdict per chunk or sentence): a
/// case with more chunks or sentences is not scored, never cut.
pub const MAX_CALLS_PER_CASE: usize = 64;

/// The longest text (in characters) one judge call is shown; a longer one is not scored.
pub const MAX_JUDGED_CHARS: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Groundedness,
    Relevance,
    Coherence,
    Fluency,
    Similarity,
    ContextualRelevancy,
    ContextualPrecision,
    ContextualRecall,
    GEval,
}

/// The judged metrics `--metric` accepts by name (G-Eval needs a `--metric-file` entry).
pub const NAMES: [&str; 8] = [
    "groundedness",
    "relevance",
    "coherence",
    "fluency",
    "similarity",
    "contextual_relevancy",
    "contextual_precision",
    "contextual_recall",
];

impl Kind {
    pub fn by_name(name: &str) -> Option<Kind> {
        Some(match name {
            "groundedness" => Kind::Groundedness,
            "relevance" => Kind::Relevance,
            "coherence" => Kind::Coherence,
            "fluency" => Kind::Fluency,
            "similarity" => Kind::Similarity,
            "contextual_relevancy" => Kind::ContextualRelevancy,
            "contextual_precision" => Kind::ContextualPrecision,
            "contextual_recall" => Kind::ContextualRecall,
            "g_eval" | "geval" => Kind::GEval,
            _ => return None,
        })
    }
}

/// A field of a case G-Eval shows the judge (DeepEval's `LLMTestCaseParams`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Input,
    ActualOutput,
    ExpectedOutput,
    Context,
    RetrievalContext,
}

pub const PARAM_NAMES: &str = "input, actual_output, expected_output, context, retrieval_context";

impl Param {
    pub fn by_name(name: &str) -> Option<Param> {
        Some(match name {
            "input" => Param::Input,
            "actual_output" => Param::ActualOutput,
            "expected_output" => Param::ExpectedOutput,
            "context" => Param::Context,
            "retrieval_context" => Param::RetrievalContext,
            _ => return None,
        })
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Param::Input => "Input",
            Param::ActualOutput => "Actual output",
            Param::ExpectedOutput => "Expected output",
            Param::Context => "Context",
            Param::RetrievalContext => "Retrieval context",
        }
    }
}

/// One judged metric as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The name reports show: the metric's, or a G-Eval's own `name`.
    pub name: String,
    pub kind: Kind,
    /// The `judges:` entry; `None`: the run's (`--metric-file`'s `judge`, else the only one).
    pub judge: Option<String>,
    /// G-Eval only.
    pub criteria: String,
    pub evaluation_steps: Vec<String>,
    pub evaluation_params: Vec<Param>,
    /// G-Eval: the verdict is 1 (meets the criteria fully) or 0, and the threshold is 1.
    pub strict_mode: bool,
    /// What a case must carry (checked before any case runs).
    pub needs: Vec<Needs>,
}

impl Spec {
    /// A metric without parameters (every kind but G-Eval).
    pub fn plain(kind: Kind, name: &str) -> Spec {
        let needs = match kind {
            Kind::Groundedness | Kind::ContextualRelevancy => vec![Needs::Context],
            Kind::Similarity => vec![Needs::GroundTruth],
            Kind::ContextualPrecision | Kind::ContextualRecall => {
                vec![Needs::GroundTruth, Needs::Context]
            }
            Kind::Relevance | Kind::Coherence | Kind::Fluency | Kind::GEval => Vec::new(),
        };
        Spec {
            name: name.to_owned(),
            kind,
            judge: None,
            criteria: String::new(),
            evaluation_steps: Vec::new(),
            evaluation_params: Vec::new(),
            strict_mode: false,
            needs,
        }
    }

    /// A G-Eval metric (`evaluation_params` default: `[actual_output]`, as DeepEval's).
    pub fn g_eval(
        name: &str,
        criteria: &str,
        steps: Vec<String>,
        params: Vec<Param>,
        strict_mode: bool,
    ) -> Result<Spec, String> {
        if name.trim().is_empty() {
            return Err("g_eval: name must not be empty".into());
        }
        if criteria.trim().is_empty() {
            return Err(format!("g_eval {name}: criteria must not be empty"));
        }
        let params = if params.is_empty() {
            vec![Param::ActualOutput]
        } else {
            params
        };
        let mut needs = Vec::new();
        for p in &params {
            let need = match p {
                Param::ExpectedOutput => Needs::GroundTruth,
                Param::Context | Param::RetrievalContext => Needs::Context,
                Param::Input | Param::ActualOutput => continue,
            };
            if !needs.contains(&need) {
                needs.push(need);
            }
        }
        Ok(Spec {
            name: name.to_owned(),
            kind: Kind::GEval,
            judge: None,
            criteria: criteria.to_owned(),
            evaluation_steps: steps,
            evaluation_params: params,
            strict_mode,
            needs,
        })
    }
}

/// A score with the judge's reasons, one per verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub score: f64,
    pub reasoning: String,
}

/// What a run calls the config's judges with: the evals' judges and gates (`eval_judges`),
/// built as the proxy builds them, and an upstream client of the config's.
pub fn env(rt: &crate::proxy::Runtime) -> Result<JudgeEnv, String> {
    let client = crate::upstream::UpstreamClient::for_config(&rt.config)?;
    Ok(JudgeEnv {
        judges: Arc::clone(&rt.eval_judges),
        tenant: None,
        client: Arc::new(client),
        metrics: Arc::new(crate::metrics::Metrics::new()),
    })
}

/// What judged metrics need to call the judges: the run's tokio runtime and the judges of the
/// config, built as the proxy builds them.
pub struct Runner {
    tokio: tokio::runtime::Runtime,
    env: JudgeEnv,
    /// The judge a metric without its own uses.
    default_judge: Option<String>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("default_judge", &self.default_judge)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// The judges of `rt` (their `eval:` gates); every judge `specs` name must be configured,
    /// and a spec without one needs `default` or exactly one configured judge.
    pub fn new(rt: &Runtime, specs: &[&Spec], default: Option<&str>) -> Result<Runner, String> {
        let configured: Vec<&str> = rt.config.judges.iter().map(|j| j.name.as_str()).collect();
        let known = |name: &str, what: &str| {
            if configured.contains(&name) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: judge {name:?} is not in the config's judges: ({})",
                    if configured.is_empty() {
                        "none configured".to_owned()
                    } else {
                        configured.join(", ")
                    }
                ))
            }
        };
        if let Some(d) = default {
            known(d, "--metric-file judge")?;
        }
        let default_judge = match (default, configured.as_slice()) {
            (Some(d), _) => Some(d.to_owned()),
            (None, [only]) => Some((*only).to_owned()),
            _ => None,
        };
        for s in specs {
            match (&s.judge, &default_judge) {
                (Some(j), _) => known(j, &format!("metric {}", s.name))?,
                (None, Some(_)) => {}
                (None, None) => {
                    return Err(format!(
                        "metric {}: which judge? the config has {} judges: name one with `judge:` in --metric-file",
                        s.name,
                        configured.len()
                    ))
                }
            }
        }
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("judged metrics: cannot start the runtime: {e}"))?;
        Ok(Runner {
            tokio,
            env: env(rt)?,
            default_judge,
        })
    }

    /// Scores `case` with `spec`: `Err` when a verdict could not be had (the case fails the
    /// metric with the reason).
    pub fn score(&self, spec: &Spec, case: &CaseView<'_>) -> Result<Judgement, String> {
        let judge = spec
            .judge
            .clone()
            .or_else(|| self.default_judge.clone())
            .ok_or_else(|| format!("metric {}: no judge", spec.name))?;
        let asks = ask::asks(spec, case)?;
        if asks.len() > MAX_CALLS_PER_CASE {
            return Err(format!(
                "metric {}: {} verdicts needed, over the {MAX_CALLS_PER_CASE} a case may ask",
                spec.name,
                asks.len()
            ));
        }
        let mut verdicts = Vec::with_capacity(asks.len());
        for ask in &asks {
            let chars = ask.content.chars().count();
            if chars > MAX_JUDGED_CHARS {
                return Err(format!(
                    "metric {}: the text to judge is {chars} characters, over the {MAX_JUDGED_CHARS} a judge is shown",
                    spec.name
                ));
            }
            let check = JudgedCheck {
                kind: JudgedKind::Llm(LlmJudge {
                    judge: judge.clone(),
                    criteria: ask.criteria.clone(),
                    rubric: None,
                    system_prompt: None,
                    model: None,
                    evaluation_steps: spec.evaluation_steps.clone(),
                    scale: ask.scale,
                    judged: Judged::Text,
                }),
                timeout_ms: None,
                parallel: false,
                window: None,
            };
            let subject = Subject {
                conversation: Arc::new(Conversation::default()),
                answer: Some(Answer {
                    text: ask.content.clone(),
                    tool_calls: Vec::new(),
                }),
            };
            let v = self
                .tokio
                .block_on(crate::judge::verdict(&self.env, &check, &subject))
                .map_err(|e: JudgeError| format!("metric {}: judge {judge}: {e}", spec.name))?;
            verdicts.push((ask.label.clone(), v.score, v.reason));
        }
        Ok(combine(spec, &verdicts))
    }
}

/// A verdict counts as "yes" (relevant, attributable) at 0.5 and above.
fn yes(score: f64) -> bool {
    score >= 0.5
}

/// The metric's score from its verdicts (label, score 0–1, reason), with the reasons.
fn combine(spec: &Spec, verdicts: &[(String, f64, Option<String>)]) -> Judgement {
    let reasoning = verdicts
        .iter()
        .map(|(label, score, reason)| {
            let reason = reason.as_deref().unwrap_or("(no reason given)");
            match (label.is_empty(), spec.kind) {
                (true, _) => reason.to_owned(),
                (false, Kind::ContextualRecall) => format!(
                    "{label}: {}: {reason}",
                    if yes(*score) {
                        "attributable"
                    } else {
                        "not attributable"
                    }
                ),
                (false, _) => format!(
                    "{label}: {}: {reason}",
                    if yes(*score) {
                        "relevant"
                    } else {
                        "not relevant"
                    }
                ),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let n = verdicts.len() as f64;
    let hits: Vec<bool> = verdicts.iter().map(|v| yes(v.1)).collect();
    let score = match spec.kind {
        Kind::ContextualRelevancy | Kind::ContextualRecall => {
            if verdicts.is_empty() {
                0.0
            } else {
                hits.iter().filter(|h| **h).count() as f64 / n
            }
        }
        // DeepEval: the mean over the relevant chunks of the precision at their rank.
        Kind::ContextualPrecision => {
            let (mut relevant, mut sum) = (0.0, 0.0);
            for (k, hit) in hits.iter().enumerate() {
                if *hit {
                    relevant += 1.0;
                    sum += relevant / (k as f64 + 1.0);
                }
            }
            if relevant == 0.0 {
                0.0
            } else {
                sum / relevant
            }
        }
        Kind::GEval if spec.strict_mode => {
            if verdicts.first().is_some_and(|v| v.1 >= 1.0) {
                1.0
            } else {
                0.0
            }
        }
        _ => verdicts.first().map_or(0.0, |v| v.1),
    };
    Judgement { score, reasoning }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn v(scores: &[f64]) -> Vec<(String, f64, Option<String>)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("chunk {}", i + 1), *s, Some("r".into())))
            .collect()
    }

    #[test]
    fn deepeval_scores_are_combined_as_deepeval_does() {
        let spec = |k| Spec::plain(k, "x");
        let p = combine(&spec(Kind::ContextualPrecision), &v(&[0.0, 1.0])).score;
        assert!((p - 0.5).abs() < 1e-12, "{p}");
        let p = combine(&spec(Kind::ContextualPrecision), &v(&[1.0, 0.0, 1.0])).score;
        assert!((p - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-12, "{p}");
        assert_eq!(
            combine(&spec(Kind::ContextualPrecision), &v(&[0.0])).score,
            0.0
        );
        assert_eq!(
            combine(&spec(Kind::ContextualRelevancy), &v(&[1.0, 0.0])).score,
            0.5
        );
        let r = combine(&spec(Kind::ContextualRecall), &v(&[1.0, 1.0, 0.0]));
        assert!((r.score - 2.0 / 3.0).abs() < 1e-12);
        assert!(r.reasoning.contains("chunk 3: not attributable: r"));
        let strict = Spec::g_eval("g", "c", vec![], vec![], true).unwrap();
        assert_eq!(combine(&strict, &v(&[0.9])).score, 0.0);
        assert_eq!(combine(&strict, &v(&[1.0])).score, 1.0);
    }

    #[test]
    fn g_eval_specs_are_checked_and_need_what_they_show() {
        assert!(Spec::g_eval("", "c", vec![], vec![], false).is_err());
        assert!(Spec::g_eval("n", " ", vec![], vec![], false).is_err());
        let s = Spec::g_eval(
            "n",
            "c",
            vec![],
            vec![Param::Input, Param::ExpectedOutput, Param::RetrievalContext],
            false,
        )
        .unwrap();
        assert_eq!(s.needs, [Needs::GroundTruth, Needs::Context]);
        let d = Spec::g_eval("n", "c", vec![], vec![], false).unwrap();
        assert_eq!(d.evaluation_params, [Param::ActualOutput]);
        assert!(d.needs.is_empty());
    }

    #[test]
    fn sentences_split_at_stops_and_line_breaks() {
        assert_eq!(
            sentences("Features are A. B is 1.5 kg!\nC?  "),
            ["Features are A.", "B is 1.5 kg!", "C?"]
        );
        assert!(sentences(" \n ").is_empty());
    }
}
