//! `contains` / `content_includes` (all patterns) and `contains_any` / `content_includes_any`
//! (one of them): case-insensitive, on the whole text.

use super::{non_empty_patterns, Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::TargetChecks;
use crate::policy::pack::params::Params;
use crate::policy::transcript::TranscriptRule;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct ContainsType;
pub(in crate::policy) const CONTAINS: ContainsType = ContainsType;

impl CheckType for ContainsType {
    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let canonical = ty.canonical;
        let patterns = non_empty_patterns(p.required_string_list("patterns")?)?;
        let any = canonical == "contains_any";
        let transcript = match any {
            true => TranscriptRule::ContainsAny {
                patterns: patterns.clone(),
            },
            false => TranscriptRule::ContainsAll {
                patterns: patterns.clone(),
            },
        };
        Ok(CheckDef::new(ContainsCheck {
            whole: Contains {
                patterns: patterns.iter().map(|p| p.to_lowercase()).collect(),
                any,
            },
            transcript,
        }))
    }
}

/// The whole-text check, and as an assertion PromptKit's rule: `contains_any` over every
/// assistant message, `contains` the share of patterns in the answer.
#[derive(Debug)]
struct ContainsCheck {
    whole: Contains,
    transcript: TranscriptRule,
}

impl Check for ContainsCheck {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(self.whole.clone())));
        Ok(())
    }

    fn transcript(&self) -> Option<TranscriptRule> {
        Some(self.transcript.clone())
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
