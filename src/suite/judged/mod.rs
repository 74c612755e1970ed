//! The judged metrics of `guardwire eval`: HoloDeck's AI-assisted metrics (groundedness,
//! relevance, coherence, fluency, similarity: 1–5, scaled to 0–1), DeepEval's contextual
//! relevancy, precision and recall (a yes/no verdict per statement, node or sentence, combined
//! with DeepEval's formulas: deepeval.rs) and G-Eval (`criteria`, `evaluation_steps` — written
//! by the judge once per run when not given: steps.rs —, `evaluation_params`, `strict_mode`).
//!
//! Every score comes from a configured judge (`judges:`) through the proxy's own judge path:
//! [`crate::judge::verdict`] for a score (its prompt, protocol shapes, G-Eval log-probability
//! weighting, cache, retries, breaker and deadline), [`crate::judge::reply`] for a list of
//! verdicts or steps (the same request, gate and deadline), behind the `eval:` gates the
//! packs' evals use. The judge's reasons are kept with the score for the reports.

mod ask;
mod claims;
mod deepeval;
mod steps;

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
    /// DeepEval's faithfulness: the answer's claims against the retrieval context's truths.
    Faithfulness,
    /// DeepEval's answer relevancy: the answer's statements against the input.
    AnswerRelevancy,
    GEval,
}

/// The judged metrics `--metric` accepts by name (G-Eval needs a `--metric-file` entry).
pub const NAMES: [&str; 10] = [
    "groundedness",
    "relevance",
    "coherence",
    "fluency",
    "similarity",
    "contextual_relevancy",
    "contextual_precision",
    "contextual_recall",
    "faithfulness",
    "answer_relevancy",
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
            "faithfulness" => Kind::Faithfulness,
            "answer_relevancy" => Kind::AnswerRelevancy,
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
    /// G-Eval without `evaluation_steps`: the steps the judge wrote from the criteria, once for
    /// the run ([`Runner::generate_steps`]), or why its reply was unusable (every case then
    /// fails the metric with that reason). `None`: not generated (yet).
    pub generated_steps: Option<Result<Vec<String>, String>>,
    /// HoloDeck's scaling of the 1–5 metrics (groundedness, relevance, coherence, fluency,
    /// similarity): the raw score over 5 (1 → 0.2), where guardwire's own is (raw − 1) / 4
    /// (1 → 0). Set by `eval --holodeck`, whose thresholds are HoloDeck's.
    pub over_five: bool,
}

