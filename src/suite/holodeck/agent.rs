//! A HoloDeck `agent.yaml` read with HoloDeck's own models (`holodeck.models.agent`,
//! `.evaluation`, `.test_case`, `.llm`): the same keys (unknown ones refused, as its
//! `extra="forbid"`), the same validation and defaults, and a plan of what `eval --holodeck`
//! sends and scores. What guardwire cannot run — the agent's own tools, files, Python code
//! graders, structured output, SDK-specific settings — is refused naming the key.

use crate::suite::deterministic::{Equality, Numeric, ResponsePath};
use crate::suite::judged::{self, Kind, Param, Spec};
use crate::suite::metrics::{Asked, Metric};
use serde::Deserialize;
use serde_norway::Value as Yaml;
use std::path::Path;
use std::sync::Arc;

/// The largest agent.yaml (and instructions file) read.
const MAX_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    author: Option<String>,
    model: Provider,
    instructions: Instructions,
    #[serde(default)]
    response_format: Option<Yaml>,
    #[serde(default)]
    tools: Option<Vec<Yaml>>,
    #[serde(default)]
    evaluations: Option<Evaluations>,
    #[serde(default)]
    test_cases: Option<Vec<TestCase>>,
    #[serde(default)]
    execution: Option<Execution>,
    // Telemetry, packaging and the embeddings of vector-store tools change no answer and no
    // score of a run: read, not used.
    #[serde(default)]
    observability: Option<Yaml>,
    #[serde(default)]
    deployment: Option<Yaml>,
    #[serde(default)]
    embedding_provider: Option<Yaml>,
    #[serde(default)]
    claude: Option<Yaml>,
    #[serde(default)]
    openai: Option<Yaml>,
}

/// HoloDeck's `LLMProvider`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub provider: String,
    pub name: String,
    #[serde(default = "default_temperature")]
    pub temperature: Option<f64>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    endpoint: Option<String>,
    // The keys and versions of HoloDeck's own clients: a run uses the config's upstream.
    #[serde(default)]
    #[allow(dead_code)]
    api_key: Option<Yaml>,
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    auth_provider: Option<Yaml>,
}

fn default_temperature() -> Option<f64> {
    Some(0.3)
}

fn default_max_tokens() -> Option<i64> {
    Some(1000)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Instructions {
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    inline: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Evaluations {
    #[serde(default)]
    model: Option<Provider>,
    metrics: Vec<Yaml>,
    /// `holodeck test optimize`'s settings: no part of a test run.
    #[serde(default)]
    #[allow(dead_code)]
    optimizer: Option<Yaml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Execution {
    #[serde(default)]
    file_timeout: Option<i64>,
    #[serde(default)]
    llm_timeout: Option<i64>,
    #[serde(default)]
    download_timeout: Option<i64>,
    #[serde(default)]
    cache_enabled: Option<bool>,
    #[serde(default)]
    cache_dir: Option<String>,
    #[serde(default)]
    verbose: Option<bool>,
    #[serde(default)]
    quiet: Option<bool>,
    #[serde(default)]
    parallel_test_cases: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TestCase {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    expected_tools: Option<Yaml>,
    #[serde(default)]
    ground_truth: Option<String>,
    #[serde(default)]
    files: Option<Yaml>,
    #[serde(default)]
    retrieval_context: Option<Vec<String>>,
    #[serde(default)]
    evaluations: Option<Vec<Yaml>>,
    #[serde(default)]
    turns: Option<Vec<Turn>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    input: String,
    #[serde(default)]
    ground_truth: Option<String>,
    #[serde(default)]
    expected_tools: Option<Yaml>,
    #[serde(default)]
    files: Option<Yaml>,
    #[serde(default)]
    retrieval_context: Option<Vec<String>>,
    #[serde(default)]
    evaluations: Option<Vec<Yaml>>,
    #[serde(default)]
    turn_config: Option<Yaml>,
}

/// `type: standard` (the default), HoloDeck's `EvaluationMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Standard {
    #[serde(rename = "type", default)]
    _kind: Option<String>,
    metric: String,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    scale: Option<i64>,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default)]
    fail_on_error: bool,
    #[serde(default)]
    retry_on_failure: Option<i64>,
    #[serde(default)]
    timeout_ms: Option<i64>,
    #[serde(default)]
    custom_prompt: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    strip_whitespace: bool,
    #[serde(default)]
    strip_punctuation: bool,
    #[serde(default = "default_absolute_tolerance")]
    absolute_tolerance: f64,
    #[serde(default)]
    relative_tolerance: f64,
    #[serde(default)]
    accept_percent: bool,
    #[serde(default)]
    accept_thousands_separators: bool,
    #[serde(default)]
    response_path: Option<String>,
}

fn yes() -> bool {
    true
}

fn default_absolute_tolerance() -> f64 {
    1e-6
}

/// `type: geval`, HoloDeck's `GEvalMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GEval {
    #[serde(rename = "type")]
    _kind: String,
    name: String,
    criteria: String,
    #[serde(default)]
    evaluation_steps: Option<Vec<String>>,
    #[serde(default)]
    evaluation_params: Option<Vec<String>>,
    #[serde(default)]
    strict_mode: bool,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    fail_on_error: bool,
}

