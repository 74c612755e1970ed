//! Personal data and secrets (`pii` checks): e-mail addresses, phone numbers, payment cards,
//! IBANs, US SSNs, IP addresses and API keys, found incrementally *with their spans*, so that a
//! redaction can replace exactly the matched bytes.
//!
//! # Design
//!
//! 1. **Candidate ends.** Loose *shapes* of every enabled kind (digit runs with single
//!    separators, dotted numbers, `local@domain.tld`, `PREFIX` + token run, …) are compiled into
//!    one forward, unanchored, multi-pattern dense DFA, stepped once per byte like
//!    [`super::RegexMatcher`]. Shapes use `+` rather than counted runs (counts are checked in
//!    code), which keeps the DFA small, and they end at an ASCII word boundary or, for token-like
//!    secrets whose alphabet includes `-`, at the first byte outside the token alphabet (or the
//!    end of the text): a shape therefore ends at most once per group or token, not at every byte.
//! 2. **Candidate starts.** When the forward DFA reports an end `e`, an anchored *reverse* DFA of
//!    the same shapes runs backwards from `e` and reports every possible start of every shape
//!    (e.g. each digit group of `order 12 4111 1111 1111 1111`). It reaches back as far as the
//!    longest candidate of the forms that ended at `e` can be (23 bytes for a card, 16 for an
//!    IPv4 address, [`MAX_SPAN`] = 256 for e-mails and tokens), over a history of the channel's
//!    last 257–514 bytes kept in the state (trimmed when it doubles: amortised O(1) per byte).
//! 3. **Validation.** Per kind, the starts are tried from the longest candidate down and the
//!    first that passes the kind's checks wins: Luhn for cards, ISO 13616 mod-97 for IBANs,
//!    octet ranges for IPv4, group counts for IPv6, NANP area/exchange digits and E.164 lengths
//!    for phones, SSA rules for SSNs, exact length/alphabet regexes for API keys. IPv4 and IPv6
//!    take only the longest start: an address is a *whole* dotted or colon run (`1.2.3.4.5` is
//!    none); so do e-mails and SSNs, whose shapes are exact.
//! 4. **Pending hits.** A valid candidate is kept pending (one per kind) because a later end may
//!    extend it (`a@mail.example` → `a@mail.example.com`, `+44 20 7946` → `+44 20 7946 0958`;
//!    `1.2.3.4` → `1.2.3.4.5` cancels it). It is reported once no later candidate can start at or
//!    before it: when the forward DFA has been idle after it, when it lies more than
//!    [`MAX_SPAN`] bytes back, or at `finish`. A longer valid candidate replaces it; a later,
//!    partly overlapping one (ambiguous digit runs) is reported as well: hits of one kind may
//!    overlap, and a redaction should merge overlapping spans.
//!
//! Hold-back: [`PiiMatcher::safe_pos`] is the earliest of the pending hits' starts and the
//! forward DFA's bound (the position where it was last idle, or `pos - MAX_SPAN`), so no byte
//! of a later-reported hit is released before it is reported, and a candidate that fails
//! validation stops holding text as soon as the forward DFA leaves its shape.
//!
//! Everything is a function of the bytes alone (how far a reverse run looks back depends only on
//! the forms that ended, and the state always keeps that much), so pieces split at any byte give
//! the same hits as the whole text. Cost: one DFA step per byte, plus a reverse run and a few
//! validations per candidate end. Ends are rare in prose (numbers with groups, `@`, `:` runs, key
//! prefixes); text built to end candidates every few bytes (`1.1.1.1…`, `a@b.cc.cc…`) costs up to
//! the reach per end, i.e. tens of times more per byte, but stays linear.
//!
//! Sizes (all kinds): forward + reverse DFAs about 1.5 MiB, built in ~0.1–0.2 s. Alone: e-mail
//! 5 KiB, phone 17 KiB, card, IBAN, SSN, IPv4, IPv6 1–2 KiB each, API keys 54 KiB; the union is
//! larger than the sum because token runs, e-mail local parts and digit groups overlap.
//!
//! Limits: a candidate longer than [`MAX_SPAN`] bytes is cut to its last `MAX_SPAN` bytes (an
//! e-mail with a huge local part is reported from there; an over-long token loses its prefix and
//! is not reported). For PEM keys only the `-----BEGIN … PRIVATE KEY-----` line is matched, not
//! the body. IPv6 needs at least one decimal digit (`dead::beef` and `std::io`-like code are not
//! addresses) and no embedded IPv4 or zone; phone numbers need separators (`4155550132` is not
//! one, `+14155550132` is).

mod shapes;
mod valid;

