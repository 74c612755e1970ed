//! Prometheus metrics (`GET /metrics`). One registry per process, no global state.
//! `exposition`: the text formats; `process`: the standard `process_*` metrics; `labels`: the
//! label sets of the families here and the enums their values come from.

mod capture;
mod evals;
mod exposition;
mod judges;
mod labels;
mod process;
mod state;
mod workers;

pub use capture::{CaptureLabels, CaptureMetrics};
pub use evals::{EvalLabels, EvalMetrics, EvalResultLabels, RESERVED_EVAL_METRICS};
use exposition::openmetrics_to_text004;
pub use exposition::Exposition;
pub use judges::{JudgeErrorLabels, JudgeLabels, JudgeMetrics, JudgedVerdictLabels};
pub use labels::{
    ClientDeadline, ClientTimeoutLabels, DropReason, DroppedLabels, LatencyLabels, RejectReason,
    RejectedLabels, ReloadLabels, ReloadResult, RequestLabels, RouteLabels, SpendLabels,
    StoredContextLabels, TokenLabels, TrafficLabels, UpstreamErrorKind, UpstreamErrorLabels,
    VerdictLabels,
};
use process::ProcessMetrics;
pub use state::StateMetrics;
pub use workers::{WorkerConnections, WorkerLabels};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and HTTP status sent to the client.
    pub requests: Family<RequestLabels, Counter>,
    /// Requests or responses blocked, by validator, phase (input | stream | response) and route.
    pub blocked: Family<VerdictLabels, Counter>,
    /// Monitor-mode violations (counted, not blocked).
    pub monitored: Family<VerdictLabels, Counter>,
    /// Matches masked by redact-mode validators.
    pub redacted: Family<VerdictLabels, Counter>,
    /// Time guardwire itself adds to a request: total time minus time waiting on the upstream.
    pub overhead: Family<LatencyLabels, Histogram>,
    /// From a request's arrival to the end of its answer (a stream's last byte).
    pub request_duration: Family<LatencyLabels, Histogram>,
    /// From sending a request upstream to the upstream's response head.
    pub upstream_response: Family<LatencyLabels, Histogram>,
    /// From sending a request upstream to the first text of its streamed answer.
    pub upstream_first_token: Family<LatencyLabels, Histogram>,
    /// Tokens the provider reported (`usage`), or guardwire estimated, by kind and source.
    pub tokens: Family<TokenLabels, Counter>,
    /// What the reported tokens cost, for models with `prices`.
    pub spend: Family<SpendLabels, Counter<f64, AtomicU64>>,
    /// Streams being relayed right now.
    pub streams_in_flight: Gauge,
    /// Upstream failures by kind (connect, timeout, reset, malformed, idle, total, encoded).
    pub upstream_errors: Family<UpstreamErrorLabels, Counter>,
    /// Responses ended because the client stopped taking them, by route and the deadline that
    /// passed while a write to it was blocked.
    pub client_timeouts: Family<ClientTimeoutLabels, Counter>,
    /// Streams ended because a pending check held back more than `limits.max_holdback_bytes`.
    pub holdback_exceeded: Family<RouteLabels, Counter>,
    /// Config reloads by result; a failed one leaves the running policy in force.
    pub config_reloads: Family<ReloadLabels, Counter>,
    /// Requests' references to provider-stored content (refused or passed, per
    /// `stored_context`), one per reference.
    pub stored_context: Family<StoredContextLabels, Counter>,
    /// Requests admitted against `limits.max_concurrent_requests` (streams until they end);
    /// set at each scrape.
    pub requests_in_flight: Gauge,
    /// `limits.max_concurrent_requests` of the running config.
    pub max_concurrent_requests: Gauge,
    /// Connections and requests turned away by a limit, by the limit.
    pub rejected: Family<RejectedLabels, Counter>,
    /// Client connections guardwire dropped, by why.
    pub connections_dropped: Family<DroppedLabels, Counter>,
    /// Client connections open (counted against `limits.max_connections`); set at each scrape.
    pub connections_open: Gauge,
    pub worker_connections: WorkerConnections,
    /// Request-body bytes held (counted against `limits.max_buffered_request_bytes`); set at
    /// each scrape.
    pub buffered_request_bytes: Gauge,
    /// A hash of the running config and the pack files it loaded (48 bits, so a float holds it
    /// exactly): replicas with different values run different policies.
    pub config_hash: Gauge,
    /// Judged checks: calls, errors, retries, breakers, queues, verdicts.
    pub judges: JudgeMetrics,
    /// The body capture: records written and dropped.
    pub capture: CaptureMetrics,
    /// The state store and the keys' limits over time.
    pub state: StateMetrics,
    /// Production evals: scores, results, the queue, the packs' own metrics.
    pub evals: EvalMetrics,
    /// 1 when the last reload succeeded (or none was tried), 0 when it failed.
    pub config_last_reload_successful: Gauge,
    /// When the running config was loaded (start or the last successful reload), Unix seconds.
    pub config_last_reload_success_timestamp: Gauge<f64, AtomicU64>,
    process: ProcessMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let process = ProcessMetrics::register(&mut root);
        let registry = root.sub_registry_with_prefix("guardwire");
        registry.register(
            "build",
            "guardwire's version (the value is always 1)",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let requests_in_flight = Gauge::default();
        let max_concurrent_requests = Gauge::default();
        let config_hash = Gauge::default();
        let config_last_reload_successful = Gauge::default();
        let config_last_reload_success_timestamp = Gauge::<f64, AtomicU64>::default();
        config_last_reload_successful.set(1);
        registry.register(
            "requests_in_flight",
            "Requests admitted against limits.max_concurrent_requests (streams until they end)",
            requests_in_flight.clone(),
        );
        registry.register(
            "max_concurrent_requests",
            "The running config's limits.max_concurrent_requests",
            max_concurrent_requests.clone(),
        );
        let rejected = Family::<RejectedLabels, Counter>::default();
        for reason in RejectReason::ALL {
            let _ = rejected.get_or_create(&RejectedLabels { reason });
        }
        registry.register(
            "rejected",
            "Connections and requests turned away by a limit, by the limit (max_connections: closed on accept; max_concurrent_requests and max_buffered_request_bytes: 503; key_max_concurrent_requests, max_concurrent_requests_per_client_address, max_buffered_request_bytes_per_key and max_buffered_request_bytes_per_client_address: 429; max_h2_streams: HTTP/2 stream reset with REFUSED_STREAM)",
            rejected.clone(),
        );
        let connections_dropped = Family::<DroppedLabels, Counter>::default();
        for reason in DropReason::ALL {
            let _ = connections_dropped.get_or_create(&DroppedLabels { reason });
        }
        registry.register(
            "connections_dropped",
            "Client connections closed without a graceful end, by why (header: no request head within timeouts.client_header_ms; unread: idle with its last answer unread for timeouts.client_send_ms; drain: still open 1 s after the drain deadline; blocked: HTTP/1, a write blocked for timeouts.client_send_ms or at the total deadline). unread and blocked are reset (RST), drain only when an HTTP/1 write stayed blocked through that second",
            connections_dropped.clone(),
        );
        let worker_connections = workers::register(registry);
        let connections_open = Gauge::default();
        registry.register(
            "connections_open",
            "Client connections open, against limits.max_connections",
            connections_open.clone(),
        );
        let buffered_request_bytes = Gauge::default();
        registry.register(
            "buffered_request_bytes",
            "Request-body bytes held by requests, against limits.max_buffered_request_bytes",
            buffered_request_bytes.clone(),
        );
        registry.register(
            "config_hash",
            "Hash of the running config and its pack files (differs between replicas running different policies)",
            config_hash.clone(),
        );
        registry.register(
            "config_last_reload_successful",
            "1 when the last config reload succeeded (or none was tried), 0 when it failed",
            config_last_reload_successful.clone(),
        );
        registry.register(
            "config_last_reload_success_timestamp_seconds",
            "When the running config was loaded (start or last successful reload), Unix time",
            config_last_reload_success_timestamp.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        let blocked = Family::<VerdictLabels, Counter>::default();
        let monitored = Family::<VerdictLabels, Counter>::default();
        let redacted = Family::<VerdictLabels, Counter>::default();
        let overhead = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            // 10 µs … ~160 ms: the proxy should live in the first few buckets.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                1e-5, 2.0, 15,
            ))
        });
        // 1 ms … ~65 s: a whole exchange, streamed answers included.
        let seconds = || {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                1e-3, 2.0, 17,
            ))
        };
        let request_duration = Family::<LatencyLabels, Histogram>::new_with_constructor(seconds);
        let upstream_response = Family::<LatencyLabels, Histogram>::new_with_constructor(seconds);
        let upstream_first_token =
            Family::<LatencyLabels, Histogram>::new_with_constructor(seconds);
        let tokens = Family::<TokenLabels, Counter>::default();
        let spend = Family::<SpendLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "request_duration_seconds",
            "From a request's arrival to the end of its answer (a stream's last byte)",
            request_duration.clone(),
        );
        registry.register(
            "upstream_response_seconds",
            "From sending a request upstream to its response head (time to first byte)",
            upstream_response.clone(),
        );
        registry.register(
            "upstream_first_token_seconds",
            "From sending a request upstream to the first text of its streamed answer",
            upstream_first_token.clone(),
        );
        registry.register(
            "tokens",
            "Tokens of each exchange, by route, model, client key, kind (input, output) and source (provider: reported; estimated: counted by guardwire when none was reported)",
            tokens.clone(),
        );
        registry.register(
            "spend_usd",
            "Cost of the tokens at the configured prices, by route, model, client key and source (estimated when a count was)",
            spend.clone(),
        );
        let streams_in_flight = Gauge::default();
        let upstream_errors = Family::<UpstreamErrorLabels, Counter>::default();
        let holdback_exceeded = Family::<RouteLabels, Counter>::default();
        let client_timeouts = Family::<ClientTimeoutLabels, Counter>::default();
        registry.register(
            "client_timeouts",
            "Responses ended because the client stopped reading them, by route and deadline (send: timeouts.client_send_ms; total: timeouts.total_ms passed while a write was blocked)",
            client_timeouts.clone(),
        );
        let config_reloads = Family::<ReloadLabels, Counter>::default();
        let stored_context = Family::<StoredContextLabels, Counter>::default();
        registry.register(
            "stored_context",
            "References to provider-stored content in requests (previous responses, conversations, cached content, files), by route, protocol and kind",
            stored_context.clone(),
        );
        registry.register(
            "config_reload",
            "Config reloads by result (a failed reload keeps the running policy)",
            config_reloads.clone(),
        );
        registry.register(
            "holdback_exceeded",
            "Streams ended because a pending check held back more than the limit",
            holdback_exceeded.clone(),
        );
        registry.register(
            "requests",
            "Requests answered, by route, model and status",
            requests.clone(),
        );
        registry.register(
            "blocked",
            "Requests or responses blocked by a guardrail, by validator, phase and route",
            blocked.clone(),
        );
        registry.register(
            "monitor_hits",
            "Violations of monitor-mode validators (not blocked)",
            monitored.clone(),
        );
        registry.register(
            "redactions",
            "Matches masked by redact-mode validators, by validator, phase and route",
            redacted.clone(),
        );
        registry.register(
            "latency_overhead_seconds",
            "Time the proxy adds to a request (total minus upstream wait)",
            overhead.clone(),
        );
        registry.register(
            "streams_in_flight",
            "Streamed responses being relayed",
            streams_in_flight.clone(),
        );
        registry.register(
            "upstream_errors",
            "Upstream failures, by route and kind",
            upstream_errors.clone(),
        );
        let judges = JudgeMetrics::register(registry);
        let capture = CaptureMetrics::register(registry);
        let state = StateMetrics::register(registry);
        let evals = EvalMetrics::register(registry);
        Metrics {
            judges,
            capture,
            state,
            evals,
            registry: root,
            requests,
            blocked,
            monitored,
            redacted,
            overhead,
            request_duration,
            upstream_response,
            upstream_first_token,
            tokens,
            spend,
            streams_in_flight,
            upstream_errors,
            client_timeouts,
            holdback_exceeded,
            config_reloads,
            stored_context,
            requests_in_flight,
            max_concurrent_requests,
            rejected,
            connections_dropped,
            connections_open,
            worker_connections,
            buffered_request_bytes,
            config_hash,
            config_last_reload_successful,
            config_last_reload_success_timestamp,
            process,
        }
    }

    /// Counts one dropped connection by `reason`.
    pub fn dropped(&self, reason: DropReason) {
        self.connections_dropped
            .get_or_create(&DroppedLabels { reason })
            .inc();
    }

    /// Counts one refusal by `reason`.
    pub fn reject(&self, reason: RejectReason) {
        self.rejected
            .get_or_create(&RejectedLabels { reason })
            .inc();
    }

    /// Every metric in `format`.
    pub fn render(&self, format: Exposition) -> String {
        self.process.refresh();
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        match format {
            Exposition::OpenMetrics => out,
            Exposition::Text004 => openmetrics_to_text004(&out),
        }
    }
}
