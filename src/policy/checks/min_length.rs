//! `min_length`: at least `min` characters, on the whole text.

use super::params::Params;
use super::{Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct MinLengthType;
pub(in crate::policy) const MIN_LENGTH: MinLengthType = MinLengthType;

impl CheckType for MinLengthType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("min_characters", "min"), ("min_chars", "min")]
    }

    fn build(&self, _: &str, _: &str, p: &mut Params, _: &CheckRefs) -> Result<CheckDef, String> {
        Ok(CheckDef::new(MinLength {
            min_chars: p
                .u64("min")?
                .ok_or_else(|| "param 'min': required (characters)".to_owned())?,
        }))
    }
}

#[derive(Debug, Clone, Copy)]
struct MinLength {
    min_chars: u64,
}

impl Check for MinLength {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(*self)));
        Ok(())
    }
}

impl WholeText for MinLength {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        crate::scan::text::char_count(text) >= self.min_chars
    }
}
