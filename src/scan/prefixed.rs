//! Forbidden regexes that begin with literals (`AKIA…`, `sk-…`, `ghp_…`, `AIza…`).
//!
//! An unanchored DFA for such a pattern must remember every place the literal may have begun
//! inside a counted run (`AIza[0-9A-Za-z_-]{35}` alone is 72 MiB that way). Instead, the literal
//! prefixes of all such patterns go into one small case-sensitive Aho-Corasick automaton, and each
//! prefix hit starts an anchored DFA *thread* at the prefix's first byte, which lives only until
//! it matches or dies. Threads in the same DFA state have the same future, so only the earliest
//! is kept. Text without prefixes costs one automaton step per byte; the anchored DFAs stay small.

use super::literal::{remember_tail, state_depths, Depths};
use super::regex::RegexError;
use super::{Hit, RegexRule};
use aho_corasick::automaton::{Automaton as _, StateID as AcState};
use aho_corasick::dfa::DFA as AcDfa;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::{PatternID, StateID};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::Hir;

/// The literal prefixes every match of `hir` starts with, if they are few and long enough to be
/// selective (a 1- or 2-byte prefix would start threads all the time).
pub fn literal_prefixes(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(hir);
    let lits = seq.literals()?;
    if lits.is_empty() || lits.len() > 64 || lits.iter().any(|l| l.len() < 3) {
        return None;
    }
    let mut out: Vec<Vec<u8>> = lits.iter().map(|l| l.as_bytes().to_vec()).collect();
    out.sort();
    out.dedup();
    Some(out)
}

#[derive(Debug)]
pub struct PrefixedMatcher {
    prefixes: AcDfa,
    ac_start: AcState,
    depth: Depths,
    /// Per prefix (Aho-Corasick pattern): the rule it starts and its bytes.
    prefix_rule: Vec<(u32, Vec<u8>)>,
    verify: dense::DFA<Vec<u32>>,
    owners: Vec<u32>,
    /// Bytes of history kept to find the byte before a prefix (look-behind for `\b`).
    tail_len: usize,
}

#[derive(Debug, Clone, Copy)]
struct Thread {
    sid: StateID,
    start: u64,
    rule: u32,
}

#[derive(Debug, Clone, Default)]
pub struct PrefixedState {
    ac: AcState,
    threads: Vec<Thread>,
    tail: Vec<u8>,
}

impl PrefixedState {
    pub(super) fn heap_bytes(&self) -> usize {
        self.threads.capacity() * std::mem::size_of::<Thread>() + self.tail.capacity()
    }
}

