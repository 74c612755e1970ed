//! Check types: each in a file of its own (or one file per family whose types share all
//! logic), holding its params (parsed and validated once into a typed struct), its
//! capabilities ([`Kind`]) and how it compiles into a [`Policy`]. The registry ([`CATALOG`])
//! maps PromptKit's type names and aliases to them; nothing else lists check types.
//!
//! Adding a check type: a file here with a [`CheckType`] (its params and aliases) whose
//! `build` returns a [`Check`] (its kind and its part of the compiled policy), then its `mod`
//! line and its registry line ([`CATALOG`]) below. See `docs/checks.md`.

mod contains;
mod content_excludes;
mod cost_budget;
mod field_presence;
mod guardrail_triggered;
mod json_path;
mod json_schema;
mod json_valid;
pub(super) mod judged;
mod latency_budget;
mod max_length;
mod min_length;
mod pii;
pub(super) mod reference;
mod regex;
mod sentence_count;
mod tools;

use super::compiled::{Policy, ScanRules, TargetChecks};
use super::evals::EvalCheck;
use super::judged::{CheckRefs, JudgedCheck};
use super::pack::params::Params;
use super::transcript::TranscriptRule;
use super::types::Validator;
use super::whole::WholeText;
use std::fmt::Debug;
use std::sync::Arc;

/// A type of the catalog: its canonical name, its aliases and, when guardwire implements it,
/// its check type.
pub struct Entry {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub(super) check: Option<&'static dyn CheckType>,
    /// For a type guardwire refuses: why a proxy cannot run it (None: not yet built).
    pub(super) refused: Option<&'static str>,
}

const fn entry(
    name: &'static str,
    aliases: &'static [&'static str],
    check: Option<&'static dyn CheckType>,
) -> Entry {
    Entry {
        name,
        aliases,
        check,
        refused: None,
    }
}

/// A type of the catalog a proxy cannot run, and why (said when a pack names it).
const fn refused(name: &'static str, why: &'static str) -> Entry {
    Entry {
        name,
        aliases: &[],
        check: None,
        refused: Some(why),
    }
}

const MEDIA: &str =
    "it reads images, audio or video, and guardwire checks the text and tool calls of an exchange";
const COMPOSITION: &str = "it reads the steps of a PromptKit composition (a pipeline run inside PromptKit), which never cross the wire guardwire sits on";

