//! The metrics `guardwire eval` knows, by name: what each needs from a case (checked before
//! any case runs), its per-case threshold and how it scores. The reference text metrics (BLEU,
//! ROUGE, METEOR) come from [`crate::scoring`]; METEOR's WordNet is loaded once per run, before
//! any case runs, and a run asking for METEOR without a readable WordNet is refused. Adding a
//! metric is an arm in [`Metric::by_name`], [`Metric::needs`] and [`Scorer::score`].

use super::deterministic::{Equality, Matches, Numeric, ResponsePath};
use super::needs::CaseView;
use super::{judged, trajectory};
use crate::scoring::meteor::Meteor;
use crate::scoring::text::TextMetric;
use std::path::PathBuf;
use std::sync::Arc;

pub use super::needs::Needs;
pub use crate::scoring::text::{RougeVariant, MAX_SCORED_CHARS};

/// A metric a run may ask for.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// The answer equals the expected output (surrounding whitespace ignored): 1 or 0.
    Equals,
    /// The answer contains the expected output: 1 or 0.
    Contains,
    /// sacreBLEU sentence BLEU, 0–1.
    Bleu,
    /// ROUGE-1/2/L F-measure (`rouge-score`), 0–1.
    Rouge,
    /// NLTK METEOR, 0–1 (needs WordNet).
    Meteor,
    /// A judged metric (src/suite/judged.rs), 0–1.
    Judged(Arc<judged::Spec>),
    /// A trajectory grader or cross-variant assertion (src/suite/trajectory.rs): 1 or 0.
    Trajectory(Arc<trajectory::Spec>),
    /// HoloDeck's `equality` (src/suite/deterministic.rs): 1 or 0.
    Equality(Arc<Equality>),
    /// HoloDeck's `numeric`: 1 or 0.
    Numeric(Arc<Numeric>),
    /// Puck's `matches`: the pattern is found in the output, 1 or 0.
    Matches(Arc<Matches>),
}

/// Every name [`Metric::by_name`] accepts.
pub const NAMES: [&str; 5] = ["equals", "contains", "bleu", "rouge", "meteor"];

/// Every name `--metric` accepts, for error messages.
fn all_names() -> String {
    NAMES
        .iter()
        .chain(judged::NAMES.iter())
        .chain(trajectory::NAMES.iter())
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

impl Metric {
    pub fn by_name(name: &str) -> Option<Metric> {
        Some(match name {
            "equals" => Metric::Equals,
            "contains" => Metric::Contains,
            "bleu" => Metric::Bleu,
            "rouge" => Metric::Rouge,
            "meteor" => Metric::Meteor,
            _ => {
                if let Some(kind) =
                    judged::Kind::by_name(name).filter(|k| *k != judged::Kind::GEval)
                {
                    return Some(Metric::Judged(Arc::new(judged::Spec::plain(kind, name))));
                }
                return trajectory::Spec::by_name(name).map(|s| Metric::Trajectory(Arc::new(s)));
            }
        })
    }

    pub fn name(&self) -> &str {
        match self {
            Metric::Equals => "equals",
            Metric::Contains => "contains",
            Metric::Bleu => "bleu",
            Metric::Rouge => "rouge",
            Metric::Meteor => "meteor",
            Metric::Judged(s) => &s.name,
            Metric::Trajectory(s) => &s.name,
            Metric::Equality(_) => "equality",
            Metric::Numeric(_) => "numeric",
            Metric::Matches(_) => "matches",
        }
    }

    /// What a case must carry for this metric.
    pub fn needs(&self) -> Vec<Needs> {
        match self {
            Metric::Equals
            | Metric::Contains
            | Metric::Bleu
            | Metric::Rouge
            | Metric::Meteor
            | Metric::Equality(_)
            | Metric::Numeric(_) => vec![Needs::GroundTruth, Needs::Output],
            Metric::Matches(_) => vec![Needs::Output],
            Metric::Judged(s) => {
                let mut n = s.needs.clone();
                n.push(Needs::Output);
                n
            }
            Metric::Trajectory(s) => s.needs(),
        }
    }

    /// The per-case threshold when `--metric NAME` gives none. The reference text metrics
    /// have none, as in HoloDeck (whose evaluators pass every score without a threshold):
    /// their score is reported and never fails a case.
    pub fn default_min(&self) -> f64 {
        match self {
            Metric::Equals
            | Metric::Contains
            | Metric::Trajectory(_)
            | Metric::Equality(_)
            | Metric::Numeric(_)
            | Metric::Matches(_) => 1.0,
            Metric::Judged(s) if s.strict_mode => 1.0,
            Metric::Judged(_) => 0.5,
            Metric::Bleu | Metric::Rouge | Metric::Meteor => 0.0,
        }
    }
}

/// A metric asked for, with the score a case needs to pass it.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub metric: Metric,
    pub min: f64,
    /// HoloDeck's `response_path`: the leaf of the JSON answer the metric scores instead of
    /// the whole answer (a case whose answer has none fails the metric, with the reason).
    pub response_path: Option<Arc<ResponsePath>>,
}

