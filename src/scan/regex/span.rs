//! Where a match starts, given where it ends: forward DFAs only know ends, but a redaction (and
//! the inner matcher's check of the run before its literal) needs the start too.

use super::rule::{RegexError, SINGLE_DFA_LIMIT};
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;

/// Finds where a match of one pattern starts, given where it ends: an anchored reverse DFA run
/// backwards from the end over the text before it, keeping the leftmost start (so a redaction
/// covers the whole match).
#[derive(Debug)]
pub struct SpanFinder {
    reverse: dense::DFA<Vec<u32>>,
}

impl SpanFinder {
    pub fn new(hir: &Hir) -> Result<Self, RegexError> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .reverse(true)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(hir)
            .map_err(Box::new)?;
        let reverse = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(Some(SINGLE_DFA_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .map_err(Box::new)?;
        Ok(SpanFinder { reverse })
    }

    pub fn memory_usage(&self) -> usize {
        self.reverse.memory_usage()
    }

    /// The leftmost start of a match ending exactly at `end` in `text` (`text[..end]` is what
    /// the reverse run reads; the byte at `end`, if any, is the look-ahead).
    pub fn start(&self, text: &[u8], end: usize) -> Option<usize> {
        let input = regex_automata::Input::new(text)
            .range(..end)
            .anchored(Anchored::Yes);
        self.reverse
            .try_search_rev(&input)
            .ok()
            .flatten()
            .map(|m| m.offset())
    }
}
