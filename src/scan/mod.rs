//! Incremental scanning of text that arrives in pieces.
//!
//! A [`ScanSet`] is compiled once per policy and shared by every stream; each stream keeps a
//! small [`ScanState`] per text channel. Feeding a piece costs O(its length): automaton states are
//! carried from piece to piece, so a match split across deltas, SSE frames, TCP reads or UTF-8
//! characters is found exactly as in the whole text, and nothing is ever rescanned.
//!
//! Besides matches, the scanner answers the question the hold-back needs: *from which position
//! could a match still be forming?* ([`ScanSet::safe_pos`]). Text before that position can be
//! released to the client; text after it is held until the automata have moved past it.

// The modules in layers, top down: a module uses only modules of lower layers (and, among the
// matchers, `inner` uses `prefixed`, which uses `literal`). The planner sends each forbidden
// regex to a matcher; the matchers report hits; the start filter and its check of candidates
// tell the literal and prefixed matchers where to look; the vector kernels run the filter's and
// the regex DFAs' per-position passes; below them, the layout the filter and the kernels share
// and CPU detection; at the bottom, what every layer uses.
// Above the matchers: the normalised view they are fed (`normal`) and the scan sets of a
// target over it (`view`).
pub mod normal;
mod view;

mod plan;

mod inner;
mod literal;
mod pii;
mod prefixed;
mod regex;

mod gram;
mod verify;

mod simd;

mod cpu;
mod gram_layout;

mod hit;
mod marks;
pub mod text;

pub use self::hit::Hit;
pub use self::literal::{LiteralMatcher, LiteralRule};
pub use self::normal::Normalize;
pub use self::pii::{PiiKind, PiiMatcher, PiiRule, PiiState};
pub use self::plan::{build_forbidden, ForbiddenRegexes};
pub use self::regex::{
    compile_hir, trim_for_existence, RegexError, RegexMatcher, RegexRule, SpanFinder,
};
pub use self::view::{TextScan, TextScanState, ViewSet};

