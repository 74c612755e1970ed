//! Where the verdicts of an exchange go: metrics, the log and the audit log — the validator,
//! phase and rule, never the matched text.

use super::runtime::Runtime;
use crate::audit::{Audit, AuditEvent};
use crate::error::GatewayError;
use crate::metrics::{
    ClientDeadline, ClientTimeoutLabels, EvalLabels, EvalResultLabels, Metrics, ReloadLabels,
    ReloadResult, RouteLabels, SpendLabels, TokenLabels, TrafficLabels, UpstreamErrorKind,
    UpstreamErrorLabels, VerdictLabels,
};
use crate::policy::{ExchangeGuard, Finding, Mode, Phase, Policy};
use crate::telemetry::RequestTrace;
use prometheus_client::metrics::family::Family;
use std::sync::Arc;

/// Where the verdicts of one exchange go: metrics, the log and the audit log — the validator,
/// phase and rule, never the matched text. Shared by the request path and the stream body.
pub struct Reporter<'a> {
    pub metrics: &'a Metrics,
    pub audit: &'a Audit,
    pub policy: &'a Policy,
    pub route: &'static str,
    pub key_id: Option<&'a str>,
    pub request_id: &'a str,
    /// The request's span (verdicts are its events) and access-log facts.
    pub trace: &'a RequestTrace,
}

impl Reporter<'_> {
    /// Counts and logs a block, and returns the error the client is answered with.
    pub fn block(&self, finding: Finding) -> GatewayError {
        self.record(&finding, Mode::Enforce);
        GatewayError::Blocked {
            message: self.policy.message(&finding),
        }
    }

    /// Monitor-mode violations (which never block).
    pub fn monitor(&self, findings: &[Finding]) {
        for f in findings {
            self.record(f, Mode::Monitor);
        }
    }

    /// Matches masked by redact-mode validators.
    pub fn redactions(&self, findings: &[Finding]) {
        for f in findings {
            self.record(f, Mode::Redact);
        }
    }

    fn record(&self, f: &Finding, mode: Mode) {
        let v = self.policy.validator(f.validator);
        let (family, mode_name) = match mode {
            Mode::Enforce => (&self.metrics.blocked, "enforce"),
            Mode::Monitor => (&self.metrics.monitored, "monitor"),
            Mode::Redact => (&self.metrics.redacted, "redact"),
        };
        let (route, request_id, phase) = (self.route, self.request_id, f.phase.as_str());
        family
            .get_or_create(&VerdictLabels {
                validator: v.label.clone(),
                phase,
                route,
            })
            .inc();
        // Rate-limited per route, key and validator (one request's batch can fire thousands):
        // the counter above and the audit line below count every verdict.
        let reason = (route, self.key_id, v.label.as_str());
        crate::telemetry::throttle::VERDICTS.allow(&reason, |suppressed| {
            tracing::info!(request_id, route, key_id = self.key_id, validator = %v.label, phase, mode = mode_name, suppressed, "guardrail verdict");
        });
        self.trace.verdict(&v.label, phase, mode_name);
        self.trace.note_fired(crate::evals::Fired {
            validator: f.validator,
            on_input: f.phase == Phase::Input,
        });
        if self.audit.enabled() {
            self.audit.record(&AuditEvent {
                ts: crate::audit::now_rfc3339(),
                request_id,
                route,
                protocol: self.trace.protocol(),
                key_id: self.key_id,
                validator: &v.label,
                check: v.canonical,
                phase,
                mode: mode_name,
                rule: f.rule,
                matched: f.matched.as_deref(),
                score: None,
                result: None,
            });
        }
    }
}

pub fn count_upstream_error(metrics: &Metrics, route: &'static str, kind: UpstreamErrorKind) {
    metrics
        .upstream_errors
        .get_or_create(&UpstreamErrorLabels { route, kind })
        .inc();
}

/// Counts a response ended because its client stopped reading, and says so in the log (who,
/// which deadline; never a body).
pub fn count_client_timeout(
    metrics: &Metrics,
    route: &'static str,
    deadline: ClientDeadline,
    request_id: Option<&str>,
) {
    metrics
        .client_timeouts
        .get_or_create(&ClientTimeoutLabels { route, deadline })
        .inc();
    tracing::warn!(
        request_id,
        route,
        deadline = deadline.as_str(),
        "the client stopped reading: response ended, upstream request cancelled"
    );
}

