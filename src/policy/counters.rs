//! Incremental counters for streamed length limits: tokens (`max_length`'s `max_tokens`) and
//! sentences (`sentence_count`). Like the scanner, each keeps a small state per text stream, costs
//! O(bytes) in total, never rescans what it has seen, and answers the hold-back's question: from
//! which position could text still be part of a violation ([`TokenState::safe_pos`],
//! [`SentenceState::safe_pos`])?
//!
//! Both states take their limit when created (`u64::MAX` to count only) and report the byte
//! position where the violation starts; once it is known nothing more is held back (the policy
//! blocks, or in monitor mode lets the stream go on).
//!
//! # Tokens
//!
//! Counts are o200k_base tokens, exactly `encode_ordinary(whole_text).len()` however the text is
//! split. Re-tokenizing the accumulated text per piece would be quadratic, so the counter relies
//! on where o200k's pre-tokenizer can cut. tiktoken first splits text into pieces with the regex
//! below (alternatives tried in order, leftmost-first), then runs BPE on each piece on its own:
//!
//! ```text
//! P1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! P2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! P3 \p{N}{1,3}
//! P4  ?[^\s\p{L}\p{N}]+[\r\n/]*
//! P5 \s*[\r\n]+
//! P6 \s+(?!\S)
//! P7 \s+
//! ```
//!
//! A position `q` between characters `x` and `y` is a *split point* when the pieces of
//! `text[..q]` followed by the pieces of `text[q..]` are the pieces of `text`; then the token
//! counts add up. That holds when (a) no piece of `text` spans `q` (the pieces from `q` on are then
//! the same: the pattern has no look-behind), and (b) cutting the text at `q` does not change a
//! piece before it. For (b): a match attempt ending by `q` behaves the same on `text[..q]`,
//! except that `(?!\S)` (P6) newly succeeds at the cut, so only a whitespace run ending at `q`
//! can change. The rules (`is_token_split`), all checked against the regex's pieces in the tests:
//!
//! 1. `x` is not whitespace and `y` is whitespace other than `\r`/`\n` (`"word next"`, `"a.\tb"`):
//!    whitespace sits inside a piece only as the optional first character of P1/P2/P4 or in
//!    all-whitespace pieces (P5-P7), so a piece containing `y` starts at `y`; (b) holds as `x` is
//!    not whitespace.
//! 2. `x` is an ASCII letter or digit and `y` is `\r`/`\n`: `x` is in a P1/P2/P3 piece, none of
//!    which takes a line break (only P4 does, after punctuation: `".\n"` is one piece).
//! 3. `x` is `\r`/`\n` and `y` is neither whitespace nor `/`: no piece continues after a line
//!    break except P4's `[\r\n/]*` and the whitespace pieces. For (b), any whitespace run ending at
//!    `q` ends with a line break, so P5 (tried before P6) matches it whole on both texts.
//!
//! Between split points, a prose stream is cut at every space and line end, so the pending text
//! is about a word. Text with no split point (base64, minified code, a long CJK run, `"  "` runs)
//! stays pending until one arrives or the stream ends: each feed only scans its own bytes for
//! split points and each byte is BPE-encoded once, so the cost stays O(bytes); the pending text
//! is at most the longest run without a split point (memory the hold-back would hold as frames
//! anyway once the run exceeds the remaining token budget).
//!
//! Hold-back: every token is at least one byte, and the tokens before the pending text are
//! exactly `committed`, so the `k`-th pending byte is in token number `committed + k` or earlier.
//! Pending bytes that fit the remaining budget (`max - committed`) are safe; the rest waits for
//! the exact count. When a completed segment takes the count over `max`, the violation is the
//! start of token `max + 1` (rounded down to a character boundary).
//!
//! # Sentences
//!
//! A sentence starts at its first non-whitespace character; the count is the number of starts,
//! so trailing text without a terminator is a sentence and whitespace-only text has none. A
//! streamed `max` is exceeded when sentence `max + 1` starts, at that character: nothing of it is
//! released. The rules:
//!
//! - **Terminators** `.` `!` `?` `…` end a sentence when the run of them (`?!`, `...` count once),
//!   optionally followed by closing quotes or brackets `"'”’)]»`, is followed by whitespace. A
//!   terminator followed by anything else is no end (`3.14`, `e.g.x`, `example.com`, `Hi!!!Yes`).
//! - **Full-width terminators** `。` `！` `？` `｡` end a sentence without whitespace: the next
//!   character that is not a terminator, closer (also `」』）】`) or whitespace starts a new one.
//! - The end is decided at the first non-whitespace character `c` after the terminator:
//!   - `!`, `?`, full-width: always an end;
//!   - an ellipsis (`…`, or two or more dots): an end unless `c` is lowercase;
//!   - a single `.`: an end unless `c` is lowercase, or the word before the dot (letters and inner
//!     dots, case-insensitive) is a single letter (initials: `J. R. R. Tolkien`), or is one of the
//!     abbreviations [`ABBREVIATIONS`], or is one of [`NUMBER_ABBREVIATIONS`] (`no`, `fig`, ...)
//!     and `c` is a digit (`No. 5`, but `I said no. Then`).
//!   - if `c` is itself a terminator or closer (`Wait . . . what`), the sentence goes on.
//! - **Lines**: a single line break is whitespace like any other. A blank line (two `\n`, or
//!   U+2029) ends the sentence: the next non-whitespace character starts one, even lowercase.
//! - **Lists**: a line whose first non-whitespace characters are a bullet (`-`, `*`, `+`, `•`) or
//!   up to 9 digits and `.` or `)`, followed by whitespace, starts a sentence (each list item is
//!   one), and that marker's `.` is no terminator. Other markdown (headings, tables) has no rule.
//!
//! Known limits, chosen to err towards fewer sentences: an abbreviation or a one-letter word at a
//! real sentence end (`... Apple Inc. The`, `Plan B. Then`) does not end it, and neither does a
//! `.` followed by a lowercase start. `"Why?" he asked` counts two.
//!
//! Hold-back: all decisions happen at the character that would start the new sentence, except
//! list markers, which are known only at the whitespace after them. So with `max` sentences
//! started, text is safe up to the end of what was fed, except a possible list marker that
//! would start sentence `max + 1`, held from its first character.
//!
//! # Wiring
//!
//! A state holds its limit, so keep one per (text stream, validator), like `output_chars` per
//! choice; `u64::MAX` counts without a limit (`min_*` checks, metrics). Load the tokenizer with
//! [`o200k`] when compiling a pack that sets `max_tokens` (about 0.3 s and 46 MB once per
//! process, in release). After each feed, a `Some(pos)` from `feed` is the violation (the same
//! value on every later feed); hold each frame until the state's `safe_pos` passes its end. Call
//! `finish` at AfterCall: a token violation can first be found there.

