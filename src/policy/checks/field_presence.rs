//! `field_presence` / `required_fields`: the whole text is JSON with these fields.

use super::params::Params;
use super::{non_empty_patterns, Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::structured;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct FieldPresenceType;
pub(in crate::policy) const FIELD_PRESENCE: FieldPresenceType = FieldPresenceType;

impl CheckType for FieldPresenceType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("required_fields", "fields")]
    }

    fn build(&self, _: &str, _: &str, p: &mut Params, _: &CheckRefs) -> Result<CheckDef, String> {
        Ok(CheckDef::new(FieldPresence {
            fields: non_empty_patterns(p.required_string_list("fields")?)?,
        }))
    }
}

#[derive(Debug, Clone)]
struct FieldPresence {
    fields: Vec<String>,
}

impl Check for FieldPresence {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(self.clone())));
        Ok(())
    }
}

impl WholeText for FieldPresence {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        structured::fields_present(text, &self.fields)
    }
}
