//! MCP's JSON-RPC framing (`guardwire::protocol::mcp`): a POST body or an SSE event's data.
//!
//! Input: the bytes of the body.
//!
//! Asserts:
//! - `jsonrpc::parse` never panics; its refusal renders as a JSON-RPC error that is JSON;
//! - a message it accepts, written back (`to_json`), reads again as the same kind of message
//!   with the same id;
//! - fail closed: every non-empty string of an accepted message that is not protocol structure
//!   (a structural key's string, the top level's `jsonrpc`, `id`, `method`) is among the texts
//!   the checks read (`Texts::of_message`): as a text of its own, or inside the JSON text of a
//!   free-form value; or the message is marked unreadable (binary content).
#![no_main]

use guardwire::protocol::mcp::content::{is_structure, Texts};
use guardwire::protocol::mcp::jsonrpc;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (messages, _) = match jsonrpc::parse(data) {
        Ok(m) => m,
        Err(e) => {
            let answer = jsonrpc::error_json(&e.id, e.code, &e.message, None);
            assert!(serde_json::from_str::<IgnoredAny>(&answer).is_ok());
            return;
        }
    };
    for msg in messages {
        let again = jsonrpc::one(serde_json::from_str(&msg.to_json()).unwrap()).unwrap();
        assert_eq!(again.kind, msg.kind);
        assert_eq!(again.id, msg.id);
        let texts = Texts::of_message(&msg.body);
        if texts.unreadable.is_some() {
            continue;
        }
        for (k, v) in &msg.body {
            if !matches!(k.as_str(), "jsonrpc" | "id" | "method") {
                every_string_read(k, v, &texts);
            }
        }
    }
});

fn every_string_read(key: &str, value: &Value, texts: &Texts) {
    match value {
        Value::String(s) if s.is_empty() => {}
        Value::String(_) if is_structure(key) => {}
        Value::String(s) => {
            let escaped = serde_json::to_string(s).unwrap();
            let inner = &escaped[1..escaped.len() - 1];
            assert!(
                texts.modelled.contains(s)
                    || texts.residual.contains(s)
                    || texts.modelled.iter().any(|t| t.contains(inner)),
                "{key}: {s:?} is read by no check"
            );
        }
        Value::Array(items) => {
            for item in items {
                every_string_read(key, item, texts);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                every_string_read(k, v, texts);
            }
        }
        _ => {}
    }
}