use std::sync::{Arc, OnceLock};
use tiktoken_rs::CoreBPE;

/// The o200k_base tokenizer, loaded once per process and shared. Load it when a pack needs it,
/// so an error surfaces at pack load rather than on a request.
pub fn o200k() -> Result<Arc<CoreBPE>, String> {
    static O200K: OnceLock<Result<Arc<CoreBPE>, String>> = OnceLock::new();
    O200K
        .get_or_init(|| {
            tiktoken_rs::o200k_base()
                .map(Arc::new)
                .map_err(|e| format!("cannot load the o200k_base tokenizer: {e}"))
        })
        .clone()
}

/// Counts o200k_base tokens of streamed text. Cheap to clone; one per policy.
#[derive(Clone)]
pub struct TokenCounter {
    bpe: Arc<CoreBPE>,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter(o200k_base)")
    }
}

/// Token count of one text stream against one limit.
#[derive(Debug, Clone)]
pub struct TokenState {
    max: u64,
    /// Exact tokens of the text before `pending_start`.
    committed: u64,
    /// Text since the last split point: its tokens are not known yet.
    pending: String,
    pending_start: u64,
    violation: Option<u64>,
    finished: bool,
}

impl TokenState {
    /// A stream allowed `max` tokens (`u64::MAX`: count only).
    pub fn new(max: u64) -> Self {
        TokenState {
            max,
            committed: 0,
            pending: String::new(),
            pending_start: 0,
            violation: None,
            finished: false,
        }
    }

