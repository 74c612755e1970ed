//! `judges:` (the LLMs that judged checks ask, by name) and `exec:` (subprocess handlers, used
//! in packs as `type: <name>`), checked at load.

use super::{check_duration_ms, BaseUrl, ConfigError, ProtocolId};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One judge: an LLM endpoint in one of the four chat protocols guardwire speaks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeConfig {
    /// Validators pick a judge with `params.judge` (optional when exactly one is configured).
    pub name: String,
    /// `openai_chat`, `openai_responses`, `anthropic_messages` or `gemini`.
    pub protocol: String,
    /// Base URL; the protocol's path is appended (`/v1/chat/completions`, `/v1/messages`, ...).
    pub base_url: String,
    /// The environment variable holding the judge's API key (read at load).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The default model; a validator's `params.model` overrides it.
    pub model: String,
    /// Deadline of one verdict, retries included; a validator's `params.timeout_ms` overrides it.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub retry: RetryConfig,
    /// Calls in flight at once; more wait in a queue of `max_queue`, then fail (`on_error`).
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    #[serde(default = "default_max_queue")]
    pub max_queue: usize,
    /// The most of `max_concurrency` one client key may hold; unset, a fair share: the limit
    /// divided by the keys that have calls in flight or waiting (rounded up).
    #[serde(default)]
    pub max_concurrency_per_key: Option<usize>,
    /// The most of `max_queue` one client key may fill; unset, a fair share as above (a key
    /// over its share gives up its newest waiter to a key under it when the queue is full).
    #[serde(default)]
    pub max_queue_per_key: Option<usize>,
    #[serde(default)]
    pub breaker: BreakerConfig,
    #[serde(default)]
    pub cache: CacheConfig,
    /// `max_tokens` of a judge call.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// The embeddings model `cosine_similarity` uses (OpenAI `/v1/embeddings`, Gemini
    /// `batchEmbedContents`); a validator's `params.model` overrides it.
    #[serde(default)]
    pub embedding_model: Option<String>,
    /// Ask for log probabilities with `scale: 1-5` checks, for G-Eval's probability-weighted
    /// score (OpenAI Chat and Responses, Gemini). Off by default: models that do not return
    /// them answer such requests with an error.
    #[serde(default)]
    pub logprobs: bool,
    /// Filled by validation.
    #[serde(skip)]
    pub checked: Option<CheckedJudge>,
}

/// What validation made of a judge's names and URL.
#[derive(Clone, PartialEq)]
pub struct CheckedJudge {
    pub protocol: ProtocolId,
    pub base_url: BaseUrl,
    /// Read from `api_key_env`; never printed (`Debug` shows whether it is set).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for CheckedJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedJudge")
            .field("protocol", &self.protocol)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Retries of a failed call that may succeed when tried again (connect errors, 429, 5xx):
/// exponential backoff with full jitter, within the verdict's deadline (HoloDeck's `RetryConfig`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
    pub exponential_base: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 2,
            base_delay_ms: 200,
            max_delay_ms: 2_000,
            exponential_base: 2.0,
        }
    }
}

/// The circuit breaker: after `failures` failed calls in a row, calls fail at once for
/// `open_ms`; then one trial call decides whether it closes again.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    pub failures: u32,
    pub open_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failures: 5,
            open_ms: 30_000,
        }
    }
}

/// Verdicts kept by a hash of what was judged, so a retried exchange does not pay twice.
/// `entries: 0` turns it off.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub entries: usize,
    pub ttl_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            entries: 10_000,
            ttl_ms: 300_000,
        }
    }
}

/// A subprocess handler: run without a shell, the check as JSON on stdin, `{score, detail,
/// data}` JSON on stdout, killed at its deadline.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// `NAME=value` sets a variable; `NAME` passes guardwire's own. The child's environment is
    /// otherwise empty but for `PATH`, so provider keys never reach it.
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default = "default_exec_timeout_ms")]
    pub timeout_ms: u64,
    /// Processes running at once; more wait (within their deadline) in a queue of `max_queue`.
    #[serde(default = "default_exec_concurrency")]
    pub max_concurrency: usize,
    #[serde(default = "default_max_queue")]
    pub max_queue: usize,
}

