//! The metrics of production evals: every score by eval and route, results, the queue, and
//! the metrics packs declare themselves (`metric: {name, type, labels}`), exported on each
//! scrape by a collector since their names come from the packs.

use crate::policy::evals::{EvalMetric, MetricKind};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{linear_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// One eval (its `id`) on one route.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvalLabels {
    pub eval: String,
    pub route: &'static str,
}

/// One eval's results on one route, by result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvalResultLabels {
    pub eval: String,
    pub route: &'static str,
    /// `pass`, `fail` or `error` (no score).
    pub result: &'static str,
}

/// Metric names of packs' `metric:` that guardwire's own eval metrics use.
pub const RESERVED_EVAL_METRICS: [&str; 2] = ["score", "results"];

/// Scores fall in [0, 1]: ten buckets of 0.1.
fn score_histogram() -> Histogram {
    Histogram::new(linear_buckets(0.1, 0.1, 10))
}

/// The metrics of production evals.
pub struct EvalMetrics {
    /// `guardwire_eval_score`: every score.
    pub scores: Family<EvalLabels, Histogram>,
    /// `guardwire_eval_results_total`: pass, fail or error.
    pub results: Family<EvalResultLabels, Counter>,
    /// `guardwire_evals_dropped_total`: turns the full queue turned away.
    pub dropped: Counter,
    /// `guardwire_evals_queue_depth`: turns waiting (in the queue or for a slot).
    pub queue_depth: Gauge,
    /// The metrics the packs declare.
    pub declared: Arc<DeclaredMetrics>,
}

impl EvalMetrics {
    pub(super) fn register(registry: &mut Registry) -> EvalMetrics {
        let m = EvalMetrics {
            scores: Family::new_with_constructor(score_histogram),
            results: Family::default(),
            dropped: Counter::default(),
            queue_depth: Gauge::default(),
            declared: Arc::default(),
        };
        registry.register(
            "eval_score",
            "Scores of production evals (0 to 1), by eval and route",
            m.scores.clone(),
        );
        registry.register(
            "eval_results",
            "Results of production evals, by eval, route and result (pass, fail, error)",
            m.results.clone(),
        );
        registry.register(
            "evals_dropped",
            "Turns not evaluated because the eval queue was full",
            m.dropped.clone(),
        );
        registry.register(
            "evals_queue_depth",
            "Turns waiting to be evaluated",
            m.queue_depth.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&m.declared)));
        m
    }
}

/// Constant labels of a declared metric, `route` first.
type Labels = Vec<(String, String)>;

enum DeclaredFamily {
    Gauge(Family<Labels, Gauge<f64, AtomicU64>>),
    Counter(Family<Labels, Counter>),
    Histogram(Family<Labels, Histogram>),
}

/// The metrics packs declare (`metric:` of an eval), by name: `guardwire_eval_<name>`.
#[derive(Default)]
pub struct DeclaredMetrics {
    families: Mutex<BTreeMap<String, (MetricKind, DeclaredFamily)>>,
}

impl std::fmt::Debug for DeclaredMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredMetrics").finish_non_exhaustive()
    }
}

impl DeclaredMetrics {
    /// Records one result: a gauge keeps the last score, a counter counts results, a
    /// histogram observes every score, a boolean is 1 when the result passed (else 0).
    pub fn record(&self, metric: &EvalMetric, route: &str, score: f64, passed: bool) {
        let Ok(mut families) = self.families.lock() else {
            return;
        };
        let (kind, family) = families
            .entry(metric.name.clone())
            .or_insert_with(|| (metric.kind, new_family(metric.kind)));
        if *kind != metric.kind {
            // A reload changed the metric's type: it starts again.
            *kind = metric.kind;
            *family = new_family(metric.kind);
        }
        let mut labels = Vec::with_capacity(metric.labels.len() + 1);
        labels.push(("route".to_owned(), route.to_owned()));
        labels.extend(metric.labels.iter().cloned());
        match family {
            DeclaredFamily::Gauge(g) => {
                let value = match metric.kind {
                    MetricKind::Boolean => f64::from(u8::from(passed)),
                    _ => score,
                };
                g.get_or_create(&labels).set(value);
            }
            DeclaredFamily::Counter(c) => {
                c.get_or_create(&labels).inc();
            }
            DeclaredFamily::Histogram(h) => h.get_or_create(&labels).observe(score),
        }
    }
}

fn new_family(kind: MetricKind) -> DeclaredFamily {
    match kind {
        MetricKind::Gauge | MetricKind::Boolean => DeclaredFamily::Gauge(Family::default()),
        MetricKind::Counter => DeclaredFamily::Counter(Family::default()),
        MetricKind::Histogram => {
            DeclaredFamily::Histogram(Family::new_with_constructor(score_histogram))
        }
    }
}

impl Collector for DeclaredMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(families) = self.families.lock() else {
            return Ok(());
        };
        for (name, (kind, family)) in families.iter() {
            let name = format!("eval_{name}");
            let help = format!("Eval metric: {name} ({})", kind.as_str());
            match family {
                DeclaredFamily::Gauge(f) => {
                    let e = encoder.encode_descriptor(&name, &help, None, f.metric_type())?;
                    f.encode(e)?;
                }
                DeclaredFamily::Counter(f) => {
                    let e = encoder.encode_descriptor(&name, &help, None, f.metric_type())?;
                    f.encode(e)?;
                }
                DeclaredFamily::Histogram(f) => {
                    let e = encoder.encode_descriptor(&name, &help, None, f.metric_type())?;
                    f.encode(e)?;
                }
            }
        }
        Ok(())
    }
}
