//! Length limits counted as text streams (`max_length`'s `max_tokens`, `sentence_count`), behind
//! one trait pair: a compiled [`Limit`] starts one [`LimitState`] per text it watches (each
//! answer or refusal channel), and judges a whole text (each request message) in one call.
//!
//! The guard feeds every state the channel's text, holds frames back to the states'
//! [`LimitState::safe_pos`] and reports a hit where a state says the limit was crossed. A new
//! streamed limit is one implementation of both traits (its counting in a file of its own, as
//! in `counters/`) and one line in `compile.rs` that pushes it to the target's `limits`.

use super::counters::{count_sentences, SentenceState, TokenCounter, TokenState};
use std::fmt::Debug;

/// A validator's limit, compiled once and shared by every exchange.
pub(crate) trait Limit: Debug + Send + Sync {
    /// The count of one streamed text, from its start.
    fn start(&self) -> Box<dyn LimitState>;
    /// True when a whole text (one request message) is over the limit.
    fn exceeded_by(&self, text: &str) -> bool;
}

/// One text's count against one limit: O(bytes) over the stream, never a rescan.
pub(crate) trait LimitState: Debug + Send {
    /// Counts the next piece of the text; the position where the limit was crossed, once known
    /// (the same on every later call).
    fn feed(&mut self, text: &str) -> Option<u64>;
    /// Text before this position cannot be part of a violation.
    fn safe_pos(&self) -> u64;
    /// Ends the text; true when it is over the limit (which can first be known here).
    fn finish(&mut self) -> bool;
}

/// At most `max` o200k_base tokens.
#[derive(Debug)]
pub(crate) struct MaxTokens {
    pub(crate) max: u64,
    pub(crate) counter: TokenCounter,
}

#[derive(Debug)]
struct TokensSoFar {
    counter: TokenCounter,
    state: TokenState,
}

impl Limit for MaxTokens {
    fn start(&self) -> Box<dyn LimitState> {
        Box::new(TokensSoFar {
            counter: self.counter.clone(),
            state: TokenState::new(self.max),
        })
    }

    fn exceeded_by(&self, text: &str) -> bool {
        self.counter.count_whole(text) > self.max
    }
}

impl LimitState for TokensSoFar {
    fn feed(&mut self, text: &str) -> Option<u64> {
        self.counter.feed(&mut self.state, text)
    }

    fn safe_pos(&self) -> u64 {
        self.state.safe_pos()
    }

    fn finish(&mut self) -> bool {
        self.counter.finish(&mut self.state);
        self.state.violation().is_some()
    }
}

/// At most `max` sentences.
#[derive(Debug)]
pub(crate) struct MaxSentences {
    pub(crate) max: u64,
}

impl Limit for MaxSentences {
    fn start(&self) -> Box<dyn LimitState> {
        Box::new(SentenceState::new(self.max))
    }

    fn exceeded_by(&self, text: &str) -> bool {
        count_sentences(text) > self.max
    }
}

impl LimitState for SentenceState {
    fn feed(&mut self, text: &str) -> Option<u64> {
        SentenceState::feed(self, text)
    }

    fn safe_pos(&self) -> u64 {
        SentenceState::safe_pos(self)
    }

    fn finish(&mut self) -> bool {
        SentenceState::finish(self);
        self.violation().is_some()
    }
}
