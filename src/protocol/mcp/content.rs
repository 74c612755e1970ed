//! The texts of an MCP message as the checks read them. Each message is read whole: the
//! strings under the keys MCP defines for text a model or a user reads (`text`,
//! `description`, `messages`, `contents`, a tool's schemas, a call's arguments, …) and every
//! other string a field of MCP holds are the modelled texts; the strings under keys that are
//! no field of MCP (a vendor's field, a map's key) are residual, checked or not as the route's
//! `unknown_content` says. A key is a field in every spelling the SDKs read for it
//! ([`canonical`]: `structured_content` is `structuredContent`). A string is protocol
//! structure only where the MCP schema puts structure ([`structure_at`]: a message's
//! `jsonrpc`, `id` and `method`, a content block's `type`, a message's `role`, a cursor, …)
//! and only when it is what the schema allows there: one of its values (read by no check), or
//! an identifier (`protocol::identifier`; read by the secret and PII patterns only). The same
//! key anywhere else — inside `_meta`, an unknown field, structured content — is text. So is
//! an object key that is no field name of the schema. Free-form JSON (schemas, arguments,
//! structured content) is read as its JSON text, keys included. Binary data (a resource's
//! `blob`, an image's or audio's `data`) cannot be read as text. Sibling texts a client hands
//! the model together are read joined as well ([`joined`]).

use serde_json::{Map, Value};

mod joined;
mod schema;

pub use crate::protocol::identifier::MAX_IDENTIFIER as MAX_TOKEN;
pub use joined::joined;
pub use schema::{canonical, is_field, structure_at, Structure};
use schema::{FREE, MODELLED};

/// What the checks read from one message.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Texts {
    pub modelled: Vec<String>,
    pub residual: Vec<String>,
    /// Sibling texts joined as a client joins them for the model ([`joined`]): modelled, and
    /// read besides each piece.
    pub joined: Vec<String>,
    /// Identifiers at the positions of structure: read by the secret and PII patterns only.
    pub identifiers: Vec<String>,
    /// The key path of binary data found (a `blob`, an image's `data`): not text.
    pub unreadable: Option<String>,
}

impl Texts {
    /// Reads every string of a message that is not structure, and its joined sibling texts.
    pub fn of_message(body: &Map<String, Value>) -> Texts {
        let mut t = Texts::default();
        t.object(body, false, &mut Vec::with_capacity(8));
        t.joined = joined(body);
        t
    }

    /// Reads every string of `value`, a field found at `at` (the keys from the message's top).
    pub fn of_value<'a>(value: &'a Value, at: &[&'a str]) -> Texts {
        let mut t = Texts::default();
        t.walk(value, false, true, &mut at.to_vec());
        t
    }

    fn push(&mut self, s: String, modelled: bool) {
        match modelled {
            true => self.modelled.push(s),
            false => self.residual.push(s),
        }
    }

    fn object<'a>(&mut self, map: &'a Map<String, Value>, modelled: bool, path: &mut Vec<&'a str>) {
        let binary = matches!(
            map.iter()
                .find(|(k, _)| canonical(k) == Some("type"))
                .and_then(|(_, v)| v.as_str()),
            Some("image" | "audio")
        );
        for (k, v) in map {
            let field = canonical(k);
            path.push(field.unwrap_or(k));
            let binary_here = field == Some("blob") || (binary && field == Some("data"));
            if binary_here && v.as_str().is_some_and(|s| !s.is_empty()) {
                self.unreadable.get_or_insert_with(|| path.join("."));
            } else {
                self.member(k, field, v, modelled, path);
            }
            path.pop();
        }
    }

    /// One member of an object (`path` ends with its key, as `field` when it is one).
    fn member<'a>(
        &mut self,
        key: &'a str,
        field: Option<&'static str>,
        value: &'a Value,
        modelled: bool,
        path: &mut Vec<&'a str>,
    ) {
        let Some(field) = field else {
            // Free-form data: a vendor's field name or a map's key is text too.
            if !key.is_empty() {
                self.push(key.to_owned(), modelled);
            }
            self.walk(value, modelled, false, path);
            return;
        };
        if let Value::String(s) = value {
            match structure_at(path, s) {
                Some(Structure::Constant) => return,
                Some(Structure::Identifier) => {
                    self.identifiers.push(s.clone());
                    return;
                }
                None => {}
            }
        }
        if FREE.contains(&field) {
            if !is_empty(value) {
                self.modelled.push(json_text(value));
                // A `data:` URL in it (a link a host opens, one a tool fetches) on its own
                // too: its content is read (`proxy/mcp/check.rs`).
                data_urls(value, &mut self.modelled);
            }
            return;
        }
        self.walk(value, modelled || MODELLED.contains(&field), true, path);
    }

    /// `known`: `value` is (an item of) a field of MCP, whose strings are known text whatever
    /// `unknown_content` says.
    fn walk<'a>(&mut self, value: &'a Value, modelled: bool, known: bool, path: &mut Vec<&'a str>) {
        match value {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => self.push(s.clone(), modelled || known),
            Value::Array(items) => {
                for item in items {
                    self.walk(item, modelled, known, path);
                }
            }
            Value::Object(map) => self.object(map, modelled, path),
            _ => {}
        }
    }
}

/// Every string value of free-form JSON that is a `data:` URL.
fn data_urls(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if crate::protocol::documents::is_data_url(s.trim_start()) => {
            out.push(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| data_urls(v, out)),
        Value::Object(map) => map.values().for_each(|v| data_urls(v, out)),
        _ => {}
    }
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
mod tests;
