//! The texts of an MCP message as the checks read them. Each message is read whole: the
//! strings under the keys MCP defines for text a model or a user reads (`text`,
//! `description`, `messages`, `contents`, a tool's schemas, a call's arguments, …) are the
//! modelled texts; every other string is residual, checked or not as the route's
//! `unknown_content` says. A string is protocol structure, and not read, only where the MCP
//! schema puts structure ([`is_structure_at`]: a message's `jsonrpc`, `id` and `method`, a
//! content block's `type`, a message's `role`, a cursor, …) and only when it is what the
//! schema allows there (one of its values, or a short opaque token): the same key anywhere
//! else — inside `_meta`, an unknown field, structured content — is text. So is an object key
//! that is no field name of the schema (a vendor's field, a map's key). Free-form JSON
//! (schemas, arguments, structured content) is read as its JSON text, keys included. Binary
//! data (a resource's `blob`, an image's or audio's `data`) cannot be read as text.

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

/// Every field name of the MCP schema (the revisions guardwire reads, with 2026-07-28's reserved
/// `_meta` keys). Any other object key is free-form data and is read as text.
const FIELDS: &[&str] = &[
    "_meta",
    "action",
    "annotations",
    "argument",
    "arguments",
    "audience",
    "blob",
    "cacheScope",
    "call",
    "cancel",
    "capabilities",
    "clientInfo",
    "code",
    "completion",
    "completions",
    "content",
    "contents",
    "context",
    "costPriority",
    "create",
    "createMessage",
    "createdAt",
    "cursor",
    "data",
    "description",
    "destructiveHint",
    "elicitation",
    "elicitationId",
    "elicitations",
    "error",
    "execution",
    "experimental",
    "extensions",
    "form",
    "hasMore",
    "hints",
    "icons",
    "id",
    "idempotentHint",
    "includeContext",
    "input",
    "inputRequests",
    "inputResponses",
    "inputSchema",
    "instructions",
    "intelligencePriority",
    "isError",
    "jsonrpc",
    "lastModified",
    "lastUpdatedAt",
    "level",
    "list",
    "listChanged",
    "logger",
    "logging",
    "maxTokens",
    "message",
    "messages",
    "metadata",
    "method",
    "mimeType",
    "mode",
    "model",
    "modelPreferences",
    "name",
    "nextCursor",
    "notifications",
    "openWorldHint",
    "outputSchema",
    "params",
    "pollInterval",
    "priority",
    "progress",
    "progressToken",
    "prompts",
    "promptsListChanged",
    "protocolVersion",
    "readOnlyHint",
    "reason",
    "ref",
    "requestId",
    "requestState",
    "requested",
    "requestedSchema",
    "requests",
    "required",
    "requiredCapabilities",
    "resource",
    "resourceSubscriptions",
    "resourceTemplates",
    "resources",
    "resourcesListChanged",
    "result",
    "resultType",
    "role",
    "roots",
    "sampling",
    "serverInfo",
    "size",
    "sizes",
    "speedPriority",
    "src",
    "status",
    "statusMessage",
    "stopReason",
    "stopSequences",
    "structuredContent",
    "subscribe",
    "supported",
    "supportedVersions",
    "systemPrompt",
    "task",
    "taskId",
    "taskSupport",
    "tasks",
    "temperature",
    "text",
    "theme",
    "title",
    "toolChoice",
    "toolUseId",
    "tools",
    "toolsListChanged",
    "total",
    "ttl",
    "ttlMs",
    "type",
    "uri",
    "uriTemplate",
    "url",
    "value",
    "values",
    "version",
    "websiteUrl",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
    "io.modelcontextprotocol/serverInfo",
    "io.modelcontextprotocol/subscriptionId",
];

/// What a structural string may be at its position.
enum Allowed {
    /// A token: 1 to [`MAX_TOKEN`] bytes of visible ASCII, no spaces (ids, cursors, MIME types).
    Token,
    /// One of the schema's values.
    OneOf(&'static [&'static str]),
}

/// The longest token exempt as structure (an opaque cursor or id); longer ones are read.
pub const MAX_TOKEN: usize = 1024;

impl Allowed {
    fn admits(&self, value: &str) -> bool {
        match self {
            Allowed::Token => {
                (1..=MAX_TOKEN).contains(&value.len())
                    && value.bytes().all(|b| b.is_ascii_graphic())
            }
            Allowed::OneOf(values) => values.contains(&value),
        }
    }
}

const ROLES: &[&str] = &["user", "assistant"];
const LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
const TASK_STATUS: &[&str] = &[
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];
const BLOCK_TYPES: &[&str] = &[
    "text",
    "image",
    "audio",
    "resource",
    "resource_link",
    "tool_use",
    "tool_result",
];

