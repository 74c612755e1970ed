//! The metrics `guardwire eval` knows, by name: what each needs from a case (checked before
//! any case runs) and how it scores. The reference text metrics (BLEU, ROUGE, METEOR) come
//! from `crate::scoring` once it is part of the build; until then a run asking for one is
//! refused by name, never scored as a pass. Adding one is an arm in [`Metric::by_name`],
//! [`Metric::needs`] and [`Metric::score`].

/// What a metric reads from a case besides the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// `expected_output` / `ground_truth`.
    GroundTruth,
    /// `context` / `retrieval_context`.
    Context,
}

impl Needs {
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::GroundTruth => "expected_output (or ground_truth)",
            Needs::Context => "context (or retrieval_context)",
        }
    }
}

/// A metric a run may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// Every name [`Metric::by_name`] accepts.
pub const NAMES: [&str; 5] = ["equals", "contains", "bleu", "rouge", "meteor"];

impl Metric {
    pub fn by_name(name: &str) -> Option<Metric> {
        Some(match name {
            "equals" => Metric::Equals,
            "contains" => Metric::Contains,
            "bleu" => Metric::Bleu,
            "rouge" => Metric::Rouge,
            "meteor" => Metric::Meteor,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Equals => "equals",
            Metric::Contains => "contains",
            Metric::Bleu => "bleu",
            Metric::Rouge => "rouge",
            Metric::Meteor => "meteor",
        }
    }

    /// What a case must carry for this metric.
    pub fn needs(self) -> &'static [Needs] {
        match self {
            Metric::Equals | Metric::Contains | Metric::Bleu | Metric::Rouge | Metric::Meteor => {
                &[Needs::GroundTruth]
            }
        }
    }

    /// `Err` names why this build cannot compute the metric.
    pub fn available(self) -> Result<(), String> {
        match self {
            Metric::Equals | Metric::Contains => Ok(()),
            Metric::Bleu | Metric::Rouge | Metric::Meteor => Err(format!(
                "metric {}: not available in this build (the reference text metrics are not compiled in)",
                self.name()
            )),
        }
    }

    /// Scores `answer` against `references` (at least one; [`Metric::needs`] is checked
    /// before a run starts).
    pub fn score(self, answer: &str, references: &[&str]) -> Result<f64, String> {
        self.available()?;
        let answer = answer.trim();
        let hit = |f: &dyn Fn(&str) -> bool| {
            if references.iter().any(|r| f(r.trim())) {
                1.0
            } else {
                0.0
            }
        };
        match self {
            Metric::Equals => Ok(hit(&|r| answer == r)),
            Metric::Contains => Ok(hit(&|r| answer.contains(r))),
            Metric::Bleu | Metric::Rouge | Metric::Meteor => {
                Err(format!("metric {}: not available", self.name()))
            }
        }
    }
}

/// The metrics of a run, resolved by name before anything runs.
pub struct Registry;

impl Registry {
    /// Every name known and available, or the first that is not, explained.
    pub fn resolve(names: &[String]) -> Result<Vec<Metric>, String> {
        names
            .iter()
            .map(|n| {
                let m = Metric::by_name(n)
                    .ok_or_else(|| format!("unknown metric {n:?} (known: {})", NAMES.join(", ")))?;
                m.available()?;
                Ok(m)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reference_metrics_are_refused_by_name_never_scored() {
        for name in ["bleu", "rouge", "meteor"] {
            let err = Registry::resolve(&[name.to_owned()]).unwrap_err();
            assert!(err.contains(name) && err.contains("not available"), "{err}");
            assert!(Metric::by_name(name).unwrap().score("a", &["a"]).is_err());
        }
        assert!(Registry::resolve(&["blue".into()])
            .unwrap_err()
            .contains("unknown metric"));
    }

    #[test]
    fn equals_and_contains_score_one_or_zero() {
        assert_eq!(Metric::Equals.score(" Paris\n", &["Paris"]), Ok(1.0));
        assert_eq!(Metric::Equals.score("Paris.", &["Paris"]), Ok(0.0));
        assert_eq!(
            Metric::Contains.score("It is Paris.", &["x", "Paris"]),
            Ok(1.0)
        );
        assert_eq!(Metric::Contains.score("Lyon", &["Paris"]), Ok(0.0));
        assert_eq!(
            Registry::resolve(&["equals".into(), "contains".into()]),
            Ok(vec![Metric::Equals, Metric::Contains])
        );
    }
}
