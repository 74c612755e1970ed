//! Identifiers (`protocol::identifier`): strings a protocol carries as structure, exempt from
//! the checks of words, phrases and lengths but read by the secret and PII patterns — the
//! forbidden regexes (`regex` / `content_matches` with `expect_match: false`) and `pii`. An id,
//! a cursor or a media type can carry a key as well as any text can; a word in one is no
//! sentence a reader reads.

use super::ExchangeGuard;
use crate::policy::types::{Phase, Target};

impl ExchangeGuard {
    /// Scans each identifier on its own with the secret and PII patterns of the input checks
    /// (`input`: what the model or user will read) or of the output checks (data leaving).
    /// `Err` carries the first enforcing violation; monitor-mode findings are kept with the
    /// exchange's.
    pub fn check_identifiers(
        &mut self,
        input: bool,
        ids: &[String],
    ) -> Result<(), crate::policy::Finding> {
        let (target, phase) = match input {
            true => (Target::Input, Phase::Input),
            false => (Target::Output, self.chunk_phase),
        };
        if ids.is_empty() {
            return Ok(());
        }
        // The one reading of identifiers (policy/identifiers.rs): each value whole, only the
        // secret and PII patterns' hits, without a span (an identifier is not rewritten).
        let policy = std::sync::Arc::clone(&self.policy);
        for id in ids {
            policy.identifier_hits(target, id, &mut self.hits);
        }
        self.judge(phase)
    }
}