/// The positions of structure (the keys from the message's top, array positions left out,
/// the string's own key last) and what the string may be there.
const STRUCTURE: &[(&[&str], Allowed)] = &[
    (&["jsonrpc"], Allowed::OneOf(&["2.0"])),
    (&["id"], Allowed::Token),
    (&["method"], Allowed::Token),
    (&["params", "_meta", "progressToken"], Allowed::Token),
    (
        &["params", "_meta", "io.modelcontextprotocol/protocolVersion"],
        Allowed::OneOf(&super::VERSIONS),
    ),
    (
        &["params", "_meta", "io.modelcontextprotocol/logLevel"],
        Allowed::OneOf(LEVELS),
    ),
    (
        &[
            "params",
            "_meta",
            "io.modelcontextprotocol/clientInfo",
            "version",
        ],
        Allowed::Token,
    ),
    (&["params", "progressToken"], Allowed::Token),
    (&["params", "requestId"], Allowed::Token),
    (&["params", "cursor"], Allowed::Token),
    (
        &["params", "protocolVersion"],
        Allowed::OneOf(&super::VERSIONS),
    ),
    (&["params", "level"], Allowed::OneOf(LEVELS)),
    (&["params", "clientInfo", "version"], Allowed::Token),
    (
        &["params", "ref", "type"],
        Allowed::OneOf(&["ref/prompt", "ref/resource"]),
    ),
    (
        &["params", "includeContext"],
        Allowed::OneOf(&["none", "thisServer", "allServers"]),
    ),
    (&["params", "mode"], Allowed::OneOf(&["form", "url"])),
    (&["params", "elicitationId"], Allowed::Token),
    (
        &["params", "toolChoice", "mode"],
        Allowed::OneOf(&["auto", "required", "none"]),
    ),
    (&["params", "taskId"], Allowed::Token),
    (&["params", "status"], Allowed::OneOf(TASK_STATUS)),
    (&["params", "messages", "role"], Allowed::OneOf(ROLES)),
    (
        &["result", "protocolVersion"],
        Allowed::OneOf(&super::VERSIONS),
    ),
    (&["result", "serverInfo", "version"], Allowed::Token),
    (
        &[
            "result",
            "_meta",
            "io.modelcontextprotocol/serverInfo",
            "version",
        ],
        Allowed::Token,
    ),
    (&["result", "nextCursor"], Allowed::Token),
    // A tool's task support: the TypeScript SDK lists every tool with `forbidden`, which a
    // pack banning that word would otherwise read as poison in every tool.
    (
        &["result", "tools", "execution", "taskSupport"],
        Allowed::OneOf(&["forbidden", "optional", "required"]),
    ),
    (&["result", "resultType"], Allowed::Token),
    (&["result", "contents", "mimeType"], Allowed::Token),
    (&["result", "resources", "mimeType"], Allowed::Token),
    (&["result", "resourceTemplates", "mimeType"], Allowed::Token),
    (&["result", "messages", "role"], Allowed::OneOf(ROLES)),
    (&["result", "role"], Allowed::OneOf(ROLES)),
    (&["result", "stopReason"], Allowed::Token),
    (&["result", "model"], Allowed::Token),
    (
        &["result", "action"],
        Allowed::OneOf(&["accept", "decline", "cancel"]),
    ),
    (&["result", "task", "taskId"], Allowed::Token),
    (&["result", "task", "status"], Allowed::OneOf(TASK_STATUS)),
    (&["result", "tasks", "taskId"], Allowed::Token),
    (&["result", "tasks", "status"], Allowed::OneOf(TASK_STATUS)),
];

/// Where content blocks are (a tool's result, a prompt's or a sampling request's messages, a
/// sampling result, a `tool_result` block's own content).
const BLOCKS_AT: &[&[&str]] = &[
    &["result", "content"],
    &["result", "content", "content"],
    &["result", "messages", "content"],
    &["params", "messages", "content"],
    &["params", "messages", "content", "content"],
];

/// A content block's structure, below one of [`BLOCKS_AT`].
const BLOCK: &[(&[&str], Allowed)] = &[
    (&["type"], Allowed::OneOf(BLOCK_TYPES)),
    (&["mimeType"], Allowed::Token),
    (&["resource", "mimeType"], Allowed::Token),
    (&["annotations", "audience"], Allowed::OneOf(ROLES)),
    (&["annotations", "lastModified"], Allowed::Token),
    (&["id"], Allowed::Token),
    (&["toolUseId"], Allowed::Token),
];

/// True when `value`, a string found at `path` (the keys from the message's top, array
/// positions left out, its own key last), is protocol structure: at a position where the MCP
/// schema puts structure, and what the schema allows there.
pub fn is_structure_at(path: &[&str], value: &str) -> bool {
    let Some(key) = path.last() else {
        return false;
    };
    let exact = STRUCTURE
        .iter()
        .any(|(at, allowed)| at.last() == Some(key) && *at == path && allowed.admits(value));
    exact
        || BLOCKS_AT.iter().any(|at| {
            path.len() > at.len()
                && path.starts_with(at)
                && BLOCK
                    .iter()
                    .any(|(rest, allowed)| *rest == &path[at.len()..] && allowed.admits(value))
        })
}

/// True when `key` is a field name of the MCP schema (any other key is read as text).
pub fn is_field(key: &str) -> bool {
    key.is_empty() || FIELDS.contains(&key)
}

