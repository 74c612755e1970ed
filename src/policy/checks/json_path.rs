//! `json_path`: what a JSONPath expression finds in the whole text (or the JSON it wraps).

use super::{CheckDef, CheckType, Named};
use crate::policy::pack::params::Params;
use crate::policy::structured::{parse_path, PathCheck};
use crate::policy::whole::WholeText;
use serde_json::Value;
use std::sync::Arc;

pub(in crate::policy) struct JsonPathType;
pub(in crate::policy) const JSON_PATH: JsonPathType = JsonPathType;

impl CheckType for JsonPathType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
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
        Ok(CheckDef::whole(JsonPath(Arc::new(PathCheck {
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

impl WholeText for JsonPath {
    fn passes(&self, text: &str, _: &mut Option<String>) -> bool {
        self.0.passes(text)
    }
}
