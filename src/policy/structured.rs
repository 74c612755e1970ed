//! Checks on structured (JSON) output: `field_presence`, `json_schema`, `json_path`.
//!
//! All need the complete response, so they run at AfterCall (or, with `buffer: true`, before
//! anything is released).

use super::tools::json_equal;
use serde_json::Value;

/// How the JSON document is found in the response text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extract {
    /// Accept a document wrapped in a Markdown code fence (```` ```json … ``` ````).
    pub allow_wrapped: bool,
    /// Take the first balanced `{…}` or `[…]` anywhere in the text.
    pub extract_json: bool,
}

impl Extract {
    /// The JSON document of `text`: the whole trimmed text, else (when allowed) a fenced block,
    /// else (when allowed) the first balanced object or array that parses.
    pub fn document(self, text: &str) -> Option<Value> {
        let trimmed = text.trim();
        if let Ok(v) = serde_json::from_str(trimmed) {
            return Some(v);
        }
        if self.allow_wrapped {
            if let Some(v) = fenced(trimmed).and_then(|f| serde_json::from_str(f.trim()).ok()) {
                return Some(v);
            }
        }
        if self.extract_json {
            return balanced_documents(text).find_map(|d| serde_json::from_str(d).ok());
        }
        None
    }
}

/// The body of the first ```` ``` ```` fence (any info string, e.g. `json`).
fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let close = body.find("```")?;
    Some(&body[..close])
}

/// Every balanced `{…}` / `[…]` span, in order of their starts (strings respected).
fn balanced_documents(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    (0..bytes.len())
        .filter(move |&i| matches!(bytes[i], b'{' | b'['))
        .filter_map(move |start| {
            let (mut depth, mut in_str, mut esc) = (0u32, false, false);
            for (k, &b) in bytes[start..].iter().enumerate() {
                if in_str {
                    match b {
                        _ if esc => esc = false,
                        b'\\' => esc = true,
                        b'"' => in_str = false,
                        _ => {}
                    }
                    continue;
                }
                match b {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(&text[start..start + k + 1]);
                        }
                    }
                    _ => {}
                }
            }
            None
        })
}

/// `field_presence`: with JSON output, each field (a dotted path, `a.b.0.c`) exists; with any
/// other output, each field name appears in the text (case-insensitive).
pub fn fields_present(text: &str, fields: &[String]) -> bool {
    let doc = Extract {
        allow_wrapped: true,
        extract_json: false,
    }
    .document(text);
    match doc {
        Some(doc @ (Value::Object(_) | Value::Array(_))) => {
            fields.iter().all(|f| lookup(&doc, f).is_some())
        }
        _ => {
            let lower = text.to_lowercase();
            fields.iter().all(|f| lower.contains(&f.to_lowercase()))
        }
    }
}

fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// A compiled `json_path` check.
#[derive(Debug)]
pub struct PathCheck {
    pub path: serde_json_path::JsonPath,
    pub expected: Option<Value>,
    pub contains: Vec<Value>,
    pub min_results: Option<u64>,
    pub max_results: Option<u64>,
    pub extract: Extract,
}

/// Parses a path in RFC 9535 form (`$.a.b[0]`) or the bare form (`a.b[0]`, read as `$.a.b[0]`).
pub fn parse_path(expression: &str) -> Result<serde_json_path::JsonPath, String> {
    let e = expression.trim();
    let full = if e.starts_with('$') {
        e.to_owned()
    } else if e.starts_with('[') {
        format!("${e}")
    } else {
        format!("$.{e}")
    };
    serde_json_path::JsonPath::parse(&full).map_err(|err| {
        format!("`{expression}` is not a JSONPath (RFC 9535, or the bare `a.b[0]` form): {err}")
    })
}

impl PathCheck {
    pub fn passes(&self, text: &str) -> bool {
        let Some(doc) = self.extract.document(text) else {
            return false;
        };
        let nodes: Vec<&Value> = self.path.query(&doc).all();
        let n = nodes.len() as u64;
        if self.min_results.is_some_and(|m| n < m) || self.max_results.is_some_and(|m| n > m) {
            return false;
        }
        if let Some(expected) = &self.expected {
            let ok = match nodes.as_slice() {
                [one] => json_equal(one, expected),
                many => json_equal(
                    &Value::Array(many.iter().map(|v| (*v).clone()).collect()),
                    expected,
                ),
            };
            if !ok {
                return false;
            }
        }
        self.contains
            .iter()
            .all(|c| nodes.iter().any(|node| value_contains(node, c)))
    }
}

