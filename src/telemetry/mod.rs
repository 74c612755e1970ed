//! What guardwire tells about each request besides metrics: the log subscriber, OpenTelemetry
//! spans (the `otel` feature, the `telemetry:` config) and the opt-in access log
//! (`log.access`).
//!
//! Request spans use their own target, [`TARGET`], which only the OpenTelemetry layer listens
//! to: with traces off no layer is interested, so creating a span costs one cached check and
//! the log shows nothing new. A request's [`RequestTrace`] carries its span and what the
//! access line needs, and is finished once, when the answer (or the stream) ends.

#[cfg(feature = "otel")]
mod otel;
pub mod throttle;

use crate::config::{Config, LogFormat};
use crate::protocol::Protocol;
use http::{HeaderMap, Method};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tracing::field::Empty;
use tracing::Span;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The target of request spans and verdict events (for OpenTelemetry, not the log).
pub const TARGET: &str = "guardwire::otel";

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The trace pipeline, when traces are on: flush it with [`Tracing::shutdown`] at exit.
pub struct Tracing {
    #[cfg(feature = "otel")]
    export: Option<otel::TraceExport>,
}

impl Tracing {
    /// Sends the spans still batched (blocking; call it off the runtime's worker threads).
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(export) = self.export {
            export.shutdown();
        }
    }
}

/// Installs the global subscriber: the log (`log.level`, `log.format`; `RUST_LOG` wins) and,
/// with `telemetry.otlp_endpoint`, the OpenTelemetry layer. Call inside the Tokio runtime.
pub fn init(config: &Config) -> Result<Tracing, String> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.level));
    let not_spans = tracing_subscriber::filter::filter_fn(|m| m.target() != TARGET);
    // Colour only on a terminal: escape codes would end up in files and the journal.
    let ansi = std::io::stdout().is_terminal();
    let fmt: BoxedLayer = match config.log.format {
        LogFormat::Json => Box::new(tracing_subscriber::fmt::layer().json().with_ansi(ansi)),
        LogFormat::Text => Box::new(tracing_subscriber::fmt::layer().with_ansi(ansi)),
    };
    let log: BoxedLayer = Box::new(fmt.with_filter(filter).with_filter(not_spans));
    #[cfg(feature = "otel")]
    let (traces, export) = match otel::layer(config)? {
        Some((layer, export)) => (Some(layer), Some(export)),
        None => (None, None),
    };
    #[cfg(not(feature = "otel"))]
    let traces: Option<BoxedLayer> = None;
    let layers: Vec<BoxedLayer> = std::iter::once(log).chain(traces).collect();
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    Ok(Tracing {
        #[cfg(feature = "otel")]
        export,
    })
}

/// How a request ended, for the access log and the span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Answered.
    Ok,
    /// An enforced validator stopped it.
    Blocked,
    /// Any other answer with a status of 400 or more (guardwire's or the provider's), or a
    /// stream that ended with the error frame.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Blocked => "blocked",
            Outcome::Error => "error",
        }
    }
}

/// One request's span and the facts its access line reports, gathered as the steps learn
/// them (set-once cells: the steps share the trace by reference).
pub struct RequestTrace {
    pub span: Span,
    /// `log.access`: the line is written when the request finishes.
    access: bool,
    /// `gen_ai.operation.name`, for the span name.
    operation: &'static str,
    /// The protocol's config name (`a2a`, `mcp`, `openai_chat`…; empty before routing).
    protocol: &'static str,
    started: Instant,
    method: Method,
    /// The request path (kept only for the access line).
    path: String,
    route: &'static str,
    request_id: String,
    key_id: OnceLock<&'static str>,
    model: OnceLock<String>,
    /// The `model` label of the request's metrics (a configured model, else `other`).
    model_label: OnceLock<&'static str>,
    blocked: OnceLock<(String, &'static str)>,
    failed: OnceLock<()>,
    tokens: OnceLock<(Option<u64>, Option<u64>)>,
    /// Time spent waiting on the upstream (head and body of a whole answer), in nanoseconds:
    /// what is not the proxy's overhead.
    upstream_wait_ns: AtomicU64,
    /// The overhead metric has this request already.
    overhead_observed: AtomicBool,
    /// The validators that fired (any mode), for evals' `guardrail_triggered`.
    fired: std::sync::Mutex<Vec<crate::evals::Fired>>,
    /// The exchange's body capture record (`capture:`), when it is captured.
    capture: OnceLock<Arc<crate::capture::Exchange>>,
}

impl RequestTrace {
    /// The trace of a request just routed (`protocol`: its route's, when one matched). A
    /// client's `traceparent` makes the span part of the client's trace.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        access: bool,
        started: Instant,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        route: &'static str,
        protocol: Option<&'static dyn Protocol>,
        request_id: &str,
    ) -> RequestTrace {
        let (op, provider, protocol) = match protocol {
            Some(p) => (p.operation(), p.provider().otel_name(), p.name()),
            None => ("", "", ""),
        };
        let span = tracing::info_span!(
            target: TARGET,
            "request",
            otel.name = op,
            otel.kind = "server",
            otel.status_code = Empty,
            gen_ai.operation.name = op,
            gen_ai.provider.name = provider,
            gen_ai.request.model = Empty,
            gen_ai.tool.name = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            guardwire.usage.source = Empty,
            http.request.method = method.as_str(),
            url.path = path,
            http.response.status_code = Empty,
            guardwire.route = route,
            guardwire.request_id = request_id,
            guardwire.key_id = Empty,
            guardwire.outcome = Empty,
        );
        #[cfg(feature = "otel")]
        otel::adopt_parent(&span, headers);
        #[cfg(not(feature = "otel"))]
        let _ = headers;
        RequestTrace {
            span,
            access,
            operation: op,
            protocol,
            started,
            method: method.clone(),
            path: if access {
                path.to_owned()
            } else {
                String::new()
            },
            route,
            request_id: request_id.to_owned(),
            key_id: OnceLock::new(),
            model: OnceLock::new(),
            model_label: OnceLock::new(),
            blocked: OnceLock::new(),
            failed: OnceLock::new(),
            tokens: OnceLock::new(),
            upstream_wait_ns: AtomicU64::new(0),
            overhead_observed: AtomicBool::new(false),
            fired: std::sync::Mutex::default(),
            capture: OnceLock::new(),
        }
    }

