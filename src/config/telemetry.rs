//! `telemetry:`: where OpenTelemetry traces go, checked at load.

use super::{BaseUrl, ConfigError};
use serde::Deserialize;

/// OpenTelemetry traces: a span per request (GenAI semantic conventions), child spans for the
/// upstream call and each guardrail phase, an event per verdict; W3C `traceparent` in and out.
/// Needs the `otel` cargo feature (on by default). Read at start only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Telemetry {
    /// Base URL of an OTLP/HTTP receiver (a collector: `http://127.0.0.1:4318`); spans are
    /// sent to `<it>/v1/traces` as protobuf. Unset: no traces.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The share of requests traced, 0 to 1, when the client sent no sampled `traceparent`
    /// (a client's sampling decision is followed).
    pub sample_ratio: f64,
    /// Limit for one export call.
    pub export_timeout_ms: u64,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            otlp_endpoint: None,
            service_name: "guardwire".into(),
            sample_ratio: 1.0,
            export_timeout_ms: 10_000,
        }
    }
}

impl Telemetry {
    /// The checked receiver URL, when traces are on.
    pub fn endpoint(&self) -> Option<BaseUrl> {
        self.otlp_endpoint
            .as_deref()
            .and_then(|u| BaseUrl::parse(u).ok())
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let Some(url) = &self.otlp_endpoint else {
            return Ok(());
        };
        let at = |m: String| ConfigError::Invalid(format!("telemetry.{m}"));
        if !cfg!(feature = "otel") {
            return Err(at(
                "otlp_endpoint: this guardwire was built without the `otel` feature; \
                 rebuild with it (it is a default feature) or leave the key out"
                    .into(),
            ));
        }
        BaseUrl::parse(url).map_err(|e| at(format!("otlp_endpoint: {e}")))?;
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(at(format!(
                "sample_ratio: {} is not between 0 and 1",
                self.sample_ratio
            )));
        }
        if self.service_name.is_empty() {
            return Err(at("service_name: must not be empty".into()));
        }
        Ok(())
    }
}
