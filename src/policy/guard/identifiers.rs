//! Identifiers (`protocol::identifier`): strings a protocol carries as structure, exempt from
//! the checks of words, phrases and lengths but read by the secret and PII patterns — the
//! forbidden regexes (`regex` / `content_matches` with `expect_match: false`) and `pii`. An id,
//! a cursor or a media type can carry a key as well as any text can; a word in one is no
//! sentence a reader reads.

use super::ExchangeGuard;
use crate::policy::types::{Phase, Target};

/// The check types whose streamed rules read identifiers: patterns of secrets and PII.
const PATTERN_TYPES: &[&str] = &["regex", "pii"];

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
        let policy = std::sync::Arc::clone(&self.policy);
        let scan = &policy.checks(target).scan;
        if ids.is_empty() || scan.is_empty() {
            return Ok(());
        }
        let mut hits = Vec::new();
        for id in ids {
            let mut st = scan.start();
            scan.feed(&mut st, id, &mut hits, false);
            scan.finish(&mut st, &mut hits, false);
            hits.retain(|h| PATTERN_TYPES.contains(&policy.validator(h.owner).canonical));
            for h in hits.drain(..) {
                if self.keep_matches {
                    let matched = h.start.and_then(|s| id.get(s as usize..h.end as usize));
                    if let Some(m) = matched {
                        self.matches.push((h.owner, m.to_owned()));
                    }
                }
                self.hits.push(h);
            }
        }
        self.judge(phase)
    }
}
