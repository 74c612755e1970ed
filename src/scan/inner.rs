//! Forbidden regexes found from a literal inside them (`…+@…` in an e-mail pattern).
//!
//! An e-mail address may begin at any letter, so an unanchored DFA for one is stepped over every
//! byte of prose. But every match holds its `@`: the scan jumps from one `@` to the next
//! (`memchr`), checks the part before it backwards with a reverse DFA over the text kept since
//! that part could have begun, and starts an anchored thread for the part from the `@` on.
//!
//! The pattern must be a concatenation `P L S` with `L` a literal and `P` made of ASCII classes
//! and literals only: then a match in progress before its `L` lies inside the trailing run of
//! bytes `P` can hold, which is what is held back and kept (see [`InnerMatcher::safe_pos`]).
//! `L` must not begin with a byte `P` can hold, or each occurrence would look back over the same
//! run again.

use super::hit::Hit;
use super::prefixed::{anchored_dfa, finish_threads, step_threads, Thread};
use super::regex::{RegexError, RegexRule, SpanFinder};
use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::start;
use regex_automata::Anchored;
use regex_syntax::hir::{Class, Hir, HirKind};

/// Longest run of bytes kept for the backward check. A longer run before an `L` is taken to
/// match (fail closed): `P` is then a long run of its own bytes, which matches in practice.
const MAX_RUN: usize = 4096;

#[derive(Debug)]
pub struct InnerMatcher {
    owner: u32,
    literal: Vec<u8>,
    /// Bytes the part before the literal can consist of.
    run_bytes: [bool; 256],
    /// `P`, run backwards from the literal.
    before: SpanFinder,
    /// `L S`, anchored: run from the literal on.
    after: dense::DFA<Vec<u32>>,
}

#[derive(Debug, Clone, Default)]
pub struct InnerState {
    /// Start of the trailing run of `run_bytes` (the channel position when there is none).
    run_start: u64,
    /// The text from the byte before `run_start` (if any) to the end.
    kept: Vec<u8>,
    /// The run outgrew [`MAX_RUN`] and `kept` stopped growing.
    overflow: bool,
    /// The last byte of the text so far (look-behind for a literal at a piece's start).
    last: Option<u8>,
    threads: Vec<Thread>,
}

impl InnerState {
    pub(super) fn heap_bytes(&self) -> usize {
        self.kept.capacity() + self.threads.capacity() * std::mem::size_of::<Thread>()
    }
}

impl InnerMatcher {
    /// The matcher for `rule`, if its pattern has the shape this needs.
    pub fn new(rule: &RegexRule) -> Option<Result<Self, RegexError>> {
        let HirKind::Concat(subs) = rule.hir.kind() else {
            return None;
        };
        let k = subs
            .iter()
            .position(|h| matches!(h.kind(), HirKind::Literal(_)))?;
        let HirKind::Literal(lit) = subs[k].kind() else {
            return None;
        };
        if k == 0 {
            return None;
        }
        let mut run_bytes = [false; 256];
        if !subs[..k].iter().all(|h| ascii_bytes(h, &mut run_bytes)) {
            return None;
        }
        // A literal that can also be part of the run would make every occurrence look back
        // over the whole run again: quadratic on a long run of it.
        if lit.0.first().is_none_or(|&b| run_bytes[usize::from(b)]) {
            return None;
        }
        let before = Hir::concat(subs[..k].to_vec());
        let after = Hir::concat(subs[k..].to_vec());
        Some(Self::build(
            rule.owner,
            lit.0.to_vec(),
            run_bytes,
            &before,
            &after,
        ))
    }

    fn build(
        owner: u32,
        literal: Vec<u8>,
        run_bytes: [bool; 256],
        before: &Hir,
        after: &Hir,
    ) -> Result<Self, RegexError> {
        Ok(InnerMatcher {
            owner,
            literal,
            run_bytes,
            before: SpanFinder::new(before)?,
            after: anchored_dfa(&[after])?,
        })
    }

    pub fn start(&self) -> InnerState {
        InnerState::default()
    }

    pub fn feed(&self, st: &mut InnerState, base: u64, bytes: &[u8], hits: &mut Vec<Hit>) {
        let first = self.literal[0];
        let mut i = 0;
        while i < bytes.len() {
            if st.threads.is_empty() {
                match memchr::memchr(first, &bytes[i..]) {
                    Some(at) => i += at,
                    None => break,
                }
            }
            let pos = base + i as u64;
            if !st.threads.is_empty() {
                self.step_threads(&mut st.threads, bytes[i], pos, hits);
            }
            if bytes[i] == first {
                self.try_spawn(st, base, bytes, i, hits);
            }
            i += 1;
        }
        self.keep_run(st, base, bytes);
        if let Some(&b) = bytes.last() {
            st.last = Some(b);
        }
    }

