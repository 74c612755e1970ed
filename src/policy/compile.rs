//! Compiling packs into a [`Policy`]: the policy itself, its per-target checks (input, output,
//! reasoning) and the accessors the hook phases share.

use super::counters::TokenCounter;
use super::evals::Eval;
use super::judged::{JudgedCheck, Window};
use super::limits::{Limit, MaxSentences, MaxTokens};
use super::pack;
use super::tools::ToolCheck;
use super::types::{CheckDef, Mode, PolicyError, Validator};
use super::whole::WholeCheck;
use crate::scan::normal::{normalize_hir, normalize_pattern};
use crate::scan::{
    build_forbidden, LiteralMatcher, LiteralRule, Normalize, PiiMatcher, PiiRule, RegexRule,
    ScanSet, SpanFinder, TextScan, ViewSet,
};
use std::path::Path;
use std::sync::Arc;

/// The texts a scan set is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Input,
    Output,
    Reasoning,
}

const TARGETS: [Target; 3] = [Target::Input, Target::Output, Target::Reasoning];

#[derive(Debug, Default)]
pub(super) struct TargetChecks {
    pub(super) scan: Arc<TextScan>,
    /// (validator, max characters) — output: per choice over content and refusal; input: per message.
    pub(super) max_chars: Vec<(u32, u64)>,
    /// (validator, length limit counted as the text streams) — output: per answer and refusal
    /// channel; input: per message.
    pub(super) limits: Vec<(u32, Box<dyn Limit>)>,
    /// (validator, check) on the whole text.
    pub(super) whole: Vec<(u32, WholeCheck)>,
}

/// Every validator of a route's packs, compiled: one literal automaton and one regex DFA per
/// target, shared (read-only) by all requests.
#[derive(Debug, Default)]
pub struct Policy {
    validators: Vec<Validator>,
    targets: [TargetChecks; 3],
    /// (validator, check) on the turn's or session's tool calls.
    pub(super) tools: Vec<(u32, ToolCheck)>,
    /// (validator, milliseconds) of `latency_budget`s.
    pub(super) latency: Vec<(u32, u64)>,
    /// (validator, max total tokens, max cost) of `cost_budget`s.
    pub(super) cost: Vec<(u32, Option<u64>, Option<f64>)>,
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

impl Policy {
    /// Loads and compiles the given pack files, in order.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Policy, PolicyError> {
        let mut packs = Vec::new();
        for p in paths {
            packs.push(pack::load_pack(p.as_ref())?);
        }
        let mut policy = Policy::compile_packs(packs)?;
        policy.packs = paths
            .iter()
            .map(|p| p.as_ref().display().to_string())
            .collect();
        Ok(policy)
    }

    /// Compiles packs (from [`pack::parse_pack`]), in order, into a policy.
    pub fn compile_packs(packs: Vec<pack::Pack>) -> Result<Policy, PolicyError> {
        let (mut defs, mut evals) = (Vec::new(), Vec::new());
        for p in packs {
            defs.extend(p.validators);
            evals.extend(p.evals);
        }
        let mut policy = Policy::compile(defs)?;
        policy.evals = super::evals::compile(evals)?;
        policy.keeps_answer |= !policy.evals.is_empty();
        policy.needs_args |= policy.keeps_answer;
        Ok(policy)
    }