    /// The same request's trace for its stream, which finishes it when the stream ends.
    pub fn for_stream(&self) -> RequestTrace {
        let copy = |c: &OnceLock<&'static str>| match c.get() {
            Some(v) => OnceLock::from(*v),
            None => OnceLock::new(),
        };
        RequestTrace {
            span: self.span.clone(),
            access: self.access,
            operation: self.operation,
            protocol: self.protocol,
            started: self.started,
            method: self.method.clone(),
            path: self.path.clone(),
            route: self.route,
            request_id: self.request_id.clone(),
            key_id: copy(&self.key_id),
            model: self
                .model
                .get()
                .cloned()
                .map_or_else(OnceLock::new, OnceLock::from),
            model_label: copy(&self.model_label),
            blocked: OnceLock::new(),
            failed: OnceLock::new(),
            tokens: OnceLock::new(),
            upstream_wait_ns: AtomicU64::new(0),
            overhead_observed: AtomicBool::new(false),
            fired: std::sync::Mutex::new(self.fired()),
            capture: self
                .capture
                .get()
                .cloned()
                .map_or_else(OnceLock::new, OnceLock::from),
        }
    }

    /// The exchange is captured into `record` (its verdicts and end are noted there).
    pub fn capture_into(&self, record: Arc<crate::capture::Exchange>) {
        let _ = self.capture.set(record);
    }

    /// The exchange's capture record, when it is captured.
    pub fn capture(&self) -> Option<&Arc<crate::capture::Exchange>> {
        self.capture.get()
    }

    /// An enforced validator stopped the exchange.
    pub fn was_blocked(&self) -> bool {
        self.blocked.get().is_some()
    }

    /// The exchange failed for another reason than a block.
    pub fn has_failed(&self) -> bool {
        self.failed.get().is_some()
    }

    /// A validator fired (blocked, monitored or redacted); each (validator, side) once.
    pub fn note_fired(&self, fired: crate::evals::Fired) {
        if let Ok(mut list) = self.fired.lock() {
            if !list.contains(&fired) {
                list.push(fired);
            }
        }
    }

    /// The validators that fired so far.
    pub fn fired(&self) -> Vec<crate::evals::Fired> {
        self.fired.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The span of the input checks (BeforeCall).
    pub fn before_call_span(&self) -> Span {
        tracing::info_span!(target: TARGET, parent: &self.span, "guardrail.before_call")
    }

    /// The span of the answer's checks as it is relayed (OnChunk): a stream's whole relay, or
    /// the one pass over a whole answer.
    pub fn on_chunk_span(&self) -> Span {
        tracing::info_span!(target: TARGET, parent: &self.span, "guardrail.on_chunk")
    }

    /// The span of the checks at the answer's end (AfterCall).
    pub fn after_call_span(&self) -> Span {
        tracing::info_span!(target: TARGET, parent: &self.span, "guardrail.after_call")
    }

    /// The span of the upstream call, and its `traceparent` in the request's headers.
    pub fn upstream_span(&self, method: &Method, server: &str, headers: &mut HeaderMap) -> Span {
        let span = tracing::info_span!(
            target: TARGET,
            parent: &self.span,
            "upstream",
            otel.name = method.as_str(),
            otel.kind = "client",
            http.request.method = method.as_str(),
            server.address = server,
            http.response.status_code = Empty,
        );
        #[cfg(feature = "otel")]
        otel::inject(&span, headers);
        #[cfg(not(feature = "otel"))]
        let _ = headers;
        span
    }

    /// The request id (`x-request-id`), for log lines.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    pub fn note_caller(&self, key_id: Option<&'static str>) {
        if let Some(id) = key_id {
            let _ = self.key_id.set(id);
            self.span.record("guardwire.key_id", id);
        }
    }

    /// The protocol's config name, for audit lines (empty when no route matched).
    pub fn protocol(&self) -> &'static str {
        self.protocol
    }

    /// The `model` label of the request's metrics, once known.
    pub fn note_model_label(&self, label: &'static str) {
        let _ = self.model_label.set(label);
    }

    /// The `model` label of the request's metrics: `other` until the request was read.
    pub fn model_label(&self) -> &'static str {
        self.model_label.get().copied().unwrap_or("other")
    }

    /// The tool an MCP `tools/call` calls (`execute_tool` spans).
    pub fn note_tool(&self, name: &str) {
        if !self.span.is_disabled() {
            self.span.record("gen_ai.tool.name", name);
            self.span
                .record("otel.name", format!("{} {name}", self.operation).as_str());
        }
    }

    /// The model the request asks for (free text in the span; the access line too).
    pub fn note_model(&self, model: Option<&str>) {
        let Some(model) = model else { return };
        if !self.span.is_disabled() {
            self.span.record("gen_ai.request.model", model);
            // The conventions' span name: "{operation} {model}".
            self.span
                .record("otel.name", format!("{} {model}", self.operation).as_str());
        }
        if self.access {
            let _ = self.model.set(model.to_owned());
        }
    }

    /// A verdict, as an event of the request span: validator, phase and mode, never the
    /// matched text. An enforced one is the request's outcome.
    pub fn verdict(&self, validator: &str, phase: &'static str, mode: &'static str) {
        tracing::info!(
            target: TARGET,
            parent: &self.span,
            validator,
            phase,
            mode,
            "guardrail.verdict"
        );
        if mode == "enforce" {
            let _ = self.blocked.set((validator.to_owned(), phase));
        }
        if let Some(c) = self.capture.get() {
            c.verdict(validator, phase, mode);
        }
    }

    /// The exchange failed for another reason than a block (its stream ended with the error
    /// frame, or guardwire answered with an error).
    pub fn note_failure(&self) {
        let _ = self.failed.set(());
    }

    /// The tokens the provider reported.
    pub fn note_usage(&self, input: Option<u64>, output: Option<u64>) {
        if let Some(n) = input {
            self.span.record("gen_ai.usage.input_tokens", n);
        }
        if let Some(n) = output {
            self.span.record("gen_ai.usage.output_tokens", n);
        }
        let _ = self.tokens.set((input, output));
    }

    /// Some token count is guardwire's estimate, not the provider's report.
    pub fn note_usage_estimated(&self) {
        self.span.record("guardwire.usage.source", "estimated");
    }

    /// Adds a wait on the upstream (for the overhead: the request's time minus these).
    pub fn add_upstream_wait(&self, waited: std::time::Duration) {
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.upstream_wait_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn upstream_wait(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.upstream_wait_ns.load(Ordering::Relaxed))
    }

    /// The request's overhead was counted (by the step that knows it best).
    pub fn overhead_observed(&self) {
        self.overhead_observed.store(true, Ordering::Relaxed);
    }

    pub fn was_overhead_observed(&self) -> bool {
        self.overhead_observed.load(Ordering::Relaxed)
    }

    /// The request is over: the span gets its status and outcome (and ends when its last
    /// handle drops), the access line is written.
    pub fn finish(&self, status: u16) {
        let outcome = if self.blocked.get().is_some() {
            Outcome::Blocked
        } else if self.failed.get().is_some() || status >= 400 {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        if let Some(c) = self.capture.get() {
            c.finish(status, outcome.as_str());
        }
        if !self.span.is_disabled() {
            self.span.record("http.response.status_code", status);
            self.span.record("guardwire.outcome", outcome.as_str());
            if outcome == Outcome::Error || status >= 500 {
                self.span.record("otel.status_code", "ERROR");
            }
        }
        if self.access {
            self.write_access_line(status, outcome);
        }
    }

    fn write_access_line(&self, status: u16, outcome: Outcome) {
        let (input_tokens, output_tokens) = self.tokens.get().copied().unwrap_or_default();
        let blocked = self.blocked.get();
        let line = AccessLine {
            log: "access",
            ts: crate::audit::now_rfc3339(),
            request_id: &self.request_id,
            route: self.route,
            method: self.method.as_str(),
            path: &self.path,
            status,
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            outcome,
            validator: blocked.map(|(v, _)| v.as_str()),
            phase: blocked.map(|(_, p)| *p),
            key_id: self.key_id.get().copied(),
            model: self.model.get().map(String::as_str),
            input_tokens,
            output_tokens,
        };
        let Ok(mut bytes) = serde_json::to_vec(&line) else {
            return;
        };
        bytes.push(b'\n');
        // One write per line: lines of concurrent requests do not interleave.
        let _ = std::io::stdout().lock().write_all(&bytes);
    }
}

/// One access-log line: what happened to a request, never its bodies or keys.
#[derive(Serialize)]
struct AccessLine<'a> {
    log: &'static str,
    ts: String,
    request_id: &'a str,
    route: &'static str,
    method: &'a str,
    path: &'a str,
    status: u16,
    duration_ms: f64,
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    validator: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_id: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
}