/// A result "contains" `c` when it equals it, is an array with it, or is a string with it.
fn value_contains(node: &Value, c: &Value) -> bool {
    match (node, c) {
        (Value::Array(items), _) => items.iter().any(|i| json_equal(i, c)) || json_equal(node, c),
        (Value::String(s), Value::String(sub)) => s.contains(sub.as_str()),
        _ => json_equal(node, c),
    }
}

/// A compiled `json_schema` check.
pub struct SchemaCheck {
    pub validator: jsonschema::Validator,
    pub extract: Extract,
}

impl std::fmt::Debug for SchemaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaCheck")
            .field("extract", &self.extract)
            .finish()
    }
}

impl SchemaCheck {
    pub fn compile(schema: &Value, extract: Extract) -> Result<SchemaCheck, String> {
        let validator =
            jsonschema::validator_for(schema).map_err(|e| format!("invalid JSON Schema: {e}"))?;
        Ok(SchemaCheck { validator, extract })
    }

    pub fn passes(&self, text: &str) -> bool {
        self.extract
            .document(text)
            .is_some_and(|doc| self.validator.is_valid(&doc))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn extraction_modes() {
        let plain = Extract::default();
        let wrapped = Extract {
            allow_wrapped: true,
            extract_json: false,
        };
        let extract = Extract {
            allow_wrapped: false,
            extract_json: true,
        };
        let fence = "Here:\n```json\n{\"a\": 1}\n```\nbye";
        assert_eq!(plain.document(" {\"a\":1} "), Some(json!({"a":1})));
        assert_eq!(plain.document(fence), None);
        assert_eq!(wrapped.document(fence), Some(json!({"a":1})));
        assert_eq!(
            extract.document("x {bad} then [1, \"]\"] end"),
            Some(json!([1, "]"]))
        );
        assert_eq!(extract.document("no json"), None);
    }

    #[test]
    fn field_presence_is_json_aware() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(fields_present(
            r#"{"order": {"id": 1, "items": [{"sku": "x"}]}}"#,
            &f(&["order.id", "order.items.0.sku"])
        ));
        assert!(!fields_present(
            r#"{"order": {"id": 1}}"#,
            &f(&["order.status"])
        ));
        // In JSON, a key's name inside a value does not count.
        assert!(!fields_present(r#"{"note": "status"}"#, &f(&["status"])));
        assert!(fields_present(
            "Name: Ann\nStatus: ok",
            &f(&["name", "STATUS"])
        ));
        assert!(!fields_present("Name: Ann", &f(&["status"])));
    }

    #[test]
    fn json_path_forms_and_params() {
        let doc = r#"{"order": {"status": "confirmed", "items": [{"sku": "a"}, {"sku": "b"}], "tags": ["x", "y"]}}"#;
        let check = |expr: &str,
                     expected: Option<Value>,
                     contains: Vec<Value>,
                     min: Option<u64>,
                     max: Option<u64>| {
            PathCheck {
                path: parse_path(expr).unwrap(),
                expected,
                contains,
                min_results: min,
                max_results: max,
                extract: Extract::default(),
            }
            .passes(doc)
        };
        assert!(check(
            "$.order.status",
            Some(json!("confirmed")),
            vec![],
            None,
            None
        ));
        assert!(check(
            "order.status",
            Some(json!("confirmed")),
            vec![],
            None,
            None
        ));
        assert!(!check(
            "order.status",
            Some(json!("pending")),
            vec![],
            None,
            None
        ));
        assert!(check(
            "order.items[*].sku",
            Some(json!(["a", "b"])),
            vec![],
            Some(2),
            Some(2)
        ));
        assert!(!check("order.items[*].sku", None, vec![], Some(3), None));
        assert!(check("order.tags", None, vec![json!("y")], None, None));
        assert!(check("order.status", None, vec![json!("firm")], None, None));
        assert!(!check("order.missing", None, vec![], Some(1), None));
        assert!(parse_path("a..[").is_err());
    }

    #[test]
    fn json_schema_validates() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {"age": {"type": "integer"}}});
        let c = SchemaCheck::compile(
            &schema,
            Extract {
                allow_wrapped: true,
                extract_json: false,
            },
        )
        .unwrap();
        assert!(c.passes(r#"{"name": "a", "age": 3}"#));
        assert!(c.passes("```json\n{\"name\": \"a\"}\n```"));
        assert!(!c.passes(r#"{"age": 3}"#));
        assert!(!c.passes("not json"));
        assert!(SchemaCheck::compile(&json!({"type": 12}), Extract::default()).is_err());
    }
}
