//! What a metric reads from a case, and the view of a case the judged metrics and trajectory
//! graders score (a leaf: `cases.rs` builds the view, `judged.rs` and `trajectory.rs` read it).

/// What a metric reads from a case besides the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// `expected_output` / `ground_truth`.
    GroundTruth,
    /// `context` / `retrieval_context`.
    Context,
    /// `actual_output` (or a recorded answer's text).
    Output,
    /// The tools called: `tool_calls`, or a whole recorded `response`.
    ToolCalls,
    /// `expected_tools`, the golden path.
    ExpectedTools,
    /// `trajectory.steps`, `.tokens` (else a whole response's usage), `.duration_ms`,
    /// `.cost_usd`.
    Steps,
    Tokens,
    Duration,
    Cost,
    /// `variant_of`: the case it is a variant of.
    Variant,
}

impl Needs {
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::GroundTruth => "expected_output (or ground_truth)",
            Needs::Context => "context (or retrieval_context)",
            Needs::Output => "actual_output",
            Needs::ToolCalls => "tool_calls (or a whole recorded response)",
            Needs::ExpectedTools => "expected_tools",
            Needs::Steps => "trajectory.steps",
            Needs::Tokens => "trajectory.tokens (or a response with usage)",
            Needs::Duration => "trajectory.duration_ms",
            Needs::Cost => "trajectory.cost_usd",
            Needs::Variant => "variant_of",
        }
    }
}

/// A tool call, recorded or expected: its name and, when given, its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<serde_json::Value>,
}

/// A case's recorded totals.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trajectory {
    pub steps: Option<u64>,
    pub tokens: Option<u64>,
    pub duration_ms: Option<u64>,
    pub cost_usd: Option<f64>,
}

/// A case as the judged metrics and trajectory graders read it.
#[derive(Debug, Clone, Copy)]
pub struct CaseView<'a> {
    pub id: &'a str,
    /// The input as the reports show it: the text, or the messages or request as JSON.
    pub input: &'a str,
    pub output: Option<&'a str>,
    pub expected: Option<&'a str>,
    pub context: Option<&'a [String]>,
    pub tool_calls: Option<&'a [ToolCall]>,
    pub expected_tools: Option<&'a [ToolCall]>,
    pub trajectory: &'a Trajectory,
}
