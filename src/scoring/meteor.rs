//! METEOR as NLTK computes it (`nltk.translate.meteor_score.meteor_score(references,
//! hypothesis)` with its defaults: alpha 0.9, beta 3, gamma 0.5, `str.lower`, `PorterStemmer()`,
//! WordNet 3.0).
//!
//! NLTK takes pre-tokenized input; guardwire splits on whitespace (Python's `str.split()`), the
//! common usage `meteor_score([r.split() for r in refs], hyp.split())`. NLTK lowercases each
//! token. The alignment is NLTK's, stage by stage, each over the words the previous left
//! unmatched, the hypothesis walked from its last word to its first:
//!
//! 1. exact: a word takes the last unmatched occurrence of the same word in the reference;
//! 2. stem: the same over the Porter stems of the words left;
//! 3. synonyms: a (stemmed — NLTK passes the stems on) hypothesis word matches a reference
//!    word that is the word itself or one of the lemma names (without `_`) of the synsets
//!    `wordnet.synsets(word)` returns; of those, the one at the latest position.
//!
//! Then P = m / |hyp|, R = m / |ref|, Fmean = PR / (αP + (1−α)R), the chunks of adjacent
//! matches give the penalty γ (chunks / m)^β, and the score is (1 − penalty) · Fmean, the best
//! over the references; 0 when nothing matches or a side has no token.

use std::collections::HashMap;
use std::path::Path;

pub use super::wordnet::MeteorError;
use super::wordnet::WordNet;
use super::{porter, py_split};

const ALPHA: f64 = 0.9;
const BETA: f64 = 3.0;
const GAMMA: f64 = 0.5;

/// METEOR with WordNet loaded (about 0.2 s and 20 MB; see docs/metrics.md). Load it once and
/// share it: scoring only reads it.
pub struct Meteor {
    wordnet: WordNet,
}

impl std::fmt::Debug for Meteor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lemmas, synsets) = self.wordnet.sizes();
        f.debug_struct("Meteor")
            .field("lemmas", &lemmas)
            .field("synsets", &synsets)
            .finish()
    }
}

type Enumerated = Vec<(usize, String)>;