    /// Compiles validators (from [`pack::parse_pack`]) into a policy.
    pub fn compile(defs: Vec<(Validator, CheckDef)>) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        for (t, target) in TARGETS.iter().enumerate() {
            let checks = &mut policy.targets[t];
            for (i, (v, def)) in defs.iter().enumerate() {
                if v.covers(*target) {
                    compile_unscanned(i as u32, v, def, checks)?;
                }
            }
            // Reasoning is usually checked by exactly the answer's text checks: it shares their
            // automata instead of compiling (and holding) a copy.
            let scanned = |target: Target| -> Vec<usize> {
                defs.iter()
                    .enumerate()
                    .filter(|(_, (v, def))| v.covers(target) && is_scanned(def))
                    .map(|(i, _)| i)
                    .collect()
            };
            if *target == Target::Reasoning && scanned(Target::Reasoning) == scanned(Target::Output)
            {
                policy.targets[t].scan = Arc::clone(&policy.targets[Target::Output as usize].scan);
                continue;
            }
            // One scan set per `normalize:` setting in use: each reads its own view.
            let mut lanes = Vec::new();
            for normalize in [Normalize::None, Normalize::Nfkc, Normalize::Full] {
                let own = |v: &Validator| v.covers(*target) && v.normalize == normalize;
                if defs.iter().any(|(v, _)| own(v)) {
                    lanes.push(compile_scan(&defs, own, normalize)?);
                }
            }
            policy.targets[t].scan = Arc::new(TextScan::new(lanes));
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
                CheckDef::Judged(check) => {
                    if v.direction.covers(Target::Input) {
                        policy.judged_input.push((owner, Arc::clone(check)));
                    }
                    if v.direction.covers(Target::Output) {
                        policy.judged_output.push((owner, Arc::clone(check)));
                    }
                }
                _ => {}
            }
            policy.buffer |= v.buffer;
            policy.redacts |= v.mode == Mode::Redact;
        }
        // A judged answer is judged window by window when every judged check of the answer
        // has the same window; otherwise it is held whole and judged before release.
        let windows: Vec<Option<Window>> =
            policy.judged_output.iter().map(|(_, c)| c.window).collect();
        policy.judged_window = windows.iter().find_map(|w| *w);
        if policy.judged_window.is_some() && windows.iter().any(|w| *w != policy.judged_window) {
            let (owner, _) = policy.judged_output[windows
                .iter()
                .position(|w| *w != policy.judged_window)
                .unwrap_or(0)];
            let (v, _) = &defs[owner as usize];
            return Err(PolicyError::Compile {
                file: v.file.clone(),
                index: v.index,
                type_name: v.type_name.clone(),
                message: "param 'window': every judged check of the answer in one policy needs the same window (or none); mixed windows are not supported yet".into(),
            });
        }
        policy.buffer |= !policy.judged_output.is_empty() && policy.judged_window.is_none();
        policy.keeps_answer = !policy.judged_output.is_empty();
        policy.needs_args = policy.tools.iter().any(|(_, c)| c.needs_args()) || policy.keeps_answer;
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

    /// Judged checks of the request: (validator, check).
    pub fn judged_input(&self) -> &[(u32, Arc<JudgedCheck>)] {
        &self.judged_input
    }

    /// Judged checks of the answer: (validator, check).
    pub fn judged_output(&self) -> &[(u32, Arc<JudgedCheck>)] {
        &self.judged_output
    }

    /// The packs' `evals:`.
    pub fn evals(&self) -> &[Eval] {
        &self.evals
    }

    /// Whether the exchange's conversation and answer are kept for judged checks or evals.
    pub fn keeps_exchange(&self) -> bool {
        self.keeps_answer || !self.judged_input.is_empty()
    }

    /// The window a streamed answer is judged by (`None`: held whole).
    pub fn judged_window(&self) -> Option<Window> {
        self.judged_window
    }

    pub(super) fn checks(&self, target: Target) -> &TargetChecks {
        &self.targets[target as usize]
    }

    /// Heap bytes of the compiled automata.
    pub fn memory_usage(&self) -> usize {
        let shared = Arc::ptr_eq(
            &self.targets[Target::Reasoning as usize].scan,
            &self.targets[Target::Output as usize].scan,
        );
        self.targets
            .iter()
            .enumerate()
            .filter(|(t, _)| !(shared && *t == Target::Reasoning as usize))
            .map(|(_, t)| t.scan.memory_usage())
            .sum()
    }
}

/// The checks a [`TextScan`] runs (words and phrases, forbidden regexes, PII).
fn is_scanned(def: &CheckDef) -> bool {
    matches!(
        def,
        CheckDef::ContentExcludes { .. } | CheckDef::ForbidRegex { .. } | CheckDef::Pii { .. }
    )
}

