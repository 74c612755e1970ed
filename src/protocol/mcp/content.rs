//! The texts of an MCP message as the checks read them. Each message is read whole: the
//! strings under the keys MCP defines for text a model or a user reads (`text`,
//! `description`, `messages`, `contents`, a tool's schemas, a call's arguments, …) are the
//! modelled texts; every other string that is not protocol structure ([`super::STRUCTURAL`])
//! is residual, checked or not as the route's `unknown_content` says. Free-form JSON (schemas,
//! arguments, structured content) is read as its JSON text, keys included. Binary data (a
//! resource's `blob`, an image's or audio's `data`) cannot be read as text.

use serde_json::{Map, Value};

/// Keys whose whole value is text a model or user reads.
const MODELLED: &[&str] = &[
    "text",
    "description",
    "title",
    "name",
    "message",
    "messages",
    "content",
    "contents",
    "prompt",
    "systemPrompt",
    "instructions",
    "data",
    "uri",
    "uriTemplate",
    "clientInfo",
    "serverInfo",
    "capabilities",
    "tools",
    "resources",
    "resourceTemplates",
    "prompts",
    "roots",
    "values",
    "argument",
    "annotations",
    "icons",
    "_meta",
];

/// Keys whose value is free-form JSON, read as its JSON text (object keys are text there: a
/// poisoned schema can hide words in a property name).
const FREE: &[&str] = &[
    "inputSchema",
    "outputSchema",
    "structuredContent",
    "arguments",
    "requestedSchema",
];

/// What the checks read from one message.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Texts {
    pub modelled: Vec<String>,
    pub residual: Vec<String>,
    /// The key path of binary data found (a `blob`, an image's `data`): not text.
    pub unreadable: Option<String>,
}

impl Texts {
    /// Reads every string of `value` (the top level of a message: its `jsonrpc`, `id` and
    /// `method` are structure).
    pub fn of_message(body: &Map<String, Value>) -> Texts {
        let mut t = Texts::default();
        for (k, v) in body {
            if matches!(k.as_str(), "jsonrpc" | "id" | "method") {
                continue;
            }
            t.walk_member(k, v, false, k);
        }
        t
    }

    /// Reads every string of `value`, found under `path`.
    pub fn of_value(value: &Value, path: &str) -> Texts {
        let mut t = Texts::default();
        t.walk(value, false, path);
        t
    }

    fn walk_member(&mut self, key: &str, value: &Value, modelled: bool, path: &str) {
        if value.is_string() && is_structure(key) {
            return;
        }
        if FREE.contains(&key) {
            if !is_empty(value) {
                self.modelled.push(json_text(value));
            }
            return;
        }
        self.walk(value, modelled || MODELLED.contains(&key), path);
    }

    fn walk(&mut self, value: &Value, modelled: bool, path: &str) {
        match value {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) if modelled => self.modelled.push(s.clone()),
            Value::String(s) => self.residual.push(s.clone()),
            Value::Array(items) => {
                for item in items {
                    self.walk(item, modelled, path);
                }
            }
            Value::Object(map) => {
                let binary = matches!(
                    map.get("type").and_then(Value::as_str),
                    Some("image" | "audio")
                );
                for (k, v) in map {
                    let binary_here = k == "blob" || (binary && k == "data");
                    if binary_here && v.as_str().is_some_and(|s| !s.is_empty()) {
                        self.unreadable.get_or_insert_with(|| format!("{path}.{k}"));
                        continue;
                    }
                    self.walk_member(k, v, modelled, &format!("{path}.{k}"));
                }
            }
            _ => {}
        }
    }
}

/// True when a string under `key` is protocol structure wherever it appears: MCP's own
/// structural keys ([`super::STRUCTURAL`]) and `type`, `role` and `id` — not the model APIs'
/// other common keys (`status`, `model`, … are text an MCP server may fill with anything).
pub fn is_structure(key: &str) -> bool {
    matches!(key, "type" | "role" | "id") || super::STRUCTURAL.keys.contains(&key)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Free-form JSON as one text: serde_json writes strings unescaped but for quotes,
/// backslashes and control characters, so the words stand in it as a model reads them.
pub fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn texts(json: &str) -> Texts {
        let v: Value = serde_json::from_str(json).unwrap();
        Texts::of_message(v.as_object().unwrap())
    }

    #[test]
    fn results_schemas_and_unknown_fields_are_read() {
        let t = texts(
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],
            "structuredContent":{"k":"v"},"isError":false,"x-extra":"odd","_meta":{"m":"meta"}}}"#,
        );
        assert_eq!(t.modelled, ["meta", "hello", r#"{"k":"v"}"#]);
        assert_eq!(t.residual, ["odd"]);
        assert!(t.unreadable.is_none());
        let t = texts(
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"add","description":"Adds",
            "inputSchema":{"type":"object","properties":{"ignore previous":{"type":"string"}}}}]}}"#,
        );
        assert!(t.modelled.iter().any(|s| s.contains("ignore previous")));
        assert!(t.modelled.contains(&"Adds".to_string()));
    }

    #[test]
    fn structure_is_skipped_and_binary_is_unreadable() {
        let t = texts(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1,"message":"half"}}"#,
        );
        assert_eq!(t.modelled, ["half"]);
        assert!(t.residual.is_empty());
        let t = texts(
            r#"{"jsonrpc":"2.0","id":2,"result":{"contents":[{"uri":"file:///a","mimeType":"image/png","blob":"AAAA"}]}}"#,
        );
        assert_eq!(t.unreadable.as_deref(), Some("result.contents.blob"));
        let t = texts(
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}}"#,
        );
        assert!(t.unreadable.is_some());
    }
}
