//! Policies: the compiled form of the packs a route enforces, and the three hook phases.
//!
//! One [`ExchangeGuard`] per exchange carries the three phases, with one API for each:
//!
//! - **BeforeCall** ([`ExchangeGuard::before_call`]) checks the request's
//!   [`Conversation`](crate::delta::Conversation) before the provider is called.
//! - **OnChunk** ([`ExchangeGuard::on_chunk`]) checks each [`Delta`](crate::delta::Delta) as it
//!   streams, incrementally.
//! - **AfterCall** ([`ExchangeGuard::after_call`]) ends every channel's scan and runs the checks
//!   that need the whole response.
//!
//! Each phase returns its enforcing verdict as an `Err`; everything else it found (monitor-mode
//! findings, redactions) waits for [`ExchangeGuard::take_findings`]. Checks know nothing of
//! HTTP or wire formats; a non-streamed response goes through the same OnChunk + AfterCall path
//! as one big delta per channel, so both give the same verdict.
//!
//! The code, by concern:
//!
//! - `types`: the validator types ([`Validator`], [`Direction`], [`Mode`], ...), [`Finding`],
//!   [`Phase`], [`PackError`] and [`PolicyError`]; it imports nothing else of the policy.
//! - `compiled`: [`Policy`] itself and its parts (the per-target checks, a scan set's rules);
//!   `compile`: [`Policy::compile`] / [`Policy::load`], and a pack's evals (`compile/evals`).
//! - `whole`: the checks on a whole text.
//! - `verdict`: from raw hits to a verdict, shared by every phase.
//! - `before_call`: BeforeCall's checks; `identifiers`: the secret and PII patterns over
//!   identifier-shaped values, in a request and in an answer.
//! - `guard`: [`ExchangeGuard`], the phases' API and OnChunk and AfterCall; its tool calls (`guard/calls`) and budgets
//!   (`guard/budgets`).
//! - `redaction`: [`Redaction`] spans and how they merge.
//! - `checks`: the check types, one file each (their params, capabilities and compile step);
//!   `catalog`: the registry of type names and aliases.
//! - `pack`: loading packs; `counters`, `json_args`, `structured`, `tools`: the check
//!   engines; `cache`: the compiled policies shared across routes.

mod before_call;
mod cache;
pub mod catalog;
mod checks;
mod compile;
mod compiled;
pub mod counters;
pub mod evals;
mod guard;
mod identifiers;
pub mod json_args;
pub mod json_text;
pub mod judged;
mod limits;
pub mod pack;
pub mod structured;
pub mod tools;
pub mod transcript;
mod types;
mod verdict;
mod whole;

pub use tools::{Scope, ToolCheck};

pub use cache::{PolicyCache, PolicyLoader};
pub use checks::CheckDef;
pub use compiled::Policy;
pub use guard::{ChannelId, ExchangeGuard, Redaction};
pub use types::{
    Direction, Finding, Mode, OnError, PackError, Phase, PolicyError, Threshold, Validator,
};

#[cfg(test)]
mod tests;
