//! `contains` / `content_includes` (all patterns) and `contains_any` / `content_includes_any`
//! (one of them): case-insensitive, on the whole text.

use super::params::Params;
use super::{non_empty_patterns, Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct ContainsType;
pub(in crate::policy) const CONTAINS: ContainsType = ContainsType;

impl CheckType for ContainsType {
    fn build(
        &self,
        canonical: &str,
        _: &str,
        p: &mut Params,
        _: &CheckRefs,
    ) -> Result<CheckDef, String> {
        Ok(CheckDef::new(Contains {
            patterns: non_empty_patterns(p.required_string_list("patterns")?)?,
            any: canonical == "contains_any",
        }))
    }
}

/// The patterns; `any`: one suffices.
#[derive(Debug, Clone)]
struct Contains {
    patterns: Vec<String>,
    any: bool,
}

impl Check for Contains {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        let lowercased = Contains {
            patterns: self.patterns.iter().map(|p| p.to_lowercase()).collect(),
            any: self.any,
        };
        checks.whole.push((owner, Box::new(lowercased)));
        Ok(())
    }
}

/// Compiled: the patterns lowercased.
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
