//! The MCP schema as the reader of a message's texts needs it: the keys whose value is text
//! a model or user reads, the keys holding free-form JSON, every field name and the other
//! spellings the SDKs read for it, and the positions where the schema puts structure with
//! what it allows there.

use crate::protocol::identifier::is_identifier;

/// Keys whose whole value is text a model or user reads.
pub(super) const MODELLED: &[&str] = &[
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
pub(super) const FREE: &[&str] = &[
    "inputSchema",
    "outputSchema",
    "structuredContent",
    "arguments",
    "requestedSchema",
    // The 2024-10-07 tool result, which the TypeScript SDK's `CompatibilityCallToolResultSchema`
    // still reads.
    "toolResult",
];

/// Every field name of the MCP schema (the revisions guardwire reads, with 2026-07-28's reserved
/// `_meta` keys). Any other object key is free-form data and is read as text.
const FIELDS: &[&str] = &[
    "_meta",
    "action",
    "annotations",
    "applyDefaults",
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
    "toolResult",
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
    /// An identifier ([`is_identifier`]: ids, cursors, MIME types, versions).
    Token,
    /// One of the schema's values.
    OneOf(&'static [&'static str]),
}

/// What a string at a structural position is, when it is what the schema allows there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structure {
    /// One of the schema's values (`"2.0"`, a role, a block type): read by no check.
    Constant,
    /// An identifier: read by the secret and PII patterns only.
    Identifier,
}

impl Allowed {
    fn admits(&self, value: &str) -> Option<Structure> {
        match self {
            Allowed::Token => is_identifier(value).then_some(Structure::Identifier),
            Allowed::OneOf(values) => values.contains(&value).then_some(Structure::Constant),
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
        Allowed::OneOf(&super::super::VERSIONS),
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
        Allowed::OneOf(&super::super::VERSIONS),
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
        Allowed::OneOf(&super::super::VERSIONS),
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

/// What `value`, a string found at `path` (the keys from the message's top as their
/// [`canonical`] names, array positions left out, its own key last), is as protocol structure:
/// `None` when it is text — not at a position where the MCP schema puts structure, or not what
/// the schema allows there.
pub fn structure_at(path: &[&str], value: &str) -> Option<Structure> {
    let key = path.last()?;
    let exact = STRUCTURE
        .iter()
        .filter(|(at, _)| at.last() == Some(key) && *at == path)
        .find_map(|(_, allowed)| allowed.admits(value));
    exact.or_else(|| {
        BLOCKS_AT
            .iter()
            .filter(|at| path.len() > at.len() && path.starts_with(at))
            .find_map(|at| {
                BLOCK
                    .iter()
                    .filter(|(rest, _)| *rest == &path[at.len()..])
                    .find_map(|(_, allowed)| allowed.admits(value))
            })
    })
}

/// The field of the MCP schema `key` names, in any spelling an SDK reads: the schema's own
/// (camelCase), or the Python SDK's attribute name, which its models accept as well
/// (`populate_by_name`: `structured_content`, `mime_type`, `meta` for `_meta`). `None` for any
/// other key, which is read as text.
pub fn canonical(key: &str) -> Option<&'static str> {
    if let Some(f) = FIELDS.iter().find(|f| **f == key) {
        return Some(f);
    }
    if key == "meta" {
        return Some("_meta");
    }
    if !key.contains('_') {
        return None;
    }
    FIELDS.iter().copied().find(|f| is_snake_of(key, f))
}

/// True when `snake` is `camel` written in snake_case (`mime_type`, `mimeType`), as the Python
/// SDK names its attributes.
fn is_snake_of(snake: &str, camel: &str) -> bool {
    let mut s = snake.bytes();
    for c in camel.bytes() {
        if c.is_ascii_uppercase() {
            if s.next() != Some(b'_') || s.next() != Some(c.to_ascii_lowercase()) {
                return false;
            }
        } else if c == b'_' || s.next() != Some(c) {
            // A field with an underscore of its own (`_meta`) has no other spelling here.
            return false;
        }
    }
    s.next().is_none()
}

/// True when `key` names a field of the MCP schema in any spelling ([`canonical`]); any other
/// key is read as text.
pub fn is_field(key: &str) -> bool {
    key.is_empty() || canonical(key).is_some()
}