/// The registry: every type of the PromptKit catalog, with its aliases and, when guardwire
/// implements it, its check type. Order follows the PromptKit "Checks Reference".
pub const CATALOG: &[Entry] = &[
    entry("contains", &["content_includes"], Some(&contains::CONTAINS)),
    entry("regex", &["content_matches"], Some(&regex::REGEX)),
    entry(
        "content_excludes",
        &["banned_words", "content_not_includes"],
        Some(&content_excludes::CONTENT_EXCLUDES),
    ),
    entry(
        "contains_any",
        &["content_includes_any"],
        Some(&contains::CONTAINS),
    ),
    entry("min_length", &[], Some(&min_length::MIN_LENGTH)),
    entry("max_length", &["length"], Some(&max_length::MAX_LENGTH)),
    entry(
        "sentence_count",
        &["max_sentences"],
        Some(&sentence_count::SENTENCE_COUNT),
    ),
    entry(
        "field_presence",
        &["required_fields"],
        Some(&field_presence::FIELD_PRESENCE),
    ),
    entry("cosine_similarity", &[], Some(&judged::JUDGED)),
    entry(
        "json_valid",
        &["is_valid_json", "valid_json"],
        Some(&json_valid::JSON_VALID),
    ),
    entry("json_schema", &[], Some(&json_schema::JSON_SCHEMA)),
    entry("json_path", &[], Some(&json_path::JSON_PATH)),
    entry("tools_called", &["tool_called"], Some(&tools::TOOL)),
    entry("tools_not_called", &[], Some(&tools::TOOL)),
    entry("tool_args", &[], Some(&tools::TOOL)),
    // PromptKit's session handlers: the same rules over every call of the session.
    entry("tools_called_session", &[], Some(&tools::TOOL)),
    entry("tools_not_called_session", &[], Some(&tools::TOOL)),
    entry("tool_args_session", &[], Some(&tools::TOOL)),
    entry("tool_calls_with_args", &[], Some(&tools::TOOL)),
    entry("tool_call_count", &[], Some(&tools::TOOL)),
    entry("tool_call_sequence", &[], Some(&tools::TOOL)),
    entry("tool_call_chain", &[], Some(&tools::TOOL)),
    entry("tool_anti_pattern", &[], Some(&tools::TOOL)),
    entry("tool_no_repeat", &[], Some(&tools::TOOL)),
    entry("tool_efficiency", &[], Some(&tools::TOOL)),
    entry("no_tool_errors", &[], Some(&tools::TOOL)),
    entry("tool_result_includes", &[], Some(&tools::TOOL)),
    entry("tool_result_matches", &[], Some(&tools::TOOL)),
    refused("tool_result_has_media", MEDIA),
    refused("tool_result_media_type", MEDIA),
    entry(
        "tool_args_excluded_session",
        &["tools_not_called_with_args"],
        Some(&tools::TOOL),
    ),
    entry("agent_invoked", &[], Some(&tools::TOOL)),
    entry("agent_not_invoked", &[], Some(&tools::TOOL)),
    entry("agent_response_contains", &[], Some(&tools::TOOL)),
    entry("skill_activated", &[], Some(&tools::TOOL)),
    entry("skill_not_activated", &[], Some(&tools::TOOL)),
    entry("skill_activation_order", &[], Some(&tools::TOOL)),
    entry("workflow_complete", &[], Some(&tools::TOOL)),
    // PromptKit registers these two as `state_is` and `transitioned_to`.
    entry("workflow_state_is", &["state_is"], Some(&tools::TOOL)),
    entry(
        "workflow_transitioned_to",
        &["transitioned_to"],
        Some(&tools::TOOL),
    ),
    entry("workflow_transition_order", &[], Some(&tools::TOOL)),
    entry("workflow_tool_access", &[], Some(&tools::TOOL)),
    refused("image_format", MEDIA),
    refused("image_dimensions", MEDIA),
    refused("audio_format", MEDIA),
    refused("audio_duration", MEDIA),
    refused("video_duration", MEDIA),
    refused("video_resolution", MEDIA),
    entry("llm_judge", &[], Some(&judged::JUDGED)),
    entry(
        "llm_judge_session",
        &["llm_judge_conversation"],
        Some(&judged::JUDGED),
    ),
    entry("llm_judge_tool_calls", &[], Some(&judged::JUDGED)),
    entry("rest_eval", &[], Some(&judged::JUDGED)),
    entry("rest_eval_session", &[], Some(&judged::JUDGED)),
    entry("a2a_eval", &[], Some(&judged::JUDGED)),
    entry("a2a_eval_session", &[], Some(&judged::JUDGED)),
    entry("latency_budget", &[], Some(&latency_budget::LATENCY_BUDGET)),
    entry("cost_budget", &[], Some(&cost_budget::COST_BUDGET)),
    entry(
        "guardrail_triggered",
        &[],
        Some(&guardrail_triggered::GUARDRAIL_TRIGGERED),
    ),
    entry("invariant_fields_preserved", &[], Some(&tools::TOOL)),
    entry("outcome_equivalent", &[], None),
    entry("directional", &[], None),
    entry("pii", &["pii_leakage"], Some(&pii::PII)),
    // guardwire's own: RAG checks (HoloDeck's and DeepEval's metrics) on the context the
    // request carries.
    entry("faithfulness", &[], Some(&judged::JUDGED)),
    entry("answer_relevancy", &[], Some(&judged::JUDGED)),
    // PromptKit's judged safety types (DeepEval's metrics): an LLM judge with their criteria.
    entry("hallucination", &[], Some(&judged::JUDGED)),
    entry("bias", &[], Some(&judged::JUDGED)),
    entry("toxicity", &[], Some(&judged::JUDGED)),
    entry("role_violation", &[], Some(&judged::JUDGED)),
    // PromptKit types a proxy cannot run, refused with the reason.
    refused(
        "tool_exec",
        "it executes a tool itself, and guardwire only relays and checks the calls an agent makes",
    ),
    refused("composition_step_output", COMPOSITION),
    refused("composition_branch_taken", COMPOSITION),
    refused("composition_parallel_complete", COMPOSITION),
    refused("composition_output", COMPOSITION),
    refused(
        "text_toxicity",
        "it asks a toxicity classifier service guardwire does not run; use `toxicity` (an LLM judge) or a `rest_eval` to your classifier",
    ),
    refused(
        "text_sentiment",
        "it asks a sentiment classifier service guardwire does not run; use an `llm_judge` or a `rest_eval` to your classifier",
    ),
    refused("audio_emotion", MEDIA),
    refused("image_moderation", MEDIA),
    // guardwire's own, evals only: HoloDeck's reference text metrics.
    entry("bleu", &[], Some(&reference::REFERENCE)),
    entry("rouge", &[], Some(&reference::REFERENCE)),
    entry("meteor", &[], Some(&reference::REFERENCE)),
];