/// The checks of one validator on one target that are not scanned for spans: lengths, counts
/// and whole-text checks.
fn compile_unscanned(
    owner: u32,
    v: &Validator,
    def: &CheckDef,
    checks: &mut TargetChecks,
) -> Result<(), PolicyError> {
    let fail = compile_error(v);
    match def {
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
                let counter = TokenCounter::o200k().map_err(|e| {
                    fail(format!(
                        "param 'max_tokens': cannot load the o200k tokenizer: {e}"
                    ))
                })?;
                let max = *max;
                checks
                    .limits
                    .push((owner, Box::new(MaxTokens { max, counter })));
            }
        }
        CheckDef::SentenceCount { max } => {
            let max = *max;
            checks.limits.push((owner, Box::new(MaxSentences { max })));
        }
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
        CheckDef::JsonPath(c) => checks.whole.push((owner, WholeCheck::Path(Arc::clone(c)))),
        // Scanned (see `compile_scan`), or not a text check (collected by `Policy::compile`).
        CheckDef::ContentExcludes { .. }
        | CheckDef::ForbidRegex { .. }
        | CheckDef::Pii { .. }
        | CheckDef::Tool(_)
        | CheckDef::LatencyBudget { .. }
        | CheckDef::CostBudget { .. }
        | CheckDef::Judged(_)
        | CheckDef::GuardrailTriggered { .. } => {}
    }
    Ok(())
}

/// The scan set of the validators `own` picks (one target, one `normalize:` setting), with its
/// patterns in the view they read, and span finders for its redacting regexes.
fn compile_scan(
    defs: &[(Validator, CheckDef)],
    own: impl Fn(&Validator) -> bool,
    normalize: Normalize,
) -> Result<ViewSet, PolicyError> {
    let mut literals = Vec::new();
    let mut regexes = Vec::new();
    let mut regex_owners = Vec::new();
    let mut pii = Vec::new();
    let mut finders = Vec::new();
    for (i, (v, def)) in defs.iter().enumerate() {
        if !own(v) {
            continue;
        }
        let owner = i as u32;
        let fail = compile_error(v);
        match def {
            CheckDef::ContentExcludes {
                patterns,
                word_boundary,
            } => {
                for p in patterns {
                    for form in normalize_pattern(p, normalize) {
                        if form.is_empty() {
                            return Err(fail(format!(
                                "pattern {p:?} is empty once normalised (normalize: {}): it has only characters the view drops (invisible ones, and with full Markdown's `*`, `~`, `` ` ``); use normalize: none to match them as written",
                                normalize.name()
                            )));
                        }
                        literals.push(LiteralRule {
                            pattern: form,
                            owner,
                            word_boundary: *word_boundary,
                        });
                    }
                }
            }
            CheckDef::ForbidRegex { hir: raw, .. } => {
                let hir = normalize_hir(raw, normalize);
                // Only characters the view drops (Markdown's `*`, invisible ones): it would match
                // everywhere.
                if hir.properties().minimum_len() == Some(0)
                    && raw.properties().minimum_len() != Some(0)
                {
                    return Err(fail(format!(
                        "pattern can match nothing but characters the normalised view drops (normalize: {}: invisible characters, and with full Markdown's `*`, `~`, `` ` ``); use normalize: none to match them as written",
                        normalize.name()
                    )));
                }
                let exact = v.mode == Mode::Redact;
                if exact && !finders.iter().any(|(o, _)| *o == owner) {
                    let finder =
                        SpanFinder::new(&hir).map_err(|e| fail(format!("param 'pattern': {e}")))?;
                    finders.push((owner, finder));
                }
                regexes.push(RegexRule { hir, owner, exact });
                regex_owners.push(i);
            }
            CheckDef::Pii { kinds } => pii.push(PiiRule {
                kinds: kinds.clone(),
                owner,
            }),
            _ => {}
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
        compile_error(v)(format!(
            "param 'pattern': cannot be scanned incrementally: {e}"
        ))
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
    Ok(ViewSet {
        normalize,
        set: ScanSet::new(literals, regexes, pii),
        finders,
    })
}

/// The error of compiling validator `v`, naming its file, index and type.
fn compile_error(v: &Validator) -> impl Fn(String) -> PolicyError + '_ {
    |message| PolicyError::Compile {
        file: v.file.clone(),
        index: v.index,
        type_name: v.type_name.clone(),
        message,
    }
}
