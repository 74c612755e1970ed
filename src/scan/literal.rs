//! Literal patterns (banned words) in one Aho-Corasick DFA, run only where a [`StartFilter`]
//! says a pattern could begin.
//!
//! The automaton is unanchored, so one run from a candidate position finds every match starting
//! at or after it. The run stops (the state goes back to the start) as soon as no candidate lies
//! within the prefix its state stands for: nothing in progress can then become a match, and the
//! filter skips ahead to the next candidate.

use super::gram::{StartKeys, Starts};
use super::hit::Hit;
use super::text::{fold_char, fold_str, is_word_char, needs_unicode_fold};
use super::verify::StartVerifier;
use aho_corasick::automaton::Automaton;
use aho_corasick::automaton::StateID;
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, StartKind};
use std::collections::{HashMap, VecDeque};

/// One literal to find.
#[derive(Debug, Clone)]
pub struct LiteralRule {
    pub pattern: String,
    pub owner: u32,
    /// Only count matches with a non-word character (or the start/end of the text) on both sides.
    pub word_boundary: bool,
}

/// All literals of a scan target. Matching is case-insensitive: ASCII by the automaton,
/// other scripts by length-preserving folding of the input (see [`fold_char`]).
#[derive(Debug)]
pub struct LiteralMatcher {
    dfa: DFA,
    start: StateID,
    /// Length of the pattern prefix each state stands for: how far back a match in progress began.
    depth: Depths,
    /// Where patterns can begin, for the start filter (see [`super::ScanSet`]).
    start_keys: StartKeys,
    /// Rejects most of what the filter lets through before the automaton runs from it.
    verify: StartVerifier,
    rules: Vec<(u32, bool)>,
    fold_unicode: bool,
    /// Bytes of history kept for word-boundary checks (0 when no rule needs them).
    tail_len: usize,
}

