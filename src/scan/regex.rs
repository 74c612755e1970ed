//! Forbidden regular expressions, all of a scan target in one multi-pattern dense DFA.
//!
//! `\b` and the other word assertions are ASCII-only, as in Go's RE2 that PromptKit packs are
//! written for (and because a DFA cannot carry Unicode word boundaries).

use super::Hit;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{self, Hir, HirKind, Look};

/// One regular expression to find, already parsed and checked.
#[derive(Debug, Clone)]
pub struct RegexRule {
    pub hir: Hir,
    pub owner: u32,
}

#[derive(Debug)]
pub struct RegexMatcher {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    /// States in which no match is in progress (one per kind of preceding byte).
    idle: Vec<StateID>,
    owners: Vec<u32>,
    /// Longest possible match in bytes; `None` when a pattern is unbounded (`.*`).
    max_len: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct RegexState {
    sid: StateID,
    /// A position at which the automaton was idle: no match can start before it.
    idle_pos: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RegexError {
    #[error("{0}")]
    Syntax(#[from] Box<regex_syntax::Error>),
    #[error("{0}")]
    Nfa(#[from] Box<thompson::BuildError>),
    #[error("{0}")]
    Dfa(#[from] Box<dense::BuildError>),
    #[error("{0}")]
    Start(#[from] regex_automata::dfa::StartError),
    #[error("the pattern matches the empty string, so it would match every text")]
    MatchesEmpty,
}

/// Parses `pattern` with guardwire's regex dialect (ASCII word boundaries).
pub fn compile_hir(pattern: &str) -> Result<Hir, RegexError> {
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .map_err(Box::new)?;
    Ok(ascii_word_boundaries(hir))
}

fn ascii_word_boundaries(h: Hir) -> Hir {
    match h.into_kind() {
        HirKind::Look(look) => Hir::look(match look {
            Look::WordUnicode => Look::WordAscii,
            Look::WordUnicodeNegate => Look::WordAsciiNegate,
            Look::WordStartUnicode => Look::WordStartAscii,
            Look::WordEndUnicode => Look::WordEndAscii,
            Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
            Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
            other => other,
        }),
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            sub: Box::new(ascii_word_boundaries(*r.sub)),
            ..r
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            sub: Box::new(ascii_word_boundaries(*c.sub)),
            ..c
        }),
        HirKind::Concat(subs) => Hir::concat(subs.into_iter().map(ascii_word_boundaries).collect()),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.into_iter().map(ascii_word_boundaries).collect())
        }
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(class) => Hir::class(class),
    }
}

impl RegexMatcher {
    pub fn new(rules: &[RegexRule]) -> Result<Self, RegexError> {
        if rules
            .iter()
            .any(|r| r.hir.properties().minimum_len() == Some(0))
        {
            return Err(RegexError::MatchesEmpty);
        }
        let hirs: Vec<&Hir> = rules.iter().map(|r| &r.hir).collect();
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().which_captures(thompson::WhichCaptures::None))
            .build_many_from_hir(&hirs)
            .map_err(Box::new)?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Unanchored)
                    .dfa_size_limit(Some(256 << 20))
                    .determinize_size_limit(Some(512 << 20)),
            )
            .build_from_nfa(&nfa)
            .map_err(Box::new)?;
        let start_for = |look_behind: Option<u8>| {
            dfa.start_state(
                &start::Config::new()
                    .anchored(Anchored::No)
                    .look_behind(look_behind),
            )
        };
        let start = start_for(None)?;
        let mut idle = Vec::new();
        for lb in [None, Some(b'a'), Some(b' '), Some(b'\n'), Some(b'\r')] {
            let sid = start_for(lb)?;
            if !idle.contains(&sid) {
                idle.push(sid);
            }
        }
        let max_len = rules
            .iter()
            .map(|r| r.hir.properties().maximum_len())
            .try_fold(0usize, |acc, len| len.map(|l| acc.max(l)));
        Ok(RegexMatcher {
            dfa,
            start,
            idle,
            owners: rules.iter().map(|r| r.owner).collect(),
            max_len,
        })
    }

    pub fn start(&self) -> RegexState {
        RegexState {
            sid: self.start,
            idle_pos: 0,
        }
    }

    pub fn feed(&self, st: &mut RegexState, base: u64, bytes: &[u8], hits: &mut Vec<Hit>) {
        let mut sid = st.sid;
        for (i, &b) in bytes.iter().enumerate() {
            sid = self.dfa.next_state(sid, b);
            if self.dfa.is_special_state(sid) && self.dfa.is_match_state(sid) {
                // DFA matches are reported one byte late: the match ended before byte `i`.
                self.report(sid, base + i as u64, hits);
            }
        }
        st.sid = sid;
        if self.idle.contains(&sid) {
            st.idle_pos = base + bytes.len() as u64;
        }
    }

    pub fn finish(&self, st: &mut RegexState, pos: u64, hits: &mut Vec<Hit>) {
        let sid = self.dfa.next_eoi_state(st.sid);
        if self.dfa.is_match_state(sid) {
            self.report(sid, pos, hits);
        }
        st.sid = sid;
    }

    fn report(&self, sid: StateID, end: u64, hits: &mut Vec<Hit>) {
        for k in 0..self.dfa.match_len(sid) {
            let pid = self.dfa.match_pattern(sid, k);
            hits.push(Hit {
                owner: self.owners[pid.as_usize()],
                start: None,
                end,
            });
        }
    }

    pub fn safe_pos(&self, st: &RegexState, pos: u64) -> u64 {
        if self.idle.contains(&st.sid) {
            return pos;
        }
        // A match not reported yet ends at or after `pos` (reports come one byte late), so it
        // starts no earlier than `pos - max_len`, and never before the automaton was last idle.
        match self.max_len {
            Some(max) => st.idle_pos.max(pos.saturating_sub(max as u64)),
            None => st.idle_pos,
        }
    }

    pub fn memory_usage(&self) -> usize {
        self.dfa.memory_usage()
    }
}
