//! Live runs (`guardwire eval --cases FILE --live`, and scenarios): each case sent to its
//! route's configured upstream through guardwire itself — the config loaded and compiled as
//! `serve` does, the server started in process on an ephemeral 127.0.0.1 port
//! ([`crate::server::start_runtime`]), every case an HTTP request to it — so the request path,
//! the guarded stream and the whole-answer checks are the proxy's own, not a copy.
//!
//! The upstream is always the config's (a case names at most a route); the client-facing
//! listener, TLS, the operators' listener and the access log are replaced for the run, and the
//! audit log goes to the run (each verdict read back by request id). Concurrency, a per-case
//! timeout and retries with exponential backoff follow HoloDeck's `RetryConfig`: `max_retries`
//! retries after the first attempt, the `k`-th (from 0) after `min(base_delay *
//! exponential_base^k, max_delay)` seconds; retried are 429, 5xx answers and connection errors
//! (guardwire answers 502/504 when the upstream fails or times out), never a 4xx (a block is
//! a 400); the timeout bounds the whole case, retries and waits included.

mod send;

use super::cases::{self, Case, CaseResult};
use super::metrics::Scorer;
use super::observed::{GuardVerdict, Observed};
use super::record;
use crate::config::Config;
use crate::judge::Answer;
use crate::protocol::Protocol;
use crate::proxy::Runtime;
use crate::server::RunningServer;
use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The environment variable a live run reads a client key from, when the config has `keys:`.
pub const KEY_ENV: &str = "GUARDWIRE_EVAL_KEY";

/// HoloDeck's `RetryConfig`: retries after the first attempt, and the waits between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryConfig {
    pub max_retries: u32,
    /// Seconds before the first retry.
    pub base_delay: f64,
    /// The longest wait, in seconds.
    pub max_delay: f64,
    pub exponential_base: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 3,
            base_delay: 2.0,
            max_delay: 60.0,
            exponential_base: 2.0,
        }
    }
}

impl RetryConfig {
    /// HoloDeck's validation: positive delays, and a base that does not shrink them.
    pub fn check(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--retry-base-delay", self.base_delay),
            ("--retry-max-delay", self.max_delay),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "{flag} {v}: a delay is a positive number of seconds"
                ));
            }
        }
        if !(self.exponential_base.is_finite() && self.exponential_base >= 1.0) {
            return Err(format!(
                "--retry-exponential-base {}: a number of at least 1",
                self.exponential_base
            ));
        }
        Ok(())
    }

    /// The wait before retry `k` (from 0).
    pub fn delay(&self, k: u32) -> Duration {
        let d = self.base_delay
            * self
                .exponential_base
                .powi(i32::try_from(k).unwrap_or(i32::MAX));
        Duration::from_secs_f64(if d.is_finite() {
            d.min(self.max_delay)
        } else {
            self.max_delay
        })
    }
}

/// How a live run runs.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Cases in flight at once.
    pub concurrency: usize,
    /// The longest a case may take, retries included.
    pub timeout: Duration,
    pub retry: RetryConfig,
    /// Ask every case for a streamed answer (else: as the case says).
    pub stream: bool,
    /// The model of cases given as `input` (whose request names none).
    pub model: Option<String>,
}

/// The audit lines of the run's requests, by request id; each attempt takes its own.
#[derive(Default)]
struct Verdicts {
    by_request: Mutex<HashMap<String, Vec<GuardVerdict>>>,
}

