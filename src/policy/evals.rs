//! A pack's `evals:` (PromptKit's production evals): the same check types as validators,
//! observed off the request path on a sample of turns, their scores exported as metrics and
//! audit lines. An eval never changes a response. Here is what a pack says about them,
//! validated at load; `crate::evals` runs them.

use super::types::{Threshold, Validator};
use super::Policy;
use std::sync::Arc;

/// One eval of a pack.
#[derive(Debug, Clone)]
pub struct Eval {
    /// `id` (required, unique in a policy): the `eval` label of its metrics.
    pub id: String,
    pub trigger: Trigger,
    /// Which turns count (`when:`); empty: all.
    pub when: When,
    /// Its own metric (PromptKit's `metric:`), besides guardwire's score histogram.
    pub metric: Option<EvalMetric>,
    /// Pass/fail of a score (`threshold:`, else the params' `min_score`/`max_score`).
    pub threshold: Threshold,
    /// `threshold.passed: true|false`: the result must have passed (or failed).
    pub expect_passed: Option<bool>,
    /// The check as a validator (for its params, direction and error policy).
    pub validator: Validator,
    pub check: EvalCheck,
}

/// When an eval runs, of the turns a proxy sees (one turn: one request and its answer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    EveryTurn,
    /// `on_workflow_step`: a turn whose answer calls `workflow__transition`.
    WorkflowStep,
    /// A share of turns, decided by hashing the session and turn (the same turn always
    /// decides the same way).
    SampleTurns(f64),
    /// A share of sessions, decided by hashing the session: run once when a sampled session
    /// ends (PromptKit runs it with the session evals).
    SampleSessions(f64),
    /// Once per session, when it ends: the client ends it, or it idles
    /// (`evals.session_idle_ms`).
    SessionComplete,
}

impl Trigger {
    /// Runs when a session ends, not on its turns.
    pub fn at_session_end(self) -> bool {
        matches!(self, Trigger::SampleSessions(_) | Trigger::SessionComplete)
    }
}

impl Eval {
    /// Reads the session's spend: `cost_budget` sums it over the session's turns, as
    /// PromptKit sums the conversation's messages' costs.
    pub fn reads_session_spend(&self) -> bool {
        self.validator.canonical == "cost_budget"
    }
}

impl Policy {
    /// Its evals need the session's turns kept: some run when a session ends, or read the
    /// session's spend.
    pub fn tracks_eval_sessions(&self) -> bool {
        self.evals()
            .iter()
            .any(|e| e.trigger.at_session_end() || e.reads_session_spend())
    }
}

/// `when:`: preconditions on the session's tool calls (the request's history and the
/// answer's), all of which must hold; otherwise the eval skips the turn.
#[derive(Debug, Clone, Default)]
pub struct When {
    /// Some call is of this tool.
    pub tool_called: Option<String>,
    /// Some call's tool name matches this regex.
    pub tool_called_pattern: Option<regex_automata::meta::Regex>,
    /// There is a call at all.
    pub any_tool_called: bool,
    /// There are at least this many calls.
    pub min_tool_calls: u64,
}

impl When {
    /// Whether the turn whose session made calls of these tools qualifies.
    pub fn holds<'a>(&self, mut names: impl Iterator<Item = &'a str> + Clone) -> bool {
        (!self.any_tool_called || names.clone().next().is_some())
            && self
                .tool_called
                .as_deref()
                .is_none_or(|t| names.clone().any(|n| n == t))
            && self
                .tool_called_pattern
                .as_ref()
                .is_none_or(|re| names.clone().any(|n| re.is_match(n)))
            && names.by_ref().count() as u64 >= self.min_tool_calls
    }
}

/// PromptKit's `metric:`: a Prometheus metric of its own per eval.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalMetric {
    pub name: String,
    pub kind: MetricKind,
    /// Constant labels (`labels:`), sorted by name.
    pub labels: Vec<(String, String)>,
}

/// PromptKit's metric types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// The last score.
    Gauge,
    /// Counts scored results (+1 each, pass or fail, as PromptKit).
    Counter,
    /// Every score.
    Histogram,
    /// 1 when the last result passed, else 0.
    Boolean,
}

impl MetricKind {
    /// The type's name in packs.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Gauge => "gauge",
            MetricKind::Counter => "counter",
            MetricKind::Histogram => "histogram",
            MetricKind::Boolean => "boolean",
        }
    }
}

/// How an eval's score is found.
#[derive(Debug, Clone)]
pub enum EvalCheck {
    /// A judged check: the judge's (endpoint's, handler's) score.
    Judged(Arc<super::judged::JudgedCheck>),
    /// A deterministic check, compiled as a one-validator policy and run over the recorded
    /// turn: 1 when it passes, 0 when it fires.
    Replay(Arc<Policy>),
    /// `guardrail_triggered`: whether the named validator fired on this exchange (on the
    /// request: `on_input: Some(true)`; the answer: `Some(false)`; either: `None`).
    GuardrailTriggered {
        guardrail: String,
        should_trigger: bool,
        on_input: Option<bool>,
    },
    /// `bleu`, `rouge`, `meteor`: the answer's score against a reference.
    Reference(Arc<ReferenceCheck>),
    /// PromptKit's assertion rule over the transcript (every assistant message and tool call
    /// of the conversation with the answer), for the checks whose eval reads more than the
    /// validator does: see [`super::transcript`]. With the one-validator policy a turn of an
    /// agent route is replayed through instead (an MCP turn is a tool call: its output is
    /// the call, which no assistant message holds).
    Transcript(Arc<super::transcript::TranscriptRule>, Arc<Policy>),
}

/// A reference text metric as an eval: the metric, set up (METEOR with its WordNet loaded),
/// and where the reference comes from.
#[derive(Debug, Clone)]
pub struct ReferenceCheck {
    pub metric: crate::scoring::text::TextMetric,
    pub references: References,
}

/// Where a reference metric's references come from: a live turn has no expected output.
#[derive(Debug, Clone, PartialEq)]
pub enum References {
    /// The pack's own (`reference`: one text or a list).
    Fixed(Vec<String>),
    /// The request's messages `context_tools`, `context_roles`, `context_names` select, each
    /// one reference.
    Request(super::judged::ContextSource),
}

impl Eval {
    /// Whether a score passes this eval's threshold.
    pub fn passes(&self, score: f64) -> bool {
        let passed = self.threshold.passes(score);
        match self.expect_passed {
            Some(want) => passed == want,
            None => passed,
        }
    }
}

/// An eval's own fields.
#[derive(Debug, Clone)]
pub struct EvalHead {
    pub id: String,
    pub trigger: Trigger,
    pub when: When,
    pub metric: Option<EvalMetric>,
    pub threshold: Option<Threshold>,
    pub expect_passed: Option<bool>,
}