pub use self::shapes::{PiiKind, MAX_SPAN};

use self::shapes::{is_token_byte, shapes, token_end, Form, KEY_EXACT};
use super::hit::{Haystack, Hit};
use super::regex::{compile_hir, RegexError};
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;
use valid::{valid_card, valid_iban, valid_intl, valid_ipv4, valid_ipv6, valid_nanp, valid_ssn};

/// Channel bytes kept before the current piece: the reverse run needs one byte before the
/// earliest start it can report (for look-behind).
const HISTORY: usize = MAX_SPAN + 1;

/// One validator's kinds (empty means all of them).
#[derive(Debug, Clone)]
pub struct PiiRule {
    pub kinds: Vec<PiiKind>,
    pub owner: u32,
}

/// All PII kinds of a scan target, compiled; shared read-only by every stream.
#[derive(Debug)]
pub struct PiiMatcher {
    fwd: dense::DFA<Vec<u32>>,
    fwd_start: StateID,
    rev: dense::DFA<Vec<u32>>,
    /// Per pattern of both DFAs.
    forms: Vec<Form>,
    /// Per kind: the owners (validators) that look for it.
    owners: [Vec<u32>; 8],
    key_exact: regex::bytes::Regex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
}

/// Per-channel state: the forward DFA state, the last bytes, and one pending hit per kind.
#[derive(Debug, Clone, Default)]
pub struct PiiState {
    sid: StateID,
    /// A position at which the forward DFA was idle: no candidate starts before it.
    idle_pos: u64,
    /// The channel bytes just before the next piece (at least `HISTORY` when there are as many).
    history: Vec<u8>,
    work: Work,
}

/// What deciding candidates updates.
#[derive(Debug, Clone, Default)]
struct Work {
    pending: [Option<Span>; 8],
    /// Reused buffers: (pattern, start) found by a reverse run, and a candidate's bytes.
    starts: Vec<(u32, u64)>,
    text: Vec<u8>,
}

impl PiiState {
    pub(super) fn heap_bytes(&self) -> usize {
        self.history.capacity()
            + self.work.starts.capacity() * std::mem::size_of::<(u32, u64)>()
            + self.work.text.capacity()
    }
}

impl PiiMatcher {
    pub fn new(rules: &[PiiRule]) -> Result<PiiMatcher, RegexError> {
        let mut owners: [Vec<u32>; 8] = Default::default();
        for r in rules {
            let kinds: &[PiiKind] = if r.kinds.is_empty() {
                &PiiKind::ALL
            } else {
                &r.kinds
            };
            for k in kinds {
                if !owners[k.index()].contains(&r.owner) {
                    owners[k.index()].push(r.owner);
                }
            }
        }
        let mut forms = Vec::new();
        let mut hirs: Vec<Hir> = Vec::new();
        for (form, pattern) in shapes() {
            if !owners[form.kind().index()].is_empty() {
                forms.push(form);
                let hir = compile_hir(&pattern)?;
                hirs.push(if form == Form::Token {
                    Hir::concat(vec![hir, token_end()])
                } else {
                    hir
                });
            }
        }
        let compile = |reverse: bool| {
            thompson::Compiler::new()
                .configure(
                    thompson::Config::new()
                        .which_captures(thompson::WhichCaptures::None)
                        .reverse(reverse),
                )
                .build_many_from_hir(&hirs)
                .map_err(Box::new)
        };
        let dfa = |nfa: &thompson::NFA, kind: StartKind| {
            dense::Builder::new()
                .configure(
                    dense::Config::new()
                        .match_kind(MatchKind::All)
                        .start_kind(kind)
                        .specialize_start_states(true)
                        .dfa_size_limit(Some(32 << 20))
                        .determinize_size_limit(Some(64 << 20)),
                )
                .build_from_nfa(nfa)
                .map_err(Box::new)
        };
        let fwd = dfa(&compile(false)?, StartKind::Unanchored)?;
        let rev = dfa(&compile(true)?, StartKind::Anchored)?;
        let start_for = |look_behind: Option<u8>| {
            fwd.start_state(
                &start::Config::new()
                    .anchored(Anchored::No)
                    .look_behind(look_behind),
            )
        };
        let fwd_start = start_for(None)?;
        let key_exact =
            regex::bytes::Regex::new(KEY_EXACT).map_err(|e| RegexError::Prefix(e.to_string()))?;
        Ok(PiiMatcher {
            fwd,
            fwd_start,
            rev,
            forms,
            owners,
            key_exact,
        })
    }

    /// True when no rule asks for any kind.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// The kinds some rule looks for.
    pub fn kinds(&self) -> Vec<PiiKind> {
        PiiKind::ALL
            .into_iter()
            .filter(|k| !self.owners[k.index()].is_empty())
            .collect()
    }

