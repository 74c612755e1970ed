//! Forbidden regular expressions, all of a scan target in one multi-pattern dense DFA.
//!
//! The dialect is Go's RE2, which PromptKit packs are written for: `\d`, `\w`, `\s` and `\b`
//! are ASCII-only (`\s` also takes `\v`), while literals, `.` and `(?i)` stay Unicode-aware.
//! Besides compatibility this keeps DFAs small (Unicode `\d{3}` alone is megabytes) and lets word
//! boundaries be compiled into a DFA at all.

use super::Hit;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::ast::{self, Ast, ClassSet, ClassSetItem};
use regex_syntax::hir::{self, Hir, HirKind, Look};

/// One regular expression to find, already parsed and checked.
#[derive(Debug, Clone)]
pub struct RegexRule {
    pub hir: Hir,
    pub owner: u32,
    /// Report every end of every match as written (no trimming, no prefix automaton): for
    /// redaction, which must cover whole matches.
    pub exact: bool,
}

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

/// Parses `pattern` in guardwire's dialect (see the module docs).
pub fn compile_hir(pattern: &str) -> Result<Hir, RegexError> {
    let syntax = |e: regex_syntax::Error| Box::new(e);
    let mut parsed = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| syntax(e.into()))?;
    ascii_perl_classes(&mut parsed);
    let hir = regex_syntax::hir::translate::Translator::new()
        .translate(pattern, &parsed)
        .map_err(|e| syntax(e.into()))?;
    Ok(ascii_word_boundaries(hir))
}

/// `\d` → `[[:digit:]]`, `\w` → `[[:word:]]`, `\s` → `[[:space:]]` (negations likewise).
fn ascii_perl_classes(a: &mut Ast) {
    match a {
        Ast::ClassPerl(perl) => {
            let item = ClassSetItem::Ascii(ascii_of(perl));
            *a = Ast::class_bracketed(ast::ClassBracketed {
                span: perl.span,
                negated: false,
                kind: ClassSet::Item(item),
            });
        }
        Ast::ClassBracketed(b) => ascii_in_set(&mut b.kind),
        Ast::Repetition(r) => ascii_perl_classes(&mut r.ast),
        Ast::Group(g) => ascii_perl_classes(&mut g.ast),
        Ast::Alternation(alt) => alt.asts.iter_mut().for_each(ascii_perl_classes),
        Ast::Concat(c) => c.asts.iter_mut().for_each(ascii_perl_classes),
        _ => {}
    }
}

fn ascii_in_set(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => ascii_in_item(item),
        ClassSet::BinaryOp(op) => {
            ascii_in_set(&mut op.lhs);
            ascii_in_set(&mut op.rhs);
        }
    }
}

fn ascii_in_item(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(perl) => *item = ClassSetItem::Ascii(ascii_of(perl)),
        ClassSetItem::Bracketed(b) => ascii_in_set(&mut b.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(ascii_in_item),
        _ => {}
    }
}

fn ascii_of(perl: &ast::ClassPerl) -> ast::ClassAscii {
    ast::ClassAscii {
        span: perl.span,
        kind: match perl.kind {
            ast::ClassPerlKind::Digit => ast::ClassAsciiKind::Digit,
            ast::ClassPerlKind::Space => ast::ClassAsciiKind::Space,
            ast::ClassPerlKind::Word => ast::ClassAsciiKind::Word,
        },
        negated: perl.negated,
    }
}

/// For a pattern whose matches only need to be *found* (a forbidden pattern), a trailing
/// `X{n,m}`, `X+` or `X*` can be cut to its minimum `X{n}`: text holds a match of the original
/// exactly when it holds one of the cut form, which is found as early or earlier, keeps the
/// longest match (and so the hold-back) bounded, and keeps DFAs small — counted runs at the end
/// of secret-token patterns otherwise multiply DFA states by thousands.
pub fn trim_for_existence(h: Hir) -> Hir {
    match h.into_kind() {
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            max: Some(r.min),
            ..r
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            sub: Box::new(trim_for_existence(*c.sub)),
            ..c
        }),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.into_iter().map(trim_for_existence).collect())
        }
        HirKind::Concat(mut subs) => {
            while let Some(last) = subs.pop() {
                let trimmed = trim_for_existence(last);
                // `X*` cut to `X{0}` is the empty pattern (the constructor simplifies it so).
                let vanished = matches!(trimmed.kind(), HirKind::Empty)
                    || matches!(trimmed.kind(), HirKind::Repetition(r) if r.max == Some(0));
                if !vanished {
                    subs.push(trimmed);
                    break;
                }
            }
            Hir::concat(subs)
        }
        kind => rebuild(kind),
    }
}

