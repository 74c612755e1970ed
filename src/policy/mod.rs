//! Policies: the compiled form of the packs a route enforces, and the three hook phases.
//!
//! - **BeforeCall** ([`Policy::before_call`]) checks the request's [`Conversation`] before the
//!   provider is called.
//! - **OnChunk** ([`StreamGuard::on_chunk`]) checks each [`Delta`] as it streams, incrementally.
//! - **AfterCall** ([`StreamGuard::after_call`]) ends every channel's scan and runs the checks
//!   that need the whole response.
//!
//! Checks know nothing of HTTP or wire formats; a non-streamed response goes through the same
//! OnChunk + AfterCall path as one big delta per channel, so both give the same verdict.

pub mod catalog;
pub mod pack;

use crate::delta::{Channel, Conversation, Delta};
use crate::scan::{
    build_forbidden, Hit, LiteralMatcher, LiteralRule, RegexRule, ScanSet, ScanState,
};
use regex_syntax::hir::Hir;
use std::path::Path;
use std::sync::Arc;

pub use pack::PackError;

/// Which text a validator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The request's messages.
    Input,
    /// The response (text, refusals, tool-call arguments). PromptKit's default.
    Output,
    Both,
    /// Reasoning / thinking text of the response only.
    Reasoning,
    /// Input, output and reasoning.
    All,
}

impl Direction {
    fn covers(self, target: Target) -> bool {
        matches!(
            (self, target),
            (Direction::All, _)
                | (Direction::Input | Direction::Both, Target::Input)
                | (Direction::Output | Direction::Both, Target::Output)
                | (Direction::Reasoning, Target::Reasoning)
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
    pub mode: Mode,
    pub threshold: Threshold,
    pub file: String,
    pub index: usize,
}

/// What a validator checks, with its params validated.
#[derive(Debug, Clone)]
pub enum CheckDef {
    ContentExcludes {
        patterns: Vec<String>,
        word_boundary: bool,
    },
    /// `regex` with `expect_match: false`: streamed, incremental.
    ForbidRegex {
        pattern: String,
        hir: Hir,
    },
    /// `regex` with `expect_match: true`: the whole text must match.
    RequireRegex {
        pattern: String,
        hir: Hir,
    },
    MaxLength {
        max_chars: u64,
    },
    /// `contains` (all patterns) / `contains_any` (one of them), case-insensitive, whole text.
    Contains {
        patterns: Vec<String>,
        any: bool,
    },
    MinLength {
        min_chars: u64,
    },
    JsonValid,
    /// Tool checks on the response: see [`ToolCheck`].
    Tool(ToolCheck),
}

/// Checks on the tool calls of one response (per choice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCheck {
    /// `tools_called`: each tool called at least `min_calls` times (AfterCall).
    Called { names: Vec<String>, min_calls: u64 },
    /// `tools_not_called`: blocks at the tool call's start, before any argument is released.
    NotCalled { names: Vec<String> },
    /// `tool_call_count`: calls (of `tool`, or of any tool): `max` is enforced as calls start,
    /// `min` at the end.
    Count {
        tool: Option<String>,
        min: Option<u64>,
        max: Option<u64>,
    },
}

/// A check on a whole text (AfterCall for the response; the joined request text for input).
#[derive(Debug)]
enum WholeCheck {
    Regex(regex_automata::meta::Regex),
    /// Lowercased patterns; `any`: one suffices.
    Contains {
        patterns: Vec<String>,
        any: bool,
    },
    MinChars(u64),
    JsonValid,
}

impl WholeCheck {
    fn passes(&self, text: &str, lower: &mut Option<String>) -> bool {
        match self {
            WholeCheck::Regex(re) => re.is_match(text),
            WholeCheck::Contains { patterns, any } => {
                let lower = lower.get_or_insert_with(|| text.to_lowercase());
                let mut found = patterns.iter().map(|p| lower.contains(p.as_str()));
                if *any {
                    found.any(|f| f)
                } else {
                    found.all(|f| f)
                }
            }
            WholeCheck::MinChars(min) => crate::scan::text::char_count(text) >= *min,
            WholeCheck::JsonValid => {
                serde_json::from_str::<serde::de::IgnoredAny>(text.trim()).is_ok()
            }
        }
    }
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
}

/// The texts a scan set is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Input,
    Output,
    Reasoning,
}

