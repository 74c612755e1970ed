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

mod cache;
pub mod catalog;
pub mod counters;
pub mod json_args;
pub mod pack;
pub mod structured;
pub mod tools;

use crate::config::Price;
use crate::delta::{Channel, Conversation, Delta};
use crate::scan::{
    build_forbidden, Hit, LiteralMatcher, LiteralRule, PiiKind, PiiMatcher, PiiRule, RegexRule,
    ScanSet, ScanState, SpanFinder,
};
use counters::{SentenceState, TokenCounter, TokenState};
use json_args::FieldWatcher;
use regex_syntax::hir::Hir;
use std::path::Path;
use std::sync::Arc;
use structured::{PathCheck, SchemaCheck};
use tools::{CallRecord, Outcome, ToolHistory};
pub use tools::{Scope, ToolCheck};

pub use cache::{PolicyCache, PolicyLoader};
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
    /// Replace each match with a mask and let the rest through (content checks and `pii`).
    Redact,
}

/// Adds `new` to `list`, which stays sorted by channel and start with no two spans of a channel
/// overlapping: an overlapping span is merged into the earlier one (whose mask stays). Masking
/// walks the list in this order, and hits arrive in no particular order (each automaton reports
/// its own).
fn insert_redaction(list: &mut Vec<Redaction>, new: Redaction) {
    let at = list.partition_point(|r| (r.channel, r.start) <= (new.channel, new.start));
    list.insert(at, new);
    // Merge neighbours that now overlap, from just before the new span on.
    let mut i = at.saturating_sub(1);
    while i + 1 < list.len() {
        let (a, b) = (&list[i], &list[i + 1]);
        if a.channel == b.channel && b.start <= a.end {
            let end = a.end.max(b.end);
            list[i].end = end;
            list.remove(i + 1);
        } else if i > at {
            break;
        } else {
            i += 1;
        }
    }
}

/// A span of a response channel's text to replace with `mask` (`mode: redact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub channel: ChannelId,
    pub start: u64,
    pub end: u64,
    pub mask: String,
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
    /// What a check that cannot decide (missing usage, arguments that are not JSON) does.
    pub on_error: OnError,
    /// Hold the whole response until every check has passed (`buffer: true`).
    pub buffer: bool,
    /// `mode: redact`: the replacement text (default `[REDACTED:<kind>]`).
    pub mask: Option<String>,
    pub file: String,
    pub index: usize,
}