/// Counts the tokens of one exchange (blocked or not: the provider charges them either way),
/// as reported or as `estimated`, and, at the requested model's price, their cost.
pub fn count_usage(
    metrics: &Metrics,
    traffic: &TrafficLabels,
    guard: &ExchangeGuard,
    trace: &RequestTrace,
    estimated: crate::proxy::estimate::Estimated,
) {
    let (input, output) = guard.usage();
    trace.note_usage(input, output);
    if estimated.input || estimated.output {
        trace.note_usage_estimated();
    }
    let source = |estimated: bool| if estimated { "estimated" } else { "provider" };
    for (kind, tokens, est) in [
        ("input", input, estimated.input),
        ("output", output, estimated.output),
    ] {
        if let Some(n) = tokens {
            let labels = TokenLabels {
                route: traffic.route,
                model: traffic.model,
                key_id: traffic.key_id,
                kind,
                source: source(est),
            };
            metrics.tokens.get_or_create(&labels).inc_by(n);
        }
    }
    if let Some(usd) = guard.cost_usd() {
        let labels = SpendLabels {
            route: traffic.route,
            model: traffic.model,
            key_id: traffic.key_id,
            source: source(estimated.input || estimated.output),
        };
        metrics.spend.get_or_create(&labels).inc_by(usd);
    }
}

/// Creates (at zero) every series the running config can produce but has not yet: reloads by
/// result; per route with an upstream, its upstream errors by kind, hold-back overruns, each
/// validator that can act on it (the route's own and the keys') under every phase, in the
/// family of its mode, and each eval's score and results. Dashboards and alerts then see a 0, not an absent series, before
/// the first event. Called at start and after each reload (series of an old config stay).
pub fn declare_series(metrics: &Metrics, rt: &Runtime) {
    for result in [ReloadResult::Success, ReloadResult::Failure] {
        declare(&metrics.config_reloads, &ReloadLabels { result });
    }
    for route in rt.routes.iter().filter(|r| r.upstream.is_some()) {
        let name = route.name;
        declare(&metrics.holdback_exceeded, &RouteLabels { route: name });
        for deadline in ClientDeadline::ALL {
            declare(
                &metrics.client_timeouts,
                &ClientTimeoutLabels {
                    route: name,
                    deadline,
                },
            );
        }
        for kind in UpstreamErrorKind::ALL {
            declare(
                &metrics.upstream_errors,
                &UpstreamErrorLabels { route: name, kind },
            );
        }
        let mut policies: Vec<&Arc<Policy>> = vec![&route.policy];
        for p in rt.keys.iter().filter_map(|k| k.policy.as_ref()) {
            if !policies.iter().any(|q| Arc::ptr_eq(q, p)) {
                policies.push(p);
            }
        }
        for e in policies.iter().flat_map(|p| p.evals()) {
            let eval = e.id.clone();
            declare(
                &metrics.evals.scores,
                &EvalLabels {
                    eval: eval.clone(),
                    route: name,
                },
            );
            for result in ["pass", "fail", "error"] {
                let labels = EvalResultLabels {
                    eval: eval.clone(),
                    route: name,
                    result,
                };
                declare(&metrics.evals.results, &labels);
            }
        }
        for v in policies.iter().flat_map(|p| p.validators()) {
            let family = match v.mode {
                Mode::Enforce => &metrics.blocked,
                Mode::Monitor => &metrics.monitored,
                Mode::Redact => &metrics.redacted,
            };
            for phase in [Phase::Input, Phase::Stream, Phase::Response] {
                let labels = VerdictLabels {
                    validator: v.label.clone(),
                    phase: phase.as_str(),
                    route: name,
                };
                declare(family, &labels);
            }
        }
    }
}

/// Creates the series of `labels` in `family` (at zero) if it does not exist yet.
fn declare<S, M, C>(family: &Family<S, M, C>, labels: &S)
where
    S: Clone + std::hash::Hash + Eq,
    M: prometheus_client::metrics::TypedMetric,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    // The guard only holds the family's lock: the series exists once it is dropped.
    drop(family.get_or_create(labels));
}