/// The audit sink of the run: whole lines, read back into [`Verdicts`].
struct Sink {
    verdicts: Arc<Verdicts>,
    partial: Vec<u8>,
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(end) = memchr::memchr(b'\n', &self.partial) {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let (id, mode) = (s("request_id"), s("mode"));
            // Only this run's requests, and verdicts (not eval results).
            if !id.starts_with(ID_PREFIX) || mode == "eval" {
                continue;
            }
            let verdict = GuardVerdict {
                validator: s("validator"),
                check: s("type"),
                phase: s("phase"),
                mode,
            };
            if let Ok(mut map) = self.verdicts.by_request.lock() {
                map.entry(id).or_default().push(verdict);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const ID_PREFIX: &str = "gw-eval-";

/// guardwire running in process for a live run.
pub struct Harness {
    tokio: tokio::runtime::Runtime,
    server: Option<RunningServer>,
    shared: Arc<Shared>,
}

/// What every case's task reads.
struct Shared {
    addr: SocketAddr,
    runtime: Arc<Runtime>,
    verdicts: Arc<Verdicts>,
    key: Option<String>,
    next_id: AtomicU64,
}

impl Harness {
    /// Loads `config` as `serve` does and starts it on 127.0.0.1:0.
    pub fn start(config: &Path) -> Result<Harness, String> {
        let mut cfg = Config::load(config).map_err(|e| e.to_string())?;
        cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        cfg.tls = None;
        cfg.admin.listen = None;
        cfg.log.access = false;
        cfg.audit.include_match = false;
        cfg.capture.path = None;
        let mut runtime = Runtime::build(cfg).map_err(|e| e.to_string())?;
        let verdicts = Arc::new(Verdicts::default());
        runtime.audit = Arc::new(crate::audit::Audit::to_writer(Box::new(Sink {
            verdicts: Arc::clone(&verdicts),
            partial: Vec::new(),
        })));
        let key = match std::env::var(KEY_ENV) {
            Ok(k) if !k.is_empty() => Some(k),
            _ if !runtime.keys.is_empty() => {
                return Err(format!(
                    "{}: keys: every request needs a client key; a live run sends the one in {KEY_ENV}, which is not set",
                    config.display()
                ))
            }
            _ => None,
        };
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let server = tokio
            .block_on(crate::server::start_runtime(runtime, None))
            .map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            addr: server.addr,
            runtime: server.gateway.runtime(),
            verdicts,
            key,
            next_id: AtomicU64::new(0),
        });
        Ok(Harness {
            tokio,
            server: Some(server),
            shared,
        })
    }

    /// The runtime the in-process guardwire serves with.
    pub fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    /// Runs `f` to its end on the run's runtime (a scenario's judged assertions).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.tokio.block_on(f)
    }

    /// One exchange, now (a scenario's turns go one after the other).
    pub fn send(&self, p: &Prepared, opts: &LiveOptions) -> (Observed, Answer) {
        self.tokio.block_on(exchange(&self.shared, p, opts))
    }

    /// Stops the server (open exchanges get a second).
    pub fn stop(mut self) {
        if let Some(server) = self.server.take() {
            self.tokio.block_on(server.shutdown(Duration::from_secs(1)));
        }
    }
}

/// A request ready to send.
#[derive(Clone)]
pub struct Prepared {
    pub path: String,
    pub body: Bytes,
    pub protocol: &'static dyn Protocol,
    pub streamed: bool,
}

/// The request of `case`: its route's (the case's, else the first of its protocol), its
/// model (`--model` for a case given as `input`), streamed when the case or `--stream` asks.
pub fn prepare(rt: &Runtime, case: &Case, opts: &LiveOptions) -> Result<Prepared, String> {
    let ex = record::read(&case.exchange, case.line)?;
    let mut body: Value =
        serde_json::from_slice(&ex.request).map_err(|e| format!("the request is not JSON: {e}"))?;
    if body.get("model").and_then(Value::as_str) == Some("case") {
        // Built by cases.rs from `input`: it names no model.
        let model = opts.model.as_deref().ok_or_else(|| {
            format!(
                "case {:?} gives input, not a request: a live run needs --model for it",
                case.id
            )
        })?;
        body["model"] = Value::from(model);
    }
    prepare_body(
        rt,
        ex.route.as_deref(),
        ex.protocol,
        ex.path,
        body,
        opts.stream,
    )
}