fn rebuild(kind: HirKind) -> Hir {
    match kind {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(class) => Hir::class(class),
        HirKind::Look(look) => Hir::look(look),
        HirKind::Repetition(r) => Hir::repetition(r),
        HirKind::Capture(c) => Hir::capture(c),
        HirKind::Concat(subs) => Hir::concat(subs),
        HirKind::Alternation(subs) => Hir::alternation(subs),
    }
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
        kind => rebuild(kind),
    }
}

/// Largest DFA for all patterns of a target together; past it each pattern gets its own DFA
/// (more automaton steps per byte, but sizes add up instead of multiplying).
const UNION_DFA_BUDGET: usize = 16 << 20;
/// Finds where a match of one pattern starts, given where it ends: an anchored reverse DFA run
/// backwards from the end over the text before it, keeping the leftmost start (so a redaction
/// covers the whole match).
#[derive(Debug)]
pub struct SpanFinder {
    reverse: dense::DFA<Vec<u32>>,
}

impl SpanFinder {
    pub fn new(hir: &Hir) -> Result<Self, RegexError> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .reverse(true)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(hir)
            .map_err(Box::new)?;
        let reverse = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(Some(SINGLE_DFA_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .map_err(Box::new)?;
        Ok(SpanFinder { reverse })
    }

    pub fn memory_usage(&self) -> usize {
        self.reverse.memory_usage()
    }

    /// The leftmost start of a match ending exactly at `end` in `text` (`text[..end]` is what
    /// the reverse run reads; the byte at `end`, if any, is the look-ahead).
    pub fn start(&self, text: &[u8], end: usize) -> Option<usize> {
        let input = regex_automata::Input::new(text)
            .range(..end)
            .anchored(Anchored::Yes);
        self.reverse
            .try_search_rev(&input)
            .ok()
            .flatten()
            .map(|m| m.offset())
    }
}

/// Largest DFA for a single pattern: beyond it the pattern is refused at load.
const SINGLE_DFA_LIMIT: usize = 128 << 20;

/// Every forbidden pattern of a scan target, compiled.
#[derive(Debug, Default)]
pub struct ForbiddenRegexes {
    /// Patterns that begin with selective literals: prefix automaton + anchored threads.
    pub prefixed: Option<super::prefixed::PrefixedMatcher>,
    /// Patterns that prose keeps busy but that hold a literal after an ASCII run (e-mail
    /// addresses): found from that literal.
    pub inner: Vec<super::inner::InnerMatcher>,
    /// The others, in as few unanchored DFAs as fit the budget.
    pub dfas: Vec<RegexMatcher>,
}

/// Compiles forbidden patterns (see [`ForbiddenRegexes`]). Returns the index of the offending
/// rule with an error.
pub fn build_forbidden(rules: &[RegexRule]) -> Result<ForbiddenRegexes, (usize, RegexError)> {
    if let Some(i) = rules
        .iter()
        .position(|r| r.hir.properties().minimum_len() == Some(0))
    {
        return Err((i, RegexError::MatchesEmpty));
    }
    let mut prefixed = Vec::new();
    let mut prefixed_index = Vec::new();
    let mut others = Vec::new();
    let mut other_index = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        if r.exact {
            others.push(r.clone());
            other_index.push(i);
            continue;
        }
        let rule = RegexRule {
            hir: trim_for_existence(r.hir.clone()),
            owner: r.owner,
            exact: false,
        };
        match super::prefixed::literal_prefixes(&rule.hir) {
            Some(prefixes) => {
                prefixed.push((rule, prefixes));
                prefixed_index.push(i);
            }
            None => {
                others.push(rule);
                other_index.push(i);
            }
        }
    }
    let prefixed = if prefixed.is_empty() {
        None
    } else {
        // One anchored DFA for all: a failure cannot be pinned on one pattern; name the first.
        Some(super::prefixed::PrefixedMatcher::new(&prefixed).map_err(|e| (prefixed_index[0], e))?)
    };
    let (dfas, inner) = pack_dfas(&others).map_err(|(i, e)| (other_index[i], e))?;
    Ok(ForbiddenRegexes {
        prefixed,
        inner,
        dfas,
    })
}

/// Builds patterns in as few DFAs as fit [`UNION_DFA_BUDGET`] each: every DFA stepped is one
/// table lookup per scanned byte, so fewer is faster, but a union's size can be the product of
/// its parts. Patterns that ordinary prose leaves idle (digit runs, uppercase codes) are kept
/// apart from those it does not (an e-mail address may begin at any letter): together, the
/// first would be stepped over every byte as well instead of skipped. Of the second kind, those
/// with a literal after an ASCII run are found from that literal instead
/// ([`super::inner::InnerMatcher`]); redacting patterns are not (their hits need every end).
type Packed = (Vec<RegexMatcher>, Vec<super::inner::InnerMatcher>);

