//! The metrics of the state store (`state:`) and the keys' limits over time.

use crate::state::limits::Limit;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreOpLabels {
    /// `memory` or `redis`.
    pub backend: &'static str,
    /// `reserve`, `settle`, `usage`, `reset`, `ping`.
    pub op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// `rpm_limit`, `tpm_limit` or `max_budget`.
    pub limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OnErrorLabels {
    /// `fail_closed` (refused with 503) or `fail_open` (served uncounted).
    pub on_error: &'static str,
}

pub struct StateMetrics {
    pub duration: Family<StoreOpLabels, Histogram>,
    pub errors: Family<StoreOpLabels, Counter>,
    pub refused: Family<LimitLabels, Counter>,
    pub unavailable: Family<OnErrorLabels, Counter>,
}

impl StateMetrics {
    pub(super) fn register(registry: &mut Registry) -> StateMetrics {
        let m = StateMetrics {
            duration: Family::new_with_constructor(|| {
                // 50 µs (an in-process count) to 1 s (a store timing out).
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.00005, 2.0, 15,
                ))
            }),
            errors: Family::default(),
            refused: Family::default(),
            unavailable: Family::default(),
        };
        for limit in [Limit::Requests, Limit::Tokens, Limit::Budget] {
            let _ = m.refused.get_or_create(&LimitLabels {
                limit: limit.as_str(),
            });
        }
        for on_error in ["fail_closed", "fail_open"] {
            let _ = m.unavailable.get_or_create(&OnErrorLabels { on_error });
        }
        registry.register(
            "state_operation_duration_seconds",
            "Round trips to the state store (state:), by backend and operation",
            m.duration.clone(),
        );
        registry.register(
            "state_errors",
            "State store operations that failed or timed out (state.timeout_ms), by backend and operation",
            m.errors.clone(),
        );
        registry.register(
            "rate_limited",
            "Requests refused with 429 by a key's limit over time, by the limit (rpm_limit, tpm_limit, max_budget)",
            m.refused.clone(),
        );
        registry.register(
            "state_unavailable_requests",
            "Requests of limited keys while the state store could not answer, by state.on_error (fail_closed: refused with 503; fail_open: served uncounted)",
            m.unavailable.clone(),
        );
        m
    }

    pub fn observe(&self, backend: &'static str, op: &'static str, took: Duration, failed: bool) {
        let labels = StoreOpLabels { backend, op };
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if failed {
            self.errors.get_or_create(&labels).inc();
        }
    }

    pub fn refused(&self, limit: Limit) {
        self.refused
            .get_or_create(&LimitLabels {
                limit: limit.as_str(),
            })
            .inc();
    }

    pub fn failed_closed(&self) {
        self.unavailable
            .get_or_create(&OnErrorLabels {
                on_error: "fail_closed",
            })
            .inc();
    }

    pub fn failed_open(&self) {
        self.unavailable
            .get_or_create(&OnErrorLabels {
                on_error: "fail_open",
            })
            .inc();
    }
}