impl Spec {
    /// A metric without parameters (every kind but G-Eval).
    pub fn plain(kind: Kind, name: &str) -> Spec {
        let needs = match kind {
            Kind::Groundedness | Kind::ContextualRelevancy | Kind::Faithfulness => {
                vec![Needs::Context]
            }
            Kind::Similarity => vec![Needs::GroundTruth],
            Kind::ContextualPrecision | Kind::ContextualRecall => {
                vec![Needs::GroundTruth, Needs::Context]
            }
            Kind::Relevance
            | Kind::Coherence
            | Kind::Fluency
            | Kind::GEval
            | Kind::AnswerRelevancy => Vec::new(),
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
            generated_steps: None,
            over_five: false,
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
            generated_steps: None,
            over_five: false,
        })
    }

    /// G-Eval: whether its steps are the judge's (none were given).
    pub fn steps_wanted(&self) -> bool {
        self.kind == Kind::GEval && self.evaluation_steps.is_empty()
    }

    /// The evaluation steps G-Eval shows: the ones given, else the ones generated; an error
    /// when they were asked for but could not be had.
    pub fn steps(&self) -> Result<&[String], String> {
        if !self.steps_wanted() {
            return Ok(&self.evaluation_steps);
        }
        match &self.generated_steps {
            Some(Ok(steps)) => Ok(steps),
            Some(Err(e)) => Err(format!(
                "metric {}: the judge's evaluation steps could not be had: {e}",
                self.name
            )),
            None => Err(format!(
                "metric {}: no evaluation steps were generated",
                self.name
            )),
        }
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

    /// G-Eval's evaluation steps written by the judge from `spec`'s criteria (DeepEval's first
    /// phase): one call, made once per metric and run.
    pub fn generate_steps(&self, spec: &Spec) -> Result<Vec<String>, String> {
        let judge = self.judge_of(spec)?;
        let user = steps::prompt(&spec.criteria, &spec.evaluation_params);
        self.tokio
            .block_on(crate::judge::reply(
                &self.env,
                &judge,
                deepeval::SYSTEM,
                &user,
                &steps::read,
            ))
            .map_err(|e| format!("judge {judge}: {e}"))
    }

    fn judge_of(&self, spec: &Spec) -> Result<String, String> {
        spec.judge
            .clone()
            .or_else(|| self.default_judge.clone())
            .ok_or_else(|| format!("metric {}: no judge", spec.name))
    }

    /// Scores `case` with `spec`: `Err` when a verdict could not be had (the case fails the
    /// metric with the reason).
    pub fn score(&self, spec: &Spec, case: &CaseView<'_>) -> Result<Judgement, String> {
        let judge = self.judge_of(spec)?;
        if matches!(
            spec.kind,
            Kind::ContextualRelevancy | Kind::ContextualPrecision | Kind::ContextualRecall
        ) {
            return self.contextual(spec, &judge, case);
        }
        if matches!(spec.kind, Kind::Faithfulness | Kind::AnswerRelevancy) {
            return self.claims(spec, &judge, case);
        }
        let steps = spec.steps()?.to_vec();
        let ask = ask::ask(spec, case)
            .ok_or_else(|| format!("metric {}: not scored by one verdict", spec.name))?;
        shown_fits(spec, &ask.content)?;
        let check = JudgedCheck {
            kind: JudgedKind::Llm(LlmJudge {
                judge: judge.clone(),
                criteria: ask.criteria,
                rubric: None,
                system_prompt: None,
                model: None,
                evaluation_steps: steps,
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
                text: ask.content,
                tool_calls: Vec::new(),
            }),
        };
        let v = self
            .tokio
            .block_on(crate::judge::verdict(&self.env, &check, &subject))
            .map_err(|e: JudgeError| format!("metric {}: judge {judge}: {e}", spec.name))?;
        Ok(Judgement {
            score: final_score(spec, v.score),
            reasoning: v.reason.unwrap_or_else(|| "(no reason given)".into()),
        })
    }

    /// DeepEval's contextual metrics: the judge's yes/no verdicts (per node's statements, per
    /// node, per sentence), combined with DeepEval's formulas.
    fn contextual(
        &self,
        spec: &Spec,
        judge: &str,
        case: &CaseView<'_>,
    ) -> Result<Judgement, String> {
        let query = query_of(case);
        let expected = case.expected.unwrap_or_default();
        let context = case.context.unwrap_or_default();
        let ask = |user: &str, count: deepeval::Count| -> Result<Vec<deepeval::Verdict>, String> {
            shown_fits(spec, user)?;
            let read = |text: &str| deepeval::read(text, count);
            self.tokio
                .block_on(crate::judge::reply(
                    &self.env,
                    judge,
                    deepeval::SYSTEM,
                    user,
                    &read,
                ))
                .map_err(|e| format!("metric {}: judge {judge}: {e}", spec.name))
        };
        let too_many = |n: usize, what: &str| {
            Err(format!(
                "metric {}: {n} {what}, over the {MAX_CALLS_PER_CASE} a case may have judged",
                spec.name
            ))
        };
        let mut lines = Vec::new();
        let mut hits = Vec::new();
        match spec.kind {
            Kind::ContextualRelevancy => {
                if context.len() > MAX_CALLS_PER_CASE {
                    return too_many(context.len(), "chunks");
                }
                for (i, node) in context.iter().enumerate() {
                    for (j, v) in ask(
                        &deepeval::relevancy_prompt(&query, node),
                        deepeval::Count::Statements,
                    )?
                    .into_iter()
                    .enumerate()
                    {
                        let what = if v.yes { "relevant" } else { "not relevant" };
                        let mut line = format!(
                            "chunk {}, statement {}: {what}: {}",
                            i + 1,
                            j + 1,
                            v.statement.unwrap_or_default()
                        );
                        if let Some(r) = v.reason {
                            line.push_str(&format!(" ({r})"));
                        }
                        lines.push(line);
                        hits.push(v.yes);
                    }
                }
            }
            Kind::ContextualPrecision => {
                if context.len() > MAX_CALLS_PER_CASE {
                    return too_many(context.len(), "chunks");
                }
                let user = deepeval::precision_prompt(&query, expected, context);
                for (i, v) in ask(&user, deepeval::Count::Exactly(context.len()))?
                    .into_iter()
                    .enumerate()
                {
                    let what = if v.yes { "useful" } else { "not useful" };
                    lines.push(verdict_line(&format!("chunk {}", i + 1), what, v.reason));
                    hits.push(v.yes);
                }
            }
            _ => {
                let sentences = sentences(expected);
                if sentences.len() > MAX_CALLS_PER_CASE {
                    return too_many(sentences.len(), "sentences");
                }
                let user = deepeval::recall_prompt(&sentences, context);
                for (i, v) in ask(&user, deepeval::Count::Exactly(sentences.len()))?
                    .into_iter()
                    .enumerate()
                {
                    let what = if v.yes {
                        "attributable"
                    } else {
                        "not attributable"
                    };
                    lines.push(verdict_line(&format!("sentence {}", i + 1), what, v.reason));
                    hits.push(v.yes);
                }
            }
        }
        let score = match spec.kind {
            Kind::ContextualPrecision => deepeval::weighted_precision(&hits),
            _ => deepeval::share_yes(&hits),
        };
        Ok(Judgement {
            score,
            reasoning: lines.join("\n"),
        })
    }
}