/// A check type of the catalog: its params, read into a [`Check`].
pub(super) trait CheckType: Sync {
    /// Param aliases: (alias, canonical param).
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The check of a validator of this type, from its params: every param it knows is taken
    /// from `p` (what is left is unknown), each checked and named in the error.
    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String>;
}

/// The type a validator names, and what its params may refer to.
pub(super) struct Named<'a> {
    /// As the catalog names it (`exec` for an `exec:` handler).
    pub(super) canonical: &'a str,
    /// As written.
    pub(super) type_name: &'a str,
    /// The judges and `exec:` handlers of the config.
    pub(super) refs: &'a CheckRefs,
}

/// What a check reads, which decides the directions, modes and params a validator of it may
/// take, and which of [`Check`]'s compile steps place it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Scanned for spans as the text streams (words and phrases, forbidden regexes, PII): may
    /// redact, takes `normalize:`, reads reasoning ([`Check::compile_scan`]).
    Streamed,
    /// Counted or matched over the answer (lengths, sentence counts, required regexes): any
    /// direction but reasoning alone ([`Check::compile_text`]).
    Answer,
    /// On the whole text: input, output or both ([`Check::compile_text`]).
    Whole,
    /// About the exchange (tool calls, latency, cost): no direction
    /// ([`Check::compile_exchange`]).
    Exchange,
    /// A judge's, endpoint's or handler's verdict ([`Check::judged`]).
    Judged,
    /// Evals only: about which validators fired ([`Check::eval`]).
    EvalOnly,
}

impl Kind {
    /// Scanned for spans: the checks that may redact, take `normalize:` and read reasoning.
    pub(super) fn streamed(self) -> bool {
        match self {
            Kind::Streamed => true,
            Kind::Answer | Kind::Whole | Kind::Exchange | Kind::Judged | Kind::EvalOnly => false,
        }
    }
}

/// A validator's check, its params validated: what it reads and how it compiles. Every step
/// has a default that adds nothing, so a check implements the ones of its [`Kind`].
pub(super) trait Check: Debug + Send + Sync {
    fn kind(&self) -> Kind;

    /// Its length limits and whole-text checks on one target's text.
    fn compile_text(&self, _owner: u32, _checks: &mut TargetChecks) -> Result<(), String> {
        Ok(())
    }

    /// Its rules of the scan set of one target and `normalize:` view (`rules.owner`).
    fn compile_scan(&self, _rules: &mut ScanRules) -> Result<(), String> {
        Ok(())
    }

    /// Its checks of the exchange (tool calls, budgets, judged checks).
    fn compile_exchange(&self, _owner: u32, _v: &Validator, _policy: &mut Policy) {}

    /// The judged check, for a [`Kind::Judged`] check.
    fn judged(&self) -> Option<&Arc<JudgedCheck>> {
        None
    }

    /// How an eval runs it, when not as a one-validator policy over the recorded turn.
    fn eval(&self) -> Option<EvalCheck> {
        None
    }

    /// PromptKit's assertion rule, where an eval of the answer (direction `output`) reads the
    /// transcript rather than what the validator reads ([`crate::policy::transcript`]).
    fn transcript(&self) -> Option<TranscriptRule> {
        None
    }
}

/// What a validator checks, with its params validated.
#[derive(Debug, Clone)]
pub struct CheckDef(Arc<dyn Check>);

impl CheckDef {
    pub(super) fn new(check: impl Check + 'static) -> CheckDef {
        CheckDef(Arc::new(check))
    }

    pub(super) fn check(&self) -> &dyn Check {
        &*self.0
    }

    pub(super) fn kind(&self) -> Kind {
        self.0.kind()
    }

    pub(super) fn judged(&self) -> Option<&Arc<JudgedCheck>> {
        self.0.judged()
    }

    /// A check on the whole text (input, output or both): `check` itself, compiled as is.
    fn whole(check: impl WholeText + Clone + 'static) -> CheckDef {
        CheckDef::new(Whole(check))
    }
}

/// A [`Kind::Whole`] check that compiles into itself.
#[derive(Debug)]
struct Whole<T>(T);

impl<T: WholeText + Clone + 'static> Check for Whole<T> {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(self.0.clone())));
        Ok(())
    }
}

/// Patterns as given, none of them empty.
fn non_empty_patterns(patterns: Vec<String>) -> Result<Vec<String>, String> {
    match patterns.iter().position(String::is_empty) {
        Some(i) => Err(format!("param 'patterns': entry {i} is empty")),
        None => Ok(patterns),
    }
}
