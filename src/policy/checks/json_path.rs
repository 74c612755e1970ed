//! `json_path`: what a JSONPath expression finds in the whole text (or the JSON it wraps).

use super::params::Params;
use super::{Check, CheckDef, CheckType, Kind};
use crate::policy::compile::TargetChecks;
use crate::policy::judged::CheckRefs;
use crate::policy::structured::{parse_path, PathCheck};
use crate::policy::whole::WholeText;
use serde_json::Value;
use std::sync::Arc;

pub(in crate::policy) struct JsonPathType;
pub(in crate::policy) const JSON_PATH: JsonPathType = JsonPathType;

impl CheckType for JsonPathType {
    fn build(&self, _: &str, _: &str, p: &mut Params, _: &CheckRefs) -> Result<CheckDef, String> {
        let expression = p.required_string("expression")?;
        let path = parse_path(&expression).map_err(|e| format!("param 'expression': {e}"))?;
        let expected = p.take("expected").map(|(_, v)| v);
        let contains = match p.take("contains").map(|(_, v)| v) {
            None => Vec::new(),
            Some(Value::Array(items)) => items,
            Some(one) => vec![one],
        };
        let (min_results, max_results) = (p.u64("min_results")?, p.u64("max_results")?);
        if let (Some(lo), Some(hi)) = (min_results, max_results) {
            if lo > hi {
                return Err(format!(
                    "param 'min_results': {lo} is more than max_results {hi}"
                ));
            }
        }
        Ok(CheckDef::new(JsonPath(Arc::new(PathCheck {
            path,
            expected,
            contains,
            min_results,
            max_results,
            extract: p.extract()?,
        }))))
    }
}

#[derive(Debug, Clone)]
struct JsonPath(Arc<PathCheck>);

impl Check for JsonPath {
    fn kind(&self) -> Kind {
        Kind::Whole
    }

    fn compile_text(&self, owner: u32, checks: &mut TargetChecks) -> Result<(), String> {
        checks.whole.push((owner, Box::new(self.clone())));
        Ok(())
    }
}

impl WholeText for JsonPath {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        self.0.passes(text)
    }
}