/// G-Eval's `strict_mode`: 1 only for a verdict of 1, else 0 (DeepEval's); any other metric's
/// verdict is its score.
fn final_score(spec: &Spec, score: f64) -> f64 {
    match spec.kind {
        Kind::GEval if spec.strict_mode => f64::from(u8::from(score >= 1.0)),
        // The raw 1–5 score is 1 + 4 × score; HoloDeck divides it by 5.
        _ if spec.over_five => (1.0 + 4.0 * score) / 5.0,
        _ => score,
    }
}

/// `label: what: reason` (the reason when the judge gave one).
fn verdict_line(label: &str, what: &str, reason: Option<String>) -> String {
    match reason {
        Some(r) => format!("{label}: {what}: {r}"),
        None => format!("{label}: {what}"),
    }
}

/// A text longer than a judge is shown is not scored, never cut.
fn shown_fits(spec: &Spec, text: &str) -> Result<(), String> {
    let chars = text.chars().count();
    if chars > MAX_JUDGED_CHARS {
        return Err(format!(
            "metric {}: the text to judge is {chars} characters, over the {MAX_JUDGED_CHARS} a judge is shown",
            spec.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn strict_g_eval_is_binary_and_generated_steps_are_used_or_fail() {
        let strict = Spec::g_eval("g", "c", vec![], vec![], true).unwrap();
        assert_eq!(final_score(&strict, 0.9), 0.0);
        assert_eq!(final_score(&strict, 1.0), 1.0);
        let plain = Spec::g_eval("g", "c", vec![], vec![], false).unwrap();
        assert_eq!(final_score(&plain, 0.75), 0.75);
        // Steps given: used as they are, nothing generated.
        let given = Spec::g_eval("g", "c", vec!["a".into()], vec![], false).unwrap();
        assert!(!given.steps_wanted());
        assert_eq!(given.steps().unwrap(), ["a"]);
        // None given: the generated ones, or the metric fails with why.
        let mut s = plain.clone();
        assert!(s.steps_wanted());
        assert!(s
            .steps()
            .unwrap_err()
            .contains("no evaluation steps were generated"));
        s.generated_steps = Some(Ok(vec!["x".into(), "y".into()]));
        assert_eq!(s.steps().unwrap(), ["x", "y"]);
        s.generated_steps = Some(Err("timeout".into()));
        assert_eq!(
            s.steps().unwrap_err(),
            "metric g: the judge's evaluation steps could not be had: timeout"
        );
        // Only G-Eval has steps.
        assert!(!Spec::plain(Kind::Fluency, "fluency").steps_wanted());
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