impl Meteor {
    /// Debian's WordNet folder (packages `wordnet-base`, `wordnet-sense-index`).
    pub fn default_dir() -> &'static Path {
        Path::new("/usr/share/wordnet")
    }

    /// Reads the WordNet 3.0 database files (`index.*`, `data.*`, `*.exc` of the four parts of
    /// speech) from `wordnet_dir`.
    pub fn load(wordnet_dir: &Path) -> Result<Meteor, MeteorError> {
        Ok(Meteor {
            wordnet: WordNet::load(wordnet_dir)?,
        })
    }

    /// The number of lemmas (over the four parts of speech) and synsets loaded.
    pub fn sizes(&self) -> (usize, usize) {
        self.wordnet.sizes()
    }

    /// The lemma names (without `_`) of the synsets NLTK's `wordnet.synsets(word)` returns,
    /// sorted: the synonyms METEOR's third stage accepts for `word` (besides the word itself).
    pub fn synonyms(&self, word: &str) -> Vec<&str> {
        let mut names: Vec<&str> = self.wordnet.synonyms(word).into_iter().collect();
        names.sort_unstable();
        names
    }

    /// METEOR of `hypothesis` against the best of `references`, in 0–1; 0 without references.
    pub fn score(&self, hypothesis: &str, references: &[&str]) -> f64 {
        let hyp: Vec<&str> = py_split(hypothesis).collect();
        references
            .iter()
            .map(|reference| {
                let reference: Vec<&str> = py_split(reference).collect();
                self.score_tokens(&hyp, &reference)
            })
            .fold(0.0, f64::max)
    }

    /// NLTK's `single_meteor_score(reference, hypothesis)` on tokens.
    pub fn score_tokens(&self, hypothesis: &[&str], reference: &[&str]) -> f64 {
        let enumerate = |tokens: &[&str]| -> Enumerated {
            tokens
                .iter()
                .map(|t| t.to_lowercase())
                .enumerate()
                .collect()
        };
        let hyp = enumerate(hypothesis);
        let reference = enumerate(reference);
        let (hyp_len, ref_len) = (hyp.len(), reference.len());
        let mut matches = self.align(hyp, reference);
        let m = matches.len();
        if hyp_len == 0 || ref_len == 0 || m == 0 {
            return 0.0;
        }
        matches.sort_by_key(|&(h, _)| h);
        let precision = m as f64 / hyp_len as f64;
        let recall = m as f64 / ref_len as f64;
        let fmean = (precision * recall) / (ALPHA * precision + (1.0 - ALPHA) * recall);
        let chunks = 1 + matches
            .windows(2)
            .filter(|pair| !(pair[1].0 == pair[0].0 + 1 && pair[1].1 == pair[0].1 + 1))
            .count();
        let frag = chunks as f64 / m as f64;
        let penalty = GAMMA * frag.powf(BETA);
        (1.0 - penalty) * fmean
    }

    /// `_enum_align_words`: exact, then stem, then synonym matches (hypothesis index, reference
    /// index), unsorted.
    fn align(&self, hyp: Enumerated, reference: Enumerated) -> Vec<(usize, usize)> {
        let (mut matches, hyp, reference) = match_enums(hyp, reference);
        let stem = |list: Enumerated| -> Enumerated {
            list.into_iter()
                .map(|(i, word)| (i, porter::stem(&word)))
                .collect()
        };
        let (stem_matches, hyp, reference) = match_enums(stem(hyp), stem(reference));
        matches.extend(stem_matches);
        matches.extend(self.synonym_matches(&hyp, &reference));
        matches
    }

    /// `_enum_wordnetsyn_match`.
    fn synonym_matches(&self, hyp: &Enumerated, reference: &Enumerated) -> Vec<(usize, usize)> {
        let mut positions = ref_positions(reference);
        let mut matches = Vec::new();
        for (h, word) in hyp.iter().rev() {
            let mut synonyms = self.wordnet.synonyms(word);
            synonyms.insert(word);
            let best = synonyms
                .iter()
                .filter_map(|syn| {
                    positions
                        .get(syn)
                        .and_then(|p| p.last())
                        .map(|&j| (j, *syn))
                })
                .max_by_key(|&(j, _)| j);
            if let Some((j, syn)) = best {
                if let Some(list) = positions.get_mut(syn) {
                    list.pop();
                }
                matches.push((*h, reference[j].0));
            }
        }
        matches
    }
}

fn ref_positions(reference: &Enumerated) -> HashMap<&str, Vec<usize>> {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, (_, word)) in reference.iter().enumerate() {
        positions.entry(word).or_default().push(j);
    }
    positions
}

/// `_match_enums`: each hypothesis word, from the last, takes the last unmatched reference
/// position of the same word. Returns the matches and what is left unmatched on each side.
fn match_enums(
    hyp: Enumerated,
    reference: Enumerated,
) -> (Vec<(usize, usize)>, Enumerated, Enumerated) {
    let mut matched_hyp = vec![false; hyp.len()];
    let mut matched_ref = vec![false; reference.len()];
    let mut matches = Vec::new();
    {
        let mut positions = ref_positions(&reference);
        for (i, (h, word)) in hyp.iter().enumerate().rev() {
            if let Some(j) = positions.get_mut(word.as_str()).and_then(Vec::pop) {
                matched_hyp[i] = true;
                matched_ref[j] = true;
                matches.push((*h, reference[j].0));
            }
        }
    }
    let keep = |list: Enumerated, matched: &[bool]| -> Enumerated {
        list.into_iter()
            .zip(matched)
            .filter(|(_, &m)| !m)
            .map(|(pair, _)| pair)
            .collect()
    };
    let hyp = keep(hyp, &matched_hyp);
    let reference = keep(reference, &matched_ref);
    (matches, hyp, reference)
}