impl Asked {
    pub fn new(metric: Metric, min: f64) -> Asked {
        Asked {
            metric,
            min,
            response_path: None,
        }
    }
}

/// How the metrics of a run are set up (`--rouge-variant`, `--rouge-stem`, `--wordnet-dir`).
#[derive(Debug, Clone)]
pub struct MetricOptions {
    pub rouge_variant: String,
    pub rouge_stem: bool,
    pub wordnet_dir: PathBuf,
    /// `--metric-file`: metrics with parameters (G-Eval, trajectory graders) and the judge.
    pub metric_file: Option<PathBuf>,
}

impl Default for MetricOptions {
    fn default() -> Self {
        MetricOptions {
            rouge_variant: "rougeL".into(),
            rouge_stem: false,
            wordnet_dir: Meteor::default_dir().to_path_buf(),
            metric_file: None,
        }
    }
}

/// One score: the thresholded value and, for ROUGE, every F-measure by name; a judge's or
/// grader's reasoning.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub value: f64,
    pub detail: Vec<(&'static str, f64)>,
    pub reasoning: Option<String>,
}

/// The metrics of a run, resolved and set up before anything runs.
#[derive(Debug)]
pub struct Scorer {
    pub asked: Vec<Asked>,
    rouge_variant: RougeVariant,
    rouge_stem: bool,
    meteor: Option<Arc<Meteor>>,
    /// `--metric-file`'s `judge`.
    pub judge: Option<String>,
    /// The judges judged metrics call, once the config's runtime is built ([`Scorer::attach`]).
    judges: Option<judged::Runner>,
    /// HoloDeck's rule (`eval --holodeck`): a metric whose inputs a case lacks (a ground truth,
    /// a retrieval context) is not run on it, and an empty answer runs none — where `--cases`
    /// refuses such a case before the run.
    pub skip_unmet: bool,
}

