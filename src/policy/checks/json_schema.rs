//! `json_schema`: the whole text (or the JSON it wraps) is valid against a JSON Schema.

use super::{CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::structured::SchemaCheck;
use crate::policy::whole::WholeText;
use std::sync::Arc;

pub(in crate::policy) struct JsonSchemaType;
pub(in crate::policy) const JSON_SCHEMA: JsonSchemaType = JsonSchemaType;

impl CheckType for JsonSchemaType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let (key, schema) = p
            .take("schema")
            .ok_or_else(|| "param 'schema': required (a JSON Schema object)".to_owned())?;
        let extract = p.extract()?;
        let check =
            SchemaCheck::compile(&schema, extract).map_err(|e| format!("param '{key}': {e}"))?;
        Ok(CheckDef::whole(JsonSchema(Arc::new(check))))
    }
}

#[derive(Debug, Clone)]
struct JsonSchema(Arc<SchemaCheck>);

impl WholeText for JsonSchema {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        self.0.passes(text)
    }
}
