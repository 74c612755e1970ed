//! BLEU as sacreBLEU computes it (`sacrebleu.sentence_bleu` and `sacrebleu.corpus_bleu` with
//! their defaults), scaled to 0–1 (sacreBLEU reports 0–100):
//!
//! - tokenizer `13a` (mteval-v13a, WMT's): `<skipped>` removed, `-` + newline joined, newlines
//!   to spaces, the four XML entities unescaped, then the `re` post-tokenizer's four
//!   substitutions (ASCII punctuation and symbols split off; `.` and `,` split off unless
//!   between digits; `-` split after a digit) and whitespace normalised; no lowercasing;
//! - n-grams of order 1 to 4, clipped by the maximum count over the references; the reference
//!   length closest to the hypothesis's (the shorter one on a tie) for the brevity penalty;
//! - smoothing `exp` (mteval's NIST smoothing, method 3 of Chen and Cherry 2014): the k-th order
//!   without a match counts 1 / (2^k · total);
//! - sentence BLEU uses the effective order (orders with no n-gram at all, in a hypothesis
//!   shorter than four tokens, are left out of the mean), as `sentence_bleu` does; corpus BLEU
//!   does not, as `corpus_bleu` does not.

use std::collections::HashMap;

use super::{py_rstrip, py_split};

const MAX_ORDER: usize = 4;

/// sacreBLEU's `sentence_bleu(hypothesis, references).score / 100`. No reference at all scores 0.
pub fn sentence_bleu(hypothesis: &str, references: &[&str]) -> f64 {
    if references.is_empty() {
        return 0.0;
    }
    let stats = segment_stats(hypothesis, references.iter().copied());
    compute(&stats, true) / 100.0
}

/// sacreBLEU's `corpus_bleu(hypotheses, streams).score / 100`, with the references given per
/// hypothesis: `references[i]` are the references of `hypotheses[i]` (sacreBLEU takes them as
/// streams, one list per reference set: the transpose). A hypothesis with fewer references than
/// others has fewer (sacreBLEU's `None` references); one without any, or past the end of
/// `references`, counts its n-grams with no match and a reference length of 0 (sacreBLEU would
/// count -1). No hypothesis at all scores 0.
pub fn corpus_bleu(hypotheses: &[&str], references: &[Vec<&str>]) -> f64 {
    let mut total = Stats::default();
    for (i, hypothesis) in hypotheses.iter().enumerate() {
        let refs = references.get(i).map(Vec::as_slice).unwrap_or(&[]);
        total.add(&segment_stats(hypothesis, refs.iter().copied()));
    }
    if hypotheses.is_empty() {
        return 0.0;
    }
    compute(&total, false) / 100.0
}

/// The `13a` tokenizer: the tokens of `line` (after sacreBLEU's `rstrip`).
pub fn tokenize_13a(line: &str) -> Vec<String> {
    let mut line = py_rstrip(line)
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    // `([\{-\~\[-\` -\&\(-\+\:-\@\/])` → ` \1 `: these ASCII characters become tokens.
    let mut spaced: Vec<char> = Vec::with_capacity(line.len() + 16);
    spaced.push(' ');
    for c in line.chars() {
        if matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/') {
            spaced.extend([' ', c, ' ']);
        } else {
            spaced.push(c);
        }
    }
    spaced.push(' ');
    let digit = |c: char| c.is_ascii_digit();
    let dot = |c: char| c == '.' || c == ',';
    // `([^0-9])([\.,])` → `\1 \2 `
    let s = substitute(
        &spaced,
        |a, b| !digit(a) && dot(b),
        |a, b| vec![a, ' ', b, ' '],
    );
    // `([\.,])([^0-9])` → ` \1 \2`
    let s = substitute(&s, |a, b| dot(a) && !digit(b), |a, b| vec![' ', a, ' ', b]);
    // `([0-9])(-)` → `\1 \2 `
    let s = substitute(&s, |a, b| digit(a) && b == '-', |a, b| vec![a, ' ', b, ' ']);
    let s: String = s.into_iter().collect();
    py_split(&s).map(str::to_string).collect()
}