impl Scorer {
    /// Every `--metric NAME[:MIN]` resolved, then `file`'s metrics (`--metric-file`: what it
    /// asks for, and its judge), WordNet loaded if METEOR is asked for; or the first problem,
    /// explained.
    pub fn resolve(
        names: &[String],
        opts: &MetricOptions,
        file: Option<(Vec<Asked>, Option<String>)>,
    ) -> Result<Scorer, String> {
        let asked = names
            .iter()
            .map(|spec| {
                let (n, min) = match spec.split_once(':') {
                    Some((n, min)) => (n, Some(min)),
                    None => (spec.as_str(), None),
                };
                let metric = Metric::by_name(n).ok_or_else(|| {
                    format!(
                        "unknown metric {n:?} (known: {}; g_eval and the trajectory graders with parameters go in --metric-file)",
                        all_names()
                    )
                })?;
                let min = match min {
                    None => metric.default_min(),
                    Some(text) => text
                        .parse::<f64>()
                        .ok()
                        .filter(|v| (0.0..=1.0).contains(v))
                        .ok_or_else(|| {
                            format!(
                                "--metric {spec}: the threshold after ':' is a number from 0 to 1"
                            )
                        })?,
                };
                Ok(Asked::new(metric, min))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut asked = asked;
        let mut judge = None;
        if let Some((more, file_judge)) = file {
            asked.extend(more);
            judge = file_judge;
        }
        let rouge_variant = RougeVariant::by_name(&opts.rouge_variant).ok_or_else(|| {
            format!(
                "--rouge-variant {:?}: rouge1, rouge2 or rougeL",
                opts.rouge_variant
            )
        })?;
        let meteor = if asked.iter().any(|a| a.metric == Metric::Meteor) {
            Some(
                crate::scoring::text::shared_meteor(&opts.wordnet_dir).map_err(|e| {
                    format!(
                        "metric meteor (--wordnet-dir {}): {e}",
                        opts.wordnet_dir.display()
                    )
                })?,
            )
        } else {
            None
        };
        Ok(Scorer {
            asked,
            rouge_variant,
            rouge_stem: opts.rouge_stem,
            meteor,
            judge,
            judges: None,
            skip_unmet: false,
        })
    }

    /// Sets up the judges of `rt` for the judged metrics asked for (none: nothing to do);
    /// every judge they name must be configured. Before any case runs.
    pub fn attach(&mut self, rt: &crate::proxy::Runtime) -> Result<(), String> {
        let specs: Vec<&judged::Spec> = self
            .asked
            .iter()
            .filter_map(|a| match &a.metric {
                Metric::Judged(s) => Some(&**s),
                _ => None,
            })
            .collect();
        if specs.is_empty() {
            return Ok(());
        }
        let runner = judged::Runner::new(rt, &specs, self.judge.as_deref())?;
        // G-Eval without steps: the judge writes them, once per metric for the whole run.
        for a in &mut self.asked {
            if let Metric::Judged(spec) = &mut a.metric {
                if spec.steps_wanted() && spec.generated_steps.is_none() {
                    let generated = runner.generate_steps(spec);
                    Arc::make_mut(spec).generated_steps = Some(generated);
                }
            }
        }
        self.judges = Some(runner);
        Ok(())
    }

    /// Scores `case` with a judged metric.
    pub fn judged(&self, spec: &judged::Spec, case: &CaseView<'_>) -> Result<Scored, String> {
        let runner = self
            .judges
            .as_ref()
            .ok_or_else(|| format!("metric {}: the judges were not set up", spec.name))?;
        let j = runner.score(spec, case)?;
        Ok(Scored {
            value: j.score,
            detail: Vec::new(),
            reasoning: Some(j.reasoning),
        })
    }

    /// Scores `answer` against `references` (at least one; [`Metric::needs`] is checked
    /// before a run starts) with `metric`.
    pub fn score(
        &self,
        metric: &Metric,
        answer: &str,
        references: &[&str],
    ) -> Result<Scored, String> {
        let plain = |value| {
            Ok(Scored {
                value,
                detail: Vec::new(),
                reasoning: None,
            })
        };
        let hit = |f: &dyn Fn(&str) -> bool| {
            if references.iter().any(|r| f(r.trim())) {
                1.0
            } else {
                0.0
            }
        };
        let first = || references.first().copied().unwrap_or_default();
        let text = match metric {
            Metric::Equals => return plain(hit(&|r| answer.trim() == r)),
            Metric::Contains => return plain(hit(&|r| answer.trim().contains(r))),
            Metric::Equality(e) => return plain(f64::from(u8::from(e.equal(answer, first())))),
            Metric::Numeric(n) => return plain(f64::from(u8::from(n.equal(answer, first())?))),
            Metric::Matches(m) => return plain(f64::from(u8::from(m.found(answer)))),
            Metric::Bleu => TextMetric::Bleu,
            Metric::Rouge => TextMetric::Rouge {
                variant: self.rouge_variant,
                stemmer: self.rouge_stem,
            },
            Metric::Meteor => match &self.meteor {
                Some(m) => TextMetric::Meteor(Arc::clone(m)),
                None => return Err("metric meteor: WordNet was not loaded for this run".into()),
            },
            Metric::Judged(_) | Metric::Trajectory(_) => {
                return Err(format!(
                    "metric {}: scored on the whole case, not on texts",
                    metric.name()
                ))
            }
        };
        // One code path with the packs' reference metrics (`crate::scoring::text`).
        let s = text.score(answer, references, "expected output")?;
        Ok(Scored {
            value: s.value,
            detail: s.detail,
            reasoning: None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scorer(names: &[&str], opts: &MetricOptions) -> Result<Scorer, String> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        Scorer::resolve(&names, opts, None)
    }

    #[test]
    fn names_thresholds_and_options_are_checked() {
        let opts = MetricOptions::default();
        assert!(scorer(&["blue"], &opts)
            .unwrap_err()
            .contains("unknown metric"));
        for bad in ["bleu:x", "bleu:1.5", "bleu:-0.1"] {
            assert!(
                scorer(&[bad], &opts).unwrap_err().contains("threshold"),
                "{bad}"
            );
        }
        let s = scorer(&["equals", "bleu:0.25", "rouge"], &opts).unwrap();
        let mins: Vec<f64> = s.asked.iter().map(|a| a.min).collect();
        assert_eq!(
            mins,
            [1.0, 0.25, 0.0],
            "a text metric has no threshold by default"
        );
        let bad = MetricOptions {
            rouge_variant: "rougeLsum".into(),
            ..MetricOptions::default()
        };
        assert!(scorer(&["rouge"], &bad)
            .unwrap_err()
            .contains("--rouge-variant"));
        let empty = tempfile::tempdir().unwrap();
        let no_wordnet = MetricOptions {
            wordnet_dir: empty.path().to_path_buf(),
            ..MetricOptions::default()
        };
        let err = scorer(&["meteor"], &no_wordnet).unwrap_err();
        assert!(
            err.contains("metric meteor") && err.contains("WordNet"),
            "{err}"
        );
        // Without METEOR, WordNet is not read.
        assert!(scorer(&["bleu"], &no_wordnet).is_ok());
    }

    #[test]
    fn equals_contains_bleu_and_rouge_score() {
        let s = scorer(&["equals"], &MetricOptions::default()).unwrap();
        let v = |m: Metric, a, r: &[&str]| s.score(&m, a, r).unwrap().value;
        assert_eq!(v(Metric::Equals, " Paris\n", &["Paris"]), 1.0);
        assert_eq!(v(Metric::Equals, "Paris.", &["Paris"]), 0.0);
        assert_eq!(v(Metric::Contains, "It is Paris.", &["x", "Paris"]), 1.0);
        assert_eq!(v(Metric::Contains, "Lyon", &["Paris"]), 0.0);
        let close = v(
            Metric::Bleu,
            "The cat sat on the mat.",
            &["The cat is sitting on the mat."],
        );
        assert!((close - 0.4238365628278778).abs() < 1e-9, "{close}");
        let r = s
            .score(&Metric::Rouge, "running dogs", &["the dog runs"])
            .unwrap();
        assert_eq!(r.value, 0.0);
        let stemmed = scorer(
            &["rouge"],
            &MetricOptions {
                rouge_variant: "rouge1".into(),
                rouge_stem: true,
                ..MetricOptions::default()
            },
        )
        .unwrap();
        let r = stemmed
            .score(&Metric::Rouge, "running dogs", &["zebra", "the dog runs"])
            .unwrap();
        assert!((r.value - 0.8).abs() < 1e-9);
        assert_eq!(r.detail[2].0, "rougeL");
        assert!((r.detail[2].1 - 0.4).abs() < 1e-9);
        let long = "a ".repeat(MAX_SCORED_CHARS);
        let err = s.score(&Metric::Rouge, &long, &["a"]).unwrap_err();
        assert!(err.contains("over the"), "{err}");
        assert!(s.score(&Metric::Meteor, "a", &["a"]).is_err());
    }
}