fn pack_dfas(trimmed: &[RegexRule]) -> Result<Packed, (usize, RegexError)> {
    let mut singles: Vec<Option<RegexMatcher>> = Vec::with_capacity(trimmed.len());
    for (i, r) in trimmed.iter().enumerate() {
        let m = RegexMatcher::with_limit(std::slice::from_ref(r), SINGLE_DFA_LIMIT)
            .map_err(|e| (i, e))?;
        singles.push(Some(m));
    }
    let (skipping, busy): (Vec<usize>, Vec<usize>) = (0..trimmed.len())
        .partition(|&i| singles[i].as_ref().is_some_and(RegexMatcher::skips_prose));
    let mut inner = Vec::new();
    let mut stepped = Vec::new();
    for i in busy {
        let found = match trimmed[i].exact {
            true => None,
            false => super::inner::InnerMatcher::new(&trimmed[i]),
        };
        match found {
            Some(m) => inner.push(m.map_err(|e| (i, e))?),
            None => stepped.push(i),
        }
    }
    let mut groups = Vec::new();
    for part in [skipping, stepped] {
        groups.extend(pack_part(trimmed, part, &mut singles));
    }
    Ok((groups, inner))
}

/// Packs the patterns `part` of `trimmed` (see [`pack_dfas`]); `singles` holds each one's own
/// DFA, taken from it when used alone.
fn pack_part(
    trimmed: &[RegexRule],
    part: Vec<usize>,
    singles: &mut [Option<RegexMatcher>],
) -> Vec<RegexMatcher> {
    if part.len() > 1 {
        let members: Vec<RegexRule> = part.iter().map(|&i| trimmed[i].clone()).collect();
        if let Ok(all) = RegexMatcher::with_limit(&members, UNION_DFA_BUDGET) {
            return vec![all];
        }
    }
    // Greedy packing from the smallest up: a pattern joins the current group while the
    // group's DFA stays in budget.
    let mut order = part;
    order.sort_by_key(|&i| singles[i].as_ref().map_or(0, RegexMatcher::memory_usage));
    let mut groups = Vec::new();
    let mut members: Vec<RegexRule> = Vec::new();
    let mut current: Option<RegexMatcher> = None;
    for i in order {
        let single = singles[i].take();
        if current.is_some() {
            members.push(trimmed[i].clone());
            if let Ok(joined) = RegexMatcher::with_limit(&members, UNION_DFA_BUDGET) {
                current = Some(joined);
                continue;
            }
            members.pop();
            groups.extend(current.take());
        }
        members = vec![trimmed[i].clone()];
        current = single;
    }
    groups.extend(current);
    groups
}

impl RegexMatcher {
    /// One DFA for all `rules` (patterns are used as given; see [`build_forbidden`]).
    pub fn new(rules: &[RegexRule]) -> Result<Self, RegexError> {
        Self::with_limit(rules, SINGLE_DFA_LIMIT)
    }

    fn with_limit(rules: &[RegexRule], limit: usize) -> Result<Self, RegexError> {
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
    /// automaton out of its idle states (see [`Self::stays_idle`] and [`super::marks`]); it
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
                    Some(marks) => super::marks::next(marks, i, bytes.len()),
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
    pub(super) fn stays_idle(&self, b: u8) -> bool {
        self.stays_idle[usize::from(b)]
    }

    /// Pairs of a waking byte and a byte after it that put the automaton back to rest, as two
    /// byte sets: the vector marks can leave such a waking byte unmarked, so the skip loop
    /// never stops for it. `None` when there are none worth marking.
    pub(super) fn resting_pairs(&self) -> Option<&RestingPairs> {
        self.resting_pairs.as_deref()
    }

    /// Whether ordinary prose leaves this automaton idle, so that it is skipped rather than
    /// stepped (see [`pack_dfas`]).
    pub(super) fn skips_prose(&self) -> bool {
        self.skips_prose
    }
}

/// Waking bytes (`first`) and bytes (`second`) such that every `first` byte followed by any
/// `second` byte leads every idle state to the idle state `second` alone leads to, and no match
/// ends at either byte. A skip over such a pair therefore needs no stop: the state after it
/// (and after any staying-idle bytes that follow) is decided by the last byte skipped, as for
/// a run of staying-idle bytes. `second` holds only staying-idle bytes.
#[derive(Debug, Clone)]
pub(super) struct RestingPairs {
    pub(super) first: [bool; 256],
    pub(super) second: [bool; 256],
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
pub(super) fn skip_while(bytes: &[u8], mut i: usize, set: &[bool; 256]) -> usize {
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
