//! `json_valid` / `is_valid_json` / `valid_json`: the whole text is one JSON value.

use super::params::Params;
use super::{Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct JsonValidType;
pub(in crate::policy) const JSON_VALID: JsonValidType = JsonValidType;

impl CheckType for JsonValidType {
    fn build(&self, _: &str, _: &str, _: &mut Params, _: &CheckRefs) -> Result<CheckDef, String> {
        Ok(CheckDef::new(JsonValid))
    }
}

#[derive(Debug, Clone, Copy)]
struct JsonValid;

impl Check for JsonValid {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(JsonValid)));
        Ok(())
    }
}

impl WholeText for JsonValid {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text.trim()).is_ok()
    }
}
