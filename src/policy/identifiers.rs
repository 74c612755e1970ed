//! Identifier-shaped values ([`crate::protocol::identifier`]): the ids, kinds and media types
//! of a request or an answer skip the word, phrase and length checks, but not the secret and
//! PII patterns — a key or an address has the shape of an identifier. Each value is scanned
//! whole, as a text of its own, by its target's scan set, and only the hits of forbidden
//! regexes (`regex` with `expect_match: false`) and `pii` count. A value is not rewritten, so a
//! redacting validator that matches one blocks.

use super::types::Target;
use super::Policy;
use crate::scan::Hit;

impl Policy {
    /// True when validator `owner`'s matches count in an identifier: a secret or PII pattern.
    fn reads_identifiers(&self, owner: u32) -> bool {
        matches!(self.validator(owner).canonical, "regex" | "pii")
    }

    /// Appends to `hits` the secret and PII matches in `value`, read as a whole text of
    /// `target`. The hits have no span, so they block in every mode but `monitor`.
    pub(super) fn identifier_hits(&self, target: Target, value: &str, hits: &mut Vec<Hit>) {
        let first = hits.len();
        self.value_hits(target, value, hits);
        let mut kept = first;
        for i in first..hits.len() {
            if self.reads_identifiers(hits[i].owner) {
                hits[kept] = hits[i];
                kept += 1;
            }
        }
        hits.truncate(kept);
        self.data_url_hits(target, value, hits);
    }

    /// Appends to `hits` every check's matches in what `value` holds when it is a `data:` URL
    /// (an A2A file part's `url`, an MCP resource link's `uri`, an icon): the reader that
    /// opens it reads that content. Identifier-shaped or read as text, the same.
    pub(super) fn data_url_hits(&self, target: Target, value: &str, hits: &mut Vec<Hit>) {
        if let Some(Some(text)) = crate::protocol::documents::Documents::data_url_payload(value) {
            self.value_hits(target, &text, hits);
        }
    }

    /// Every check's hits on `value` read whole (a relayed header's value), without a span:
    /// a value that is not rewritten (a hit of a redacting check blocks).
    pub(super) fn value_hits(&self, target: Target, value: &str, hits: &mut Vec<Hit>) {
        let scan = &self.checks(target).scan;
        if scan.is_empty() || value.is_empty() {
            return;
        }
        let first = hits.len();
        let mut st = scan.start();
        scan.feed(&mut st, value, hits, false);
        scan.finish(&mut st, hits, false);
        for h in &mut hits[first..] {
            h.start = None;
        }
    }

    /// BeforeCall's part for a request's identifiers.
    pub(super) fn check_input_identifiers<'a>(
        &self,
        values: impl Iterator<Item = &'a String>,
        hits: &mut Vec<Hit>,
    ) {
        for v in values {
            self.identifier_hits(Target::Input, v, hits);
        }
    }
}
