//! Identifiers (`protocol::identifier`): strings a protocol carries as structure, exempt from
//! the checks of words, phrases and lengths but read by the secret and PII patterns — the
//! forbidden regexes (`regex` / `content_matches` with `expect_match: false`) and `pii`. An id,
//! a cursor or a media type can carry a key as well as any text can; a word in one is no
//! sentence a reader reads.

use super::{ExchangeGuard, MAX_IDENTIFIERS_REMEMBERED};
use crate::policy::types::{Phase, Target};
use crate::policy::Finding;
use std::sync::Arc;

impl ExchangeGuard {
    /// Scans each identifier on its own with the secret and PII patterns of the input checks
    /// (`input`: what the model or user will read) or of the output checks (data leaving).
    /// `Err` carries the first enforcing violation; monitor-mode findings are kept with the
    /// exchange's.
    pub fn check_identifiers(&mut self, input: bool, ids: &[String]) -> Result<(), Finding> {
        for id in ids {
            self.identifier(input, id)?;
        }
        Ok(())
    }

    /// Checks an identifier-shaped value of the answer (an id, a kind, a media type found at a
    /// place of structure). Nothing is held back: the value is whole.
    pub fn check_identifier(&mut self, value: &str) -> Result<(), Finding> {
        self.identifier(false, value)
    }

    /// Checks a header of the answer relayed to the client (the SDKs read some: a session id,
    /// `WWW-Authenticate`; any reaches the application): its name as an identifier, its value
    /// as one when it has the shape, else as text read whole by every output check.
    pub fn check_header(&mut self, name: &str, value: &[u8]) -> Result<(), Finding> {
        // (A name of lowercase words and dashes, as nearly all are, matches no secret or PII
        // pattern: not scanned.)
        if !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            self.identifier(false, name)?;
        }
        let value = String::from_utf8_lossy(value);
        if crate::protocol::identifier::is_identifier(&value) {
            return self.identifier(false, &value);
        }
        let policy = Arc::clone(&self.policy);
        policy.value_hits(Target::Output, &value, &mut self.hits);
        self.judge(self.chunk_phase)
    }

    /// The one reading of an identifier (policy/identifiers.rs): the value whole, only the
    /// secret and PII patterns' hits, without a span (an identifier is not rewritten). A value
    /// already checked on the same side is not scanned again (a stream repeats its ids in
    /// every frame).
    fn identifier(&mut self, input: bool, value: &str) -> Result<(), Finding> {
        let (target, phase) = match input {
            true => (Target::Input, Phase::Input),
            false => (Target::Output, self.chunk_phase),
        };
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (input, value).hash(&mut h);
            h.finish()
        };
        if self.identifiers_checked.contains(&hash) {
            return Ok(());
        }
        let policy = Arc::clone(&self.policy);
        policy.identifier_hits(target, value, &mut self.hits);
        self.judge(phase)?;
        if self.identifiers_checked.len() < MAX_IDENTIFIERS_REMEMBERED {
            self.identifiers_checked.push(hash);
        }
        Ok(())
    }
}
