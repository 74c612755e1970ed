//! Streamed o200k_base token counts: the tokenizer, [`TokenCounter`] and its [`TokenState`].
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
    pub(super) bpe: Arc<CoreBPE>,
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
    pub(super) pending: String,
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
pub(super) fn is_token_split(x: char, y: char) -> bool {
    let line_break = |c: char| c == '\r' || c == '\n';
    (!x.is_whitespace() && y.is_whitespace() && !line_break(y))
        || (x.is_ascii_alphanumeric() && line_break(y))
        || (line_break(x) && !y.is_whitespace() && y != '/')
}

/// The largest character boundary of `s` at or below `i`.
pub(super) fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