thread_local! {
    /// Scratch for [`ScanSet::feed`]: per matcher, the positions of the piece where its
    /// patterns could begin.
    static STARTS: std::cell::RefCell<gram::StartLists> = std::cell::RefCell::new(gram::StartLists::default());
    /// Scratch for [`ScanSet::feed`]: per regex automaton, the bytes of the piece that wake it.
    static WAKES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// At most this many regex automata get their wake-up bytes marked by the vector pass (one bit
/// of a byte each); any others skip with the scalar loop.
const MARKED_REGEXES: usize = 8;

/// The automata of one scan target (input, output or reasoning text), shared by all streams.
#[derive(Debug, Default)]
pub struct ScanSet {
    literals: Option<LiteralMatcher>,
    prefixed: Option<prefixed::PrefixedMatcher>,
    /// Where literals and prefixes could begin: one filter for both, so that a piece is judged
    /// in one pass that lists each matcher's positions (tag 0: the literals if any, then the
    /// prefixes). `None` only if a matcher has an empty start, which no matcher builds.
    starts: Option<gram::StartFilter>,
    inner: Vec<inner::InnerMatcher>,
    regexes: Vec<RegexMatcher>,
    /// With the vector kernels on: bit `k` set for the bytes that wake `regexes[k]`, except
    /// those of its [`RegexMatcher::resting_pairs`] (when the spare bits hold them).
    wake_lanes: Option<simd::ByteLanes>,
    pii: Option<PiiMatcher>,
}

/// Per-channel scanning state: a few words, plus a short tail for word-boundary checks.
#[derive(Debug, Clone)]
pub struct ScanState {
    pos: u64,
    literal: literal::LiteralState,
    prefixed: prefixed::PrefixedState,
    inner: Vec<inner::InnerState>,
    regex: Vec<regex::RegexState>,
    /// Boxed: a few hundred bytes that streams without PII checks should not carry.
    pii: Option<Box<PiiState>>,
}

impl ScanState {
    /// Bytes of channel text fed so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Heap bytes this state holds (its inline size is `size_of::<ScanState>()`).
    pub fn heap_bytes(&self) -> usize {
        self.literal.heap_bytes()
            + self.prefixed.heap_bytes()
            + self.regex.capacity() * std::mem::size_of::<regex::RegexState>()
            + self.inner.capacity() * std::mem::size_of::<inner::InnerState>()
            + self
                .inner
                .iter()
                .map(inner::InnerState::heap_bytes)
                .sum::<usize>()
            + self
                .pii
                .as_ref()
                .map_or(0, |p| std::mem::size_of::<PiiState>() + p.heap_bytes())
    }
}

impl ScanSet {
    pub fn new(
        literals: Option<LiteralMatcher>,
        regexes: ForbiddenRegexes,
        pii: Option<PiiMatcher>,
    ) -> Self {
        let mut start_keys = Vec::new();
        start_keys.extend(literals.as_ref().map(LiteralMatcher::start_keys));
        start_keys.extend(regexes.prefixed.as_ref().map(|p| p.start_keys()));
        let starts = gram::StartFilter::new(&start_keys);
        let marked = regexes.dfas.len().min(MARKED_REGEXES);
        // Spare lane bits hold resting pairs: two sets per automaton.
        let mut unless = Vec::new();
        for (k, r) in regexes.dfas[..marked].iter().enumerate() {
            let first = marked + 2 * unless.len();
            if r.skips_prose() && r.resting_pairs().is_some() && first + 2 <= MARKED_REGEXES {
                unless.push(simd::Unless {
                    set: k,
                    first,
                    second: first + 1,
                });
            }
        }
        let wake_lanes = (cpu::enabled() && regexes.dfas.iter().any(RegexMatcher::skips_prose))
            .then(|| {
                let dfas = &regexes.dfas;
                let rests = unless.clone();
                simd::ByteLanes::new(marked, unless, |b| {
                    let wakes = dfas[..marked]
                        .iter()
                        .enumerate()
                        .fold(0, |f, (k, r)| f | (u8::from(!r.stays_idle(b)) << k));
                    rests.iter().fold(wakes, |f, u| {
                        let Some(pairs) = dfas[u.set].resting_pairs() else {
                            return f;
                        };
                        f | (u8::from(pairs.first[usize::from(b)]) << u.first)
                            | (u8::from(pairs.second[usize::from(b)]) << u.second)
                    })
                })
            });
        ScanSet {
            literals,
            starts,
            prefixed: regexes.prefixed,
            inner: regexes.inner,
            regexes: regexes.dfas,
            wake_lanes,
            pii: pii.filter(|p| !p.is_empty()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.literals.is_none()
            && self.prefixed.is_none()
            && self.inner.is_empty()
            && self.regexes.is_empty()
            && self.pii.is_none()
    }

    pub fn start(&self) -> ScanState {
        ScanState {
            pos: 0,
            literal: self
                .literals
                .as_ref()
                .map(LiteralMatcher::start)
                .unwrap_or_default(),
            prefixed: self
                .prefixed
                .as_ref()
                .map(prefixed::PrefixedMatcher::start)
                .unwrap_or_default(),
            inner: self.inner.iter().map(inner::InnerMatcher::start).collect(),
            regex: self.regexes.iter().map(RegexMatcher::start).collect(),
            pii: self.pii.as_ref().map(|p| Box::new(p.start())),
        }
    }

    /// Scans the next piece of a channel's text, appending matches to `hits`.
    pub fn feed(&self, st: &mut ScanState, text: &str, hits: &mut Vec<Hit>) {
        if self.literals.is_some() || self.prefixed.is_some() {
            STARTS.with_borrow_mut(|lists| {
                let bytes = text.as_bytes();
                let (judged, rows) = match &self.starts {
                    Some(filter) => (filter.mark(bytes, lists), filter.tags()),
                    None => (0, 0),
                };
                let mut row = 0..rows;
                let mut next_starts = || match row.next() {
                    Some(k) => gram::Starts::new(lists.row(k), judged),
                    None => gram::Starts::everywhere(),
                };
                if let Some(l) = &self.literals {
                    l.feed(&mut st.literal, st.pos, text, hits, next_starts());
                }
                if let Some(p) = &self.prefixed {
                    p.feed(&mut st.prefixed, st.pos, bytes, hits, next_starts());
                }
                lists.shrink();
            });
        }
        for (m, ms) in self.inner.iter().zip(&mut st.inner) {
            m.feed(ms, st.pos, text.as_bytes(), hits);
        }
        let bytes = text.as_bytes();
        WAKES.with_borrow_mut(|marks| {
            let lanes = self
                .wake_lanes
                .as_ref()
                .filter(|_| bytes.len() >= simd::MIN_RUN);
            match lanes {
                Some(lanes) => lanes.mark(bytes, marks),
                None => marks.clear(),
            }
            let words = marks::words(bytes.len());
            for (k, (r, rs)) in self.regexes.iter().zip(&mut st.regex).enumerate() {
                let wakes = marks.get(k * words..(k + 1) * words);
                r.feed(rs, st.pos, bytes, hits, wakes);
            }
            marks.shrink_to(1024);
        });
        if let (Some(p), Some(ps)) = (&self.pii, &mut st.pii) {
            p.feed(ps, st.pos, text.as_bytes(), hits);
        }
        st.pos += text.len() as u64;
    }

    /// Ends the channel's text: matches that waited for what follows them are decided now.
    pub fn finish(&self, st: &mut ScanState, hits: &mut Vec<Hit>) {
        if let Some(l) = &self.literals {
            l.finish(&mut st.literal, hits);
        }
        if let Some(p) = &self.prefixed {
            p.finish(&mut st.prefixed, st.pos, hits);
        }
        for (m, ms) in self.inner.iter().zip(&mut st.inner) {
            m.finish(ms, st.pos, hits);
        }
        for (r, rs) in self.regexes.iter().zip(&mut st.regex) {
            r.finish(rs, st.pos, hits);
        }
        if let (Some(p), Some(ps)) = (&self.pii, &mut st.pii) {
            p.finish(ps, st.pos, hits);
        }
    }

    /// The earliest position at which a match still in progress could start. Everything before
    /// it can be released; nothing at or after it may be until the scan moves on.
    pub fn safe_pos(&self, st: &ScanState) -> u64 {
        let mut safe = st.pos;
        if let Some(l) = &self.literals {
            safe = safe.min(l.safe_pos(&st.literal, st.pos));
        }
        if let Some(p) = &self.prefixed {
            safe = safe.min(p.safe_pos(&st.prefixed, st.pos));
        }
        for (m, ms) in self.inner.iter().zip(&st.inner) {
            safe = safe.min(m.safe_pos(ms, st.pos));
        }
        for (r, rs) in self.regexes.iter().zip(&st.regex) {
            safe = safe.min(r.safe_pos(rs, st.pos));
        }
        if let (Some(p), Some(ps)) = (&self.pii, &st.pii) {
            safe = safe.min(p.safe_pos(ps, st.pos));
        }
        safe
    }

    /// Heap bytes the compiled automata use.
    pub fn memory_usage(&self) -> usize {
        self.literals
            .as_ref()
            .map_or(0, LiteralMatcher::memory_usage)
            + self
                .regexes
                .iter()
                .map(RegexMatcher::memory_usage)
                .sum::<usize>()
            + self
                .inner
                .iter()
                .map(inner::InnerMatcher::memory_usage)
                .sum::<usize>()
            + self.pii.as_ref().map_or(0, PiiMatcher::memory_usage)
            + self
                .starts
                .as_ref()
                .map_or(0, gram::StartFilter::memory_usage)
    }
}

#[cfg(test)]
mod pii_tests;
#[cfg(test)]
mod tests;