/// `type: rag`, HoloDeck's `RAGMetric`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rag {
    #[serde(rename = "type")]
    _kind: String,
    metric_type: String,
    #[serde(default = "half")]
    threshold: f64,
    #[serde(default = "yes")]
    include_reason: bool,
    #[serde(default)]
    model: Option<Provider>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    fail_on_error: bool,
}

fn half() -> f64 {
    0.5
}

/// What a run sends and scores.
pub struct Plan {
    pub agent: String,
    /// `openai_chat` (providers openai, azure_openai, ollama) or `anthropic_messages`.
    pub protocol: &'static str,
    pub model: Provider,
    /// The instructions, sent as the system prompt.
    pub system: String,
    /// Every metric of every rung, each once.
    pub metrics: Vec<Asked>,
    pub tests: Vec<PlannedTest>,
    /// `execution.llm_timeout` (seconds) and `.parallel_test_cases`.
    pub llm_timeout: Option<u64>,
    pub parallel: Option<usize>,
}

pub struct PlannedTest {
    /// The test case's name, else `test_cases[i]`.
    pub name: String,
    pub turns: Vec<PlannedTurn>,
}

pub struct PlannedTurn {
    pub input: String,
    pub ground_truth: Option<String>,
    pub retrieval_context: Option<Vec<String>>,
    /// Indices into [`Plan::metrics`]: the turn's own list, else its test case's, else the
    /// agent's (HoloDeck's precedence).
    pub metrics: Vec<usize>,
}

/// The judges a run may use: name and model of each `judges:` entry of the config.
pub struct Judges<'a>(pub Vec<(&'a str, &'a str)>);

