//! The metrics of judged checks: calls to judges, HTTP endpoints and subprocesses, and their
//! verdicts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// One judge (`judges[].name`), endpoint (`rest:<host>`) or handler (`exec:<name>`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JudgeLabels {
    pub judge: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JudgeErrorLabels {
    pub judge: String,
    /// `transport`, `timeout`, `status`, `malformed`, `overloaded`, `circuit_open`, `process`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JudgedVerdictLabels {
    pub validator: String,
    /// `pass`, `fail`, or `error` (no verdict: `on_error` decided).
    pub result: &'static str,
}

pub struct JudgeMetrics {
    pub calls: Family<JudgeLabels, Histogram>,
    pub errors: Family<JudgeErrorLabels, Counter>,
    pub retries: Family<JudgeLabels, Counter>,
    pub cache_hits: Family<JudgeLabels, Counter>,
    pub circuit_open: Family<JudgeLabels, Gauge>,
    pub queue_depth: Family<JudgeLabels, Gauge>,
    pub verdicts: Family<JudgedVerdictLabels, Counter>,
}

impl JudgeMetrics {
    pub(super) fn register(registry: &mut Registry) -> JudgeMetrics {
        let m = JudgeMetrics {
            // 1 ms … ~65 s.
            calls: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-3, 2.0, 17))
            }),
            errors: Family::default(),
            retries: Family::default(),
            cache_hits: Family::default(),
            circuit_open: Family::default(),
            queue_depth: Family::default(),
            verdicts: Family::default(),
        };
        registry.register(
            "judge_call_seconds",
            "Calls of judged checks (one attempt each), by judge, endpoint or handler",
            m.calls.clone(),
        );
        registry.register(
            "judge_errors",
            "Judged checks that got no verdict, by judge and kind",
            m.errors.clone(),
        );
        registry.register(
            "judge_retries",
            "Judge calls tried again",
            m.retries.clone(),
        );
        registry.register(
            "judge_cache_hits",
            "Verdicts answered from the cache",
            m.cache_hits.clone(),
        );
        registry.register(
            "judge_circuit_open",
            "1 while a judge's circuit breaker is open (calls fail at once)",
            m.circuit_open.clone(),
        );
        registry.register(
            "judge_queue_depth",
            "Calls waiting for a judge's concurrency limit",
            m.queue_depth.clone(),
        );
        registry.register(
            "judged_verdicts",
            "Verdicts of judged validators, by validator and result (pass, fail, error)",
            m.verdicts.clone(),
        );
        m
    }
}
