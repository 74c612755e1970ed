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
//! `limits.rs` puts both behind its `Limit` / `LimitState` traits, which the
//! guard and BeforeCall use: one state per (text channel, validator), holding its limit
//! (`u64::MAX` counts without one). The tokenizer ([`o200k`]) is loaded once per process when a
//! pack sets `max_tokens` (about 0.3 s and 46 MB, in release). A token violation can first be
//! found at `finish`.

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
