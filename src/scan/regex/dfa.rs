//! The forward DFA matcher: all patterns of a group in one multi-pattern unanchored dense DFA,
//! stepped byte by byte only while a match may be in progress.
//!
//! Most prose leaves such a DFA in one of its idle states (no match in progress), so the scan
//! skips the bytes that keep it idle (with the vector wake marks of [`super::super::marks`], or
//! eight bytes a round in scalar code) and a waking byte followed by one that puts it back to
//! rest ([`RestingPairs`]). The tables that make this possible (idle states, per-byte and
//! per-class-pair idle transitions) are derived from the DFA when it is built. Which patterns
//! share a DFA is the planner's decision ([`super::super::plan`]).

use super::super::hit::Hit;
use super::rule::{RegexError, RegexRule, SINGLE_DFA_LIMIT};
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;

#[derive(Debug)]
pub struct RegexMatcher {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    /// States in which no match is in progress (one per kind of preceding byte).
    idle: Vec<StateID>,
    /// The same as a bitset over state indices (`sid >> stride2`, up to the highest idle one),
    /// for a one-load test in the scan loop.
    idle_set: Box<[u64]>,
    /// log2 of the DFA's stride: state ids are indices shifted by it.
    stride2: usize,
    /// Bytes that leave the automaton idle whatever idle state it is in, with the idle state
    /// they lead to; `None` where a byte may start a match. Runs of such bytes are skipped
    /// without stepping the automaton.
    idle_after: Box<[Option<StateID>; 256]>,
    /// `idle_after[b].is_some()`, compact for the skip loop.
    stays_idle: [bool; 256],
    /// A waking byte is often followed by one that puts the automaton back to rest (a capital
    /// starting a sentence, for patterns that need two): per pair of byte classes, the idle state
    /// the two bytes lead to from every idle state (index into `idle`, plus one), or 0.
    pair_idle: Box<[u8]>,
    /// The DFA's byte classes (`pair_idle` is indexed by class pairs) and their number.
    classes: [u8; 256],
    /// The commonest such pairs as two byte sets, for the vector wake marks: see
    /// [`Self::resting_pairs`].
    resting_pairs: Option<Box<RestingPairs>>,
    alphabet: usize,
    /// Whether skipping pays: ordinary prose (lowercase letters, spaces) keeps it idle.
    skips_prose: bool,
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

impl RegexMatcher {
    /// One DFA for all `rules` (patterns are used as given; see
    /// [`build_forbidden`](super::super::plan::build_forbidden)).
    pub fn new(rules: &[RegexRule]) -> Result<Self, RegexError> {
        Self::with_limit(rules, SINGLE_DFA_LIMIT)
    }