fn default_timeout_ms() -> u64 {
    10_000
}
fn default_max_concurrency() -> usize {
    64
}
fn default_max_queue() -> usize {
    256
}
fn default_max_tokens() -> u32 {
    1024
}
fn default_exec_timeout_ms() -> u64 {
    30_000
}
fn default_exec_concurrency() -> usize {
    8
}

pub(super) fn validate_judges(judges: &mut [JudgeConfig]) -> Result<(), ConfigError> {
    let mut names: Vec<String> = Vec::new();
    for (i, j) in judges.iter_mut().enumerate() {
        let name = j.name.clone();
        let at = |m: String| ConfigError::Invalid(format!("judges[{i}] ({name}): {m}"));
        if j.name.is_empty() || names.contains(&j.name) {
            return Err(at("name: must be unique and not empty".into()));
        }
        names.push(j.name.clone());
        let protocol = ProtocolId::from_name(&j.protocol)
            .filter(|p| p.judge_wire().is_some())
            .ok_or_else(|| {
                let known: Vec<&str> = ProtocolId::judges().map(|p| p.as_str()).collect();
                at(format!(
                    "protocol: `{}` is not one of {}",
                    j.protocol,
                    known.join(", ")
                ))
            })?;
        let base_url = BaseUrl::parse(&j.base_url).map_err(|e| at(format!("base_url: {e}")))?;
        if j.model.is_empty() {
            return Err(at("model: must not be empty".into()));
        }
        let api_key = match &j.api_key_env {
            None => None,
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| {
                        at(format!(
                            "api_key_env: the environment variable `{var}` is not set"
                        ))
                    })?,
            ),
        };
        for (key, ms) in [
            ("timeout_ms", j.timeout_ms),
            ("retry.max_delay_ms", j.retry.max_delay_ms),
            ("breaker.open_ms", j.breaker.open_ms),
            ("cache.ttl_ms", j.cache.ttl_ms),
        ] {
            if ms == 0 {
                return Err(at(format!("{key}: must be more than 0 (milliseconds)")));
            }
            check_duration_ms(ms).map_err(|e| at(format!("{key}: {e}")))?;
        }
        check_duration_ms(j.retry.base_delay_ms)
            .map_err(|e| at(format!("retry.base_delay_ms: {e}")))?;
        if j.retry.base_delay_ms > j.retry.max_delay_ms {
            return Err(at(
                "retry.base_delay_ms: must not be more than max_delay_ms".into(),
            ));
        }
        if !(1.0..=10.0).contains(&j.retry.exponential_base) {
            return Err(at("retry.exponential_base: must be between 1 and 10".into()));
        }
        if j.retry.max_retries > 10 {
            return Err(at("retry.max_retries: at most 10".into()));
        }
        if j.max_concurrency == 0 {
            return Err(at("max_concurrency: must be at least 1".into()));
        }
        for (name, value, limit) in [
            (
                "max_concurrency_per_key",
                j.max_concurrency_per_key,
                j.max_concurrency,
            ),
            ("max_queue_per_key", j.max_queue_per_key, j.max_queue),
        ] {
            if value.is_some_and(|v| v == 0 || v > limit) {
                let whole = name.trim_end_matches("_per_key");
                return Err(at(format!("{name}: must be from 1 to {whole} ({limit})")));
            }
        }
        if j.breaker.failures == 0 {
            return Err(at("breaker.failures: must be at least 1".into()));
        }
        if j.max_tokens == 0 {
            return Err(at("max_tokens: must be at least 1".into()));
        }
        j.checked = Some(CheckedJudge {
            protocol,
            base_url,
            api_key,
        });
    }
    Ok(())
}

