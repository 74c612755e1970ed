//! Forbidden regular expressions: guardwire's regex dialect, and the automata that find its
//! patterns.
//!
//! - [`dialect`]: parsing a pattern in the dialect, Go's RE2 with ASCII `\d`, `\w`, `\s` and
//!   `\b` ([`compile_hir`]), and cutting a forbidden pattern to what finding it needs
//!   ([`trim_for_existence`]);
//! - [`dfa`]: the multi-pattern unanchored DFA that skips idle text ([`RegexMatcher`]);
//! - [`span`]: where a match starts, given where it ends ([`SpanFinder`]);
//! - [`rule`]: what they share: the rule ([`RegexRule`]), the error ([`RegexError`]) and the
//!   size limit of one pattern's DFA.
//!
//! This file only re-exports them (the submodules share [`rule`], never this file). Which
//! pattern goes to which matcher (these DFAs, the prefix automaton or the inner matcher) is
//! decided by the planner, [`super::plan`], which sits above all of them.

mod dfa;
mod dialect;
mod rule;
mod span;

pub use self::dfa::{RegexMatcher, RegexState};
pub use self::dialect::{compile_hir, trim_for_existence};
pub(super) use self::rule::SINGLE_DFA_LIMIT;
pub use self::rule::{RegexError, RegexRule};
pub use self::span::SpanFinder;

#[cfg(test)]
pub(super) use self::dfa::skip_while;