    pub(in crate::scan) fn with_limit(
        rules: &[RegexRule],
        limit: usize,
    ) -> Result<Self, RegexError> {
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
                    .dfa_size_limit(Some(limit))
                    .determinize_size_limit(Some(limit * 2)),
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
        let stride2 = dfa.stride2();
        let highest = idle
            .iter()
            .map(|s| s.as_usize() >> stride2)
            .max()
            .unwrap_or(0);
        let mut idle_set = vec![0u64; (highest >> 6) + 1].into_boxed_slice();
        for sid in &idle {
            let index = sid.as_usize() >> stride2;
            idle_set[index >> 6] |= 1 << (index & 63);
        }
        let idle_after = idle_transitions(&dfa, &idle);
        let stays_idle: [bool; 256] = std::array::from_fn(|b| idle_after[b].is_some());
        let classes: [u8; 256] = std::array::from_fn(|b| dfa.byte_classes().get(b as u8));
        let alphabet = dfa.byte_classes().alphabet_len();
        let pair_idle = idle_pairs(&dfa, &idle, &classes, alphabet);
        let resting_pairs = RestingPairs::new(&idle_after, |f, g| {
            let pair = usize::from(classes[usize::from(f)]) * alphabet
                + usize::from(classes[usize::from(g)]);
            pair_idle[pair].checked_sub(1).map(|k| idle[usize::from(k)])
        });
        let skips_prose = (b'a'..=b'z')
            .chain([b' ', b',', b'.'])
            .all(|b| idle_after[usize::from(b)].is_some());
        Ok(RegexMatcher {
            dfa,
            start,
            idle,
            idle_set,
            stride2,
            idle_after,
            stays_idle,
            pair_idle,
            classes,
            resting_pairs,
            alphabet,
            skips_prose,
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

    /// Scans the next piece. `wakes`, when given, marks the bytes of `bytes` that take the
    /// automaton out of its idle states (see [`Self::stays_idle`] and [`super::super::marks`]); it
    /// may leave unmarked a waking byte that forms one of the [`Self::resting_pairs`] with the
    /// byte after it.
    pub fn feed(
        &self,
        st: &mut RegexState,
        base: u64,
        bytes: &[u8],
        hits: &mut Vec<Hit>,
        wakes: Option<&[u64]>,
    ) {
        let mut sid = st.sid;
        let mut i = 0;
        while i < bytes.len() {
            if self.skips_prose && self.is_idle(sid) {
                // Nothing in progress: skip the bytes that keep it so.
                let from = i;
                i = match wakes {
                    Some(marks) => super::super::marks::next(marks, i, bytes.len()),
                    None => skip_while(bytes, i, &self.stays_idle),
                };
                if i > from {
                    sid = self.idle_after[usize::from(bytes[i - 1])].unwrap_or(sid);
                }
                let Some(&b) = bytes.get(i) else {
                    break;
                };
                if let Some(&next) = bytes.get(i + 1) {
                    let pair = usize::from(self.classes[usize::from(b)]) * self.alphabet
                        + usize::from(self.classes[usize::from(next)]);
                    if let Some(to) = self.pair_idle[pair].checked_sub(1) {
                        // The two bytes leave it idle again, and no match can end at either.
                        sid = self.idle[usize::from(to)];
                        i += 2;
                        continue;
                    }
                }
                sid = self.dfa.next_state(sid, b);
                i += 1;
                continue; // a match cannot end right after an idle state: no report is due
            }
            sid = self.dfa.next_state(sid, bytes[i]);
            if self.dfa.is_special_state(sid) && self.dfa.is_match_state(sid) {
                // DFA matches are reported one byte late: the match ended before byte `i`.
                self.report(sid, base + i as u64, hits);
            }
            i += 1;
        }
        st.sid = sid;
        if self.is_idle(sid) {
            st.idle_pos = base + bytes.len() as u64;
        }
    }

    /// Whether `sid` is one of the idle states.
    #[inline(always)]
    fn is_idle(&self, sid: StateID) -> bool {
        let index = sid.as_usize() >> self.stride2;
        self.idle_set
            .get(index >> 6)
            .is_some_and(|w| w >> (index & 63) & 1 != 0)
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
                rule: None,
            });
        }
    }