/// A request body for a route (by name, else the first route of `protocol`, else OpenAI
/// chat's), streamed when `stream` or the body asks.
pub fn prepare_body(
    rt: &Runtime,
    route: Option<&str>,
    protocol: Option<&'static dyn Protocol>,
    path: Option<String>,
    mut body: Value,
    stream: bool,
) -> Result<Prepared, String> {
    let ex = record::Exchange {
        id: String::new(),
        route: route.map(str::to_owned),
        protocol,
        path: None,
        request: Vec::new().into(),
        answer: record::Answer::None,
        key_id: None,
    };
    let route = super::replay::route(rt, None, &ex)?;
    if route.upstream.is_none() {
        return Err(format!(
            "route {} has no upstream in the config (upstreams: or routes[].upstream)",
            route.name
        ));
    }
    let protocol = super::replay::protocol_on(route, protocol)?;
    let gemini = protocol.name() == "gemini";
    if stream && !gemini {
        if let Some(o) = body.as_object_mut() {
            o.insert("stream".into(), Value::Bool(true));
        }
    }
    let streamed = if gemini {
        stream
            || path
                .as_deref()
                .is_some_and(|p| p.contains(":streamGenerateContent"))
    } else {
        body.get("stream").and_then(Value::as_bool) == Some(true)
    };
    // Usage (tokens) comes on an OpenAI-style stream only when asked for: ask, as a client
    // that counts tokens does (a request that says otherwise is sent as it is).
    if streamed && protocol.usage_on_request() {
        if let Some(o) = body.as_object_mut() {
            o.entry("stream_options")
                .or_insert_with(|| serde_json::json!({"include_usage": true}));
        }
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    let mut path = path.unwrap_or_else(|| record::default_path(protocol, streamed, &bytes));
    if gemini && streamed && !path.contains("alt=sse") {
        path.push_str(if path.contains('?') {
            "&alt=sse"
        } else {
            "?alt=sse"
        });
    }
    if let Some(prefix) = &route.prefix {
        if !path.starts_with(prefix.as_str()) {
            path = format!("{}{path}", prefix.trim_end_matches('/'));
        }
    }
    Ok(Prepared {
        path,
        body: Bytes::from(bytes),
        protocol,
        streamed,
    })
}

/// One exchange, with retries, within the timeout: what was observed and the answer (its
/// text, its tool calls with their arguments).
async fn exchange(shared: &Shared, p: &Prepared, opts: &LiveOptions) -> (Observed, Answer) {
    let started = Instant::now();
    let mut obs = Observed {
        streamed: p.streamed,
        ..Observed::default()
    };
    let mut answer = Answer::default();
    let run = attempts(shared, p, opts, &mut obs, &mut answer);
    if tokio::time::timeout(opts.timeout, run).await.is_err() {
        obs.error = Some(format!(
            "timed out after {} ms (--timeout, retries included)",
            opts.timeout.as_millis()
        ));
        obs.status = None;
    }
    obs.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    (obs, answer)
}

async fn attempts(
    shared: &Shared,
    p: &Prepared,
    opts: &LiveOptions,
    obs: &mut Observed,
    answer: &mut Answer,
) {
    let limits = &shared.runtime.config.limits;
    // What guardwire may send back: the answer, and its own framing around it.
    let max_bytes = limits.max_response_bytes.saturating_mul(2).max(1 << 20);
    for k in 0..=opts.retry.max_retries {
        if k > 0 {
            tokio::time::sleep(opts.retry.delay(k - 1)).await;
        }
        obs.attempts = k + 1;
        let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{ID_PREFIX}{n}");
        let reply = send::send(shared.addr, p, &id, shared.key.as_deref(), max_bytes).await;
        obs.verdicts = shared
            .verdicts
            .by_request
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&id))
            .unwrap_or_default();
        let retry = match reply {
            send::Reply::Failed(e) => {
                obs.status = None;
                obs.error = Some(e);
                true
            }
            send::Reply::Answer { status, sse, body } => {
                obs.status = Some(status);
                let read = send::read(p.protocol, status, sse, &body, limits.max_frame_bytes);
                answer.text = read.text;
                obs.tool_calls = read.tool_calls.iter().map(|c| c.1.clone()).collect();
                answer.tool_calls = read.tool_calls.into_iter().map(|c| (c.1, c.2)).collect();
                obs.input_tokens = read.input_tokens;
                obs.output_tokens = read.output_tokens;
                obs.error = read.error;
                status == 429 || status >= 500
            }
        };
        if !retry || obs.blocked().is_some() {
            return;
        }
    }
}