    /// Bytes fed so far.
    pub fn pos(&self) -> u64 {
        self.pending_start + self.pending.len() as u64
    }

    /// Exact tokens of the text before the pending segment (all of it after `finish`).
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Where the `max + 1`-th token starts, once the count is known to exceed `max`.
    pub fn violation(&self) -> Option<u64> {
        self.violation
    }

    /// Text before this position cannot be part of a violation.
    pub fn safe_pos(&self) -> u64 {
        if self.violation.is_some() || self.finished {
            return self.pos();
        }
        let budget = usize::try_from(self.max.saturating_sub(self.committed)).unwrap_or(usize::MAX);
        self.pending_start + floor_char_boundary(&self.pending, budget) as u64
    }

    /// Heap bytes this state holds.
    pub fn heap_bytes(&self) -> usize {
        self.pending.capacity()
    }
}

impl TokenCounter {
    pub fn new(bpe: Arc<CoreBPE>) -> Self {
        TokenCounter { bpe }
    }

    /// A counter over the shared o200k_base tokenizer.
    pub fn o200k() -> Result<Self, String> {
        o200k().map(TokenCounter::new)
    }

    /// Counts the next piece of the stream. Returns the violation position once known.
    pub fn feed(&self, st: &mut TokenState, text: &str) -> Option<u64> {
        let mut prev = st.pending.chars().next_back();
        let mut split = None;
        for (i, c) in text.char_indices() {
            if prev.is_some_and(|x| is_token_split(x, c)) {
                split = Some(i);
            }
            prev = Some(c);
        }
        match split {
            None => st.pending.push_str(text),
            Some(q) => {
                // Everything up to the last split point is encoded in one go.
                let (done, rest) = text.split_at(q);
                st.pending.push_str(done);
                self.commit(st);
                st.pending.push_str(rest);
            }
        }
        st.violation
    }

    /// Ends the stream: counts the pending text. Returns the exact total; a violation found here
    /// is in [`TokenState::violation`].
    pub fn finish(&self, st: &mut TokenState) -> u64 {
        if !st.pending.is_empty() {
            self.commit(st);
        }
        st.finished = true;
        st.committed
    }

    /// Tokens of a whole text.
    pub fn count_whole(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }

    /// Encodes the pending segment, which ends at a split point (or the end of the text).
    fn commit(&self, st: &mut TokenState) {
        let tokens = self.bpe.encode_ordinary(&st.pending);
        let before = st.committed;
        st.committed += tokens.len() as u64;
        if st.violation.is_none() && st.committed > st.max {
            // `before <= max`: else the violation would have been found with an earlier segment.
            let allowed = usize::try_from(st.max.saturating_sub(before)).unwrap_or(usize::MAX);
            let allowed = allowed.min(tokens.len());
            // Tokens are at least a byte each, so `allowed` bytes is a lower bound if decoding
            // (which cannot fail on tokens just encoded) did.
            let bytes = self
                .bpe
                .decode_bytes(&tokens[..allowed])
                .map_or(allowed, |b| b.len());
            st.violation = Some(st.pending_start + floor_char_boundary(&st.pending, bytes) as u64);
        }
        st.pending_start += st.pending.len() as u64;
        st.pending.clear();
    }
}