    pub fn start(&self) -> PiiState {
        PiiState {
            sid: self.fwd_start,
            ..PiiState::default()
        }
    }

    pub fn feed(&self, st: &mut PiiState, base: u64, bytes: &[u8], hits: &mut Vec<Hit>) {
        if self.forms.is_empty() {
            return;
        }
        let mut sid = st.sid;
        let mut idle_at = None;
        for (i, &b) in bytes.iter().enumerate() {
            sid = self.fwd.next_state(sid, b);
            if !self.fwd.is_special_state(sid) {
                continue;
            }
            // Start states are specialised: they are the idle ones (no candidate in progress).
            if self.fwd.is_start_state(sid) {
                idle_at = Some(i + 1);
            } else if self.fwd.is_match_state(sid) {
                // Reported one byte late: candidates end before byte `i`.
                let hay = Haystack {
                    history: &st.history,
                    base,
                    piece: bytes,
                };
                let end = base + i as u64;
                self.on_end(&hay, end, self.reach(sid), &mut st.work, hits);
            }
        }
        st.sid = sid;
        if let Some(i) = idle_at {
            st.idle_pos = base + i as u64;
        }
        let pos = base + bytes.len() as u64;
        remember(&mut st.history, bytes);
        let bound = self.fwd_bound(st, pos);
        self.flush(&mut st.work.pending, bound, hits);
    }

    pub fn finish(&self, st: &mut PiiState, pos: u64, hits: &mut Vec<Hit>) {
        if self.forms.is_empty() {
            return;
        }
        let sid = self.fwd.next_eoi_state(st.sid);
        if self.fwd.is_match_state(sid) {
            let hay = Haystack {
                history: &st.history,
                base: pos,
                piece: &[],
            };
            self.on_end(&hay, pos, self.reach(sid), &mut st.work, hits);
        }
        st.sid = self.fwd_start;
        st.idle_pos = pos;
        self.flush(&mut st.work.pending, u64::MAX, hits);
    }

    /// The earliest position a hit not reported yet can start at.
    pub fn safe_pos(&self, st: &PiiState, pos: u64) -> u64 {
        let mut safe = self.fwd_bound(st, pos);
        for p in st.work.pending.iter().flatten() {
            safe = safe.min(p.start);
        }
        safe
    }

    pub fn memory_usage(&self) -> usize {
        self.fwd.memory_usage() + self.rev.memory_usage()
    }

    /// How far back the candidates ending in forward match state `sid` can start.
    fn reach(&self, sid: StateID) -> usize {
        (0..self.fwd.match_len(sid))
            .map(|k| self.forms[self.fwd.match_pattern(sid, k).as_usize()].max_span())
            .max()
            .unwrap_or(0)
    }

    /// No candidate still in progress in the forward DFA starts before this.
    fn fwd_bound(&self, st: &PiiState, pos: u64) -> u64 {
        if self.fwd.is_start_state(st.sid) {
            pos
        } else {
            st.idle_pos.max(pos.saturating_sub(MAX_SPAN as u64))
        }
    }

    /// Reports the pending hits that no later candidate can start at or before.
    fn flush(&self, pending: &mut [Option<Span>; 8], bound: u64, hits: &mut Vec<Hit>) {
        for (k, slot) in pending.iter_mut().enumerate() {
            if let Some(span) = slot.filter(|s| s.start < bound) {
                self.emit(PiiKind::ALL[k], span, hits);
                *slot = None;
            }
        }
    }

    fn emit(&self, kind: PiiKind, span: Span, hits: &mut Vec<Hit>) {
        for &owner in &self.owners[kind.index()] {
            hits.push(Hit {
                owner,
                start: Some(span.start),
                end: span.end,
                rule: Some(kind.name()),
            });
        }
    }