const TARGETS: [Target; 3] = [Target::Input, Target::Output, Target::Reasoning];

#[derive(Debug, Default)]
struct TargetChecks {
    scan: ScanSet,
    /// (validator, max characters) — output: per choice over content and refusal; input: per message.
    max_chars: Vec<(u32, u64)>,
    /// (validator, check) on the whole text.
    whole: Vec<(u32, WholeCheck)>,
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

/// Every validator of a route's packs, compiled: one literal automaton and one regex DFA per
/// target, shared (read-only) by all requests.
#[derive(Debug, Default)]
pub struct Policy {
    validators: Vec<Validator>,
    targets: [TargetChecks; 3],
    /// (validator, check) on the response's tool calls.
    tools: Vec<(u32, ToolCheck)>,
    packs: Vec<String>,
}

impl Policy {
    /// Loads and compiles the given pack files, in order.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Policy, PolicyError> {
        let mut defs = Vec::new();
        for p in paths {
            defs.extend(pack::load_pack(p.as_ref())?);
        }
        let mut policy = Policy::compile(defs)?;
        policy.packs = paths
            .iter()
            .map(|p| p.as_ref().display().to_string())
            .collect();
        Ok(policy)
    }

    /// Compiles validators (from [`pack::parse_pack`]) into a policy.
    pub fn compile(defs: Vec<(Validator, CheckDef)>) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        for (t, target) in TARGETS.iter().enumerate() {
            let mut literals = Vec::new();
            let mut regexes = Vec::new();
            let mut regex_owners = Vec::new();
            let checks = &mut policy.targets[t];
            for (i, (v, def)) in defs.iter().enumerate() {
                if !v.direction.covers(*target) {
                    continue;
                }
                let owner = i as u32;
                let fail = |message: String| PolicyError::Compile {
                    file: v.file.clone(),
                    index: v.index,
                    type_name: v.type_name.clone(),
                    message,
                };
                match def {
                    CheckDef::ContentExcludes {
                        patterns,
                        word_boundary,
                    } => literals.extend(patterns.iter().map(|p| LiteralRule {
                        pattern: p.clone(),
                        owner,
                        word_boundary: *word_boundary,
                    })),
                    CheckDef::ForbidRegex { hir, .. } => {
                        regexes.push(RegexRule {
                            hir: hir.clone(),
                            owner,
                        });
                        regex_owners.push(i);
                    }
                    CheckDef::RequireRegex { hir, .. } => {
                        let re = regex_automata::meta::Regex::builder()
                            .build_from_hir(hir)
                            .map_err(|e| fail(format!("param 'pattern': {e}")))?;
                        checks.whole.push((owner, WholeCheck::Regex(re)));
                    }
                    CheckDef::MaxLength { max_chars } => checks.max_chars.push((owner, *max_chars)),
                    CheckDef::Contains { patterns, any } => checks.whole.push((
                        owner,
                        WholeCheck::Contains {
                            patterns: patterns.iter().map(|p| p.to_lowercase()).collect(),
                            any: *any,
                        },
                    )),
                    CheckDef::MinLength { min_chars } => {
                        checks.whole.push((owner, WholeCheck::MinChars(*min_chars)))
                    }
                    CheckDef::JsonValid => checks.whole.push((owner, WholeCheck::JsonValid)),
                    // Tool calls are not text: collected once, below.
                    CheckDef::Tool(_) => {}
                }
            }
            let literals = if literals.is_empty() {
                None
            } else {
                Some(
                    LiteralMatcher::new(&literals).map_err(|e| PolicyError::Compile {
                        file: "(packs)".into(),
                        index: 0,
                        type_name: "content_excludes".into(),
                        message: e.to_string(),
                    })?,
                )
            };
            let regexes = build_forbidden(&regexes).map_err(|(i, e)| {
                let (v, _) = &defs[regex_owners[i]];
                PolicyError::Compile {
                    file: v.file.clone(),
                    index: v.index,
                    type_name: v.type_name.clone(),
                    message: format!("param 'pattern': cannot be scanned incrementally: {e}"),
                }
            })?;
            checks.scan = ScanSet::new(literals, regexes, None);
        }
        policy.tools = defs
            .iter()
            .enumerate()
            .filter_map(|(i, (_, def))| match def {
                CheckDef::Tool(t) => Some((i as u32, t.clone())),
                _ => None,
            })
            .collect();
        policy.validators = defs.into_iter().map(|(v, _)| v).collect();
        Ok(policy)
    }

    pub fn validators(&self) -> &[Validator] {
        &self.validators
    }

    pub fn validator(&self, index: u32) -> &Validator {
        &self.validators[index as usize]
    }

    /// The pack files this policy was loaded from.
    pub fn packs(&self) -> &[String] {
        &self.packs
    }

    fn checks(&self, target: Target) -> &TargetChecks {
        &self.targets[target as usize]
    }

    /// Heap bytes of the compiled automata.
    pub fn memory_usage(&self) -> usize {
        self.targets.iter().map(|t| t.scan.memory_usage()).sum()
    }

    /// The block message for a validator: its own `message`, else a generic one naming it.
    pub fn message(&self, validator: u32) -> String {
        let v = self.validator(validator);
        v.message
            .clone()
            .unwrap_or_else(|| format!("blocked by guardrail '{}'", v.label))
    }

    /// BeforeCall: checks every text of the request (each message part and each tool-call's
    /// arguments in the history, scanned separately). `Err` carries the first enforcing
    /// violation; monitor-mode findings are appended to `findings`.
    pub fn before_call(
        &self,
        conversation: &Conversation,
        findings: &mut Vec<Finding>,
    ) -> Result<(), Finding> {
        let checks = self.checks(Target::Input);
        let mut reported = Reported::default();
        let mut hits = Vec::new();
        let mut all_text = String::new();
        let texts = conversation.messages.iter().flat_map(|m| {
            m.text
                .iter()
                .map(String::as_str)
                .chain(m.tool_calls.iter().map(|c| c.arguments.as_str()))
        });
        for text in texts {
            if !checks.scan.is_empty() {
                let mut st = checks.scan.start();
                checks.scan.feed(&mut st, text, &mut hits);
                checks.scan.finish(&mut st, &mut hits);
            }
            let chars = crate::scan::text::char_count(text);
            for &(owner, max) in &checks.max_chars {
                if chars > max {
                    hits.push(whole_hit(owner));
                }
            }
            if !checks.whole.is_empty() {
                all_text.push_str(text);
                all_text.push('\n');
            }
        }
        let mut lower = None;
        for (owner, check) in &checks.whole {
            if !check.passes(&all_text, &mut lower) {
                hits.push(whole_hit(*owner));
            }
        }
        self.judge(&mut hits, Phase::Input, &mut reported, findings)
    }

    /// Turns raw hits into a verdict: the first enforcing one blocks; monitor ones are reported
    /// once per validator per exchange.
    fn judge(
        &self,
        hits: &mut Vec<Hit>,
        phase: Phase,
        reported: &mut Reported,
        findings: &mut Vec<Finding>,
    ) -> Result<(), Finding> {
        for hit in hits.drain(..) {
            let finding = Finding {
                validator: hit.owner,
                phase,
            };
            match self.validator(hit.owner).mode {
                Mode::Enforce => return Err(finding),
                Mode::Monitor => {
                    if reported.insert(hit.owner) {
                        findings.push(finding);
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts the OnChunk/AfterCall state of one response. `streaming` decides the phase its
    /// incremental findings are reported under: `stream`, or `response` for a whole response.
    pub fn stream_guard(self: &Arc<Self>, streaming: bool) -> StreamGuard {
        StreamGuard {
            policy: Arc::clone(self),
            chunk_phase: if streaming {
                Phase::Stream
            } else {
                Phase::Response
            },
            channels: Vec::new(),
            choices: Vec::new(),
            tool_calls: Vec::new(),
            hits: Vec::new(),
            reported: Reported::default(),
            findings: Vec::new(),
        }
    }

    /// True when AfterCall needs the response text kept (whole-text checks exist).
    fn keeps_text(&self, target: Target) -> bool {
        !self.checks(target).whole.is_empty()
    }
}

/// A violation of a check on something whole (a text, a count): no span to point at.
fn whole_hit(owner: u32) -> Hit {
    Hit {
        owner,
        start: None,
        end: 0,
        rule: None,
    }
}

/// Validators already reported in monitor mode for this exchange.
#[derive(Debug, Default)]
struct Reported(Vec<u32>);

impl Reported {
    fn insert(&mut self, v: u32) -> bool {
        if self.0.contains(&v) {
            false
        } else {
            self.0.push(v);
            true
        }
    }
}

/// Identifies one text channel of a response for the hold-back: an index into the guard's
/// channel table.
pub type ChannelId = usize;

#[derive(Debug)]
struct ChannelState {
    choice: u32,
    channel: Channel,
    target: Target,
    scan: ScanState,
}

#[derive(Debug, Default)]
struct ChoiceState {
    choice: u32,
    output_chars: u64,
    /// Output text, kept only when a whole-text check needs it.
    text: String,
}

/// The per-response state of OnChunk and AfterCall: scanner states per channel, counters per
/// choice. Small (a few words per channel) and owned by the stream, so no locks.
#[derive(Debug)]
pub struct StreamGuard {
    policy: Arc<Policy>,
    chunk_phase: Phase,
    channels: Vec<ChannelState>,
    choices: Vec<ChoiceState>,
    /// (choice, tool name) of every tool call started so far.
    tool_calls: Vec<(u32, String)>,
    hits: Vec<Hit>,
    reported: Reported,
    /// Monitor-mode findings not yet collected by the caller.
    pub findings: Vec<Finding>,
}

impl StreamGuard {
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// OnChunk: checks one delta. For text it returns the channel and the channel position after
    /// it, so the caller can hold the frame until [`StreamGuard::safe_pos`] passes that position.
    pub fn on_chunk(&mut self, delta: &Delta<'_>) -> Result<Option<(ChannelId, u64)>, Finding> {
        let (choice, channel, text) = match delta {
            Delta::Text {
                choice,
                channel,
                text,
            } => (choice, channel, text),
            Delta::ToolCallStart { choice, name, .. } => {
                self.on_tool_call(*choice, name);
                self.policy.judge(
                    &mut self.hits,
                    self.chunk_phase,
                    &mut self.reported,
                    &mut self.findings,
                )?;
                return Ok(None);
            }
            _ => return Ok(None),
        };
        let id = self.channel(*choice, *channel);
        let policy = &*self.policy;
        let ch = &mut self.channels[id];
        let checks = policy.checks(ch.target);
        checks.scan.feed(&mut ch.scan, text, &mut self.hits);
        let pos = ch.scan.pos();
        if ch.target == Target::Output && matches!(channel, Channel::Content | Channel::Refusal) {
            let keep = policy.keeps_text(Target::Output);
            let c = choice_state(&mut self.choices, *choice);
            c.output_chars += crate::scan::text::char_count(text);
            if keep {
                c.text.push_str(text);
            }
            for &(owner, max) in &checks.max_chars {
                if c.output_chars > max {
                    self.hits.push(Hit {
                        owner,
                        start: None,
                        end: pos,
                        rule: None,
                    });
                }
            }
        }
        policy.judge(
            &mut self.hits,
            self.chunk_phase,
            &mut self.reported,
            &mut self.findings,
        )?;
        Ok(Some((id, pos)))
    }

    /// A tool call starts: `tools_not_called` and `tool_call_count` maxima fire here, before
    /// any of its arguments is released.
    fn on_tool_call(&mut self, choice: u32, name: &str) {
        self.tool_calls.push((choice, name.to_owned()));
        for (owner, check) in &self.policy.tools {
            let violated = match check {
                ToolCheck::NotCalled { names } => names.iter().any(|n| n == name),
                ToolCheck::Count {
                    tool,
                    max: Some(max),
                    ..
                } => self.calls(choice, tool.as_deref()) > *max,
                _ => false,
            };
            if violated {
                self.hits.push(whole_hit(*owner));
            }
        }
    }

    /// Tool calls of `choice` (to `tool`, or to any tool).
    fn calls(&self, choice: u32, tool: Option<&str>) -> u64 {
        self.tool_calls
            .iter()
            .filter(|(c, n)| *c == choice && tool.is_none_or(|t| t == n))
            .count() as u64
    }

    /// Text of `channel` before this position can no longer be part of a violation.
    pub fn safe_pos(&self, channel: ChannelId) -> u64 {
        let ch = &self.channels[channel];
        self.policy.checks(ch.target).scan.safe_pos(&ch.scan)
    }

    /// AfterCall: ends every channel's scan (matches waiting on what follows them are decided)
    /// and runs the whole-response checks.
    pub fn after_call(&mut self) -> Result<(), Finding> {
        let policy = &*self.policy;
        for ch in &mut self.channels {
            policy
                .checks(ch.target)
                .scan
                .finish(&mut ch.scan, &mut self.hits);
        }
        policy.judge(
            &mut self.hits,
            self.chunk_phase,
            &mut self.reported,
            &mut self.findings,
        )?;
        let output = policy.checks(Target::Output);
        // Every choice that produced anything (choice 0 for an empty answer) is judged.
        for &(choice, _) in &self.tool_calls {
            choice_state(&mut self.choices, choice);
        }
        if self.choices.is_empty() {
            self.choices.push(ChoiceState::default());
        }
        for c in &self.choices {
            let mut lower = None;
            for (owner, check) in &output.whole {
                if !check.passes(&c.text, &mut lower) {
                    self.hits.push(whole_hit(*owner));
                }
            }
            for (owner, check) in &policy.tools {
                let violated = match check {
                    ToolCheck::Called { names, min_calls } => names
                        .iter()
                        .any(|n| self.calls(c.choice, Some(n)) < *min_calls),
                    ToolCheck::Count {
                        tool,
                        min: Some(min),
                        ..
                    } => self.calls(c.choice, tool.as_deref()) < *min,
                    _ => false,
                };
                if violated {
                    self.hits.push(whole_hit(*owner));
                }
            }
        }
        policy.judge(
            &mut self.hits,
            Phase::Response,
            &mut self.reported,
            &mut self.findings,
        )
    }

    fn channel(&mut self, choice: u32, channel: Channel) -> ChannelId {
        if let Some(i) = self
            .channels
            .iter()
            .position(|c| c.choice == choice && c.channel == channel)
        {
            return i;
        }
        let target = if channel.is_output() {
            Target::Output
        } else {
            Target::Reasoning
        };
        self.channels.push(ChannelState {
            choice,
            channel,
            target,
            scan: self.policy.checks(target).scan.start(),
        });
        self.channels.len() - 1
    }
}

fn choice_state(choices: &mut Vec<ChoiceState>, choice: u32) -> &mut ChoiceState {
    let i = match choices.iter().position(|c| c.choice == choice) {
        Some(i) => i,
        None => {
            choices.push(ChoiceState {
                choice,
                ..ChoiceState::default()
            });
            choices.len() - 1
        }
    };
    &mut choices[i]
}

#[cfg(test)]
mod tests;