/// True when o200k_base's pre-tokenizer cannot have a piece spanning the boundary between `x` and
/// `y` and cutting there changes no piece before it (see the module docs), so token counts of the
/// text before and after add up.
fn is_token_split(x: char, y: char) -> bool {
    let line_break = |c: char| c == '\r' || c == '\n';
    (!x.is_whitespace() && y.is_whitespace() && !line_break(y))
        || (x.is_ascii_alphanumeric() && line_break(y))
        || (line_break(x) && !y.is_whitespace() && y != '/')
}

/// The largest character boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Words (lowercase, inner dots kept, final dot dropped) after which a `.` ends no sentence.
pub const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "mx", "messrs", "dr", "prof", "sr", "jr", "st", "mt", "rev", "capt", "sgt",
    "lt", "gov", "sen", "pres", "vs", "etc", "e.g", "i.e", "cf", "viz", "al", "inc", "ltd", "co",
    "corp", "bros", "dept", "univ", "est", "approx", "ca", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "a.m", "p.m", "u.s", "u.s.a", "u.k", "u.n",
    "e.u", "a.k.a", "ph.d", "m.d", "b.a", "m.a", "b.sc", "m.sc", "n.b", "p.s", "ave", "blvd",
];

/// Words after which a `.` ends no sentence when a digit follows (`No. 5`, `Fig. 3`).
pub const NUMBER_ABBREVIATIONS: &[&str] = &[
    "no", "nos", "nr", "fig", "figs", "vol", "vols", "pp", "ch", "sec", "eq", "art", "ref", "tab",
];

/// Longest word kept for the abbreviation check, in bytes; longer words are no abbreviation.
const WORD_BYTES: usize = 8;

/// Most digits of a numbered list marker (CommonMark's limit).
const MARKER_DIGITS: u8 = 9;

/// The word before a terminator: letters and dots, lowercase, bounded.
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    buf: [u8; WORD_BYTES],
    len: u8,
    /// Characters pushed (saturating), including the ones not kept.
    chars: u8,
    /// A character was not kept (non-ASCII, or past `WORD_BYTES`).
    lossy: bool,
}

impl Word {
    fn push(&mut self, c: char) {
        self.chars = self.chars.saturating_add(1);
        let len = usize::from(self.len);
        match self.buf.get_mut(len) {
            Some(b) if c.is_ascii() => {
                *b = c.to_ascii_lowercase() as u8;
                self.len += 1;
            }
            _ => self.lossy = true,
        }
    }

    fn clear(&mut self) {
        *self = Word::default();
    }

    /// How a single `.` after this word (already pushed as its last character) is judged.
    fn abbreviation(&self) -> Abbrev {
        // One letter and the dot: an initial.
        if self.chars == 2 && (self.lossy || self.buf[0].is_ascii_alphabetic()) {
            return Abbrev::Always;
        }
        if self.lossy {
            return Abbrev::No;
        }
        let word = &self.buf[..usize::from(self.len)];
        let word = word.strip_suffix(b".").unwrap_or(word);
        let is = |list: &[&str]| list.iter().any(|a| a.as_bytes() == word);
        if is(ABBREVIATIONS) {
            Abbrev::Always
        } else if is(NUMBER_ABBREVIATIONS) {
            Abbrev::BeforeDigit
        } else {
            Abbrev::No
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abbrev {
    No,
    Always,
    BeforeDigit,
}

/// A run of terminators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// One `.`.
    Dot,
    /// `…` or several dots.
    Ellipsis,
    /// Contains `!`, `?` or a full-width terminator.
    Strong,
}

impl Run {
    /// The run the terminator `c` starts.
    fn first(c: char) -> Run {
        match c {
            '.' => Run::Dot,
            '…' => Run::Ellipsis,
            _ => Run::Strong,
        }
    }

    /// The run after one more terminator `c`.
    fn then(self, c: char) -> Run {
        match (self, c) {
            (Run::Strong, _) => Run::Strong,
            (_, '.' | '…') => Run::Ellipsis,
            _ => Run::Strong,
        }
    }
}

/// A possible sentence end, waiting for the next non-whitespace character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Dot(Abbrev),
    Ellipsis,
    Strong,
}

impl End {
    /// Does a sentence end here, given the next non-whitespace character?
    fn ends_before(self, c: char) -> bool {
        match self {
            End::Strong => true,
            End::Ellipsis | End::Dot(Abbrev::No) => !c.is_lowercase(),
            End::Dot(Abbrev::Always) => false,
            End::Dot(Abbrev::BeforeDigit) => !(c.is_lowercase() || c.is_ascii_digit()),
        }
    }

