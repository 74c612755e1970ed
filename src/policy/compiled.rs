//! The compiled policy's parts: [`Policy`], its per-target checks ([`TargetChecks`]) and the
//! rules of a scan set as the streamed checks add them ([`ScanRules`]). How packs compile into
//! them is in `compile`.

use super::evals::Eval;
use super::judged::{JudgedCheck, Window};
use super::limits::Limit;
use super::tools::ToolCheck;
use super::types::Validator;
use super::whole::WholeText;
use crate::scan::{LiteralRule, Normalize, PiiRule, RegexRule, SpanFinder, TextScan};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(super) struct TargetChecks {
    pub(super) scan: Arc<TextScan>,
    /// (validator, max characters) — output: per choice over content and refusal; input: per message.
    pub(super) max_chars: Vec<(u32, u64)>,
    /// (validator, length limit counted as the text streams) — output: per answer and refusal
    /// channel; input: per message.
    pub(super) limits: Vec<(u32, Box<dyn Limit>)>,
    /// (validator, check) on the whole text.
    pub(super) whole: Vec<(u32, Box<dyn WholeText>)>,
}

/// The rules of one scan set (one target, one `normalize:` view), as the streamed checks
/// ([`Check::compile_scan`](super::checks::Check::compile_scan)) add them.
pub(super) struct ScanRules {
    /// The validator whose rules are being added.
    pub(super) owner: u32,
    /// It redacts (`mode: redact`): its matches need exact spans.
    pub(super) redact: bool,
    /// The view the set reads.
    pub(super) normalize: Normalize,
    pub(super) literals: Vec<LiteralRule>,
    pub(super) regexes: Vec<RegexRule>,
    pub(super) pii: Vec<PiiRule>,
    /// (validator, span finder) of redacting regexes.
    pub(super) finders: Vec<(u32, SpanFinder)>,
}

/// Every validator of a route's packs, compiled: one literal automaton and one regex DFA per
/// target, shared (read-only) by all requests.
#[derive(Debug, Default)]
pub struct Policy {
    pub(super) validators: Vec<Validator>,
    pub(super) targets: [TargetChecks; 3],
    /// (validator, check) on the turn's or session's tool calls.
    pub(super) tools: Vec<(u32, ToolCheck)>,
    /// (validator, milliseconds) of `latency_budget`s.
    pub(super) latency: Vec<(u32, u64)>,
    /// (validator, max total tokens, max cost) of `cost_budget`s.
    pub(super) cost: Vec<(u32, CostLimits)>,
    /// Some validator asks for the whole response to be held until it passes.
    pub(super) buffer: bool,
    /// Some validator redacts (asked per frame, so computed once).
    pub(super) redacts: bool,
    /// Some tool check reads call arguments.
    pub(super) needs_args: bool,
    /// (validator, check) of judged checks on the request, and on the answer.
    pub(super) judged_input: Vec<(u32, Arc<JudgedCheck>)>,
    pub(super) judged_output: Vec<(u32, Arc<JudgedCheck>)>,
    /// The window streamed answers are judged by, when every judged output check has it.
    pub(super) judged_window: Option<Window>,
    /// The packs' `evals:`, run off the request path.
    pub(super) evals: Vec<Eval>,
    /// The answer is kept (its text, unmodelled strings and tool arguments) for judged checks
    /// or evals.
    pub(super) keeps_answer: bool,
    pub(super) packs: Vec<String>,
}

/// A `cost_budget`'s limits (each optional, at least one given): tokens in, out and both, and
/// USD.
#[derive(Debug, Clone, Copy)]
pub struct CostLimits {
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}
