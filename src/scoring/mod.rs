//! Reference text metrics: BLEU (sacreBLEU's sentence and corpus BLEU), ROUGE-1/2/L (Google's
//! `rouge-score`) and METEOR (NLTK's `meteor_score`, with WordNet 3.0 read from a folder).
//!
//! Each metric reproduces its reference implementation's tokenization and arithmetic, so that a
//! score computed here is the score the Python package computes on the same strings (the oracle
//! test, tests/metrics.rs, compares them to 1e-6 on generated pairs). docs/metrics.md says which
//! version of each package is the reference and what guardwire's tokenization is.
//!
//! The metrics are pure functions of their inputs (METEOR also of the WordNet it loaded): no I/O
//! at scoring time, no panics on any input.

pub mod bleu;
pub mod meteor;
pub mod porter;
pub mod rouge;
pub mod text;
mod wordnet;

#[cfg(test)]
pub(crate) mod tests;

/// Python's `str.isspace()` for one character: Unicode's White_Space property (what Rust's
/// `char::is_whitespace` tests) plus the four ASCII information separators U+001C..U+001F, which
/// Python also treats as whitespace in `str.split()` and `str.strip()`.
pub(crate) fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` without arguments: runs of whitespace separate tokens, no empty token.
pub(crate) fn py_split(text: &str) -> impl Iterator<Item = &str> {
    text.split(py_isspace).filter(|token| !token.is_empty())
}

/// Python's `str.rstrip()` without arguments.
pub(crate) fn py_rstrip(text: &str) -> &str {
    text.trim_end_matches(py_isspace)
}