/// Runs every case live, `opts.concurrency` at a time; results in the cases' order.
pub fn run_cases(
    h: &Harness,
    all: &[Case],
    opts: &LiveOptions,
    scorer: &Scorer,
) -> Vec<CaseResult> {
    let prepared: Vec<Result<Prepared, String>> =
        all.iter().map(|c| prepare(h.runtime(), c, opts)).collect();
    let observed: Vec<Option<(Observed, Answer)>> = h.tokio.block_on(async {
        let limit = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        for (i, p) in prepared.iter().enumerate() {
            let Ok(p) = p else { continue };
            let (p, shared, opts, limit) = (
                p.clone(),
                Arc::clone(&h.shared),
                opts.clone(),
                Arc::clone(&limit),
            );
            tasks.spawn(async move {
                let _permit = limit.acquire_owned().await;
                (i, exchange(&shared, &p, &opts).await)
            });
        }
        let mut out: Vec<Option<(Observed, Answer)>> = vec![None; prepared.len()];
        while let Some(done) = tasks.join_next().await {
            if let Ok((i, r)) = done {
                out[i] = Some(r);
            }
        }
        out
    });
    // Every case answered first; then each scored, cross-variant graders comparing the
    // answers of its base or variants, all of this run.
    let runs: Vec<(Case, Observed, String)> = all
        .iter()
        .zip(prepared)
        .zip(observed)
        .map(|((case, p), o)| {
            let (obs, answer) = match (p, o) {
                (Err(e), _) => (
                    Observed {
                        error: Some(e),
                        ..Observed::default()
                    },
                    Answer::default(),
                ),
                (Ok(_), Some(r)) => r,
                (Ok(_), None) => (
                    Observed {
                        error: Some("the case's task ended without a result".into()),
                        ..Observed::default()
                    },
                    Answer::default(),
                ),
            };
            (answered(case, &obs, &answer.text), obs, answer.text)
        })
        .collect();
    let answered: Vec<Case> = runs.iter().map(|r| r.0.clone()).collect();
    let related = cases::relations(&answered);
    runs.into_iter()
        .zip(related)
        .map(|((case, obs, text), rel)| {
            let rel: Vec<&Case> = rel.iter().map(|&i| &answered[i]).collect();
            result(case, obs, text, scorer, &rel)
        })
        .collect()
}

/// The packs' verdict of a live exchange: blocked (by which validator, in which phase), an
/// error (the case has no answer to judge: it fails), or released.
pub fn pack_verdict(obs: &Observed) -> Option<String> {
    if let Some(b) = obs.blocked() {
        return Some(format!(
            "blocked at {} by {} ({})",
            b.phase, b.validator, b.check
        ));
    }
    obs.error.as_ref().map(|e| {
        let tries = if obs.attempts > 1 {
            format!(" (after {} attempts)", obs.attempts)
        } else {
            String::new()
        };
        format!("not answered{tries}: {e}")
    })
}

/// The case as the metrics read it: with what the run made (the answer, its tool calls, the
/// totals). A case that got no complete answer (an upstream error, a timeout, a cut stream;
/// not a block) has no output or tool calls to compare: the graders that read them, across
/// variants too, do not score it (never a match of two empty answers).
fn answered(case: &Case, obs: &Observed, text: &str) -> Case {
    let mut answered = case.clone();
    let unanswered = obs.error.is_some() && obs.blocked().is_none();
    answered.output = (!unanswered).then(|| text.to_owned());
    answered.tool_calls = (!unanswered).then(|| {
        obs.tool_calls
            .iter()
            .map(|name| cases::ToolCall {
                name: name.clone(),
                arguments: None,
            })
            .collect()
    });
    answered.trajectory.steps = (!unanswered).then_some(obs.tool_calls.len() as u64);
    answered.trajectory.tokens = match (obs.input_tokens, obs.output_tokens) {
        (None, None) => None,
        (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
    };
    answered.trajectory.duration_ms = Some(obs.duration_ms.round() as u64);
    answered
}

fn result(
    answered: Case,
    obs: Observed,
    text: String,
    scorer: &Scorer,
    related: &[&Case],
) -> CaseResult {
    let scores = cases::score_all(scorer, &answered, related);
    CaseResult {
        id: answered.id,
        tags: answered.tags,
        input: answered.input,
        output: Some(text),
        expected: answered.expected,
        pack: pack_verdict(&obs),
        blocked_span: None, // a live run keeps no matched text (its audit lines omit it)
        scores,
        observed: Some(obs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_holodecks_retry_config() {
        let r = RetryConfig::default();
        let secs: Vec<f64> = (0..6).map(|k| r.delay(k).as_secs_f64()).collect();
        assert_eq!(secs, [2.0, 4.0, 8.0, 16.0, 32.0, 60.0]);
        let r = RetryConfig {
            max_retries: 2,
            base_delay: 0.5,
            max_delay: 1.0,
            exponential_base: 3.0,
        };
        assert_eq!(r.delay(0), Duration::from_millis(500));
        assert_eq!(r.delay(1), Duration::from_secs(1));
        assert_eq!(r.delay(u32::MAX), Duration::from_secs(1));
        assert!(r.check().is_ok());
        for bad in [
            RetryConfig {
                base_delay: 0.0,
                ..r
            },
            RetryConfig {
                max_delay: -1.0,
                ..r
            },
            RetryConfig {
                exponential_base: 0.5,
                ..r
            },
            RetryConfig {
                base_delay: f64::NAN,
                ..r
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
