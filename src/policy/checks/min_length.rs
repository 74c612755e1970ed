//! `min_length`: at least `min` characters, on the whole text.

use super::{CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct MinLengthType;
pub(in crate::policy) const MIN_LENGTH: MinLengthType = MinLengthType;

impl CheckType for MinLengthType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("min_characters", "min"), ("min_chars", "min")]
    }

    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        Ok(CheckDef::whole(MinLength {
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

impl WholeText for MinLength {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        crate::scan::text::char_count(text) >= self.min_chars
    }
}