    /// Candidates end at `end`: finds their starts, validates them, updates the pending hits.
    fn on_end(
        &self,
        hay: &Haystack<'_>,
        end: u64,
        reach: usize,
        work: &mut Work,
        hits: &mut Vec<Hit>,
    ) {
        let Work {
            pending,
            starts,
            text,
        } = work;
        self.find_starts(hay, end, reach, starts);
        let Some(&(_, first)) = starts.last() else {
            return;
        };
        // The bytes of every candidate and the one before: copied once, sliced per candidate.
        let from = first.saturating_sub(1);
        text.clear();
        text.extend((from..end).map_while(|p| hay.at(p)));
        let rel = |p: u64| (p - from) as usize;
        for kind in PiiKind::ALL {
            // Reverse runs find starts latest first: walk back for the longest first.
            let mut candidates = starts
                .iter()
                .rev()
                .filter(|&&(pid, start)| {
                    let form = self.forms[pid as usize];
                    form.kind() == kind && end - start <= form.max_span() as u64
                })
                .peekable();
            let Some(&&(_, earliest)) = candidates.peek() else {
                continue;
            };
            let slot = &mut pending[kind.index()];
            if kind.maximal() && slot.is_some_and(|p| earliest <= p.end) {
                // The same run goes on: what looked like an address is part of something else.
                *slot = None;
            }
            let found = candidates.find_map(|&(pid, start)| {
                let form = self.forms[pid as usize];
                if form.longest_only() && start != earliest {
                    return None;
                }
                let mut span = Span { start, end };
                let t = text.get(rel(start)..rel(end))?;
                let mut t = t;
                if form == Form::Token {
                    // The shape includes the byte that ended the token.
                    while let Some((&last, rest)) = t.split_last() {
                        if is_token_byte(last) {
                            break;
                        }
                        t = rest;
                        span.end -= 1;
                    }
                }
                let before = if start == 0 {
                    None
                } else {
                    text.get(rel(start - 1)).copied()
                };
                self.valid(form, t, before).then_some(span)
            });
            let Some(span) = found else {
                continue;
            };
            match *slot {
                Some(p) if span.start > p.start => {
                    self.emit(kind, p, hits);
                    *slot = Some(span);
                }
                _ => *slot = Some(span),
            }
        }
    }

    /// Every (pattern, start) of a shape ending at `end`, latest start first.
    fn find_starts(&self, hay: &Haystack<'_>, end: u64, reach: usize, out: &mut Vec<(u32, u64)>) {
        out.clear();
        let config = start::Config::new()
            .anchored(Anchored::Yes)
            .look_behind(hay.at(end));
        let Ok(mut sid) = self.rev.start_state(&config) else {
            return;
        };
        let limit = end.saturating_sub(reach.min(MAX_SPAN) as u64);
        let mut at = end;
        // Matches show one byte late: after the byte at `at - 1`, a start at `at`.
        while at > limit {
            at -= 1;
            let Some(b) = hay.at(at) else {
                return;
            };
            sid = self.rev.next_state(sid, b);
            if self.rev.is_special_state(sid) {
                if self.rev.is_dead_state(sid) {
                    return;
                }
                self.record(sid, at + 1, out);
            }
        }
        sid = match at.checked_sub(1).and_then(|p| hay.at(p)) {
            Some(b) => self.rev.next_state(sid, b),
            None if at == 0 => self.rev.next_eoi_state(sid),
            None => return,
        };
        self.record(sid, at, out);
    }

    fn record(&self, sid: StateID, start: u64, out: &mut Vec<(u32, u64)>) {
        if self.rev.is_match_state(sid) {
            for k in 0..self.rev.match_len(sid) {
                out.push((self.rev.match_pattern(sid, k).as_u32(), start));
            }
        }
    }

    /// Checks a candidate of `form`; `before` is the byte before it.
    fn valid(&self, form: Form, t: &[u8], before: Option<u8>) -> bool {
        let after_word = before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        match form {
            Form::Email => true,
            Form::Nanp => !after_word && before != Some(b'+') && valid_nanp(t),
            Form::Intl => !after_word && valid_intl(t),
            Form::Card => valid_card(t),
            Form::Iban => valid_iban(t),
            Form::Ssn => valid_ssn(t),
            // Not the tail of a longer run (one cut by the reverse run's reach).
            Form::Ipv4 => !matches!(before, Some(b'.' | b'0'..=b'9')) && valid_ipv4(t),
            Form::Ipv6 => !after_word && !matches!(before, Some(b':' | b'.')) && valid_ipv6(t),
            Form::Token => self.key_exact.is_match(t),
            Form::Pem => true,
        }
    }
}

/// Appends `bytes` to the history, keeping at least its last [`HISTORY`] bytes; trimming only
/// when it has doubled keeps the cost amortised O(1) per byte.
fn remember(history: &mut Vec<u8>, bytes: &[u8]) {
    if history.capacity() == 0 {
        // Its final size at once: growing by doubling cost four reallocations per stream.
        history.reserve_exact(2 * HISTORY + bytes.len().min(HISTORY));
    }
    if bytes.len() >= HISTORY {
        history.clear();
        history.extend_from_slice(&bytes[bytes.len() - HISTORY..]);
        return;
    }
    history.extend_from_slice(bytes);
    if history.len() > 2 * HISTORY {
        history.drain(..history.len() - HISTORY);
    }
}