pub(super) fn validate_exec(handlers: &BTreeMap<String, ExecConfig>) -> Result<(), ConfigError> {
    for (name, h) in handlers {
        let at = |m: String| ConfigError::Invalid(format!("exec.{name}: {m}"));
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(at("the name must be letters, digits, `_` or `-`".into()));
        }
        if h.command.is_empty() {
            return Err(at("command: must not be empty".into()));
        }
        if h.timeout_ms == 0 {
            return Err(at("timeout_ms: must be more than 0 (milliseconds)".into()));
        }
        check_duration_ms(h.timeout_ms).map_err(|e| at(format!("timeout_ms: {e}")))?;
        if h.max_concurrency == 0 {
            return Err(at("max_concurrency: must be at least 1".into()));
        }
        for var in &h.env {
            let name = var.split_once('=').map_or(var.as_str(), |(n, _)| n);
            if name.is_empty() || name.contains('\0') {
                return Err(at(format!("env: `{var}` is not NAME or NAME=value")));
            }
        }
    }
    Ok(())
}

/// Production evals (the packs' `evals:`): where turns wait to be evaluated, off the request
/// path. Read at start (a reload keeps the queue).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalsConfig {
    /// Turns waiting; a turn that finds the queue full is dropped and counted
    /// (`guardwire_evals_dropped_total`), never waited for.
    pub max_queue: usize,
    /// Bytes of the turns waiting or being evaluated (their conversations' and answers' text):
    /// a turn that would take the queue past it is dropped and counted the same way.
    pub max_queue_bytes: usize,
    /// Turns evaluated at once.
    pub max_concurrency: usize,
    /// The request header that names the session (`sample_sessions`, `sample_turns`); without
    /// it a session is known by its conversation's first messages.
    pub session_header: String,
    /// The request header that ends the session with this turn (`true` or `1`): the
    /// session-level evals (`on_session_complete`, `sample_sessions`) run once it is answered.
    pub session_end_header: String,
    /// A session without a turn for this long has ended (its session-level evals run).
    pub session_idle_ms: u64,
    /// The WordNet 3.0 folder the packs' `meteor` evals read (loaded when a pack asks for it).
    pub wordnet_dir: std::path::PathBuf,
}

impl Default for EvalsConfig {
    fn default() -> Self {
        EvalsConfig {
            max_queue: 1000,
            // 1,000 turns of 64 KiB: evals are a sample, their backlog need not hold more.
            max_queue_bytes: 64 << 20,
            max_concurrency: 4,
            session_header: "x-session-id".into(),
            session_end_header: "x-session-end".into(),
            // A quarter of an hour: longer than a person's pause, short enough to report on.
            session_idle_ms: 15 * 60 * 1000,
            wordnet_dir: crate::scoring::meteor::Meteor::default_dir().to_path_buf(),
        }
    }
}

pub(super) fn validate_evals(e: &EvalsConfig) -> Result<(), ConfigError> {
    let at = |m: &str| ConfigError::Invalid(format!("evals: {m}"));
    if e.max_queue == 0 || e.max_queue > 1_000_000 {
        return Err(at("max_queue: must be from 1 to 1000000"));
    }
    if e.max_queue_bytes == 0 {
        return Err(at("max_queue_bytes: must be at least 1"));
    }
    if e.max_concurrency == 0 || e.max_concurrency > 1024 {
        return Err(at("max_concurrency: must be from 1 to 1024"));
    }
    if http::HeaderName::from_bytes(e.session_header.as_bytes()).is_err() {
        return Err(at("session_header: not a valid header name"));
    }
    if http::HeaderName::from_bytes(e.session_end_header.as_bytes()).is_err()
        || e.session_end_header.eq_ignore_ascii_case(&e.session_header)
    {
        return Err(at(
            "session_end_header: not a valid header name, or the same as session_header",
        ));
    }
    if !(1_000..=30 * 24 * 3_600_000).contains(&e.session_idle_ms) {
        return Err(at(
            "session_idle_ms: must be from 1000 (1 s) to 2592000000 (30 days)",
        ));
    }
    Ok(())
}
