//! What a live run observed of one case (`--live`, `--scenario`): the answer as the client
//! received it through the guard, the guard's verdicts, usage, tool calls, time and attempts.
//! A leaf: the cases' results and the reports read it; `live.rs` fills it.

use serde_json::{json, Value};

/// One verdict of the guard on the exchange, as its audit line says it (never the matched
/// text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardVerdict {
    /// The validator's label (`id`, else `type#index`).
    pub validator: String,
    /// Its check type (canonical name).
    pub check: String,
    /// `input` or `output` (the phase the finding came in).
    pub phase: String,
    /// `enforce` (blocked), `monitor` or `redact`.
    pub mode: String,
}

/// One case (or one scenario turn) run live.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Requests sent (1 + retries).
    pub attempts: u32,
    /// From the first attempt's start to the last one's end, retry waits included.
    pub duration_ms: f64,
    /// The last attempt's HTTP status (`None`: no answer, a connection error or a timeout).
    pub status: Option<u16>,
    /// The answer came as a stream of events.
    pub streamed: bool,
    /// Usage as the provider reported it.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// The tool calls the answer made, by name, in order.
    pub tool_calls: Vec<String>,
    /// Every verdict of the guard on the last attempt.
    pub verdicts: Vec<GuardVerdict>,
    /// Why the case has no complete answer besides a block (upstream error, timeout, a stream
    /// cut short), after the retries.
    pub error: Option<String>,
    /// A scenario turn's assertions, in the file's order.
    pub assertions: Vec<AssertionResult>,
}

/// One assertion of a scenario turn.
#[derive(Debug, Clone)]
pub struct AssertionResult {
    /// The type as written (`content_includes`).
    pub check: String,
    pub passed: bool,
    /// The assertion's `message` (what it expects), and for a failure why.
    pub message: Option<String>,
}

impl Observed {
    /// The enforced verdict that blocked the exchange, if one did.
    pub fn blocked(&self) -> Option<&GuardVerdict> {
        self.verdicts.iter().find(|v| v.mode == "enforce")
    }

    /// For the JSON report.
    pub fn to_json(&self) -> Value {
        let verdicts: Vec<Value> = self
            .verdicts
            .iter()
            .map(|v| json!({"validator": v.validator, "type": v.check, "phase": v.phase, "mode": v.mode}))
            .collect();
        json!({
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
            "status": self.status,
            "streamed": self.streamed,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tool_calls": self.tool_calls,
            "verdicts": verdicts,
            "blocked": self.blocked().is_some(),
            "error": self.error,
            "assertions": self.assertions.iter().map(|a| json!({"type": a.check, "passed": a.passed, "message": a.message})).collect::<Vec<_>>(),
        })
    }
}