    fn step_threads(&self, threads: &mut Vec<Thread>, b: u8, pos: u64, hits: &mut Vec<Hit>) {
        step_threads(&self.after, threads, b, pos, hits, |_, end| self.hit(end));
    }

    fn hit(&self, end: u64) -> Hit {
        Hit {
            owner: self.owner,
            start: None,
            end,
            rule: None,
        }
    }

    /// At a possible literal starting at `bytes[i]`: when the text before it ends with a match
    /// of `P`, starts a thread for `L S` there, which checks the literal itself.
    fn try_spawn(
        &self,
        st: &mut InnerState,
        base: u64,
        bytes: &[u8],
        i: usize,
        hits: &mut Vec<Hit>,
    ) {
        // The run of `P`'s bytes that ends at `i`, and the text from the byte before it on.
        let mut from = i;
        while from > 0 && self.run_bytes[usize::from(bytes[from - 1])] {
            from -= 1;
        }
        // `P` cannot reach past the run (its bytes are all run bytes), so a window from the
        // byte before the run on sees all it can match, with that byte as look-behind.
        let (start, matched) = if from > 0 {
            let window = &bytes[from - 1..=i];
            (base + from as u64, self.before_matches(window))
        } else if st.overflow {
            // Too long to check: a long run of `P`'s own bytes (fail closed).
            (st.run_start, true)
        } else {
            let mut window = Vec::with_capacity(st.kept.len() + i + 1);
            window.extend_from_slice(&st.kept);
            window.extend_from_slice(&bytes[..=i]);
            (st.run_start, self.before_matches(&window))
        };
        if !matched {
            return;
        }
        let look_behind = match i {
            0 => st.last,
            _ => Some(bytes[i - 1]),
        };
        let config = start::Config::new()
            .anchored(Anchored::Yes)
            .look_behind(look_behind);
        let Ok(sid) = self.after.start_state(&config) else {
            return;
        };
        // The feed loop has stepped the live threads over this byte already: step the new one.
        let mut thread = vec![Thread {
            sid,
            start,
            rule: 0,
        }];
        self.step_threads(&mut thread, bytes[i], base + i as u64, hits);
        for t in thread {
            // A thread in the same state as an earlier one has the same future.
            if !st.threads.iter().any(|u| u.sid == t.sid) {
                st.threads.push(t);
            }
        }
    }

    /// Whether `P` matches a part of `window` that ends right before its last byte (the
    /// literal's first).
    fn before_matches(&self, window: &[u8]) -> bool {
        self.before.start(window, window.len() - 1).is_some()
    }

    /// Remembers the trailing run of `P`'s bytes (and the byte before it) for the next piece.
    fn keep_run(&self, st: &mut InnerState, base: u64, bytes: &[u8]) {
        match bytes.iter().rposition(|&b| !self.run_bytes[usize::from(b)]) {
            Some(last) => {
                st.run_start = base + last as u64 + 1;
                st.kept.clear();
                st.kept.extend_from_slice(&bytes[last..]);
                st.overflow = false;
            }
            None if !st.overflow => {
                st.kept.extend_from_slice(bytes);
                if st.kept.len() > MAX_RUN + 1 {
                    st.overflow = true;
                    st.kept = Vec::new();
                }
            }
            None => {}
        }
    }

    pub fn finish(&self, st: &mut InnerState, pos: u64, hits: &mut Vec<Hit>) {
        finish_threads(&self.after, &mut st.threads, pos, hits, |_, end| {
            self.hit(end)
        });
    }

    pub fn safe_pos(&self, st: &InnerState, pos: u64) -> u64 {
        // A match not yet past its literal lies in the trailing run; one past it, in a thread.
        st.threads
            .iter()
            .map(|t| t.start)
            .fold(st.run_start.min(pos), u64::min)
    }

    pub fn memory_usage(&self) -> usize {
        self.before.memory_usage() + self.after.memory_usage()
    }
}

/// Adds to `set` every byte `hir` can match, if those are all ASCII and `hir` holds no
/// look-around other than word boundaries and no nested structure beyond repetition.
fn ascii_bytes(hir: &Hir, set: &mut [bool; 256]) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(lit) => lit.0.iter().all(|&b| {
            set[usize::from(b)] = true;
            b.is_ascii()
        }),
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().all(|r| {
            let (a, b) = (u32::from(r.start()), u32::from(r.end()));
            if b >= 0x80 {
                return false;
            }
            (a..=b).for_each(|x| set[x as usize] = true);
            true
        }),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().all(|r| {
            if r.end() >= 0x80 {
                return false;
            }
            (r.start()..=r.end()).for_each(|x| set[usize::from(x)] = true);
            true
        }),
        HirKind::Repetition(r) => ascii_bytes(&r.sub, set),
        HirKind::Capture(c) => ascii_bytes(&c.sub, set),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            subs.iter().all(|h| ascii_bytes(h, set))
        }
    }
}
