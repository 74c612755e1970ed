//! ROUGE-1, ROUGE-2 and ROUGE-L as Google's `rouge-score` computes them
//! (`rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=…).score(reference,
//! hypothesis)`):
//!
//! - its default tokenizer: lowercase, every run of characters other than `a`–`z` and `0`–`9`
//!   becomes a separator (so any non-ASCII letter separates words, as in the original ROUGE
//!   perl script), and with the stemmer on, tokens longer than three characters are replaced by
//!   their Porter stem (NLTK's `PorterStemmer()`, see [`super::porter`]);
//! - ROUGE-N: clipped n-gram overlap; precision over the hypothesis's n-grams, recall over the
//!   reference's (each denominator at least 1), F1 = 2PR/(P+R) (0 when both are 0);
//! - ROUGE-L: the longest common subsequence of the two token lists, over the whole text (not
//!   `rougeLsum`'s sentence-level union); 0 when either side has no token.

use std::collections::HashMap;

use super::porter;

/// Precision, recall and F1 of one ROUGE variant, each in 0–1.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub fmeasure: f64,
}

/// The three variants guardwire reports.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct RougeScores {
    pub rouge1: Prf,
    pub rouge2: Prf,
    pub rouge_l: Prf,
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of `hypothesis` against `reference`.
pub fn score(hypothesis: &str, reference: &str, stemmer: bool) -> RougeScores {
    let hyp = tokenize(hypothesis, stemmer);
    let reference = tokenize(reference, stemmer);
    RougeScores {
        rouge1: ngrams(&reference, &hyp, 1),
        rouge2: ngrams(&reference, &hyp, 2),
        rouge_l: lcs(&reference, &hyp),
    }
}

/// `rouge_score.tokenize.tokenize(text, stemmer)`.
pub fn tokenize(text: &str, stemmer: bool) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|token| !token.is_empty())
        .map(|token| {
            if stemmer && token.len() > 3 {
                porter::stem(token)
            } else {
                token.to_string()
            }
        })
        // rouge-score's final check keeps tokens of [a-z0-9]+ only; a stem is never empty.
        .filter(|token| {
            !token.is_empty()
                && token
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        .collect()
}

fn fmeasure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

fn count_ngrams(tokens: &[String], n: usize) -> HashMap<&[String], u64> {
    let mut counts: HashMap<&[String], u64> = HashMap::new();
    for gram in tokens.windows(n) {
        *counts.entry(gram).or_insert(0) += 1;
    }
    counts
}

fn ngrams(target: &[String], prediction: &[String], n: usize) -> Prf {
    let target_counts = count_ngrams(target, n);
    let prediction_counts = count_ngrams(prediction, n);
    let overlap: u64 = target_counts
        .iter()
        .map(|(gram, &c)| c.min(prediction_counts.get(gram).copied().unwrap_or(0)))
        .sum();
    let target_total: u64 = target_counts.values().sum();
    let prediction_total: u64 = prediction_counts.values().sum();
    let precision = overlap as f64 / prediction_total.max(1) as f64;
    let recall = overlap as f64 / target_total.max(1) as f64;
    Prf {
        precision,
        recall,
        fmeasure: fmeasure(precision, recall),
    }
}

/// The length of the longest common subsequence, in O(len(a) · len(b)) time and O(len(b))
/// memory.
pub(crate) fn lcs_length<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut previous = vec![0usize; b.len() + 1];
    let mut current = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            current[j + 1] = if x == y {
                previous[j] + 1
            } else {
                previous[j + 1].max(current[j])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

fn lcs(target: &[String], prediction: &[String]) -> Prf {
    if target.is_empty() || prediction.is_empty() {
        return Prf::default();
    }
    let length = lcs_length(target, prediction) as f64;
    let precision = length / prediction.len() as f64;
    let recall = length / target.len() as f64;
    Prf {
        precision,
        recall,
        fmeasure: fmeasure(precision, recall),
    }
}
