//! Compiling packs into a [`Policy`] (its parts are in `compiled`): its per-target checks
//! (input, output, reasoning), its evals (`compile/evals`) and the accessors the hook phases
//! share.

pub(super) mod evals;

use super::checks::{CheckDef, Kind};
use super::compiled::{Policy, ScanRules, TargetChecks};
use super::evals::Eval;
use super::judged::{JudgedCheck, Window};
use super::pack;
use super::types::{Mode, PolicyError, Target, Validator};
use crate::scan::{
    build_forbidden, LiteralMatcher, Normalize, PiiMatcher, ScanSet, TextScan, ViewSet,
};
use std::path::Path;
use std::sync::Arc;

const TARGETS: [Target; 3] = [Target::Input, Target::Output, Target::Reasoning];

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
        policy.evals = self::evals::compile(evals)?;
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
                    def.check()
                        .compile_text(i as u32, checks)
                        .map_err(compile_error(v))?;
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
            def.check().compile_exchange(i as u32, v, &mut policy);
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

    /// The first tool check an MCP route cannot judge: its validator's label and why
    /// ([`ToolCheck::unjudged_on_mcp`](super::tools::ToolCheck::unjudged_on_mcp)).
    /// Evals are held to the same rule (an MCP turn is one call, replayed as the validator
    /// reads it), and `cost_budget` validators and evals too: MCP calls report no model usage.
    pub fn unjudged_on_mcp(&self) -> Option<(&str, &'static str)> {
        use super::evals::EvalCheck;
        const NO_USAGE: &str = "an MCP call reports no model usage for `cost_budget` to read";
        let validators = self
            .tools
            .iter()
            .find_map(|(v, check)| {
                check
                    .unjudged_on_mcp()
                    .map(|why| (self.validator(*v).label.as_str(), why))
            })
            .or_else(|| {
                let (v, _) = self.cost.first()?;
                Some((self.validator(*v).label.as_str(), NO_USAGE))
            });
        validators.or_else(|| {
            self.evals.iter().find_map(|e| {
                if e.reads_session_spend() {
                    return Some((e.id.as_str(), NO_USAGE));
                }
                match &e.check {
                    EvalCheck::Replay(p) | EvalCheck::Transcript(_, p) => {
                        p.unjudged_on_mcp().map(|(_, why)| (e.id.as_str(), why))
                    }
                    _ => None,
                }
            })
        })
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

    /// Some validator is a `cost_budget`: the session's spend is read BeforeCall.
    pub fn has_cost_budget(&self) -> bool {
        !self.cost.is_empty()
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
    def.kind() == Kind::Streamed
}

/// The scan set of the validators `own` picks (one target, one `normalize:` setting), with its
/// patterns in the view they read, and span finders for its redacting regexes.
fn compile_scan(
    defs: &[(Validator, CheckDef)],
    own: impl Fn(&Validator) -> bool,
    normalize: Normalize,
) -> Result<ViewSet, PolicyError> {
    let mut rules = ScanRules {
        owner: 0,
        redact: false,
        normalize,
        literals: Vec::new(),
        regexes: Vec::new(),
        pii: Vec::new(),
        finders: Vec::new(),
    };
    let mut regex_owners = Vec::new();
    let mut owners = Vec::new();
    for (i, (v, def)) in defs.iter().enumerate() {
        if !own(v) {
            continue;
        }
        let before = rules.regexes.len();
        let count = |r: &ScanRules| r.literals.len() + r.regexes.len() + r.pii.len();
        let rules_before = count(&rules);
        (rules.owner, rules.redact) = (i as u32, v.mode == Mode::Redact);
        def.check()
            .compile_scan(&mut rules)
            .map_err(compile_error(v))?;
        regex_owners.resize(regex_owners.len() + rules.regexes.len() - before, i);
        if count(&rules) > rules_before {
            owners.push(i as u32);
        }
    }
    let ScanRules {
        literals,
        regexes,
        pii,
        finders,
        ..
    } = rules;
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
        owners,
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
