//! Judged checks at run time: asking an LLM judge (`llm`), an HTTP endpoint (`rest`) or a
//! subprocess (`exec`) for a verdict, each call behind a [`Gate`] (cache, circuit breaker,
//! concurrency limit, retries, one deadline). What a pack asks for is in
//! [`crate::policy::judged`]; where the verdicts are awaited (before the call, before a whole
//! answer is released, at a stream's end) is in `crate::proxy`.
//!
//! Every way of not getting a verdict is a [`JudgeError`] with its [`ErrorKind`]; the
//! validator's `on_error` then decides (fail closed by default). The text judged is never
//! logged.

mod exec;
mod gate;
mod llm;
mod rest;
mod subject;
#[cfg(target_os = "linux")]
pub mod supervisor;
mod verdict;

pub use gate::Gate;
pub use subject::{Answer, Subject};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::policy::judged::{JudgedCheck, JudgedKind};
use crate::upstream::{UpstreamBase, UpstreamClient};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A verdict: a score from 0 to 1 (after scale normalisation), with the judge's reason and
/// label when it gave them.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub score: f64,
    pub reason: Option<String>,
    pub label: Option<String>,
}

/// Why there is no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Could not connect, or the connection failed.
    Transport,
    /// The deadline passed.
    Timeout,
    /// An HTTP status that is not success.
    Status,
    /// A reply without a readable verdict.
    Malformed,
    /// The concurrency limit and its queue were full.
    Overloaded,
    /// The circuit breaker is open.
    CircuitOpen,
    /// The subprocess could not run, exited non-zero or wrote something else than a verdict.
    Process,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Transport => "transport",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Status => "status",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::CircuitOpen => "circuit_open",
            ErrorKind::Process => "process",
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {detail}", kind.as_str())]
pub struct JudgeError {
    pub kind: ErrorKind,
    /// What went wrong, without the text judged.
    pub detail: String,
}

impl JudgeError {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        JudgeError {
            kind,
            detail: detail.into(),
        }
    }
}

/// The configured judges and `exec:` handlers, with their gates; rebuilt on reload, keeping
/// the gates (breaker state, cache) of every judge and handler whose settings did not change.
#[derive(Default)]
pub struct Judges {
    llm: HashMap<String, Arc<llm::JudgeClient>>,
    exec: HashMap<String, Arc<exec::Handler>>,
    /// `rest_eval` endpoints by base URL, made on first use.
    rest: Mutex<HashMap<String, Arc<(UpstreamBase, Gate)>>>,
    /// Keys the verdict cache's hashes: secret, so no one can craft a text whose hash
    /// collides with one that passed.
    hash_key: std::hash::RandomState,
    /// Starts the gates' `judge` labels: empty for the request path's, `eval:` for the evals'
    /// own gates (so evals never take the request path's permits or trip its breakers).
    label_prefix: &'static str,
}