#[derive(Debug, Clone, Default)]
pub struct LiteralState {
    sid: StateID,
    /// The latest position the filter could not rule out as a pattern start, while a run is on.
    last_start: Option<u64>,
    /// Word-boundary matches that end at the end of the text seen so far: decided by the next char.
    pending: Vec<Hit>,
    /// The last `tail_len` bytes of the channel, for the character before a match.
    tail: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum LiteralError {
    #[error("empty pattern")]
    Empty,
    #[error("cannot build the literal automaton: {0}")]
    Build(#[from] aho_corasick::BuildError),
    #[error("literal automaton has no unanchored start state: {0}")]
    Start(#[from] aho_corasick::MatchError),
}

impl LiteralState {
    pub(super) fn heap_bytes(&self) -> usize {
        self.pending.capacity() * std::mem::size_of::<Hit>() + self.tail.capacity()
    }
}

impl LiteralMatcher {
    pub fn new(rules: &[LiteralRule]) -> Result<Self, LiteralError> {
        if rules.iter().any(|r| r.pattern.is_empty()) {
            return Err(LiteralError::Empty);
        }
        let patterns: Vec<String> = rules.iter().map(|r| fold_str(&r.pattern)).collect();
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .start_kind(StartKind::Unanchored)
            .byte_classes(true)
            .build(&patterns)?;
        let start = dfa.start_state(Anchored::No)?;
        let depth = state_depths(&dfa, start, &patterns, true);
        let start_keys = StartKeys::new(patterns.iter().map(String::as_bytes));
        let verify = StartVerifier::new(&patterns);
        let max_len = patterns.iter().map(String::len).max().unwrap_or(0);
        let any_boundary = rules.iter().any(|r| r.word_boundary);
        Ok(LiteralMatcher {
            dfa,
            start,
            depth,
            start_keys,
            verify,
            rules: rules.iter().map(|r| (r.owner, r.word_boundary)).collect(),
            fold_unicode: rules.iter().any(|r| needs_unicode_fold(&r.pattern)),
            tail_len: if any_boundary { max_len + 4 } else { 0 },
        })
    }

    pub fn start(&self) -> LiteralState {
        LiteralState {
            sid: self.start,
            last_start: None,
            pending: Vec::new(),
            tail: Vec::new(),
        }
    }

    pub(super) fn start_keys(&self) -> &StartKeys {
        &self.start_keys
    }

    /// Scans the next piece, running the automaton only from where `starts` says a pattern
    /// could begin.
    pub(super) fn feed(
        &self,
        st: &mut LiteralState,
        base: u64,
        text: &str,
        hits: &mut Vec<Hit>,
        mut starts: Starts<'_>,
    ) {
        if !st.pending.is_empty() {
            if let Some(next) = text.chars().next() {
                let boundary = !is_word_char(next);
                for hit in st.pending.drain(..) {
                    if boundary {
                        hits.push(hit);
                    }
                }
            }
        }
        let bytes = text.as_bytes();
        let mut sid = st.sid;
        let mut last_start = st.last_start;
        let mut i = 0;
        // The candidate the run starts from, already verified.
        let mut verified = usize::MAX;
        while i < bytes.len() {
            if sid == self.start {
                loop {
                    i = starts.next(i);
                    // A pattern is whole characters: it cannot begin inside one.
                    if i >= bytes.len()
                        || (text.is_char_boundary(i) && self.verify.may_start(bytes, i))
                    {
                        break;
                    }
                    i += 1;
                }
                if i >= bytes.len() {
                    break;
                }
                verified = i;
            }
            let from = i;
            let b = bytes[i];
            if b < 0x80 || !self.fold_unicode {
                sid = self.dfa.next_state(Anchored::No, sid, b);
                i += 1;
            } else {
                let Some(c) = text[i..].chars().next() else {
                    break;
                };
                let mut buf = [0u8; 4];
                let folded = fold_char(c).encode_utf8(&mut buf);
                for &fb in folded.as_bytes() {
                    sid = self.dfa.next_state(Anchored::No, sid, fb);
                }
                // A pattern is whole characters, so a match can only end at a character's end.
                i += c.len_utf8();
            }
            if self.dfa.is_special(sid) && self.dfa.is_match(sid) {
                self.on_match(st, sid, base, text, i, hits);
            }
            // (Positions the filter did not judge count as starts: the run carries over.)
            if from == verified || (starts.at(from) && self.verify.may_start(bytes, from)) {
                last_start = Some(base + from as u64);
            }
            // The prefix the state stands for began `depth` bytes back; with no candidate in it,
            // nothing in progress can still become a match.
            let begun = base + i as u64 - u64::from(self.depth.get(sid));
            if last_start.is_none_or(|s| s < begun) {
                sid = self.start;
                last_start = None;
            }
        }
        st.sid = sid;
        st.last_start = last_start;
        if self.tail_len > 0 {
            remember_tail(&mut st.tail, bytes, self.tail_len);
        }
    }

    /// Records the matches of match state `sid`, reached after `end_rel` bytes of `text`.
    fn on_match(
        &self,
        st: &mut LiteralState,
        sid: StateID,
        base: u64,
        text: &str,
        end_rel: usize,
        hits: &mut Vec<Hit>,
    ) {
        for k in 0..self.dfa.match_len(sid) {
            let pid = self.dfa.match_pattern(sid, k);
            let (owner, word_boundary) = self.rules[pid.as_usize()];
            let end = base + end_rel as u64;
            let start = end - self.dfa.pattern_len(pid) as u64;
            let hit = Hit {
                owner,
                start: Some(start),
                end,
                rule: None,
            };
            if !word_boundary {
                hits.push(hit);
                continue;
            }
            if char_before(&st.tail, base, text, start).is_some_and(is_word_char) {
                continue;
            }
            match text[end_rel..].chars().next() {
                Some(next) if is_word_char(next) => {}
                Some(_) => hits.push(hit),
                None => st.pending.push(hit),
            }
        }
    }

    pub fn finish(&self, st: &mut LiteralState, hits: &mut Vec<Hit>) {
        // The end of the text is a word boundary.
        hits.append(&mut st.pending);
    }

    pub fn safe_pos(&self, st: &LiteralState, pos: u64) -> u64 {
        let mut safe = pos.saturating_sub(u64::from(self.depth.get(st.sid)));
        for p in &st.pending {
            safe = safe.min(p.start.unwrap_or(0));
        }
        safe
    }

    pub fn memory_usage(&self) -> usize {
        self.dfa.memory_usage()
            + self.depth.memory_usage()
            + self.verify.memory_usage()
            + self.rules.capacity() * std::mem::size_of::<(u32, bool)>()
    }
}

/// The character that ends at channel position `pos`, looking in the current piece first and in
/// the remembered tail of earlier pieces otherwise. `None` at the start of the text.
fn char_before(tail: &[u8], base: u64, text: &str, pos: u64) -> Option<char> {
    if pos >= base {
        let rel = (pos - base) as usize;
        if let Some(c) = text.get(..rel).and_then(|s| s.chars().next_back()) {
            return Some(c);
        }
        if rel > 0 {
            return None;
        }
    }
    // The character lies in earlier text: at most 4 bytes before `pos`, all within the tail.
    let back = (base - pos) as usize;
    let end = tail.len().checked_sub(back)?;
    let from = end.saturating_sub(4);
    let window = &tail[from..end];
    (0..window.len())
        .filter_map(|s| std::str::from_utf8(&window[s..]).ok())
        .find_map(|s| s.chars().next_back())
}

pub(super) fn remember_tail(tail: &mut Vec<u8>, bytes: &[u8], keep: usize) {
    if bytes.len() >= keep {
        tail.clear();
        tail.extend_from_slice(&bytes[bytes.len() - keep..]);
    } else {
        tail.extend_from_slice(bytes);
        if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
}

/// The depth of every state of an Aho-Corasick DFA: the length of the pattern prefix it stands
/// for. Dense, indexed by state id (ids are multiples of the DFA's stride), since it is read
/// after every automaton step.
#[derive(Debug)]
pub(super) struct Depths {
    shift: u32,
    depth: Vec<u32>,
}

impl Depths {
    #[inline(always)]
    pub(super) fn get(&self, sid: StateID) -> u32 {
        self.depth
            .get(sid.as_usize() >> self.shift)
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.depth.capacity() * std::mem::size_of::<u32>()
    }
}

/// Depth of every reachable state: the length of the pattern prefix it stands for, which is the
/// length of the shortest path to it from the start (each byte deepens a state by at most one).
/// Bytes that appear in no pattern all behave alike, so one of them stands for the rest.
pub(super) fn state_depths(
    dfa: &DFA,
    start: StateID,
    patterns: &[impl AsRef<[u8]>],
    ascii_case_insensitive: bool,
) -> Depths {
    let mut alphabet = [false; 256];
    for p in patterns {
        for &b in p.as_ref() {
            alphabet[usize::from(b)] = true;
            if ascii_case_insensitive {
                alphabet[usize::from(b.to_ascii_lowercase())] = true;
                alphabet[usize::from(b.to_ascii_uppercase())] = true;
            }
        }
    }
    let mut bytes: Vec<u8> = (0..=255u8).filter(|&b| alphabet[usize::from(b)]).collect();
    if let Some(other) = (0..=255u8).find(|&b| !alphabet[usize::from(b)]) {
        bytes.push(other);
    }
    let mut depth = HashMap::new();
    depth.insert(start, 0u32);
    let mut queue = VecDeque::from([(start, 0u32)]);
    while let Some((sid, d)) = queue.pop_front() {
        for &b in &bytes {
            let next = dfa.next_state(Anchored::No, sid, b);
            depth.entry(next).or_insert_with(|| {
                queue.push_back((next, d + 1));
                d + 1
            });
        }
    }
    // State ids are premultiplied by a power-of-two stride: the smallest trailing-zero count
    // among them recovers it.
    let shift = depth
        .keys()
        .map(|s| s.as_usize())
        .filter(|&s| s != 0)
        .map(|s| s.trailing_zeros())
        .min()
        .unwrap_or(0);
    let len = depth
        .keys()
        .map(|s| (s.as_usize() >> shift) + 1)
        .max()
        .unwrap_or(0);
    let mut dense = vec![0u32; len];
    for (sid, d) in depth {
        dense[sid.as_usize() >> shift] = d;
    }
    Depths {
        shift,
        depth: dense,
    }
}
