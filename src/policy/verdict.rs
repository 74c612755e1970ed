//! From raw hits to verdicts, shared by every phase: which finding blocks, which is reported
//! once in monitor mode, what a check that cannot decide counts as, and the block message.

use super::tools::Outcome;
use super::types::{Finding, Mode, OnError, Phase};
use super::Policy;
use crate::scan::Hit;

impl Policy {
    /// The block message for a finding: the validator's own `message`, else the rule's, else a
    /// generic one naming the validator.
    pub fn message(&self, finding: &Finding) -> String {
        let v = self.validator(finding.validator);
        v.message
            .clone()
            .or_else(|| finding.note.clone())
            .unwrap_or_else(|| format!("blocked by guardrail '{}'", v.label))
    }

    /// A check that could not decide: violated unless its validator fails open.
    pub(super) fn erred(&self, owner: u32, hits: &mut Vec<Hit>) {
        if self.validator(owner).on_error == OnError::FailClosed {
            hits.push(whole_hit(owner));
        } else {
            tracing::debug!(validator = %self.validator(owner).label, "check could not decide; failing open");
        }
    }

    pub(super) fn outcome(&self, owner: u32, outcome: Outcome, hits: &mut Vec<Hit>) {
        match outcome {
            Outcome::Pass => {}
            Outcome::Fail => hits.push(whole_hit(owner)),
            Outcome::Error => self.erred(owner, hits),
        }
    }

    /// Turns raw hits into a verdict: the first enforcing one blocks; monitor ones are reported
    /// once per validator per exchange.
    pub(super) fn judge(
        &self,
        hits: &mut Vec<Hit>,
        phase: Phase,
        reported: &mut Reported,
        findings: &mut Vec<Finding>,
    ) -> Result<(), Finding> {
        for hit in hits.drain(..) {
            let finding = Finding {
                validator: hit.owner,
                phase,
                note: None,
                rule: hit.rule,
                matched: None,
            };
            match self.validator(hit.owner).mode {
                // Redact hits with a span were taken out before; one without blocks.
                Mode::Enforce | Mode::Redact => return Err(finding),
                Mode::Monitor => {
                    if reported.insert(hit.owner) {
                        findings.push(finding);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A violation of a check on something whole (a text, a count): no span to point at.
pub(super) fn whole_hit(owner: u32) -> Hit {
    Hit {
        owner,
        start: None,
        end: 0,
        rule: None,
    }
}

/// Validators already reported in monitor mode for this exchange.
#[derive(Debug, Default)]
pub(super) struct Reported(Vec<u32>);

impl Reported {
    fn insert(&mut self, v: u32) -> bool {
        if self.0.contains(&v) {
            false
        } else {
            self.0.push(v);
            true
        }
    }
}
