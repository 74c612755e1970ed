//! Checks on a whole text ([`WholeText`]): required regexes, `contains`, minimum length and
//! the structured (JSON) checks, each implemented by its check type (`checks/`).

use std::fmt::Debug;

/// A check on a whole text (AfterCall for the response; the joined request text for input).
pub(super) trait WholeText: Debug + Send + Sync {
    /// Whether `text` passes; `lower` caches its lowercase form across the checks of a text.
    fn passes(&self, text: &str, lower: &mut Option<String>) -> bool;
}
