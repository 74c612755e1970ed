//! Runs of a stream's deltas by the part of the answer they build (a Responses output item's
//! content or summary part; Anthropic blocks get the same from their stricter rule, a delta
//! for the block started last). A reader builds each part from its own deltas (the snapshot a
//! UI renders while streaming); guardwire reads a
//! channel's deltas in the order they arrive. The two readings agree — every part's text is a
//! piece of its channel's, so a match in a part is a match in the channel — only while each
//! part's deltas come in one run. Providers stream one part after another; a delta that
//! returns to a part after another part's deltas is refused (fail closed), as is a stream of
//! more parts than [`MAX_PARTS`].

use super::DecodeError;
use std::collections::HashSet;
use std::hash::Hash;

/// Parts one streamed answer may build.
pub(super) const MAX_PARTS: usize = 16_384;

#[derive(Default)]
pub(super) struct Runs<K> {
    current: Option<K>,
    ended: HashSet<K>,
}

impl<K: Copy + Eq + Hash> Runs<K> {
    /// A delta of `part` arrives: `Ok(true)` when it starts a new run (what the decoder
    /// remembers of the last run, such as a frame template, no longer applies); an error when
    /// `part`'s run had ended.
    pub(super) fn enter(&mut self, part: K) -> Result<bool, DecodeError> {
        if self.current == Some(part) {
            return Ok(false);
        }
        if self.ended.contains(&part) {
            return Err(DecodeError(
                "the upstream interleaved the deltas of two parts of its answer (a reader builds each part alone)"
                    .into(),
            ));
        }
        if let Some(previous) = self.current.replace(part) {
            if self.ended.len() >= MAX_PARTS {
                return Err(DecodeError(format!(
                    "an answer of more than {MAX_PARTS} streamed parts"
                )));
            }
            self.ended.insert(previous);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_part_is_one_run() {
        let mut runs = Runs::default();
        assert!(runs.enter(0u32).unwrap());
        assert!(!runs.enter(0).unwrap());
        assert!(runs.enter(2).unwrap());
        assert!(runs.enter(1).unwrap());
        assert!(!runs.enter(1).unwrap());
        // Back to a part whose run ended: the readings would differ.
        assert!(runs.enter(0).is_err());
        assert!(runs.enter(2).is_err());
    }

    #[test]
    fn parts_are_bounded() {
        let mut runs = Runs::default();
        for part in 0..=MAX_PARTS as u32 {
            runs.enter(part).unwrap();
        }
        assert!(runs.enter(MAX_PARTS as u32 + 1).is_err());
    }
}
