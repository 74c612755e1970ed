//! `field_presence` / `required_fields`: the whole text is JSON with these fields.

use super::{non_empty_patterns, CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::structured;
use crate::policy::whole::WholeText;

pub(in crate::policy) struct FieldPresenceType;
pub(in crate::policy) const FIELD_PRESENCE: FieldPresenceType = FieldPresenceType;

impl CheckType for FieldPresenceType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("required_fields", "fields")]
    }

    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        Ok(CheckDef::whole(FieldPresence {
            fields: non_empty_patterns(p.required_string_list("fields")?)?,
        }))
    }
}

#[derive(Debug, Clone)]
struct FieldPresence {
    fields: Vec<String>,
}

impl WholeText for FieldPresence {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        structured::fields_present(text, &self.fields)
    }
}
