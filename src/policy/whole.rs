//! Checks on a whole text ([`WholeCheck`]): required regexes, `contains`, minimum length and
//! the structured (JSON) checks.

use super::structured::{self, PathCheck, SchemaCheck};
use std::sync::Arc;

/// A check on a whole text (AfterCall for the response; the joined request text for input).
#[derive(Debug)]
pub(super) enum WholeCheck {
    Regex(regex_automata::meta::Regex),
    /// Lowercased patterns; `any`: one suffices.
    Contains {
        patterns: Vec<String>,
        any: bool,
    },
    MinChars(u64),
    JsonValid,
    FieldPresence(Vec<String>),
    Schema(Arc<SchemaCheck>),
    Path(Arc<PathCheck>),
}

impl WholeCheck {
    pub(super) fn passes(&self, text: &str, lower: &mut Option<String>) -> bool {
        match self {
            WholeCheck::Regex(re) => re.is_match(text),
            WholeCheck::Contains { patterns, any } => {
                let lower = lower.get_or_insert_with(|| text.to_lowercase());
                let mut found = patterns.iter().map(|p| lower.contains(p.as_str()));
                if *any {
                    found.any(|f| f)
                } else {
                    found.all(|f| f)
                }
            }
            WholeCheck::MinChars(min) => crate::scan::text::char_count(text) >= *min,
            WholeCheck::JsonValid => {
                serde_json::from_str::<serde::de::IgnoredAny>(text.trim()).is_ok()
            }
            WholeCheck::FieldPresence(fields) => structured::fields_present(text, fields),
            WholeCheck::Schema(check) => check.passes(text),
            WholeCheck::Path(check) => check.passes(text),
        }
    }
}