impl Judges<'_> {
    /// The judge for a HoloDeck `model` (by model name); `None` when no model is named (the
    /// config's only judge then).
    fn for_model(&self, model: Option<&Provider>, key: &str) -> Result<Option<String>, String> {
        let Some(m) = model else { return Ok(None) };
        match self.0.iter().find(|(_, model)| *model == m.name) {
            Some((name, _)) => Ok(Some((*name).to_owned())),
            None => Err(format!(
                "{key}: model {:?} is no judge's model in the config (judges: {}); add a judges: entry with model: {:?}",
                m.name,
                if self.0.is_empty() {
                    "none".to_owned()
                } else {
                    self.0
                        .iter()
                        .map(|(n, m)| format!("{n} ({m})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                m.name
            )),
        }
    }
}

/// Reads and checks `path`; every problem names the file and the key.
pub fn load(path: &Path, judges: &Judges<'_>) -> Result<Plan, String> {
    let at = path.display();
    let read = |p: &Path| -> Result<String, String> {
        let size = std::fs::metadata(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .len();
        if size > MAX_BYTES {
            return Err(format!("{}: larger than {MAX_BYTES} bytes", p.display()));
        }
        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let text = read(path)?;
    let file: AgentFile = serde_norway::from_str(&text).map_err(|e| format!("{at}: {e}"))?;
    let base = path.parent().unwrap_or(Path::new("."));
    plan(file, base, judges, &read).map_err(|e| format!("{at}: {e}"))
}

fn plan(
    file: AgentFile,
    base: &Path,
    judges: &Judges<'_>,
    read: &dyn Fn(&Path) -> Result<String, String>,
) -> Result<Plan, String> {
    let blank = |v: &Option<String>, key: &str| match v {
        Some(s) if s.trim().is_empty() => Err(format!("{key}: must be non-empty if provided")),
        _ => Ok(()),
    };
    if file.name.trim().is_empty() {
        return Err("name: must be a non-empty string".into());
    }
    blank(&file.description, "description")?;
    blank(&file.author, "author")?;
    let _ = (
        &file.observability,
        &file.deployment,
        &file.embedding_provider,
    );
    check_provider(&file.model, "model")?;
    let protocol = protocol_of(&file.model, "model.provider")?;
    let refuse = |key: &str, why: &str| Err(format!("{key}: {why}"));
    if file.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return refuse(
            "tools",
            "the agent's own tools (vector stores, functions, MCP servers, prompts) run in HoloDeck's agent runtime; guardwire sends the model's requests only, so a test of an agent with tools is not run here",
        );
    }
    if file.response_format.is_some() {
        return refuse(
            "response_format",
            "structured output is set up by HoloDeck's agent SDKs, not sent as written; not run here",
        );
    }
    if file.claude.is_some() || file.openai.is_some() {
        return refuse(
            if file.claude.is_some() { "claude" } else { "openai" },
            "settings of HoloDeck's agent SDK backends (not a model request's fields); not run here",
        );
    }
    let system = match (&file.instructions.file, &file.instructions.inline) {
        (Some(_), Some(_)) => {
            return refuse("instructions", "Cannot provide both 'file' and 'inline'")
        }
        (None, None) => return refuse("instructions", "Must provide either 'file' or 'inline'"),
        (Some(f), None) if f.trim().is_empty() => {
            return refuse("instructions.file", "must be non-empty if provided")
        }
        (None, Some(t)) if t.trim().is_empty() => {
            return refuse("instructions.inline", "must be non-empty if provided")
        }
        (Some(f), None) => read(&base.join(f)).map_err(|e| format!("instructions.file: {e}"))?,
        (None, Some(t)) => t.clone(),
    };
    let (mut llm_timeout, mut parallel) = (None, None);
    if let Some(x) = &file.execution {
        let _ = (
            x.file_timeout,
            x.download_timeout,
            x.cache_enabled,
            &x.cache_dir,
            x.verbose,
            x.quiet,
        );
        if let Some(t) = x.llm_timeout {
            llm_timeout = Some(
                u64::try_from(t)
                    .ok()
                    .filter(|t| *t > 0)
                    .ok_or("execution.llm_timeout: a positive number of seconds")?,
            );
        }
        if let Some(n) = x.parallel_test_cases {
            parallel = Some(
                usize::try_from(n)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or("execution.parallel_test_cases: at least 1")?,
            );
        }
    }
    let mut metrics: Vec<Asked> = Vec::new();
    let default_model = file.evaluations.as_ref().and_then(|e| e.model.as_ref());
    if let Some(m) = default_model {
        check_provider(m, "evaluations.model")?;
    }
    // The agent's list is a union discriminated by `type` (which each entry must then
    // give); a test case's or turn's is a plain union, whose members pydantic tries in turn.
    let mut rung = |list: &[Yaml], key: &str, tagged: bool| -> Result<Vec<usize>, String> {
        let mut out = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            let key = format!("{key}[{i}]");
            if let Some(asked) = metric(raw, &key, tagged, default_model, judges)? {
                let at = match metrics.iter().position(|m| *m == asked) {
                    Some(at) => at,
                    None => {
                        metrics.push(asked);
                        metrics.len() - 1
                    }
                };
                if !out.contains(&at) {
                    out.push(at);
                }
            }
        }
        Ok(out)
    };
    let agent_metrics = match &file.evaluations {
        Some(e) if e.metrics.is_empty() => {
            return refuse(
                "evaluations.metrics",
                "metrics must have at least one metric",
            )
        }
        Some(e) => rung(&e.metrics, "evaluations.metrics", true)?,
        None => Vec::new(),
    };
    let cases = file.test_cases.unwrap_or_default();
    if cases.len() > 1000 {
        return refuse("test_cases", "Maximum 1000 test cases per agent");
    }
    let mut tests = Vec::new();
    for (i, tc) in cases.into_iter().enumerate() {
        let key = format!("test_cases[{i}]");
        blank(&tc.name, &format!("{key}.name"))?;
        let name = tc.name.clone().unwrap_or_else(|| key.clone());
        if tc.files.is_some() {
            return refuse(
                &format!("{key}.files"),
                "file inputs are converted by HoloDeck's file processor (PDF, Office, images); not run here",
            );
        }
        if tc.expected_tools.is_some() {
            return refuse(
                &format!("{key}.expected_tools"),
                "tool calls come from the agent's own tools, which guardwire does not run",
            );
        }
        let case_metrics = match &tc.evaluations {
            Some(list) if !list.is_empty() => {
                Some(rung(list, &format!("{key}.evaluations"), false)?)
            }
            _ => None,
        };
        let turns = match tc.turns {
            Some(turns) => {
                let conflicts: Vec<&str> = [
                    ("input", tc.input.is_some()),
                    ("ground_truth", tc.ground_truth.is_some()),
                    ("retrieval_context", tc.retrieval_context.is_some()),
                ]
                .iter()
                .filter(|(_, set)| *set)
                .map(|(k, _)| *k)
                .collect();
                if turns.is_empty() {
                    return refuse(
                        &format!("{key}.turns"),
                        "turns must be a non-empty list if provided",
                    );
                }
                if !conflicts.is_empty() {
                    return refuse(
                        &key,
                        &format!("multi-turn test case (with `turns`) cannot also set top-level {conflicts:?}; move these fields onto each turn"),
                    );
                }
                let mut planned = Vec::new();
                for (j, t) in turns.into_iter().enumerate() {
                    let tkey = format!("{key}.turns[{j}]");
                    if t.files.is_some() {
                        return refuse(
                            &format!("{tkey}.files"),
                            "file inputs are converted by HoloDeck's file processor; not run here",
                        );
                    }
                    if t.expected_tools.is_some() {
                        return refuse(&format!("{tkey}.expected_tools"), "tool calls come from the agent's own tools, which guardwire does not run");
                    }
                    if t.turn_config.is_some() {
                        return refuse(&format!("{tkey}.turn_config"), "read by HoloDeck's Python code graders only, which guardwire does not run");
                    }
                    if t.input.trim().is_empty() {
                        return refuse(
                            &format!("{tkey}.input"),
                            "input must be a non-empty string",
                        );
                    }
                    blank(&t.ground_truth, &format!("{tkey}.ground_truth"))?;
                    let own = match &t.evaluations {
                        Some(list) if !list.is_empty() => {
                            Some(rung(list, &format!("{tkey}.evaluations"), false)?)
                        }
                        _ => None,
                    };
                    planned.push(PlannedTurn {
                        input: t.input,
                        ground_truth: t.ground_truth,
                        retrieval_context: t.retrieval_context,
                        metrics: own
                            .or_else(|| case_metrics.clone())
                            .unwrap_or_else(|| agent_metrics.clone()),
                    });
                }
                planned
            }
            None => {
                let input = tc.input.ok_or_else(|| {
                    format!("{key}: test case requires either `input` (single-turn) or `turns` (multi-turn)")
                })?;
                if input.trim().is_empty() {
                    return refuse(&format!("{key}.input"), "input must be a non-empty string");
                }
                blank(&tc.ground_truth, &format!("{key}.ground_truth"))?;
                vec![PlannedTurn {
                    input,
                    ground_truth: tc.ground_truth,
                    retrieval_context: tc.retrieval_context,
                    metrics: case_metrics.unwrap_or_else(|| agent_metrics.clone()),
                }]
            }
        };
        tests.push(PlannedTest { name, turns });
    }
    if tests.is_empty() {
        return refuse("test_cases", "no test cases to run");
    }
    Ok(Plan {
        agent: file.name,
        protocol,
        model: file.model,
        system,
        metrics,
        tests,
        llm_timeout,
        parallel,
    })
}

/// HoloDeck's `LLMProvider` validation.
fn check_provider(p: &Provider, key: &str) -> Result<(), String> {
    protocol_of(p, &format!("{key}.provider"))?;
    if p.name.trim().is_empty() {
        return Err(format!("{key}.name: name must be a non-empty string"));
    }
    if p.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(format!(
            "{key}.temperature: temperature must be between 0.0 and 2.0"
        ));
    }
    if p.max_tokens.is_some_and(|m| m <= 0) {
        return Err(format!("{key}.max_tokens: max_tokens must be positive"));
    }
    if p.top_p.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return Err(format!("{key}.top_p: top_p must be between 0.0 and 1.0"));
    }
    if p.provider == "azure_openai" && p.endpoint.as_deref().is_none_or(|e| e.trim().is_empty()) {
        return Err(format!(
            "{key}.endpoint: endpoint is required for azure_openai provider"
        ));
    }
    Ok(())
}