/// Fail-closed (a check that errs counts as violated) or fail-open (it counts as passed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    #[default]
    FailClosed,
    FailOpen,
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
    /// `max_length`: characters and/or o200k tokens.
    MaxLength {
        max_chars: Option<u64>,
        max_tokens: Option<u64>,
    },
    /// `pii` / `pii_leakage`: the recognizers of these kinds (all when empty), streamed.
    Pii {
        kinds: Vec<PiiKind>,
    },
    /// `sentence_count` / `max_sentences`: streamed maximum (see [`counters`]).
    SentenceCount {
        max: u64,
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
    FieldPresence {
        fields: Vec<String>,
    },
    JsonSchema(Arc<SchemaCheck>),
    JsonPath(Arc<PathCheck>),
    /// Tool checks on the turn or session: see [`ToolCheck`].
    Tool(ToolCheck),
    /// `latency_budget`: the exchange completes within `max_ms` of the request's arrival.
    LatencyBudget {
        max_ms: u64,
    },
    /// `cost_budget`: the response's usage stays within a token count and a price.
    CostBudget {
        max_total_tokens: Option<u64>,
        max_cost_usd: Option<f64>,
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
    FieldPresence(Vec<String>),
    Schema(Arc<SchemaCheck>),
    Path(Arc<PathCheck>),
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
            WholeCheck::FieldPresence(fields) => structured::fields_present(text, fields),
            WholeCheck::Schema(check) => check.passes(text),
            WholeCheck::Path(check) => check.passes(text),
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
    /// A message from the rule that fired (a `tool_anti_pattern` pattern's `message`), used
    /// when the validator has none of its own.
    pub note: Option<String>,
    /// Which rule of the validator fired, where it has kinds (a `pii` kind).
    pub rule: Option<&'static str>,
    /// The matched text, only when asked for (`audit.include_match`) and known.
    pub matched: Option<String>,
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
    /// (validator, max o200k tokens) — output: per text channel; input: per message.
    max_tokens: Vec<(u32, u64)>,
    /// (validator, max sentences) — output: per text channel; input: per message.
    max_sentences: Vec<(u32, u64)>,
    /// (validator, check) on the whole text.
    whole: Vec<(u32, WholeCheck)>,
}

/// Error building a policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Pack(#[from] PackError),
    /// A part of the runtime built with the policy (the audit log) could not be set up.
    #[error("{0}")]
    Setup(String),
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
    /// (validator, check) on the turn's or session's tool calls.
    tools: Vec<(u32, ToolCheck)>,
    /// (validator, milliseconds) of `latency_budget`s.
    latency: Vec<(u32, u64)>,
    /// (validator, max total tokens, max cost) of `cost_budget`s.
    cost: Vec<(u32, Option<u64>, Option<f64>)>,
    /// Some validator asks for the whole response to be held until it passes.
    buffer: bool,
    /// The o200k tokenizer, loaded when a validator counts tokens.
    tokens: Option<TokenCounter>,
    /// Some validator redacts (asked per frame, so computed once).
    redacts: bool,
    /// Some tool check reads call arguments.
    needs_args: bool,
    /// Redact-mode regexes: (validator, how to find where a match starts).
    span_finders: Vec<(u32, SpanFinder)>,
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
            let mut pii = Vec::new();
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
                        let exact = v.mode == Mode::Redact;
                        regexes.push(RegexRule {
                            hir: hir.clone(),
                            owner,
                            exact,
                        });
                        regex_owners.push(i);
                        if exact && !policy.span_finders.iter().any(|(o, _)| *o == owner) {
                            let finder = SpanFinder::new(hir)
                                .map_err(|e| fail(format!("param 'pattern': {e}")))?;
                            policy.span_finders.push((owner, finder));
                        }
                    }
                    CheckDef::RequireRegex { hir, .. } => {
                        let re = regex_automata::meta::Regex::builder()
                            .build_from_hir(hir)
                            .map_err(|e| fail(format!("param 'pattern': {e}")))?;
                        checks.whole.push((owner, WholeCheck::Regex(re)));
                    }
                    CheckDef::MaxLength {
                        max_chars,
                        max_tokens,
                    } => {
                        if let Some(max) = max_chars {
                            checks.max_chars.push((owner, *max));
                        }
                        if let Some(max) = max_tokens {
                            checks.max_tokens.push((owner, *max));
                            if policy.tokens.is_none() {
                                policy.tokens = Some(TokenCounter::o200k().map_err(|e| {
                                    fail(format!(
                                        "param 'max_tokens': cannot load the o200k tokenizer: {e}"
                                    ))
                                })?);
                            }
                        }
                    }
                    CheckDef::SentenceCount { max } => checks.max_sentences.push((owner, *max)),
                    CheckDef::Pii { kinds } => pii.push(PiiRule {
                        kinds: kinds.clone(),
                        owner,
                    }),
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
                    CheckDef::FieldPresence { fields } => checks
                        .whole
                        .push((owner, WholeCheck::FieldPresence(fields.clone()))),
                    CheckDef::JsonSchema(c) => checks
                        .whole
                        .push((owner, WholeCheck::Schema(Arc::clone(c)))),
                    CheckDef::JsonPath(c) => {
                        checks.whole.push((owner, WholeCheck::Path(Arc::clone(c))))
                    }
                    // Not about text: collected once, below.
                    CheckDef::Tool(_)
                    | CheckDef::LatencyBudget { .. }
                    | CheckDef::CostBudget { .. } => {}
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
            let pii = if pii.is_empty() {
                None
            } else {
                Some(PiiMatcher::new(&pii).map_err(|e| PolicyError::Compile {
                    file: "(packs)".into(),
                    index: 0,
                    type_name: "pii".into(),
                    message: e.to_string(),
                })?)
            };
            checks.scan = ScanSet::new(literals, regexes, pii);
        }
        for (i, (v, def)) in defs.iter().enumerate() {
            let owner = i as u32;
            match def {
                CheckDef::Tool(t) => policy.tools.push((owner, t.clone())),
                CheckDef::LatencyBudget { max_ms } => policy.latency.push((owner, *max_ms)),
                CheckDef::CostBudget {
                    max_total_tokens,
                    max_cost_usd,
                } => policy.cost.push((owner, *max_total_tokens, *max_cost_usd)),
                _ => {}
            }
            policy.buffer |= v.buffer;
            policy.redacts |= v.mode == Mode::Redact;
        }
        policy.needs_args = policy.tools.iter().any(|(_, c)| c.needs_args());
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

    /// The block message for a finding: the validator's own `message`, else the rule's, else a
    /// generic one naming the validator.
    pub fn message(&self, finding: &Finding) -> String {
        let v = self.validator(finding.validator);
        v.message
            .clone()
            .or_else(|| finding.note.clone())
            .unwrap_or_else(|| format!("blocked by guardrail '{}'", v.label))
    }

    /// The tool-call history of a request, as the tool checks see it (empty when no validator
    /// needs it).
    pub fn tool_history(&self, conversation: &Conversation) -> ToolHistory {
        if self.tools.is_empty() {
            ToolHistory::default()
        } else {
            ToolHistory::of(conversation)
        }
    }

    /// True when some validator redacts (frames then keep where their text is).
    pub fn redacts(&self) -> bool {
        self.redacts
    }

    /// The mask for a redaction by `validator` of a match of `kind` (a `pii` kind).
    fn mask(&self, validator: u32, kind: Option<&str>) -> String {
        let v = self.validator(validator);
        v.mask
            .clone()
            .unwrap_or_else(|| format!("[REDACTED:{}]", kind.unwrap_or(&v.label)))
    }

    /// The earliest `latency_budget` in enforce mode: (validator, milliseconds).
    pub fn latency_budget(&self) -> Option<(u32, u64)> {
        self.latency
            .iter()
            .filter(|(v, _)| self.validator(*v).mode == Mode::Enforce)
            .min_by_key(|(_, ms)| *ms)
            .copied()
    }

    /// A check that could not decide: violated unless its validator fails open.
    fn erred(&self, owner: u32, hits: &mut Vec<Hit>) {
        if self.validator(owner).on_error == OnError::FailClosed {
            hits.push(whole_hit(owner));
        } else {
            tracing::debug!(validator = %self.validator(owner).label, "check could not decide; failing open");
        }
    }

    fn outcome(&self, owner: u32, outcome: Outcome, hits: &mut Vec<Hit>) {
        match outcome {
            Outcome::Pass => {}
            Outcome::Fail => hits.push(whole_hit(owner)),
            Outcome::Error => self.erred(owner, hits),
        }
    }

    /// BeforeCall: checks every text of the request (each message part and each tool-call's
    /// arguments in the history, scanned separately) and the tool history. `Err` carries the
    /// first enforcing violation; monitor-mode findings are appended to `findings`.
    pub fn before_call(
        &self,
        conversation: &Conversation,
        history: &ToolHistory,
        findings: &mut Vec<Finding>,
    ) -> Result<(), Finding> {
        self.before_call_with(conversation, history, findings, false)
    }

    /// [`Policy::before_call`]; with `keep_matches`, findings carry the text that matched.
    pub fn before_call_with(
        &self,
        conversation: &Conversation,
        history: &ToolHistory,
        findings: &mut Vec<Finding>,
        keep_matches: bool,
    ) -> Result<(), Finding> {
        let checks = self.checks(Target::Input);
        let mut matches: Vec<(u32, String)> = Vec::new();
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
                let before = hits.len();
                let mut st = checks.scan.start();
                checks.scan.feed(&mut st, text, &mut hits);
                checks.scan.finish(&mut st, &mut hits);
                if keep_matches {
                    for h in &hits[before..] {
                        if let Some(m) = h.start.and_then(|s| text.get(s as usize..h.end as usize))
                        {
                            matches.push((h.owner, m.to_owned()));
                        }
                    }
                }
            }
            let chars = crate::scan::text::char_count(text);
            for &(owner, max) in &checks.max_chars {
                if chars > max {
                    hits.push(whole_hit(owner));
                }
            }
            if let (Some(counter), false) = (&self.tokens, checks.max_tokens.is_empty()) {
                let n = counter.count_whole(text);
                for &(owner, max) in &checks.max_tokens {
                    if n > max {
                        hits.push(whole_hit(owner));
                    }
                }
            }
            if !checks.max_sentences.is_empty() {
                let n = counters::count_sentences(text);
                for &(owner, max) in &checks.max_sentences {
                    if n > max {
                        hits.push(whole_hit(owner));
                    }
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
        for (owner, check) in &self.tools {
            self.outcome(*owner, check.before_call(history), &mut hits);
        }
        let first_new = findings.len();
        let verdict = self.judge(&mut hits, Phase::Input, &mut reported, findings);
        let matched = |v: u32| {
            matches
                .iter()
                .find(|(o, _)| *o == v)
                .map(|(_, m)| m.clone())
        };
        for f in &mut findings[first_new..] {
            f.matched = matched(f.validator);
        }
        verdict.map_err(|mut f| {
            f.matched = matched(f.validator);
            f
        })
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
                note: None,
                rule: hit.rule,
                matched: None,
            };
            match self.validator(hit.owner).mode {
                // Redact hits with a span were taken out before; one without blocks.
                Mode::Enforce | Mode::Redact => return Err(finding),
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
    /// `history` comes from [`Policy::tool_history`]; `price` is the requested model's.
    pub fn stream_guard(
        self: &Arc<Self>,
        streaming: bool,
        history: ToolHistory,
        price: Option<Price>,
    ) -> StreamGuard {
        StreamGuard {
            policy: Arc::clone(self),
            chunk_phase: if streaming {
                Phase::Stream
            } else {
                Phase::Response
            },
            channels: Vec::new(),
            choices: Vec::new(),
            history,
            calls: Vec::new(),
            usage: (None, None),
            price,
            latency_fired: Vec::new(),
            notes: Vec::new(),
            redactions: Vec::new(),
            redacted: Vec::new(),
            keep_matches: false,
            matches: Vec::new(),
            hits: Vec::new(),
            reported: Reported::default(),
            findings: Vec::new(),
        }
    }

    /// True when AfterCall needs the response text kept (whole-text checks exist).
    fn keeps_text(&self, target: Target) -> bool {
        !self.checks(target).whole.is_empty()
    }

    /// The keys `tool_args_excluded_session` watches in calls of `tool`.
    fn watches_args_of(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|(_, c)| matches!(c, ToolCheck::ArgsExcluded { tool: t, .. } if t == tool))
    }

    fn needs_args(&self) -> bool {
        self.needs_args
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
    /// The channel's latest text and the position of its first byte, kept only with
    /// `keep_matches` (at most [`RECENT_TEXT`] bytes plus the last delta).
    recent: Option<(u64, String)>,
    /// (validator, state) of `max_tokens` limits (answer and refusal channels).
    tokens: Vec<(u32, TokenState)>,
    /// (validator, state) of `sentence_count` limits (answer and refusal channels).
    sentences: Vec<(u32, SentenceState)>,
}

#[derive(Debug, Default)]
struct ChoiceState {
    choice: u32,
    output_chars: u64,
    /// Output text, kept only when a whole-text check needs it.
    text: String,
}

/// Text kept per channel for matched-text audit lines: matches are reported within a few
/// hundred bytes of where they end, so this covers every span the scanner reports.
const RECENT_TEXT: usize = 1024;

/// A tool call of the response.
#[derive(Debug)]
struct ResponseCall {
    choice: u32,
    index: u32,
    record: CallRecord,
    /// Watches the arguments for `tool_args_excluded_session`, when one names this tool.
    watcher: Option<FieldWatcher>,
}

/// The per-response state of OnChunk and AfterCall: scanner states per channel, counters per
/// choice, the tool calls. Owned by the stream, so no locks.
#[derive(Debug)]
pub struct StreamGuard {
    policy: Arc<Policy>,
    chunk_phase: Phase,
    channels: Vec<ChannelState>,
    choices: Vec<ChoiceState>,
    /// Tool calls of the request's history.
    history: ToolHistory,
    /// Tool calls of this response, in the order they started.
    calls: Vec<ResponseCall>,
    /// (input, output) tokens, as last reported.
    usage: (Option<u64>, Option<u64>),
    price: Option<Price>,
    /// `latency_budget` validators already reported.
    latency_fired: Vec<u32>,
    /// Messages of rules that fired, by validator.
    notes: Vec<(u32, String)>,
    /// Spans to mask, per channel in order of their starts, overlapping ones merged.
    redactions: Vec<Redaction>,
    /// Redactions not yet counted by the caller (validator, phase).
    pub redacted: Vec<Finding>,
    /// Keep recent channel text so findings can carry what matched (`audit.include_match`).
    keep_matches: bool,
    /// (validator, matched text) of span hits since the last judgement.
    matches: Vec<(u32, String)>,
    hits: Vec<Hit>,
    reported: Reported,
    /// Monitor-mode findings not yet collected by the caller.
    pub findings: Vec<Finding>,
}

impl StreamGuard {
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Findings carry the text that matched (for `audit.include_match`); off by default.
    pub fn keep_matches(&mut self) {
        self.keep_matches = true;
    }

    /// The text of `channel` between two positions, if still kept.
    fn matched_text(&self, channel: ChannelId, start: u64, end: u64) -> Option<String> {
        let (base, text) = self.channels.get(channel)?.recent.as_ref()?;
        let from = usize::try_from(start.checked_sub(*base)?).ok()?;
        let to = usize::try_from(end.checked_sub(*base)?).ok()?;
        text.get(from..to).map(str::to_owned)
    }

    /// Notes the matched text of the pending span hits of `channel` (those from `from` on).
    fn note_matches(&mut self, channel: ChannelId, from: usize) {
        if !self.keep_matches {
            return;
        }
        for i in from..self.hits.len() {
            let h = self.hits[i];
            if let Some(m) = h.start.and_then(|s| self.matched_text(channel, s, h.end)) {
                self.matches.push((h.owner, m));
            }
        }
    }

    /// Judges the pending hits under `phase`, attaching rule messages (and, when kept, matched
    /// texts) to the findings.
    fn judge(&mut self, phase: Phase) -> Result<(), Finding> {
        let first_new = self.findings.len();
        let verdict = self.policy.judge(
            &mut self.hits,
            phase,
            &mut self.reported,
            &mut self.findings,
        );
        let matches = std::mem::take(&mut self.matches);
        let matched = |v: u32| {
            matches
                .iter()
                .find(|(o, _)| *o == v)
                .map(|(_, m)| m.clone())
        };
        for f in &mut self.findings[first_new..] {
            f.matched = matched(f.validator);
        }
        verdict.map_err(|mut f| {
            f.note = self
                .notes
                .iter()
                .find(|(v, _)| *v == f.validator)
                .map(|(_, n)| n.clone());
            f.matched = matched(f.validator);
            f
        })
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
            Delta::ToolCallStart {
                choice,
                index,
                name,
                ..
            } => {
                self.on_tool_call(*choice, *index, name);
                self.judge(self.chunk_phase)?;
                return Ok(None);
            }
            Delta::Usage {
                input_tokens,
                output_tokens,
            } => {
                self.usage.0 = input_tokens.or(self.usage.0);
                self.usage.1 = output_tokens.or(self.usage.1);
                return Ok(None);
            }
            Delta::Finish { .. } => return Ok(None),
            // Already checked when it streamed: only held back with its channel.
            Delta::Repeat {
                choice, channel, ..
            } => {
                let id = self.channel(*choice, *channel);
                return Ok(Some((id, self.channels[id].scan.pos())));
            }
        };
        let id = self.channel(*choice, *channel);
        let policy = &*self.policy;
        let ch = &mut self.channels[id];
        let checks = policy.checks(ch.target);
        if let Some((base, recent)) = &mut ch.recent {
            recent.push_str(text);
            if recent.len() > 2 * RECENT_TEXT {
                let mut cut = recent.len() - RECENT_TEXT;
                while !recent.is_char_boundary(cut) {
                    cut += 1;
                }
                recent.drain(..cut);
                *base += cut as u64;
            }
        }
        let first_hit = self.hits.len();
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
        if let Some(counter) = &policy.tokens {
            for (owner, st) in &mut ch.tokens {
                if let Some(at) = counter.feed(st, text) {
                    self.hits.push(Hit {
                        owner: *owner,
                        start: Some(at),
                        end: at,
                        rule: None,
                    });
                }
            }
        }
        for (owner, st) in &mut ch.sentences {
            if let Some(at) = st.feed(text) {
                self.hits.push(Hit {
                    owner: *owner,
                    start: Some(at),
                    end: at,
                    rule: None,
                });
            }
        }
        if let Channel::ToolArgs(index) = channel {
            self.on_tool_args(*choice, *index, text);
        }
        self.note_matches(id, first_hit);
        self.take_redactions(id);
        self.judge(self.chunk_phase)?;
        Ok(Some((id, pos)))
    }

    /// A tool call starts: checks that a start can violate fire here, before any of its
    /// arguments is released.
    fn on_tool_call(&mut self, choice: u32, index: u32, name: &str) {
        let policy = &*self.policy;
        self.calls.push(ResponseCall {
            choice,
            index,
            record: CallRecord {
                name: name.to_owned(),
                ..CallRecord::default()
            },
            watcher: policy.watches_args_of(name).then(FieldWatcher::default),
        });
        let (turn, _) = self.call_views(choice);
        let mut fired = Vec::new();
        for (owner, check) in &policy.tools {
            if check.on_call_start(&turn) {
                let note = check
                    .anti_pattern_hit(&turn)
                    .and_then(|p| p.message.clone());
                fired.push((*owner, note));
            }
        }
        drop(turn);
        for (owner, note) in fired {
            if let Some(n) = note {
                self.notes.push((owner, n));
            }
            self.hits.push(whole_hit(owner));
        }
    }

    /// Arguments of a response call: kept when a check reads them, and watched field by field
    /// for `tool_args_excluded_session`.
    fn on_tool_args(&mut self, choice: u32, index: u32, text: &str) {
        let policy = &*self.policy;
        if !policy.needs_args() {
            return;
        }
        let Some(call) = self
            .calls
            .iter_mut()
            .rev()
            .find(|c| c.choice == choice && c.index == index)
        else {
            return;
        };
        call.record.args.push_str(text);
        let Some(watcher) = &mut call.watcher else {
            return;
        };
        let mut fields = Vec::new();
        let name = &call.record.name;
        let watched = |key: &str| {
            policy.tools.iter().any(|(_, c)| {
                matches!(c, ToolCheck::ArgsExcluded { tool, excluded } if tool == name && excluded.contains_key(key))
            })
        };
        watcher.feed(text.as_bytes(), watched, &mut fields);
        for f in fields {
            for (owner, check) in &policy.tools {
                let ToolCheck::ArgsExcluded { tool, excluded } = check else {
                    continue;
                };
                let Some(bad) = excluded.get(&f.key).filter(|_| tool == name) else {
                    continue;
                };
                match f
                    .value
                    .as_deref()
                    .map(serde_json::from_str::<serde_json::Value>)
                {
                    Some(Ok(v)) => {
                        if tools::value_excluded(&v, bad) {
                            self.hits.push(Hit {
                                owner: *owner,
                                start: Some(f.start),
                                end: f.end,
                                rule: None,
                            });
                        }
                    }
                    _ => policy.erred(*owner, &mut self.hits),
                }
            }
        }
    }

    /// Moves the pending hits of redacting validators that have a span into the channel's
    /// redactions. (Hits without a span stay and block: nothing to mask.)
    fn take_redactions(&mut self, channel: ChannelId) {
        let policy = &*self.policy;
        if !policy.redacts() {
            return;
        }
        let mut i = 0;
        while i < self.hits.len() {
            let hit = self.hits[i];
            // Regex hits know only their end: the match's start is found backwards in the
            // channel's recent text (failing that, the hit stays and blocks).
            let start = hit.start.or_else(|| {
                let (_, finder) = policy.span_finders.iter().find(|(o, _)| *o == hit.owner)?;
                let (base, text) = self.channels.get(channel)?.recent.as_ref()?;
                let end = usize::try_from(hit.end.checked_sub(*base)?).ok()?;
                finder
                    .start(text.as_bytes(), end)
                    .map(|s| base + s as u64)
                    .filter(|&s| s > *base || *base == 0)
            });
            let (Mode::Redact, Some(start)) = (policy.validator(hit.owner).mode, start) else {
                i += 1;
                continue;
            };
            self.hits.swap_remove(i);
            self.redacted.push(Finding {
                validator: hit.owner,
                phase: self.chunk_phase,
                note: None,
                rule: hit.rule,
                matched: self.matched_text(channel, start, hit.end),
            });
            let end = hit.end.max(start);
            insert_redaction(
                &mut self.redactions,
                Redaction {
                    channel,
                    start,
                    end,
                    mask: policy.mask(hit.owner, hit.rule),
                },
            );
        }
    }

    /// The redactions so far.
    pub fn redactions(&self) -> &[Redaction] {
        &self.redactions
    }

    /// The turn's and the session's calls as seen from `choice`, this response's last.
    fn call_views(&self, choice: u32) -> (Vec<&CallRecord>, Vec<&CallRecord>) {
        let own = self
            .calls
            .iter()
            .filter(|c| c.choice == choice)
            .map(|c| &c.record);
        let turn = self.history.turn().iter().chain(own.clone()).collect();
        let session = self.history.calls.iter().chain(own).collect();
        (turn, session)
    }

    /// Text of `channel` before this position can no longer be part of a violation.
    pub fn safe_pos(&self, channel: ChannelId) -> u64 {
        if self.policy.buffer {
            return 0;
        }
        let ch = &self.channels[channel];
        let mut safe = self.policy.checks(ch.target).scan.safe_pos(&ch.scan);
        for (_, st) in &ch.tokens {
            safe = safe.min(st.safe_pos());
        }
        for (_, st) in &ch.sentences {
            safe = safe.min(st.safe_pos());
        }
        if let Channel::ToolArgs(index) = ch.channel {
            let watcher = self
                .calls
                .iter()
                .rev()
                .find(|c| c.choice == ch.choice && c.index == index)
                .and_then(|c| c.watcher.as_ref());
            if let Some(w) = watcher {
                safe = safe.min(w.safe_pos());
            }
        }
        safe
    }

    /// The next `latency_budget` to enforce while streaming: (validator, milliseconds after the
    /// request arrived). Monitor-mode budgets are judged at the end.
    pub fn latency_deadline(&self) -> Option<(u32, u64)> {
        self.policy
            .latency
            .iter()
            .filter(|(v, _)| {
                self.policy.validator(*v).mode == Mode::Enforce && !self.latency_fired.contains(v)
            })
            .min_by_key(|(_, ms)| *ms)
            .copied()
    }

    /// `elapsed_ms` after the request arrived: every `latency_budget` it exceeds fires.
    pub fn check_latency(&mut self, elapsed_ms: u64) -> Result<(), Finding> {
        for &(owner, max) in &self.policy.latency {
            if elapsed_ms > max && !self.latency_fired.contains(&owner) {
                self.latency_fired.push(owner);
                self.hits.push(whole_hit(owner));
            }
        }
        self.judge(self.chunk_phase)
    }

    /// AfterCall: ends every channel's scan (matches waiting on what follows them are decided)
    /// and runs the whole-response checks.
    pub fn after_call(&mut self) -> Result<(), Finding> {
        let policy = Arc::clone(&self.policy);
        for id in 0..self.channels.len() {
            let ch = &mut self.channels[id];
            let first_hit = self.hits.len();
            policy
                .checks(ch.target)
                .scan
                .finish(&mut ch.scan, &mut self.hits);
            self.note_matches(id, first_hit);
            self.take_redactions(id);
            let ch = &mut self.channels[id];
            let counter = policy.tokens.as_ref();
            for (owner, st) in &mut ch.tokens {
                if let Some(counter) = counter {
                    counter.finish(st);
                }
                if st.violation().is_some() {
                    self.hits.push(whole_hit(*owner));
                }
            }
            for (owner, st) in &mut ch.sentences {
                st.finish();
                if st.violation().is_some() {
                    self.hits.push(whole_hit(*owner));
                }
            }
        }
        let mut fields = Vec::new();
        for call in &mut self.calls {
            if let Some(w) = &mut call.watcher {
                w.finish(&mut fields);
            }
        }
        self.judge(self.chunk_phase)?;
        let output = policy.checks(Target::Output);
        // Every choice that produced anything (choice 0 for an empty answer) is judged.
        for c in &self.calls {
            choice_state(&mut self.choices, c.choice);
        }
        if self.choices.is_empty() {
            self.choices.push(ChoiceState::default());
        }
        let mut hits = Vec::new();
        for c in &self.choices {
            let mut lower = None;
            for (owner, check) in &output.whole {
                if !check.passes(&c.text, &mut lower) {
                    hits.push(whole_hit(*owner));
                }
            }
            let own: Vec<&CallRecord> = self
                .calls
                .iter()
                .filter(|k| k.choice == c.choice)
                .map(|k| &k.record)
                .collect();
            let (turn, session) = self.call_views(c.choice);
            for (owner, check) in &policy.tools {
                policy.outcome(*owner, check.on_response_calls(&own), &mut hits);
                // A response without tool calls ends the agent's turn.
                if own.is_empty() && check.on_turn_end(&turn, &session) {
                    hits.push(whole_hit(*owner));
                }
            }
        }
        self.hits.append(&mut hits);
        self.check_cost();
        self.judge(Phase::Response)
    }

    /// `cost_budget` on the usage the provider reported.
    fn check_cost(&mut self) {
        let policy = &*self.policy;
        for &(owner, max_tokens, max_usd) in &policy.cost {
            let (Some(input), Some(output)) = self.usage else {
                policy.erred(owner, &mut self.hits);
                continue;
            };
            if max_tokens.is_some_and(|m| input + output > m) {
                self.hits.push(whole_hit(owner));
                continue;
            }
            if let Some(max) = max_usd {
                match self.price {
                    Some(p) => {
                        let usd = (input as f64 * p.input_per_mtok
                            + output as f64 * p.output_per_mtok)
                            / 1e6;
                        if usd > max {
                            self.hits.push(whole_hit(owner));
                        }
                    }
                    None => policy.erred(owner, &mut self.hits),
                }
            }
        }
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
        let checks = self.policy.checks(target);
        let counted =
            target == Target::Output && matches!(channel, Channel::Content | Channel::Refusal);
        let (tokens, sentences) = if counted {
            (
                checks
                    .max_tokens
                    .iter()
                    .map(|&(v, max)| (v, TokenState::new(max)))
                    .collect(),
                checks
                    .max_sentences
                    .iter()
                    .map(|&(v, max)| (v, SentenceState::new(max)))
                    .collect(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        self.channels.push(ChannelState {
            choice,
            channel,
            target,
            scan: checks.scan.start(),
            tokens,
            sentences,
            recent: (self.keep_matches || !self.policy.span_finders.is_empty())
                .then(|| (0, String::new())),
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