    pub fn safe_pos(&self, st: &RegexState, pos: u64) -> u64 {
        if self.is_idle(st.sid) {
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
            + std::mem::size_of_val(&*self.idle_after)
            + self.pair_idle.len()
            + self.idle_set.len() * 8
    }

    /// Whether byte `b` leaves the automaton idle whatever idle state it is in (the bytes a
    /// skipping automaton is not woken by).
    pub(in crate::scan) fn stays_idle(&self, b: u8) -> bool {
        self.stays_idle[usize::from(b)]
    }

    /// Pairs of a waking byte and a byte after it that put the automaton back to rest, as two
    /// byte sets: the vector marks can leave such a waking byte unmarked, so the skip loop
    /// never stops for it. `None` when there are none worth marking.
    pub(in crate::scan) fn resting_pairs(&self) -> Option<&RestingPairs> {
        self.resting_pairs.as_deref()
    }

    /// Whether ordinary prose leaves this automaton idle, so that it is skipped rather than
    /// stepped (see `pack_dfas` in [`super::super::plan`]).
    pub(in crate::scan) fn skips_prose(&self) -> bool {
        self.skips_prose
    }
}

/// Waking bytes (`first`) and bytes (`second`) such that every `first` byte followed by any
/// `second` byte leads every idle state to the idle state `second` alone leads to, and no match
/// ends at either byte. A skip over such a pair therefore needs no stop: the state after it
/// (and after any staying-idle bytes that follow) is decided by the last byte skipped, as for
/// a run of staying-idle bytes. `second` holds only staying-idle bytes.
#[derive(Debug, Clone)]
pub(in crate::scan) struct RestingPairs {
    pub(in crate::scan) first: [bool; 256],
    pub(in crate::scan) second: [bool; 256],
}

impl RestingPairs {
    /// From the automaton's single-byte idle transitions and `pair(f, g)`, the idle state the
    /// two bytes lead every idle state to (if it is one state). The pairs are those of the
    /// waking bytes that every staying-idle lowercase letter puts back to rest (a capital
    /// starting a word, for patterns that need two), with every byte after them that does
    /// the same for all of them.
    fn new(
        idle_after: &[Option<StateID>; 256],
        pair: impl Fn(u8, u8) -> Option<StateID>,
    ) -> Option<Box<Self>> {
        let rests = |f: u8, g: u8| {
            idle_after[usize::from(f)].is_none()
                && idle_after[usize::from(g)].is_some()
                && pair(f, g) == idle_after[usize::from(g)]
        };
        let letters: Vec<u8> = (b'a'..=b'z')
            .filter(|&g| idle_after[usize::from(g)].is_some())
            .collect();
        if letters.is_empty() {
            return None;
        }
        let first: [bool; 256] =
            std::array::from_fn(|f| letters.iter().all(|&g| rests(f as u8, g)));
        if !first.contains(&true) {
            return None;
        }
        let second = std::array::from_fn(|g| {
            (0..=255u8)
                .filter(|&f| first[usize::from(f)])
                .all(|f| rests(f, g as u8))
        });
        Some(Box::new(RestingPairs { first, second }))
    }
}

/// The first position at or after `i` whose byte is not in `set` (or the end of `bytes`).
#[inline]
pub(in crate::scan) fn skip_while(bytes: &[u8], mut i: usize, set: &[bool; 256]) -> usize {
    // Eight bytes per round without branches; the byte that stops is found byte by byte.
    while let Some(block) = bytes.get(i..i + 8) {
        if !block.iter().all(|&b| set[usize::from(b)]) {
            break;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if !set[usize::from(b)] {
            break;
        }
        i += 1;
    }
    i
}

/// For each pair of byte classes whose first wakes the automaton: the idle state the two lead to
/// from every idle state, if that is one state (as index into `idle` plus one; 0 otherwise).
/// Such a pair cannot end a match: it ends in an idle state, and a match cannot end right after
/// one (a forbidden pattern never matches the empty string).
fn idle_pairs(
    dfa: &dense::DFA<Vec<u32>>,
    idle: &[StateID],
    classes: &[u8; 256],
    alphabet: usize,
) -> Box<[u8]> {
    // One byte of each class stands for the class.
    let mut sample = vec![None; alphabet];
    for b in 0..=255u8 {
        sample[usize::from(classes[usize::from(b)])].get_or_insert(b);
    }
    let mut table = vec![0u8; alphabet * alphabet].into_boxed_slice();
    for (c1, b1) in sample.iter().enumerate() {
        let Some(b1) = *b1 else { continue };
        for (c2, b2) in sample.iter().enumerate() {
            let Some(b2) = *b2 else { continue };
            if let Some(k) = common_idle(idle, |s| dfa.next_state(dfa.next_state(s, b1), b2)) {
                table[c1 * alphabet + c2] = u8::try_from(k + 1).unwrap_or(0);
            }
        }
    }
    table
}

/// The index in `idle` of the one idle state `step` leads to from every idle state, if
/// there is such a state.
fn common_idle(idle: &[StateID], step: impl Fn(StateID) -> StateID) -> Option<usize> {
    let mut to = idle.iter().map(|&s| step(s));
    let first = to.next()?;
    if to.all(|t| t == first) {
        idle.iter().position(|&s| s == first)
    } else {
        None
    }
}

/// For each byte: the idle state it leads to from every idle state, if that is one state.
fn idle_transitions(dfa: &dense::DFA<Vec<u32>>, idle: &[StateID]) -> Box<[Option<StateID>; 256]> {
    let mut table = Box::new([None; 256]);
    for b in 0..=255u8 {
        table[usize::from(b)] = common_idle(idle, |s| dfa.next_state(s, b)).map(|k| idle[k]);
    }
    table
}
