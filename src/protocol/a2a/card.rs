//! The agent card, served through the route with its interfaces rewritten to guardwire's URL
//! for them, so an SDK that resolves the card keeps talking through the proxy.
//!
//! - 1.0 `supportedInterfaces[]`: the JSON-RPC ones (`protocolBinding: JSONRPC`) whose URL the
//!   route reaches, with guardwire's URL; every other interface is removed (gRPC and HTTP+JSON
//!   would go around the checks).
//! - 0.3 `url` (with `preferredTransport`, JSON-RPC when absent) and `additionalInterfaces[]`
//!   (`transport`): the same; when the main interface is not a reachable JSON-RPC one, the
//!   first reachable JSON-RPC additional interface takes its place.
//! - `capabilities.pushNotifications`, `capabilities.extendedAgentCard` and 0.3's
//!   `supportsAuthenticatedExtendedCard` turn false: guardwire refuses those calls.
//!
//! A card with no JSON-RPC interface left is refused (the client could only go around the
//! proxy). Other URLs (documentation, icon, provider, OAuth endpoints) are left as they are.
//! Signatures (`signatures`) are kept: a client that verifies them rejects the rewritten card,
//! which fails closed.

use crate::protocol::mcp::jsonrpc::read_unique;
use serde_json::Value;

const JSONRPC: &str = "JSONRPC";

pub fn rewrite(body: &[u8], map: &dyn Fn(&str) -> Option<String>) -> Result<Vec<u8>, String> {
    // A key twice is refused: the client's reader may keep the copy this rewrite drops.
    let card = read_unique(body)
        .map_err(|e| format!("the agent card is not JSON guardwire reads: {}", e.message))?;
    let Value::Object(mut card) = card else {
        return Err("the agent card is not a JSON object".to_owned());
    };
    // The SDKs read each field by its camelCase or its snake_case name: the fields this
    // rewrite reads are taken in either, and given back in camelCase.
    camel_keys(&mut card)?;
    for list in ["supportedInterfaces", "additionalInterfaces"] {
        if let Some(Value::Array(items)) = card.get_mut(list) {
            for i in items {
                if let Value::Object(i) = i {
                    camel_keys(i)?;
                }
            }
        }
    }
    if let Some(Value::Object(caps)) = card.get_mut("capabilities") {
        camel_keys(caps)?;
    }
    let mut reachable = 0;
    // 1.0
    if let Some(list) = card.get_mut("supportedInterfaces") {
        let Value::Array(list) = list else {
            return Err("the agent card's supportedInterfaces is not a list".into());
        };
        list.retain_mut(|i| rewrite_interface(i, "protocolBinding", true, map));
        reachable += list.len();
    }
    // 0.3
    if let Some(list) = card.get_mut("additionalInterfaces") {
        let Value::Array(list) = list else {
            return Err("the agent card's additionalInterfaces is not a list".into());
        };
        list.retain_mut(|i| rewrite_interface(i, "transport", false, map));
        reachable += list.len();
    }
    if card.contains_key("url") {
        let main_is_jsonrpc = match card.get("preferredTransport") {
            None | Some(Value::Null) => true,
            Some(t) => t.as_str() == Some(JSONRPC),
        };
        let main = card
            .get("url")
            .and_then(Value::as_str)
            .filter(|_| main_is_jsonrpc)
            .and_then(map);
        let replacement = main.or_else(|| {
            card.get("additionalInterfaces")
                .and_then(Value::as_array)
                .and_then(|l| l.first())
                .and_then(|i| i.get("url"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        match replacement {
            Some(url) => {
                card.insert("url".into(), Value::String(url));
                card.insert("preferredTransport".into(), Value::String(JSONRPC.into()));
                reachable += 1;
            }
            None => {
                card.remove("url");
                card.remove("preferredTransport");
            }
        }
    }
    if reachable == 0 {
        return Err(
            "the agent card names no JSON-RPC interface that can be reached through this route"
                .into(),
        );
    }
    if let Some(Value::Object(caps)) = card.get_mut("capabilities") {
        for key in ["pushNotifications", "extendedAgentCard"] {
            if caps.contains_key(key) {
                caps.insert(key.into(), Value::Bool(false));
            }
        }
    }
    if card.contains_key("supportsAuthenticatedExtendedCard") {
        card.insert(
            "supportsAuthenticatedExtendedCard".into(),
            Value::Bool(false),
        );
    }
    serde_json::to_vec(&card).map_err(|e| format!("the agent card cannot be written: {e}"))
}

/// Keeps (true) a JSON-RPC interface the route reaches, its `url` rewritten. `required`: the
/// binding must be named (1.0); else a missing one is JSON-RPC (0.3's default).
fn rewrite_interface(
    i: &mut Value,
    binding_key: &str,
    required: bool,
    map: &dyn Fn(&str) -> Option<String>,
) -> bool {
    let Value::Object(i) = i else { return false };
    let jsonrpc = match i.get(binding_key).and_then(Value::as_str) {
        Some(b) => b == JSONRPC,
        None => !required,
    };
    let url = i.get("url").and_then(Value::as_str).and_then(map);
    match (jsonrpc, url) {
        (true, Some(url)) => {
            i.insert("url".into(), Value::String(url));
            true
        }
        _ => false,
    }
}

/// Renames an object's snake_case members to camelCase (`supported_interfaces` →
/// `supportedInterfaces`); a member given in both spellings is refused.
fn camel_keys(map: &mut serde_json::Map<String, Value>) -> Result<(), String> {
    let snake: Vec<String> = map
        .keys()
        .filter(|k| k.contains('_') && !k.starts_with('_'))
        .cloned()
        .collect();
    for key in snake {
        let mut camel = String::with_capacity(key.len());
        let mut upper = false;
        for c in key.chars() {
            match c {
                '_' => upper = true,
                c if upper => {
                    camel.push(c.to_ascii_uppercase());
                    upper = false;
                }
                c => camel.push(c),
            }
        }
        if !crate::protocol::residual::is_snake_of(&camel, key.as_bytes()) {
            continue; // not a spelling of a camelCase name (`a__b`, `a_`, `a_1`)
        }
        if map.contains_key(&camel) {
            return Err(format!(
                "the agent card gives `{camel}` in both its camelCase and its snake_case spelling"
            ));
        }
        if let Some(v) = map.remove(&key) {
            map.insert(camel, v);
        }
    }
    Ok(())
}