impl PrefixedMatcher {
    /// `rules` with the prefixes [`literal_prefixes`] found for each.
    pub fn new(rules: &[(RegexRule, Vec<Vec<u8>>)]) -> Result<Self, RegexError> {
        let mut prefix_rule = Vec::new();
        for (i, (_, prefixes)) in rules.iter().enumerate() {
            for p in prefixes {
                prefix_rule.push((i as u32, p.clone()));
            }
        }
        let patterns: Vec<&[u8]> = prefix_rule.iter().map(|(_, p)| p.as_slice()).collect();
        let prefixes = AcDfa::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .start_kind(aho_corasick::StartKind::Unanchored)
            .build(&patterns)
            .map_err(|e| RegexError::Prefix(e.to_string()))?;
        let ac_start = prefixes
            .start_state(aho_corasick::Anchored::No)
            .map_err(|e| RegexError::Prefix(e.to_string()))?;
        let depth = state_depths(&prefixes, ac_start, &patterns, false);
        let hirs: Vec<&Hir> = rules.iter().map(|(r, _)| &r.hir).collect();
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().which_captures(thompson::WhichCaptures::None))
            .build_many_from_hir(&hirs)
            .map_err(Box::new)?;
        let verify = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .starts_for_each_pattern(true)
                    .dfa_size_limit(Some(64 << 20))
                    .determinize_size_limit(Some(128 << 20)),
            )
            .build_from_nfa(&nfa)
            .map_err(Box::new)?;
        let tail_len = patterns.iter().map(|p| p.len()).max().unwrap_or(0) + 1;
        Ok(PrefixedMatcher {
            prefixes,
            ac_start,
            depth,
            prefix_rule,
            verify,
            owners: rules.iter().map(|(r, _)| r.owner).collect(),
            tail_len,
        })
    }

    pub fn start(&self) -> PrefixedState {
        PrefixedState {
            ac: self.ac_start,
            threads: Vec::new(),
            tail: Vec::new(),
        }
    }

    pub fn feed(&self, st: &mut PrefixedState, base: u64, bytes: &[u8], hits: &mut Vec<Hit>) {
        let mut ac = st.ac;
        for (i, &b) in bytes.iter().enumerate() {
            let pos = base + i as u64;
            if !st.threads.is_empty() {
                self.step_threads(&mut st.threads, b, pos, hits);
            }
            ac = self.prefixes.next_state(aho_corasick::Anchored::No, ac, b);
            if self.prefixes.is_special(ac) && self.prefixes.is_match(ac) {
                for k in 0..self.prefixes.match_len(ac) {
                    let pid = self.prefixes.match_pattern(ac, k).as_usize();
                    let (rule, ref prefix) = self.prefix_rule[pid];
                    let start = pos + 1 - prefix.len() as u64;
                    let before = byte_before(&st.tail, base, bytes, start);
                    self.spawn(&mut st.threads, rule, start, before, prefix, hits);
                }
            }
        }
        st.ac = ac;
        remember_tail(&mut st.tail, bytes, self.tail_len);
    }

    fn step_threads(&self, threads: &mut Vec<Thread>, b: u8, pos: u64, hits: &mut Vec<Hit>) {
        threads.retain_mut(|t| {
            t.sid = self.verify.next_state(t.sid, b);
            if !self.verify.is_special_state(t.sid) {
                return true;
            }
            if self.verify.is_match_state(t.sid) {
                // Reported one byte late: the match ended before byte `pos`.
                hits.push(Hit {
                    owner: self.owners[t.rule as usize],
                    start: Some(t.start),
                    end: pos,
                    rule: None,
                });
                return false;
            }
            !self.verify.is_dead_state(t.sid)
        });
    }

    /// Starts a thread for `rule` at `start` and runs it over the prefix just seen.
    fn spawn(
        &self,
        threads: &mut Vec<Thread>,
        rule: u32,
        start: u64,
        before: Option<u8>,
        prefix: &[u8],
        hits: &mut Vec<Hit>,
    ) {
        let Ok(pid) = PatternID::new(rule as usize) else {
            return;
        };
        let config = start::Config::new()
            .anchored(Anchored::Pattern(pid))
            .look_behind(before);
        let Ok(mut sid) = self.verify.start_state(&config) else {
            return;
        };
        for (k, &b) in prefix.iter().enumerate() {
            sid = self.verify.next_state(sid, b);
            if self.verify.is_dead_state(sid) {
                return; // e.g. `\b` before the prefix did not hold
            }
            if self.verify.is_match_state(sid) {
                hits.push(Hit {
                    owner: self.owners[rule as usize],
                    start: Some(start),
                    end: start + k as u64,
                    rule: None,
                });
                return;
            }
        }
        // A thread in the same state as an earlier one has the same future: keep the earlier.
        if !threads.iter().any(|t| t.sid == sid) {
            threads.push(Thread { sid, start, rule });
        }
    }

    pub fn finish(&self, st: &mut PrefixedState, pos: u64, hits: &mut Vec<Hit>) {
        for t in st.threads.drain(..) {
            if self
                .verify
                .is_match_state(self.verify.next_eoi_state(t.sid))
            {
                hits.push(Hit {
                    owner: self.owners[t.rule as usize],
                    start: Some(t.start),
                    end: pos,
                    rule: None,
                });
            }
        }
    }

    pub fn safe_pos(&self, st: &PrefixedState, pos: u64) -> u64 {
        let mut safe = pos.saturating_sub(u64::from(self.depth.get(st.ac)));
        for t in &st.threads {
            safe = safe.min(t.start);
        }
        safe
    }

    pub fn memory_usage(&self) -> usize {
        self.prefixes.memory_usage() + self.verify.memory_usage()
    }
}

/// The byte before channel position `pos` (`None` at the start of the text).
fn byte_before(tail: &[u8], base: u64, bytes: &[u8], pos: u64) -> Option<u8> {
    let q = pos.checked_sub(1)?;
    if q >= base {
        bytes.get((q - base) as usize).copied()
    } else {
        let back = (base - q) as usize;
        tail.len().checked_sub(back).map(|i| tail[i])
    }
}
