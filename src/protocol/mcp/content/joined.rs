//! Sibling texts as the model reads them. An MCP client hands the model the texts of one
//! answer together: a tool result's content blocks, a prompt's or a sampling request's
//! messages, a sampling result's blocks, a resource's contents. How it joins them is the
//! client's: the SDKs hand over the list and leave joining to the application, which
//! concatenates (`"".join(c.text for c in result.content)`, the Python SDK's own examples),
//! puts a line break or a blank line between them, or passes the blocks on to a provider that
//! sets them one after the other. A phrase or a key cut at a boundary is whole again to that
//! reader, so the checks read each group of siblings twice more besides the pieces: joined
//! with nothing (the concatenating reader) and with a space, which the normalised view reads
//! as it reads any run of whitespace — line breaks, blank lines, tabs — so it stands for every
//! reader that separates the pieces by whitespace. A reader that puts anything else between
//! them (JSON punctuation) breaks a phrase there as a space does.
//!
//! The pieces of a group are the texts a reader takes from each sibling: a text block's
//! `text`, and a second reading with embedded resources' `text` among them (a reader that
//! skips resources joins the blocks around one). Blocks of other kinds (an image between two
//! texts) are left out, as a text-only reader leaves them out. A `tool_result` block's own
//! blocks are read where they stand.

use super::canonical;
use serde_json::{Map, Value};

/// The joined texts of a message's sibling groups: for each group of two or more non-empty
/// pieces, its pieces joined with nothing and with a space, for each reading of it.
pub fn joined(body: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    joined_into(body, &mut out, 0);
    out
}

/// Requests a result embeds read as requests (at most this deep).
const MAX_EMBEDDED: u32 = 4;

fn joined_into(body: &Map<String, Value>, out: &mut Vec<String>, depth: u32) {
    if let Some(Value::Object(result)) = field(body, "result").next() {
        // A result that asks the client for input first (`inputRequests`, MCP's multi
        // round-trip requests): each is a server request (a sampling request's system prompt
        // and messages), joined as one sent on its own is.
        if depth < MAX_EMBEDDED {
            for requests in field(result, "inputRequests") {
                for request in as_map_values(requests) {
                    if let Value::Object(r) = request {
                        joined_into(r, out, depth + 1);
                    }
                }
            }
        }
        for content in field(result, "content") {
            group(out, |g| g.blocks(content));
        }
        for contents in field(result, "contents") {
            group(out, |g| g.blocks(contents));
        }
        if field(result, "messages").next().is_some() {
            group(out, |g| g.messages(result));
        }
    }
    if let Some(Value::Object(params)) = field(body, "params").next() {
        // The client's answers to them, sent with its retry (`inputResponses`): a sampling
        // result's blocks, joined as its own response's are.
        for responses in field(params, "inputResponses") {
            for response in as_map_values(responses) {
                if let Value::Object(r) = response {
                    for content in field(r, "content") {
                        group(out, |g| g.blocks(content));
                    }
                }
            }
        }
        if field(params, "messages").next().is_some() {
            group(out, |g| {
                for system in field(params, "systemPrompt") {
                    g.piece(system, true);
                }
                g.messages(params);
            });
        }
    }
}

/// The values of an object (the requests or responses of a multi round-trip, by their ids).
fn as_map_values(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_object().into_iter().flat_map(|m| m.values())
}

/// The values of `map` under every spelling of `name` (a field the SDKs read in two spellings
/// may come in both; a reader takes one, the checks read both).
fn field<'a>(map: &'a Map<String, Value>, name: &'static str) -> impl Iterator<Item = &'a Value> {
    map.iter()
        .filter(move |(k, _)| canonical(k) == Some(name))
        .map(|(_, v)| v)
}

/// One group's pieces, in the two readings: text blocks only, and with embedded resources.
#[derive(Default)]
struct Group<'a> {
    texts: Vec<&'a str>,
    with_resources: Vec<&'a str>,
    has_resources: bool,
}

impl<'a> Group<'a> {
    /// A piece: `text` when it is a non-empty string; `all`: a text block's (read by every
    /// reading), else an embedded resource's.
    fn piece(&mut self, text: &'a Value, all: bool) {
        let Some(t) = text.as_str().filter(|t| !t.is_empty()) else {
            return;
        };
        if all {
            self.texts.push(t);
        } else {
            self.has_resources = true;
        }
        self.with_resources.push(t);
    }

    /// The messages of a prompt or sampling request, their blocks in order.
    fn messages(&mut self, parent: &'a Map<String, Value>) {
        for messages in field(parent, "messages") {
            for message in as_list(messages) {
                if let Value::Object(m) = message {
                    for content in field(m, "content") {
                        self.blocks(content);
                    }
                }
            }
        }
    }

    /// Content blocks (a list or one block) or resource contents.
    fn blocks(&mut self, value: &'a Value) {
        for block in as_list(value) {
            match block {
                // Not a block a schema allows; a lenient reader may still take it as text.
                Value::String(_) => self.piece(block, true),
                Value::Object(b) => {
                    for (k, v) in b {
                        match canonical(k) {
                            Some("text") => self.piece(v, true),
                            Some("resource") => {
                                if let Value::Object(r) = v {
                                    for text in field(r, "text") {
                                        self.piece(text, false);
                                    }
                                }
                            }
                            // A `tool_result` block's own blocks.
                            Some("content") => self.blocks(v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn as_list(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        other => std::slice::from_ref(other),
    }
}

/// Reads one group and appends its joins to `out`.
fn group<'a>(out: &mut Vec<String>, read: impl FnOnce(&mut Group<'a>)) {
    let mut g = Group::default();
    read(&mut g);
    let mut readings = vec![g.texts];
    if g.has_resources {
        readings.push(g.with_resources);
    }
    for pieces in readings.into_iter().filter(|p| p.len() > 1) {
        out.push(pieces.concat());
        out.push(pieces.join(" "));
    }
}
