//! A HoloDeck `agent.yaml` read with HoloDeck's own models (`holodeck.models.agent`,
//! `.evaluation`, `.test_case`, `.llm`): the same keys (unknown ones refused, as its
//! `extra="forbid"`), the same validation and defaults, and a plan of what `eval --holodeck`
//! sends and scores. What guardwire cannot run — the agent's own tools, files, Python code
//! graders, structured output, SDK-specific settings — is refused naming the key.

use super::metric::metric;
use super::provider::{check_provider, protocol_of, Judges, Provider};
use crate::suite::metrics::Asked;
use serde::Deserialize;
use serde_norway::Value as Yaml;
use std::path::Path;

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
