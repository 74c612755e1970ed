//! Forbidden regexes that begin with literals (`AKIA…`, `sk-…`, `ghp_…`, `AIza…`).
//!
//! An unanchored DFA for such a pattern must remember every place the literal may have begun
//! inside a counted run (`AIza[0-9A-Za-z_-]{35}` alone is 72 MiB that way). Instead, the literal
//! prefixes of all such patterns go into one small Aho-Corasick automaton, and each prefix hit
//! starts an anchored DFA *thread* at the prefix's first byte, which lives only until it matches
//! or dies. Threads in the same DFA state have the same future, so only the earliest is kept.
//!
//! The prefix automaton ignores ASCII case, so `(?i)\bconfidential\b` needs one prefix rather
//! than 4,096; the thread checks case where the pattern cares. A [`StartFilter`] over the
//! prefixes keeps the automaton idle over text where no prefix can begin.

use super::gram::{StartKeys, Starts};
use super::hit::{Haystack, Hit};
use super::literal::{remember_tail, state_depths, Depths};
use super::regex::{RegexError, RegexRule};
use aho_corasick::automaton::{Automaton as _, StateID as AcState};
use aho_corasick::dfa::DFA as AcDfa;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::{PatternID, StateID};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind};

/// The literal prefixes, compared ignoring ASCII case, that every match of `hir` starts with, if
/// they are few and long enough to be selective (a 1- or 2-byte prefix would start threads all
/// the time).
pub fn literal_prefixes(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let folded = fold_ascii_case_pairs(hir);
    // Every match also begins with a match of the concatenation's first parts: when the whole
    // yields too many literals (`\s*` after a keyword multiplies them), try shorter heads.
    let heads: Vec<Hir> = match folded.kind() {
        HirKind::Concat(subs) => (1..=subs.len())
            .rev()
            .map(|k| Hir::concat(subs[..k].to_vec()))
            .collect(),
        _ => vec![folded],
    };
    heads.iter().find_map(selective_prefixes)
}

fn selective_prefixes(hir: &Hir) -> Option<Vec<Vec<u8>>> {
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

/// `hir` with every class that is exactly one ASCII letter in both cases (`(?i)a` = `[Aa]`)
/// replaced by the lowercase letter, so that prefix extraction yields one case-insensitive
/// literal instead of every case combination. Other classes (`(?i)k` also holds the Kelvin sign)
/// stay as they are.
fn fold_ascii_case_pairs(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Class(class) => match ascii_case_pair(class) {
            Some(lower) => Hir::literal([lower]),
            None => hir.clone(),
        },
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(fold_ascii_case_pairs).collect()),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(fold_ascii_case_pairs).collect())
        }
        HirKind::Repetition(r) => Hir::repetition(regex_syntax::hir::Repetition {
            sub: Box::new(fold_ascii_case_pairs(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(regex_syntax::hir::Capture {
            sub: Box::new(fold_ascii_case_pairs(&c.sub)),
            ..c.clone()
        }),
        _ => hir.clone(),
    }
}

/// The lowercase letter of a class that holds exactly that ASCII letter in both cases.
fn ascii_case_pair(class: &Class) -> Option<u8> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
    };
    match ranges.as_slice() {
        [(a, a2), (b, b2)] if a == a2 && b == b2 && b - a == 32 => {
            let upper = u8::try_from(*a).ok()?;
            upper
                .is_ascii_uppercase()
                .then(|| upper.to_ascii_lowercase())
        }
        _ => None,
    }
}

#[derive(Debug)]
pub struct PrefixedMatcher {
    prefixes: AcDfa,
    ac_start: AcState,
    depth: Depths,
    /// Where prefixes can begin, for the start filter (see [`super::ScanSet`]).
    start_keys: StartKeys,
    /// Per prefix (Aho-Corasick pattern): the rule it starts and its bytes.
    prefix_rule: Vec<(u32, Vec<u8>)>,
    verify: dense::DFA<Vec<u32>>,
    owners: Vec<u32>,
    /// Bytes of history kept to find the byte before a prefix (look-behind for `\b`).
    tail_len: usize,
}

