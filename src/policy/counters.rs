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
//! # Wiring
//!
//! A state holds its limit, so keep one per (text stream, validator), like `output_chars` per
//! choice; `u64::MAX` counts without a limit (`min_*` checks, metrics). Load the tokenizer with
//! [`o200k`] when compiling a pack that sets `max_tokens` (about 0.3 s and 46 MB once per
//! process, in release). After each feed, a `Some(pos)` from `feed` is the violation (the same
//! value on every later feed); hold each frame until the state's `safe_pos` passes its end. Call
//! `finish` at AfterCall: a token violation can first be found there.

mod sentences;
mod tokens;

pub use sentences::{count_sentences, SentenceState, ABBREVIATIONS, NUMBER_ABBREVIATIONS};
pub use tokens::{o200k, TokenCounter, TokenState};

// What the tests' `use super::*` needs besides the public items.
#[cfg(test)]
use std::sync::Arc;
#[cfg(test)]
use tokens::{floor_char_boundary, is_token_split};

#[cfg(test)]
mod tests;
