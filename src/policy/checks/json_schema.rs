//! `json_schema`: the whole text (or the JSON it wraps) is valid against a JSON Schema.

use super::params::Params;
use super::{Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::structured::SchemaCheck;
use crate::policy::whole::WholeText;
use std::sync::Arc;

pub(in crate::policy) struct JsonSchemaType;
pub(in crate::policy) const JSON_SCHEMA: JsonSchemaType = JsonSchemaType;

impl CheckType for JsonSchemaType {
    fn build(&self, _: &str, _: &str, p: &mut Params, _: &CheckRefs) -> Result<CheckDef, String> {
        let (key, schema) = p
            .take("schema")
            .ok_or_else(|| "param 'schema': required (a JSON Schema object)".to_owned())?;
        let extract = p.extract()?;
        let check =
            SchemaCheck::compile(&schema, extract).map_err(|e| format!("param '{key}': {e}"))?;
        Ok(CheckDef::new(JsonSchema(Arc::new(check))))
    }
}

#[derive(Debug, Clone)]
struct JsonSchema(Arc<SchemaCheck>);

impl Check for JsonSchema {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(self.clone())));
        Ok(())
    }
}

impl WholeText for JsonSchema {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        self.0.passes(text)
    }
}
