//! Prometheus metrics (`GET /metrics`). One registry per process, no global state.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    pub validator: String,
    pub phase: &'static str,
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub result: ReloadResult,
}

/// How a config reload ended (a failed one keeps the running policy).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReloadResult {
    Success,
    Failure,
}

impl ReloadResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Success => "success",
            ReloadResult::Failure => "failure",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamErrorLabels {
    pub route: &'static str,
    pub kind: UpstreamErrorKind,
}

/// Why an exchange with the upstream failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// Could not connect, or the request could not be sent.
    Connect,
    /// No response head within `timeouts.response_headers_ms`.
    Timeout,
    /// The body failed or was cut mid-way.
    Reset,
    /// Silence between chunks past `timeouts.idle_ms`.
    Idle,
    /// The exchange passed `timeouts.total_ms`.
    Total,
    /// A body or frame the protocol cannot read.
    Malformed,
    /// A `Content-Encoding` guardwire cannot check.
    Encoded,
    /// The stream ended without its protocol's terminal event.
    Incomplete,
}

impl UpstreamErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamErrorKind::Connect => "connect",
            UpstreamErrorKind::Timeout => "timeout",
            UpstreamErrorKind::Reset => "reset",
            UpstreamErrorKind::Idle => "idle",
            UpstreamErrorKind::Total => "total",
            UpstreamErrorKind::Malformed => "malformed",
            UpstreamErrorKind::Encoded => "encoded",
            UpstreamErrorKind::Incomplete => "incomplete",
        }
    }
}

/// Label values as their lowercase names.
macro_rules! label_value_as_str {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
                EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    )*};
}
label_value_as_str!(ReloadResult, UpstreamErrorKind);

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
    pub overhead: Family<RouteLabels, Histogram>,
    /// Streams being relayed right now.
    pub streams_in_flight: Gauge,
    /// Upstream failures by kind (connect, timeout, reset, malformed, idle, total, encoded).
    pub upstream_errors: Family<UpstreamErrorLabels, Counter>,
    /// Streams ended because a pending check held back more than `limits.max_holdback_bytes`.
    pub holdback_exceeded: Family<RouteLabels, Counter>,
    /// Config reloads by result; a failed one leaves the running policy in force.
    pub config_reloads: Family<ReloadLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("guardwire");
        let requests = Family::<RequestLabels, Counter>::default();
        let blocked = Family::<VerdictLabels, Counter>::default();
        let monitored = Family::<VerdictLabels, Counter>::default();
        let redacted = Family::<VerdictLabels, Counter>::default();
        let overhead = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 10 µs … ~160 ms: the proxy should live in the first few buckets.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                1e-5, 2.0, 15,
            ))
        });
        let streams_in_flight = Gauge::default();
        let upstream_errors = Family::<UpstreamErrorLabels, Counter>::default();
        let holdback_exceeded = Family::<RouteLabels, Counter>::default();
        let config_reloads = Family::<ReloadLabels, Counter>::default();
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
            "Requests answered, by route and status",
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
        Metrics {
            registry,
            requests,
            blocked,
            monitored,
            redacted,
            overhead,
            streams_in_flight,
            upstream_errors,
            holdback_exceeded,
            config_reloads,
        }
    }

    /// Every metric in `format`.
    pub fn render(&self, format: Exposition) -> String {
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

/// The formats `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus' text format 0.0.4: what a scraper gets unless it asks for OpenMetrics, and
    /// what promtool checks.
    Text004,
    /// OpenMetrics 1.0, for a scraper whose `Accept` names `application/openmetrics-text`.
    OpenMetrics,
}

impl Exposition {
    /// The format a scraper's `Accept` header asks for.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        match accept {
            Some(a)
                if a.to_ascii_lowercase()
                    .contains("application/openmetrics-text") =>
            {
                Exposition::OpenMetrics
            }
            _ => Exposition::Text004,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text004 => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Rewrites prometheus-client's OpenMetrics text as text format 0.0.4. The samples are the
/// same; the metadata differs: a counter's `# HELP` and `# TYPE` name its samples (`x_total`,
/// where OpenMetrics names the family `x`), an info family is a gauge named `x_info`, and
/// there is no `# UNIT` or `# EOF`.
fn openmetrics_to_text004(om: &str) -> String {
    // A family's TYPE comes after its HELP: find the types first.
    let mut renamed: Vec<(&str, &str, &str)> = Vec::new(); // (family, sample name suffix, 0.0.4 type)
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            match rest.split_once(' ') {
                Some((name, "counter")) => renamed.push((name, "_total", "counter")),
                Some((name, "info")) => renamed.push((name, "_info", "gauge")),
                _ => {}
            }
        }
    }
    let rename = |name: &str| renamed.iter().find(|(n, ..)| *n == name).copied();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                match rename(name) {
                    Some((_, suffix, ty)) if kind == "# TYPE " => {
                        out.push_str(&format!("# TYPE {name}{suffix} {ty}"));
                    }
                    Some((_, suffix, _)) => out.push_str(&format!("{kind}{name}{suffix} {tail}")),
                    None => out.push_str(line),
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_004_names_counters_by_their_samples_and_drops_openmetrics_markers() {
        let om = "# HELP gw_requests Requests.\n# TYPE gw_requests counter\n\
                  gw_requests_total{route=\"a\"} 2\n# HELP gw_build Build.\n# TYPE gw_build info\n\
                  gw_build_info{version=\"1\"} 1\n# HELP gw_up Up.\n# TYPE gw_up gauge\n\
                  # UNIT gw_up seconds\ngw_up 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text004(om),
            "# HELP gw_requests_total Requests.\n# TYPE gw_requests_total counter\n\
             gw_requests_total{route=\"a\"} 2\n# HELP gw_build_info Build.\n# TYPE gw_build_info gauge\n\
             gw_build_info{version=\"1\"} 1\n# HELP gw_up Up.\n# TYPE gw_up gauge\ngw_up 1\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert_eq!(Exposition::negotiate(None), Exposition::Text004);
        assert_eq!(
            Exposition::negotiate(Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")),
            Exposition::Text004
        );
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            Exposition::negotiate(Some(prometheus)),
            Exposition::OpenMetrics
        );
    }
}