/// An anchored DFA run from where a match may have begun (also used by [`super::inner`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Thread {
    pub(super) sid: StateID,
    pub(super) start: u64,
    /// The pattern it checks, as its matcher numbers them.
    pub(super) rule: u32,
}

#[derive(Debug, Clone, Default)]
pub struct PrefixedState {
    ac: AcState,
    /// The latest position the filter could not rule out as a prefix start, while a run is on.
    last_start: Option<u64>,
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
            .ascii_case_insensitive(true)
            .start_kind(aho_corasick::StartKind::Unanchored)
            .build(&patterns)
            .map_err(|e| RegexError::Prefix(e.to_string()))?;
        let ac_start = prefixes
            .start_state(aho_corasick::Anchored::No)
            .map_err(|e| RegexError::Prefix(e.to_string()))?;
        let depth = state_depths(&prefixes, ac_start, &patterns, true);
        if patterns.iter().any(|p| p.is_empty()) {
            return Err(RegexError::Prefix("empty prefix".into()));
        }
        let start_keys = StartKeys::new(patterns.iter().copied());
        let hirs: Vec<&Hir> = rules.iter().map(|(r, _)| &r.hir).collect();
        let verify = anchored_dfa(&hirs)?;
        let tail_len = patterns.iter().map(|p| p.len()).max().unwrap_or(0) + 1;
        Ok(PrefixedMatcher {
            prefixes,
            ac_start,
            depth,
            start_keys,
            prefix_rule,
            verify,
            owners: rules.iter().map(|(r, _)| r.owner).collect(),
            tail_len,
        })
    }

    pub fn start(&self) -> PrefixedState {
        PrefixedState {
            ac: self.ac_start,
            last_start: None,
            threads: Vec::new(),
            tail: Vec::new(),
        }
    }

    pub(super) fn start_keys(&self) -> &StartKeys {
        &self.start_keys
    }

    /// Scans the next piece, running the prefix automaton only from where `starts` says a
    /// prefix could begin.
    pub(super) fn feed(
        &self,
        st: &mut PrefixedState,
        base: u64,
        bytes: &[u8],
        hits: &mut Vec<Hit>,
        mut starts: Starts<'_>,
    ) {
        let mut ac = st.ac;
        let mut last_start = st.last_start;
        let mut i = 0;
        while i < bytes.len() {
            if ac == self.ac_start && st.threads.is_empty() {
                i = starts.next(i);
                if i >= bytes.len() {
                    break;
                }
            }
            let b = bytes[i];
            let pos = base + i as u64;
            if !st.threads.is_empty() {
                self.step_threads(&mut st.threads, b, pos, hits);
            }
            let candidate = starts.at(i);
            i += 1;
            if candidate {
                last_start = Some(pos);
            } else if ac == self.ac_start {
                // No prefix starts here, and none is in progress: the automaton stays idle.
                continue;
            }
            ac = self.prefixes.next_state(aho_corasick::Anchored::No, ac, b);
            if self.prefixes.is_special(ac) && self.prefixes.is_match(ac) {
                for k in 0..self.prefixes.match_len(ac) {
                    let pid = self.prefixes.match_pattern(ac, k).as_usize();
                    let (rule, ref prefix) = self.prefix_rule[pid];
                    let start = pos + 1 - prefix.len() as u64;
                    let text = Haystack {
                        history: &st.tail,
                        base,
                        piece: bytes,
                    };
                    self.spawn(&mut st.threads, (rule, start, pos + 1), text, hits);
                }
            }
            // With no candidate inside the prefix the state stands for, nothing in progress
            // can still become a prefix.
            let begun = base + i as u64 - u64::from(self.depth.get(ac));
            if last_start.is_none_or(|s| s < begun) {
                ac = self.ac_start;
                last_start = None;
            }
        }
        st.ac = ac;
        st.last_start = last_start;
        remember_tail(&mut st.tail, bytes, self.tail_len);
    }

    fn step_threads(&self, threads: &mut Vec<Thread>, b: u8, pos: u64, hits: &mut Vec<Hit>) {
        step_threads(&self.verify, threads, b, pos, hits, |t, end| {
            self.hit(t, end)
        });
    }

    fn hit(&self, t: &Thread, end: u64) -> Hit {
        Hit {
            owner: self.owners[t.rule as usize],
            start: Some(t.start),
            end,
            rule: None,
        }
    }

    /// Starts a thread for `rule` at `start` and runs it over the prefix just seen, which ends
    /// before `end`, as the text has it (the prefix automaton ignored case; the thread does not).
    fn spawn(
        &self,
        threads: &mut Vec<Thread>,
        (rule, start, end): (u32, u64, u64),
        text: Haystack<'_>,
        hits: &mut Vec<Hit>,
    ) {
        let Ok(pid) = PatternID::new(rule as usize) else {
            return;
        };
        let config = start::Config::new()
            .anchored(Anchored::Pattern(pid))
            .look_behind(text.before(start));
        let Ok(mut sid) = self.verify.start_state(&config) else {
            return;
        };
        for p in start..end {
            let Some(b) = text.at(p) else {
                return;
            };
            sid = self.verify.next_state(sid, b);
            if self.verify.is_dead_state(sid) {
                return; // e.g. `\b` before the prefix did not hold, or the case differs
            }
            if self.verify.is_match_state(sid) {
                hits.push(Hit {
                    owner: self.owners[rule as usize],
                    start: Some(start),
                    end: p,
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
        finish_threads(&self.verify, &mut st.threads, pos, hits, |t, end| {
            self.hit(t, end)
        });
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

/// One anchored DFA for `hirs`, with a start state per pattern, for threads started where a
/// match may begin (also used by [`super::inner`]).
pub(super) fn anchored_dfa(hirs: &[&Hir]) -> Result<dense::DFA<Vec<u32>>, RegexError> {
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().which_captures(thompson::WhichCaptures::None))
        .build_many_from_hir(hirs)
        .map_err(Box::new)?;
    Ok(dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .starts_for_each_pattern(true)
                .dfa_size_limit(Some(64 << 20))
                .determinize_size_limit(Some(128 << 20)),
        )
        .build_from_nfa(&nfa)
        .map_err(Box::new)?)
}

/// Steps each thread's anchored DFA over byte `b` at channel position `pos`. A thread whose
/// DFA matches (reported one byte late: the match ended before `pos`) or dies is dropped; `hit`
/// makes the report of a match.
pub(super) fn step_threads(
    dfa: &dense::DFA<Vec<u32>>,
    threads: &mut Vec<Thread>,
    b: u8,
    pos: u64,
    hits: &mut Vec<Hit>,
    hit: impl Fn(&Thread, u64) -> Hit,
) {
    threads.retain_mut(|t| {
        t.sid = dfa.next_state(t.sid, b);
        if !dfa.is_special_state(t.sid) {
            return true;
        }
        if dfa.is_match_state(t.sid) {
            hits.push(hit(t, pos));
            return false;
        }
        !dfa.is_dead_state(t.sid)
    });
}

/// Ends the threads with the text at `pos`, reporting those that match there.
pub(super) fn finish_threads(
    dfa: &dense::DFA<Vec<u32>>,
    threads: &mut Vec<Thread>,
    pos: u64,
    hits: &mut Vec<Hit>,
    hit: impl Fn(&Thread, u64) -> Hit,
) {
    for t in threads.drain(..) {
        if dfa.is_match_state(dfa.next_eoi_state(t.sid)) {
            hits.push(hit(&t, pos));
        }
    }
}
