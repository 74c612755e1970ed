//! Where the verdicts of an exchange go: metrics, the log and the audit log — the validator,
//! phase and rule, never the matched text.

use crate::audit::{Audit, AuditEvent};
use crate::error::GatewayError;
use crate::metrics::{Metrics, UpstreamErrorKind, UpstreamErrorLabels, VerdictLabels};
use crate::policy::{Finding, Mode, Policy};

/// Where the verdicts of one exchange go: metrics, the log and the audit log — the validator,
/// phase and rule, never the matched text. Shared by the request path and the stream body.
pub struct Reporter<'a> {
    pub metrics: &'a Metrics,
    pub audit: &'a Audit,
    pub policy: &'a Policy,
    pub route: &'static str,
    pub key_id: Option<&'a str>,
    pub request_id: &'a str,
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
        tracing::info!(request_id, route, key_id = self.key_id, validator = %v.label, phase, mode = mode_name, "guardrail verdict");
        if self.audit.enabled() {
            self.audit.record(&AuditEvent {
                ts: crate::audit::now_rfc3339(),
                request_id,
                route,
                key_id: self.key_id,
                validator: &v.label,
                check: v.canonical,
                phase,
                mode: mode_name,
                rule: f.rule,
                matched: f.matched.as_deref(),
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
