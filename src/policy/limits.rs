//! Length limits counted as text streams (`max_length`'s `max_tokens`, `sentence_count`), behind
//! one trait pair: a compiled [`Limit`] starts one [`LimitState`] per text it watches (each
//! answer or refusal channel), and judges a whole text (each request message) in one call.
//!
//! The guard feeds every state the channel's text, holds frames back to the states'
//! [`LimitState::safe_pos`] and reports a hit where a state says the limit was crossed. A new
//! streamed limit is one implementation of both traits (its counting in a file of its own, as
//! in `counters/`), pushed to the target's `limits` by its check type's
//! [`compile_text`](super::checks::Check::compile_text) (`checks/max_length.rs`,
//! `checks/sentence_count.rs`).

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
