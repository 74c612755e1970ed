//! `json_valid` / `is_valid_json` / `valid_json`: the whole text is one JSON value.

use super::{CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct JsonValidType;
pub(in crate::policy) const JSON_VALID: JsonValidType = JsonValidType;

impl CheckType for JsonValidType {
    fn build(&self, _: &Named, _: &mut Params) -> Result<CheckDef, String> {
        Ok(CheckDef::whole(JsonValid))
    }
}

#[derive(Debug, Clone, Copy)]
struct JsonValid;

impl WholeText for JsonValid {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text.trim()).is_ok()
    }
}