/// Python's `re.sub` for a pattern of exactly two characters: leftmost matches, not
/// overlapping, the scan going on after each match.
fn substitute(
    text: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char) -> Vec<char>,
) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < text.len() {
        if i + 1 < text.len() && matches(text[i], text[i + 1]) {
            out.extend(replace(text[i], text[i + 1]));
            i += 2;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// A segment's sufficient statistics (sacreBLEU's list `[hyp_len, ref_len, correct…, total…]`).
#[derive(Debug, Default, Clone)]
struct Stats {
    hyp_len: u64,
    ref_len: u64,
    correct: [u64; MAX_ORDER],
    total: [u64; MAX_ORDER],
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.hyp_len += other.hyp_len;
        self.ref_len += other.ref_len;
        for n in 0..MAX_ORDER {
            self.correct[n] += other.correct[n];
            self.total[n] += other.total[n];
        }
    }
}

fn ngram_counts(tokens: &[String]) -> HashMap<&[String], u64> {
    let mut counts = HashMap::new();
    for n in 1..=MAX_ORDER {
        for gram in tokens.windows(n) {
            *counts.entry(gram).or_insert(0) += 1;
        }
    }
    counts
}

fn segment_stats<'a>(hypothesis: &str, references: impl Iterator<Item = &'a str>) -> Stats {
    let hyp = tokenize_13a(hypothesis);
    let refs: Vec<Vec<String>> = references.map(tokenize_13a).collect();
    let mut ref_max: HashMap<&[String], u64> = HashMap::new();
    for tokens in &refs {
        for (gram, count) in ngram_counts(tokens) {
            let best = ref_max.entry(gram).or_insert(0);
            *best = (*best).max(count);
        }
    }
    let hyp_len = hyp.len() as u64;
    // The closest reference length; the shorter on a tie.
    let mut closest: Option<(u64, u64)> = None;
    for tokens in &refs {
        let len = tokens.len() as u64;
        let diff = hyp_len.abs_diff(len);
        closest = match closest {
            Some((d, l)) if d < diff || (d == diff && l <= len) => Some((d, l)),
            _ => Some((diff, len)),
        };
    }
    let mut stats = Stats {
        hyp_len,
        ref_len: closest.map_or(0, |(_, len)| len),
        ..Stats::default()
    };
    for (gram, count) in ngram_counts(&hyp) {
        let n = gram.len() - 1;
        stats.total[n] += count;
        if let Some(&reference) = ref_max.get(gram) {
            stats.correct[n] += count.min(reference);
        }
    }
    stats
}

/// sacreBLEU's `my_log`: log, with 0 mapped to -9999999999.
fn my_log(x: f64) -> f64 {
    if x == 0.0 {
        -9_999_999_999.0
    } else {
        x.ln()
    }
}

/// `BLEU.compute_bleu` with smoothing `exp`, on the 0–100 scale.
fn compute(stats: &Stats, effective_order: bool) -> f64 {
    let (sys_len, ref_len) = (stats.hyp_len as f64, stats.ref_len as f64);
    let mut bp = 1.0;
    if sys_len < ref_len {
        bp = if sys_len > 0.0 {
            (1.0 - ref_len / sys_len).exp()
        } else {
            0.0
        };
    }
    if stats.correct.iter().all(|&c| c == 0) {
        return 0.0;
    }
    let mut precisions = [0.0f64; MAX_ORDER];
    let mut smooth = 1.0f64;
    let mut eff_order = MAX_ORDER;
    for (n, precision) in precisions.iter_mut().enumerate() {
        let (correct, total) = (stats.correct[n], stats.total[n]);
        if total == 0 {
            break;
        }
        if effective_order {
            eff_order = n + 1;
        }
        if correct == 0 {
            smooth *= 2.0;
            *precision = 100.0 / (smooth * total as f64);
        } else {
            *precision = 100.0 * correct as f64 / total as f64;
        }
    }
    let sum: f64 = precisions[..eff_order].iter().map(|&p| my_log(p)).sum();
    bp * (sum / eff_order as f64).exp()
}
