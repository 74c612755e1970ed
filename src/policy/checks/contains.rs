//! `contains` / `content_includes` (all patterns) and `contains_any` / `content_includes_any`
//! (one of them): case-insensitive, on the whole text.

use super::{non_empty_patterns, CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct ContainsType;
pub(in crate::policy) const CONTAINS: ContainsType = ContainsType;

impl CheckType for ContainsType {
    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let canonical = ty.canonical;
        let patterns = non_empty_patterns(p.required_string_list("patterns")?)?;
        Ok(CheckDef::whole(Contains {
            patterns: patterns.iter().map(|p| p.to_lowercase()).collect(),
            any: canonical == "contains_any",
        }))
    }
}

/// The patterns, lowercased; `any`: one suffices.
#[derive(Debug, Clone)]
struct Contains {
    patterns: Vec<String>,
    any: bool,
}

impl WholeText for Contains {
    fn passes(&self, text: &str, lower: &mut Option<String>) -> bool {
        let lower = lower.get_or_insert_with(|| text.to_lowercase());
        let mut found = self.patterns.iter().map(|p| lower.contains(p.as_str()));
        if self.any {
            found.any(|f| f)
        } else {
            found.all(|f| f)
        }
    }
}