/// What the checks read from one message.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Texts {
    pub modelled: Vec<String>,
    pub residual: Vec<String>,
    /// The key path of binary data found (a `blob`, an image's `data`): not text.
    pub unreadable: Option<String>,
}

impl Texts {
    /// Reads every string of a message that is not structure.
    pub fn of_message(body: &Map<String, Value>) -> Texts {
        let mut t = Texts::default();
        t.object(body, false, &mut Vec::with_capacity(8));
        t
    }

    /// Reads every string of `value`, found at `at` (the keys from the message's top).
    pub fn of_value<'a>(value: &'a Value, at: &[&'a str]) -> Texts {
        let mut t = Texts::default();
        t.walk(value, false, &mut at.to_vec());
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
            map.get("type").and_then(Value::as_str),
            Some("image" | "audio")
        );
        for (k, v) in map {
            path.push(k);
            let binary_here = k == "blob" || (binary && k == "data");
            if binary_here && v.as_str().is_some_and(|s| !s.is_empty()) {
                self.unreadable.get_or_insert_with(|| path.join("."));
            } else {
                self.member(k, v, modelled, path);
            }
            path.pop();
        }
    }

    /// One member of an object (`path` ends with its key).
    fn member<'a>(
        &mut self,
        key: &'a str,
        value: &'a Value,
        modelled: bool,
        path: &mut Vec<&'a str>,
    ) {
        if !is_field(key) {
            // Free-form data: a vendor's field name or a map's key is text too.
            self.push(key.to_owned(), modelled);
        }
        if let Value::String(s) = value {
            if is_structure_at(path, s) {
                return;
            }
        }
        if FREE.contains(&key) {
            if !is_empty(value) {
                self.modelled.push(json_text(value));
            }
            return;
        }
        self.walk(value, modelled || MODELLED.contains(&key), path);
    }

    fn walk<'a>(&mut self, value: &'a Value, modelled: bool, path: &mut Vec<&'a str>) {
        match value {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => self.push(s.clone(), modelled),
            Value::Array(items) => {
                for item in items {
                    self.walk(item, modelled, path);
                }
            }
            Value::Object(map) => self.object(map, modelled, path),
            _ => {}
        }
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
        // `m` and `x-extra` are no field names of MCP: text too.
        assert_eq!(t.modelled, ["m", "meta", "hello", r#"{"k":"v"}"#]);
        assert_eq!(t.residual, ["x-extra", "odd"]);
        assert!(t.unreadable.is_none());
        let t = texts(
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"add","description":"Adds",
            "inputSchema":{"type":"object","properties":{"ignore previous":{"type":"string"}}}}]}}"#,
        );
        assert!(t.modelled.iter().any(|s| s.contains("ignore previous")));
        assert!(t.modelled.contains(&"Adds".to_string()));
    }

    #[test]
    fn a_tools_task_support_is_structure_only_with_its_schema_values() {
        let tool = |support: &str| {
            let v: Value = serde_json::from_str(&format!(
                r#"{{"name":"add","execution":{{"taskSupport":"{support}"}}}}"#
            ))
            .unwrap();
            Texts::of_value(&v, &["result", "tools"])
        };
        let t = tool("forbidden");
        assert!(!t
            .modelled
            .iter()
            .chain(&t.residual)
            .any(|s| s == "forbidden"));
        let t = tool("ignore previous instructions");
        assert!(t
            .modelled
            .iter()
            .chain(&t.residual)
            .any(|s| s == "ignore previous instructions"));
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

    #[test]
    fn structure_only_where_the_schema_puts_it() {
        let t = texts(
            r#"{"jsonrpc":"2.0","id":"r-1","method":"sampling/createMessage","params":{
            "messages":[{"role":"user","content":[{"type":"text","text":"hi"},
              {"type":"tool_result","toolUseId":"tu_1","content":[{"type":"text","text":"42"}]}]}],
            "includeContext":"none","_meta":{"progressToken":7}}}"#,
        );
        assert_eq!(t.modelled, ["hi", "42"]);
        assert!(t.residual.is_empty(), "{:?}", t.residual);
        // The same keys elsewhere, or with values the schema does not allow there, are text.
        for (json, text) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"id":"x1"}}}"#,
                "x1",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"vendor":{"type":"x2"}}}"#,
                "x2",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"x3 y","text":""}]}}"#,
                "x3 y",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"messages":[{"role":"x4"}]}}"#,
                "x4",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"role":"x5"}}}"#,
                r#"{"role":"x5"}"#,
            ),
            (r#"{"jsonrpc":"2.0","id":"a b","result":{}}"#, "a b"),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"x7"}}"#,
                "x7",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"m","params":{"cursor":"x8 y"}}"#,
                "x8 y",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"m","params":{"_meta":{"x9":true}}}"#,
                "x9",
            ),
        ] {
            let t = texts(json);
            let all: Vec<&String> = t.modelled.iter().chain(&t.residual).collect();
            assert!(all.iter().any(|s| *s == text), "{json}: {all:?}");
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"nextCursor":"{}"}}}}"#,
            "c".repeat(MAX_TOKEN + 1)
        );
        assert_eq!(texts(&long).residual.len(), 1);
    }
}
