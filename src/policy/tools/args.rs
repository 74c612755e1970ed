//! A tool call's arguments as the checks compare them: parsed as a JSON object (empty
//! arguments are an empty object), values compared as JSON (numbers by value).

use serde_json::{Map, Value};

/// Whether the arguments (JSON text) hold every expected key with an equal value; `None` when
/// they are not a JSON object.
pub fn args_match(args: &str, expected: &Map<String, Value>) -> Option<bool> {
    let parsed = parse_args(args)?;
    Some(
        expected
            .iter()
            .all(|(k, v)| parsed.get(k).is_some_and(|a| json_equal(a, v))),
    )
}

/// Whether `actual` is the excluded value `excluded` (or one of them, for a list).
pub fn value_excluded(actual: &Value, excluded: &Value) -> bool {
    match excluded {
        Value::Array(options) if !actual.is_array() => {
            options.iter().any(|o| json_equal(actual, o))
        }
        other => json_equal(actual, other),
    }
}

/// Empty arguments are an empty object (OpenAI sends `""` for argument-less calls).
pub(crate) fn parse_args(args: &str) -> Option<Map<String, Value>> {
    if args.trim().is_empty() {
        return Some(Map::new());
    }
    match serde_json::from_str(args) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