fn protocol_of(p: &Provider, key: &str) -> Result<&'static str, String> {
    match p.provider.as_str() {
        "openai" | "azure_openai" | "ollama" => Ok("openai_chat"),
        "anthropic" => Ok("anthropic_messages"),
        other => Err(format!(
            "{key}: {other:?} is not one of openai, azure_openai, anthropic, ollama"
        )),
    }
}

/// One entry of a metrics list (discriminated by `type`, `standard` by default) as a metric
/// with HoloDeck's pass rule; `None` when `enabled: false`.
fn metric(
    raw: &Yaml,
    key: &str,
    tagged: bool,
    default_model: Option<&Provider>,
    judges: &Judges<'_>,
) -> Result<Option<Asked>, String> {
    let has = |k: &str| raw.get(k).is_some();
    let kind = match raw.get("type") {
        Some(t) => t.as_str().unwrap_or("(not a string)"),
        None if tagged => {
            return Err(format!(
                "{key}.type: required in evaluations.metrics (standard, geval, rag or code): HoloDeck reads that list as a union discriminated by type"
            ))
        }
        // The member whose required keys the entry has, as pydantic's union finds it.
        None if has("metric") => "standard",
        None if has("metric_type") => "rag",
        None if has("grader") => "code",
        None if has("criteria") => "geval",
        None => "standard",
    };
    let parse_err = |e: serde_norway::Error| format!("{key}: {e}");
    let judge_of = |model: &Option<Provider>| -> Result<Option<String>, String> {
        if let Some(m) = model {
            check_provider(m, &format!("{key}.model"))?;
        }
        match model {
            Some(m) => judges.for_model(Some(m), &format!("{key}.model")),
            None => judges.for_model(default_model, "evaluations.model"),
        }
    };
    let in_unit = |t: f64| -> Result<f64, String> {
        if (0.0..=1.0).contains(&t) {
            Ok(t)
        } else {
            Err(format!(
                "{key}.threshold: threshold must be between 0.0 and 1.0"
            ))
        }
    };
    match kind {
        "standard" => {
            let m: Standard = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            if m.retry_on_failure.is_some_and(|r| !(1..=3).contains(&r)) {
                return Err(format!("{key}.retry_on_failure: retry_on_failure must be between 1 and 3"));
            }
            if m.timeout_ms.is_some_and(|t| t <= 0) {
                return Err(format!("{key}.timeout_ms: timeout_ms must be positive"));
            }
            if m.scale.is_some_and(|s| s <= 0) {
                return Err(format!("{key}.scale: scale must be positive"));
            }
            if m.custom_prompt.as_ref().is_some_and(|p| p.trim().is_empty()) {
                return Err(format!("{key}.custom_prompt: custom_prompt must be non-empty if provided"));
            }
            if m.absolute_tolerance < 0.0 || m.relative_tolerance < 0.0 {
                return Err(format!("{key}: absolute_tolerance and relative_tolerance are 0 or more"));
            }
            let _ = m.fail_on_error;
            let response_path = m
                .response_path
                .as_deref()
                .map(|p| ResponsePath::parse(p).map(Arc::new))
                .transpose()
                .map_err(|e| format!("{key}.response_path: {e}"))?;
            if !m.enabled {
                return Ok(None);
            }
            let (metric, unset) = match m.metric.as_str() {
                "bleu" => (Metric::Bleu, 0.0),
                "rouge" => (Metric::Rouge, 0.0),
                "meteor" => (Metric::Meteor, 0.0),
                "equality" => (
                    Metric::Equality(Arc::new(Equality {
                        case_insensitive: m.case_insensitive,
                        strip_whitespace: m.strip_whitespace,
                        strip_punctuation: m.strip_punctuation,
                    })),
                    1.0,
                ),
                "numeric" => (
                    Metric::Numeric(Arc::new(Numeric {
                        absolute_tolerance: m.absolute_tolerance,
                        relative_tolerance: m.relative_tolerance,
                        accept_percent: m.accept_percent,
                        accept_thousands_separators: m.accept_thousands_separators,
                    })),
                    1.0,
                ),
                name @ ("groundedness" | "relevance" | "coherence" | "fluency") => {
                    // `custom_prompt`, `scale`, `retry_on_failure` and `timeout_ms` are
                    // checked as HoloDeck checks them; its runner builds these evaluators
                    // from the model alone and uses none of them, nor does guardwire.
                    let kind = Kind::by_name(name).ok_or("unreachable")?;
                    let mut spec = Spec::plain(kind, name);
                    spec.over_five = true;
                    spec.judge = judge_of(&m.model)?;
                    // Without a threshold HoloDeck passes a score above 0: every score over 5.
                    (Metric::Judged(Arc::new(spec)), 0.0)
                }
                other => {
                    return Err(format!(
                        "{key}.metric: {other:?} is not one of groundedness, relevance, coherence, fluency, bleu, rouge, meteor, equality, numeric"
                    ))
                }
            };
            Ok(Some(Asked {
                metric,
                min: m.threshold.unwrap_or(unset),
                response_path,
            }))
        }
        "geval" => {
            let m: GEval = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            if m.name.trim().is_empty() {
                return Err(format!("{key}.name: name must be a non-empty string"));
            }
            if m.criteria.trim().is_empty() {
                return Err(format!("{key}.criteria: criteria must be a non-empty string"));
            }
            let params = m
                .evaluation_params
                .unwrap_or_else(|| vec!["actual_output".into()]);
            if params.is_empty() {
                return Err(format!("{key}.evaluation_params: evaluation_params must not be empty"));
            }
            let params = params
                .iter()
                .map(|p| {
                    Param::by_name(p).ok_or_else(|| {
                        format!(
                            "{key}.evaluation_params: {p:?} is not one of {}",
                            judged::PARAM_NAMES
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let threshold = m.threshold.map(in_unit).transpose()?;
            let _ = m.fail_on_error;
            if !m.enabled {
                return Ok(None);
            }
            let mut spec = Spec::g_eval(
                &m.name,
                &m.criteria,
                m.evaluation_steps.unwrap_or_default(),
                params,
                m.strict_mode,
            )
            .map_err(|e| format!("{key}: {e}"))?;
            spec.judge = judge_of(&m.model)?;
            // DeepEval's threshold is 0.5 when none is given; strict mode scores 1 or 0.
            let min = if m.strict_mode { 1.0 } else { threshold.unwrap_or(0.5) };
            Ok(Some(Asked::new(Metric::Judged(Arc::new(spec)), min)))
        }
        "rag" => {
            let m: Rag = serde_norway::from_value(raw.clone()).map_err(parse_err)?;
            let min = in_unit(m.threshold)?;
            let _ = (m.include_reason, m.fail_on_error);
            let name = m.metric_type.as_str();
            let kind = match name {
                "faithfulness" | "contextual_relevancy" | "contextual_precision"
                | "contextual_recall" | "answer_relevancy" => Kind::by_name(name).ok_or("unreachable")?,
                other => {
                    return Err(format!(
                        "{key}.metric_type: {other:?} is not one of faithfulness, contextual_relevancy, contextual_precision, contextual_recall, answer_relevancy"
                    ))
                }
            };
            if !m.enabled {
                return Ok(None);
            }
            let mut spec = Spec::plain(kind, name);
            spec.judge = judge_of(&m.model)?;
            Ok(Some(Asked::new(Metric::Judged(Arc::new(spec)), min)))
        }
        "code" => Err(format!(
            "{key}: type code runs a Python grader inside HoloDeck's process; guardwire runs no Python code"
        )),
        other => Err(format!(
            "{key}.type: {other:?} is not one of standard, geval, rag, code"
        )),
    }
}
