//! The validator types: how a pack's validators are described once loaded (direction, mode,
//! thresholds, what each checks), and what checking reports (phases, findings, errors).

/// The texts a scan set is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Input,
    Output,
    Reasoning,
}

/// A pack error: where (file, validator, param) and what.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {location}{message}")]
pub struct PackError {
    pub file: String,
    /// `validators[2] (type: regex): param 'pattern': ` or empty for file-level errors.
    pub location: String,
    pub message: String,
}

/// Which text a validator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The request's messages.
    Input,
    /// The response (text, refusals, tool-call arguments) and its reasoning, which the client
    /// receives too (see [`Validator::reasoning`]). PromptKit's default.
    Output,
    /// Input and output (reasoning included, as for `Output`).
    Both,
    /// Reasoning / thinking text of the response only.
    Reasoning,
    /// Input, output and reasoning.
    All,
}

impl Direction {
    /// The texts the direction names. Reasoning is part of what a client receives, so every
    /// direction but `Input` names it; whether a validator reads it also depends on its check
    /// and its `reasoning` param ([`Validator::covers`]).
    pub(super) fn covers(self, target: Target) -> bool {
        matches!(
            (self, target),
            (Direction::All, _)
                | (Direction::Input | Direction::Both, Target::Input)
                | (Direction::Output | Direction::Both, Target::Output)
                | (
                    Direction::Output | Direction::Both | Direction::Reasoning,
                    Target::Reasoning
                )
        )
    }
}

/// What happens when a validator fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Block the request or response.
    Enforce,
    /// Count and log only: the shadow mode for trying a policy before turning it on.
    Monitor,
    /// Replace each match with a mask and let the rest through (content checks and `pii`).
    Redact,
}

/// PromptKit score thresholds. Deterministic checks score 1 (pass) or 0 (violation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Threshold {
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
}

impl Threshold {
    pub fn passes(&self, score: f64) -> bool {
        match (self.min_score, self.max_score) {
            (None, None) => score >= 1.0,
            (min, max) => min.is_none_or(|m| score >= m) && max.is_none_or(|m| score <= m),
        }
    }
}

/// A validator of a pack, as loaded.
#[derive(Debug, Clone)]
pub struct Validator {
    /// The metrics/log label: the validator's `id`, else its type as written.
    pub label: String,
    pub id: Option<String>,
    pub type_name: String,
    pub canonical: &'static str,
    pub message: Option<String>,
    pub direction: Direction,
    /// The view word, phrase, pattern and PII checks match on (`normalize:`).
    pub normalize: crate::scan::Normalize,
    /// The validator checks the response's reasoning/thinking text: the streamed text checks
    /// (words, phrases, forbidden regexes, PII) whose direction names it, unless the pack says
    /// `reasoning: skip`. Whole-text, length, judged and tool checks never read reasoning.
    pub reasoning: bool,
    pub mode: Mode,
    pub threshold: Threshold,
    /// What a check that cannot decide (missing usage, arguments that are not JSON) does.
    pub on_error: OnError,
    /// Hold the whole response until every check has passed (`buffer: true`).
    pub buffer: bool,
    /// `mode: redact`: the replacement text (default `[REDACTED:<kind>]`).
    pub mask: Option<String>,
    pub file: String,
    pub index: usize,
}

impl Validator {
    /// Whether the validator checks `target`'s text: the input and answer its direction names,
    /// and reasoning when [`Validator::reasoning`].
    pub(super) fn covers(&self, target: Target) -> bool {
        match target {
            Target::Reasoning => self.reasoning,
            Target::Input | Target::Output => self.direction.covers(target),
        }
    }
}

/// Fail-closed (a check that errs counts as violated) or fail-open (it counts as passed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    #[default]
    FailClosed,
    FailOpen,
}

/// The hook phase a verdict came from; also the `phase` metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// BeforeCall, on the request.
    Input,
    /// OnChunk, while streaming.
    Stream,
    /// AfterCall, on the complete response.
    Response,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Input => "input",
            Phase::Stream => "stream",
            Phase::Response => "response",
        }
    }
}

/// A validator fired. Never carries the matched text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub validator: u32,
    pub phase: Phase,
    /// A message from the rule that fired (a `tool_anti_pattern` pattern's `message`), used
    /// when the validator has none of its own.
    pub note: Option<String>,
    /// Which rule of the validator fired, where it has kinds (a `pii` kind).
    pub rule: Option<&'static str>,
    /// The matched text, only when asked for (`audit.include_match`) and known.
    pub matched: Option<String>,
}

/// Error building a policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Pack(#[from] PackError),
    #[error("{file}: validators[{index}] (type: {type_name}): {message}")]
    Compile {
        file: String,
        index: usize,
        type_name: String,
        message: String,
    },
}