    fn run(self) -> Run {
        match self {
            End::Dot(_) => Run::Dot,
            End::Ellipsis => Run::Ellipsis,
            End::Strong => Run::Strong,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Bullet,
    Digits(u8),
    /// Digits and `.` or `)`.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Text start or after a blank line: the next non-whitespace character starts a sentence.
    Start,
    /// In a sentence.
    Text,
    /// After terminators (and closers). `wide`: a full-width one, which needs no whitespace.
    Term { run: Run, wide: bool },
    /// Whitespace inside or after a sentence; `end`: it follows terminators.
    Gap { end: Option<End>, newlines: u8 },
    /// A possible list marker at a line start, from `start`. `started`: a sentence started at
    /// `start` anyway; else the marker decides whether one does.
    Marker {
        start: u64,
        started: bool,
        marker: Marker,
    },
}

/// Sentence count of one text stream against one limit: a few words, no heap.
#[derive(Debug, Clone)]
pub struct SentenceState {
    max: u64,
    pos: u64,
    count: u64,
    violation: Option<u64>,
    phase: Phase,
    word: Word,
    finished: bool,
}

impl SentenceState {
    /// A stream allowed `max` sentences (`u64::MAX`: count only).
    pub fn new(max: u64) -> Self {
        SentenceState {
            max,
            pos: 0,
            count: 0,
            violation: None,
            phase: Phase::Start,
            word: Word::default(),
            finished: false,
        }
    }

    /// Bytes fed so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Sentences started so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Where sentence `max + 1` starts, once it has.
    pub fn violation(&self) -> Option<u64> {
        self.violation
    }

    /// Counts the next piece of the stream. Returns the violation position once known.
    pub fn feed(&mut self, text: &str) -> Option<u64> {
        for (i, c) in text.char_indices() {
            self.step(c, self.pos + i as u64);
        }
        self.pos += text.len() as u64;
        self.violation
    }

    /// Ends the stream; returns the sentence count.
    pub fn finish(&mut self) -> u64 {
        self.finished = true;
        self.count
    }

    /// Text before this position cannot be part of sentence `max + 1`.
    pub fn safe_pos(&self) -> u64 {
        match self.phase {
            Phase::Marker {
                start,
                started: false,
                ..
            } if self.count >= self.max && self.violation.is_none() && !self.finished => start,
            _ => self.pos,
        }
    }

    fn start_sentence(&mut self, at: u64) {
        self.count += 1;
        if self.count > self.max && self.violation.is_none() {
            self.violation = Some(at);
        }
    }

    fn step(&mut self, c: char, at: u64) {
        match self.phase {
            Phase::Start => {
                if !c.is_whitespace() {
                    self.start_sentence(at);
                    self.begin(c, at, true, true);
                }
            }
            Phase::Text => self.text(c),
            Phase::Term { run, wide } => {
                if c.is_whitespace() {
                    let end = match run {
                        Run::Dot => End::Dot(self.word.abbreviation()),
                        Run::Ellipsis => End::Ellipsis,
                        Run::Strong => End::Strong,
                    };
                    self.gap(Some(end), c, 0);
                } else if let Some(w) = terminator(c) {
                    self.terminator(run.then(c), wide || w, c);
                } else if is_closer(c) {
                    // Closers extend the run.
                } else if wide {
                    self.start_sentence(at);
                    self.begin(c, at, false, true);
                } else {
                    self.text(c);
                }
            }
            Phase::Gap { end, newlines } => {
                if c.is_whitespace() {
                    self.gap(end, c, newlines);
                } else if newlines >= 2 {
                    self.start_sentence(at);
                    self.begin(c, at, true, true);
                } else if let (Some(end), true) = (end, terminator(c).is_some() || is_closer(c)) {
                    // `Wait . . . what`: more of the same run.
                    self.phase = Phase::Term {
                        run: end.run(),
                        wide: false,
                    };
                    self.step(c, at);
                } else {
                    let started = end.is_some_and(|e| e.ends_before(c));
                    if started {
                        self.start_sentence(at);
                    }
                    self.begin(c, at, newlines > 0, started);
                }
            }
            Phase::Marker {
                start,
                started,
                marker,
            } => match marker {
                _ if c.is_whitespace() => {
                    if matches!(marker, Marker::Bullet | Marker::Closed) && !started {
                        self.start_sentence(start);
                    }
                    // A marker's `.` is no terminator; a number that is no marker is text.
                    self.gap(None, c, 0);
                }
                Marker::Digits(n) if c.is_ascii_digit() && n < MARKER_DIGITS => {
                    self.phase = Phase::Marker {
                        start,
                        started,
                        marker: Marker::Digits(n + 1),
                    };
                }
                Marker::Digits(_) if c == '.' || c == ')' => {
                    self.phase = Phase::Marker {
                        start,
                        started,
                        marker: Marker::Closed,
                    };
                }
                _ => self.text(c),
            },
        }
    }

    /// The first character of a line or of a sentence: a list marker may begin here.
    fn begin(&mut self, c: char, at: u64, line_start: bool, started: bool) {
        self.word.clear();
        let marker = match c {
            '-' | '*' | '+' | '•' => Some(Marker::Bullet),
            '0'..='9' => Some(Marker::Digits(1)),
            _ => None,
        };
        match marker {
            Some(marker) if line_start => {
                self.phase = Phase::Marker {
                    start: at,
                    started,
                    marker,
                }
            }
            _ => self.text(c),
        }
    }

    /// A character inside a sentence.
    fn text(&mut self, c: char) {
        if c.is_whitespace() {
            self.gap(None, c, 0);
        } else if let Some(wide) = terminator(c) {
            self.word_char(c);
            self.terminator(Run::first(c), wide, c);
        } else {
            self.word_char(c);
            self.phase = Phase::Text;
        }
    }

    fn terminator(&mut self, run: Run, wide: bool, c: char) {
        if c == '.' {
            self.word.push(c);
        }
        self.phase = Phase::Term { run, wide };
    }

    /// Keeps the word before a possible terminator up to date.
    fn word_char(&mut self, c: char) {
        if c.is_alphabetic() {
            self.word.push(c);
        } else if c != '.' {
            self.word.clear();
        }
    }

    fn gap(&mut self, end: Option<End>, c: char, newlines: u8) {
        let newlines = match c {
            '\u{2029}' => 2,
            '\n' | '\u{2028}' | '\u{85}' => newlines.saturating_add(1).min(2),
            _ => newlines,
        };
        self.phase = Phase::Gap { end, newlines };
    }
}

/// `Some(wide)` for a sentence terminator; `wide` ones end a sentence without whitespace.
fn terminator(c: char) -> Option<bool> {
    match c {
        '.' | '!' | '?' | '…' => Some(false),
        '。' | '！' | '？' | '｡' => Some(true),
        _ => None,
    }
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '”' | '’' | ')' | ']' | '»' | '」' | '』' | '）' | '】'
    )
}

/// Sentences in a whole text.
pub fn count_sentences(text: &str) -> u64 {
    let mut st = SentenceState::new(u64::MAX);
    st.feed(text);
    st.finish()
}

#[cfg(test)]
mod tests;