impl Judges {
    /// The judges and handlers of `config`, gates labelled with `label_prefix`.
    pub fn build(
        config: &Config,
        previous: Option<&Judges>,
        label_prefix: &'static str,
    ) -> Result<Judges, String> {
        let mut llm = HashMap::new();
        for j in &config.judges {
            let kept = previous
                .and_then(|p| p.llm.get(&j.name))
                .filter(|c| c.config == *j);
            let client = match kept {
                Some(c) => Arc::clone(c),
                None => Arc::new(llm::JudgeClient::new(j, label_prefix)?),
            };
            llm.insert(j.name.clone(), client);
        }
        let mut exec = HashMap::new();
        for (name, h) in &config.exec {
            let kept = previous
                .and_then(|p| p.exec.get(name))
                .filter(|c| c.config == *h);
            let handler = match kept {
                Some(c) => Arc::clone(c),
                None => Arc::new(exec::Handler::new(name, h, label_prefix)),
            };
            exec.insert(name.clone(), handler);
        }
        let rest = previous
            .map(|p| p.rest.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default();
        Ok(Judges {
            llm,
            exec,
            rest: Mutex::new(rest),
            hash_key: previous.map(|p| p.hash_key.clone()).unwrap_or_default(),
            label_prefix,
        })
    }

    fn rest_gate(
        &self,
        base: &crate::config::BaseUrl,
    ) -> Result<Arc<(UpstreamBase, Gate)>, JudgeError> {
        let key = base.to_string();
        let mut map = self.rest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = map.get(&key) {
            return Ok(Arc::clone(g));
        }
        let upstream =
            UpstreamBase::new(base).map_err(|e| JudgeError::new(ErrorKind::Transport, e))?;
        // Endpoints are named in packs, not in `judges:`: the judges' default settings.
        let gate = Gate::with_defaults(
            format!("{}rest:{}", self.label_prefix, base.authority),
            crate::config::RetryConfig::default(),
            64,
            256,
        );
        let entry = Arc::new((upstream, gate));
        map.insert(key, Arc::clone(&entry));
        Ok(entry)
    }
}

/// What a judged check needs to make its call: the registry, whose call it is, the HTTP
/// client, the metrics.
#[derive(Clone)]
pub struct JudgeEnv {
    pub judges: Arc<Judges>,
    /// The client key the verdicts are for: its share of each gate's capacity.
    pub tenant: gate::Tenant,
    pub client: Arc<UpstreamClient>,
    pub metrics: Arc<Metrics>,
}

/// The verdict of one judged check on `subject`.
pub async fn verdict(
    env: &JudgeEnv,
    check: &JudgedCheck,
    subject: &Subject,
) -> Result<Verdict, JudgeError> {
    match &check.kind {
        JudgedKind::Llm(j) => {
            let client = env.judges.llm.get(&j.judge).ok_or_else(|| {
                JudgeError::new(
                    ErrorKind::Transport,
                    format!("judge `{}` is not configured", j.judge),
                )
            })?;
            let deadline = deadline(check.timeout_ms.unwrap_or(client.config.timeout_ms));
            client.judge(env, j, subject, deadline).await
        }
        JudgedKind::Rest(r) => {
            let entry = env.judges.rest_gate(&r.base)?;
            let default = if r.a2a {
                rest::A2A_DEFAULT_TIMEOUT_MS
            } else {
                rest::DEFAULT_TIMEOUT_MS
            };
            let deadline = deadline(check.timeout_ms.unwrap_or(default));
            rest::evaluate(env, &entry.0, &entry.1, r, subject, deadline).await
        }
        JudgedKind::Similarity(sim) => {
            let client = env.judges.llm.get(&sim.judge).ok_or_else(|| {
                JudgeError::new(
                    ErrorKind::Transport,
                    format!("judge `{}` is not configured", sim.judge),
                )
            })?;
            let deadline = deadline(check.timeout_ms.unwrap_or(client.config.timeout_ms));
            client.similarity(env, sim, subject, deadline).await
        }
        JudgedKind::Exec(e) => {
            let handler = env.judges.exec.get(&e.handler).ok_or_else(|| {
                JudgeError::new(
                    ErrorKind::Process,
                    format!("exec handler `{}` is not configured", e.handler),
                )
            })?;
            let deadline = deadline(check.timeout_ms.unwrap_or(handler.config.timeout_ms));
            handler.evaluate(env, e, subject, deadline).await
        }
    }
}

/// LLM judge `judge`'s reply to a prompt of the caller's own (`system`, `user`), read by
/// `read` (a reply it refuses is a [`ErrorKind::Malformed`] error): the judged metrics' lists
/// of verdicts and G-Eval's generated steps. Through the judge's gate (retries, breaker,
/// concurrency limit) within its `timeout_ms`; never cached.
pub async fn reply<T>(
    env: &JudgeEnv,
    judge: &str,
    system: &str,
    user: &str,
    read: &(dyn Fn(&str) -> Result<T, String> + Sync),
) -> Result<T, JudgeError> {
    let client = env.judges.llm.get(judge).ok_or_else(|| {
        JudgeError::new(
            ErrorKind::Transport,
            format!("judge `{judge}` is not configured"),
        )
    })?;
    let deadline = deadline(client.config.timeout_ms);
    client.reply(env, system, user, deadline, read).await
}

fn deadline(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(ms)
}

impl Judges {
    /// A verdict cache key: a keyed hash of everything that decides a verdict.
    fn cache_key(&self, parts: &[&[u8]]) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = self.hash_key.build_hasher();
        for p in parts {
            p.hash(&mut h);
        }
        h.finish()
    }
}

/// The most of a judge's or endpoint's reply that is read.
const MAX_REPLY_BYTES: usize = 1 << 20;

/// One HTTP call of a judge or endpoint: its reply body on a 2xx status. Connect errors, 429
/// and 5xx may be tried again (and count towards the breaker); other statuses may not.
async fn http_call(
    env: &JudgeEnv,
    base: &UpstreamBase,
    method: http::Method,
    path_and_query: &str,
    headers: http::HeaderMap,
    body: Vec<u8>,
) -> Result<bytes::Bytes, gate::AttemptError> {
    use gate::AttemptError;
    use http_body_util::BodyExt;
    let uri = base
        .uri_for(path_and_query)
        .map_err(|e| AttemptError::judge(ErrorKind::Transport, format!("bad path: {e}"), false))?;
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .map_err(|e| AttemptError::judge(ErrorKind::Transport, e.to_string(), false))?;
    *req.headers_mut() = headers;
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    req.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    let resp = env
        .client
        .request(base, req)
        .await
        .map_err(|e| AttemptError::judge(ErrorKind::Transport, e.to_string(), true))?;
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_REPLY_BYTES)
        .collect()
        .await
        .map_err(|e| {
            AttemptError::judge(
                ErrorKind::Transport,
                format!("reading the reply: {e}"),
                true,
            )
        })?
        .to_bytes();
    if !status.is_success() {
        let detail = format!("HTTP {}", status.as_u16());
        // 429 and 5xx: the judge's own trouble. Any other refusal is about this request (too
        // long, say), which a client's content can provoke.
        return Err(
            if status == http::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                AttemptError::judge(ErrorKind::Status, detail, true)
            } else {
                AttemptError::input(ErrorKind::Status, detail)
            },
        );
    }
    Ok(body)
}
