//! The reference text metrics as one scorer: BLEU, ROUGE (the thresholded variant chosen, all
//! three reported) or METEOR of an answer against its references, under the length cap. Both
//! `guardwire eval`'s `--metric bleu|rouge|meteor` and the packs' `bleu`, `rouge` and `meteor`
//! eval types score through [`TextMetric::score`]; METEOR's WordNet is shared by every user of
//! one folder ([`shared_meteor`]).

use super::meteor::Meteor;
use super::{bleu, rouge};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// The longest text (answer or reference, in characters) a reference text metric scores:
/// ROUGE-L's longest common subsequence is quadratic in the tokens. A longer text is not
/// scored (an error saying so), never truncated.
pub const MAX_SCORED_CHARS: usize = 16 * 1024;

/// The most references one score is taken against (each costs a pass over the answer; ROUGE-L
/// a quadratic one): more is an error, never a silent cut.
pub const MAX_REFERENCES: usize = 64;

/// Which ROUGE F-measure is thresholded (all three are reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RougeVariant {
    Rouge1,
    Rouge2,
    RougeL,
}

impl RougeVariant {
    /// `rouge1`, `rouge2` or `rougeL` (rouge-score's and HoloDeck's names).
    pub fn by_name(name: &str) -> Option<RougeVariant> {
        Some(match name {
            "rouge1" => RougeVariant::Rouge1,
            "rouge2" => RougeVariant::Rouge2,
            "rougeL" => RougeVariant::RougeL,
            _ => return None,
        })
    }
}

/// A reference text metric, set up.
#[derive(Debug, Clone)]
pub enum TextMetric {
    /// sacreBLEU's sentence BLEU, 0–1.
    Bleu,
    /// rouge-score's F-measure of `variant` (`stemmer`: `use_stemmer=True`).
    Rouge {
        variant: RougeVariant,
        stemmer: bool,
    },
    /// NLTK's METEOR, on a loaded WordNet.
    Meteor(Arc<Meteor>),
}

/// A score: the thresholded value and, for ROUGE, every F-measure by name.
#[derive(Debug, Clone, PartialEq)]
pub struct TextScore {
    pub value: f64,
    pub detail: Vec<(&'static str, f64)>,
}

impl TextMetric {
    pub fn name(&self) -> &'static str {
        match self {
            TextMetric::Bleu => "bleu",
            TextMetric::Rouge { .. } => "rouge",
            TextMetric::Meteor(_) => "meteor",
        }
    }

    /// Scores `answer` against `references` (`what_ref` names them in the length error: "the
    /// expected output", "the reference"). No reference scores 0 (every metric's own rule).
    pub fn score(
        &self,
        answer: &str,
        references: &[&str],
        what_ref: &str,
    ) -> Result<TextScore, String> {
        for (what, text) in
            std::iter::once(("output", answer)).chain(references.iter().map(|r| (what_ref, *r)))
        {
            let chars = text.chars().count();
            if chars > MAX_SCORED_CHARS {
                return Err(format!(
                    "metric {}: the {what} is {chars} characters, over the {MAX_SCORED_CHARS} a reference text metric scores",
                    self.name()
                ));
            }
        }
        let plain = |value| TextScore {
            value,
            detail: Vec::new(),
        };
        Ok(match self {
            TextMetric::Bleu => plain(bleu::sentence_bleu(answer, references)),
            TextMetric::Meteor(m) => plain(m.score(answer, references)),
            TextMetric::Rouge { variant, stemmer } => {
                // rouge-score's `score_multi`: the best reference by the thresholded F-measure.
                let best = references
                    .iter()
                    .map(|r| rouge::score(answer, r, *stemmer))
                    .map(|s| {
                        let f = [s.rouge1.fmeasure, s.rouge2.fmeasure, s.rouge_l.fmeasure];
                        let value = match variant {
                            RougeVariant::Rouge1 => f[0],
                            RougeVariant::Rouge2 => f[1],
                            RougeVariant::RougeL => f[2],
                        };
                        (value, f)
                    })
                    .fold(None, |best: Option<(f64, [f64; 3])>, s| match best {
                        Some(b) if b.0 >= s.0 => Some(b),
                        _ => Some(s),
                    })
                    .unwrap_or((0.0, [0.0; 3]));
                TextScore {
                    value: best.0,
                    detail: vec![
                        ("rouge1", best.1[0]),
                        ("rouge2", best.1[1]),
                        ("rougeL", best.1[2]),
                    ],
                }
            }
        })
    }
}

/// The WordNets loaded, by folder, while something uses them.
static LOADED: Mutex<Vec<(PathBuf, Weak<Meteor>)>> = Mutex::new(Vec::new());

/// METEOR on the WordNet of `dir`, loaded once and shared while in use (a config reload, or
/// several packs asking for METEOR, do not read it again); a failure is not remembered, so
/// a later load retries.
pub fn shared_meteor(dir: &Path) -> Result<Arc<Meteor>, String> {
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    loaded.retain(|(_, w)| w.strong_count() > 0);
    if let Some(m) = loaded
        .iter()
        .find(|(d, _)| d == dir)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(m);
    }
    let m = Arc::new(Meteor::load(dir).map_err(|e| e.to_string())?);
    loaded.push((dir.to_path_buf(), Arc::downgrade(&m)));
    Ok(m)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rouge_takes_the_best_reference_and_reports_all_three() {
        let m = TextMetric::Rouge {
            variant: RougeVariant::Rouge1,
            stemmer: true,
        };
        let r = m
            .score("running dogs", &["zebra", "the dog runs"], "reference")
            .unwrap();
        assert!((r.value - 0.8).abs() < 1e-9);
        assert_eq!(r.detail[2].0, "rougeL");
        let b = TextMetric::Bleu
            .score(
                "The cat sat on the mat.",
                &["The cat is sitting on the mat."],
                "reference",
            )
            .unwrap();
        assert!((b.value - 0.4238365628278778).abs() < 1e-9);
        assert_eq!(
            TextMetric::Bleu.score("a", &[], "reference").unwrap().value,
            0.0
        );
        let long = "a ".repeat(MAX_SCORED_CHARS);
        let e = TextMetric::Bleu
            .score("a", &[&long], "reference")
            .unwrap_err();
        assert!(e.contains("the reference is"), "{e}");
    }

    #[test]
    fn a_missing_wordnet_is_an_error_and_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let e = shared_meteor(dir.path()).unwrap_err();
        assert!(e.contains("WordNet"), "{e}");
        assert!(shared_meteor(dir.path()).is_err());
    }
}
