//! What the regex matchers share: a forbidden pattern as they take it ([`RegexRule`]), what
//! building one can fail with ([`RegexError`], also the prefixed, inner and PII matchers'
//! error), and the largest DFA one pattern may have.

use regex_automata::dfa::dense;
use regex_automata::nfa::thompson;
use regex_syntax::hir::Hir;

/// One regular expression to find, already parsed and checked.
#[derive(Debug, Clone)]
pub struct RegexRule {
    pub hir: Hir,
    pub owner: u32,
    /// Report every end of every match as written (no trimming, no prefix automaton): for
    /// redaction, which must cover whole matches.
    pub exact: bool,
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
    #[error("cannot build the prefix automaton: {0}")]
    Prefix(String),
}

/// Largest DFA for a single pattern: beyond it the pattern is refused at load.
pub(in crate::scan) const SINGLE_DFA_LIMIT: usize = 128 << 20;
