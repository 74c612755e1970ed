//! The fallback for what the decoders do not model: every string value of a frame (or a
//! whole answer) that is neither a text a decoder delivered nor under a structural key.
//!
//! A decoder reads the fields it knows; an upstream can put text anywhere else — a new event
//! type, a new field of a known one, a tool-call shape guardwire has not met. The client's SDK
//! may well show such text, so it must be checked like the rest: [`residual_strings`] walks the
//! JSON once and reports the string literals left over, which the caller decodes and feeds to
//! the output checks (channel [`crate::delta::Channel::Other`]), under the same hold-back.
//!
//! What is left out is deliberately small: values under the protocol's structural keys (ids,
//! `type`, `role`, `model`, reasons, statuses, opaque signatures — see each protocol's
//! [`Structural`]) that have the shape of structure ([`structure_shaped`]), and the literals
//! the decoder turned into deltas. Everything else, including `logprobs` tokens and
//! annotations, counts.

use std::ops::Range;

mod json_views;
pub use json_views::add_json_views;
#[cfg(test)]
use json_views::json_view;
mod read_texts;
pub use read_texts::ReadTexts;
mod schema;
pub use schema::{is_snake_of, schema_strings, Left, Node, Place, Schema, Slot};

/// The keys whose string values are structure, not text, for one protocol.
pub struct Structural {
    /// Keys whose *string* value is exempt wherever they appear, when it has the shape of
    /// structure ([`structure_shaped`]; an object or array under one is still read: a JSON
    /// schema's property named `status` has a description).
    pub keys: &'static [&'static str],
    /// (path of an object from the top, key of it): the whole value is exempt. The path lists
    /// the keys leading to the object, `[]` for a position in an array, and must match from the
    /// top (`(&["response"], "instructions")`: the request's instructions echoed in a Responses
    /// event, not a field of that name anywhere in an answer).
    pub nested: &'static [(&'static [&'static str], &'static str)],
    /// Paths (as in `nested`) of objects whose keys are text, not names: maps such as legacy
    /// Completions' `top_logprobs` (`{" token": -0.1}`). Their keys are reported with the
    /// strings. Elsewhere a key is read only when it does not have the shape of a field name
    /// ([`name_shaped`]).
    pub text_keys: &'static [&'static [&'static str]],
    /// (path of an object, key of it) as in `nested`: the value is free-form JSON (a tool's
    /// parameter schema, a tool call's arguments, a function's response): no key is structural
    /// anywhere inside it, no nested exemption applies, and its object keys are text, reported
    /// with the strings. A step may list alternative spellings (`functionCall|function_call`).
    pub free: &'static [(&'static [&'static str], &'static str)],
    /// The protocol's schema: when set, exemptions are by position ([`schema`]) and the four
    /// lists above are not used.
    pub schema: Option<&'static Schema>,
}

/// Whether an object key has the shape of a field name — lowercase words, snake_case or
/// camelCase (`finish_reason`, `finishReason`), at most 64 bytes, no digits and no capitals
/// in a row — which no secret or PII pattern matches: it is not read. Any other key is.
pub fn name_shaped(key: &[u8]) -> bool {
    let mut after_capital = false;
    key.first().is_some_and(u8::is_ascii_lowercase)
        && key.len() <= 64
        && key.iter().all(|&c| {
            let ok =
                c.is_ascii_lowercase() || c == b'_' || (c.is_ascii_uppercase() && !after_capital);
            after_capital = c.is_ascii_uppercase();
            ok
        })
        && !after_capital
}

/// Keys that are structure in every protocol guardwire speaks.
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "object",
    "type",
    "role",
    "model",
    "status",
    "created",
    "created_at",
];

impl Structural {
    /// True when `key` is structural wherever it appears.
    pub fn is_structural_key(&self, key: &[u8]) -> bool {
        COMMON_KEYS.iter().any(|k| k.as_bytes() == key)
            || self.keys.iter().any(|k| k.as_bytes() == key)
    }

    /// True when `key`, a member of the object on top of `stack`, is one of the nested
    /// exemptions: the whole value is. Keys are compared raw (an escaped key never matches).
    fn exempt_tree(&self, stack: &[Level], data: &[u8], key: &[u8]) -> bool {
        self.nested
            .iter()
            .any(|(parent, k)| k.as_bytes() == key && at_path(stack, data, parent))
    }

    /// True when the object on top of `stack` is one whose keys are text.
    fn keys_are_text(&self, stack: &[Level], data: &[u8]) -> bool {
        self.text_keys.iter().any(|path| at_path(stack, data, path))
    }

    /// True when the value of `key`, a member of the object on top of `stack`, is free-form.
    fn free_tree(&self, stack: &[Level], data: &[u8], key: &[u8]) -> bool {
        self.free
            .iter()
            // The path first: its depth check rejects most entries for the price of a compare.
            .any(|(parent, k)| at_path(stack, data, parent) && step_matches(k, key))
    }
}

/// True when a string literal (quotes included) has the shape of structure — an id, an enum
/// value, a model name, a base64 signature: the shape of an identifier
/// ([`crate::protocol::identifier`]: printable ASCII, no space, no escape) of any length (a
/// provider's signatures and encrypted content run to kilobytes), or empty. Only such a value is
/// exempt under a structural key ([`Structural::keys`]), and only from the text checks (the
/// secret and PII patterns read it: [`residual_and_identifiers`]); words, escapes or any other
/// character there are text to the client's SDK like any other, and are checked.
pub fn structure_shaped(literal: &[u8]) -> bool {
    let inner = literal
        .get(1..literal.len().saturating_sub(1))
        .unwrap_or_default();
    inner.iter().all(|&b| b.is_ascii_graphic() && b != b'\\')
}

/// The end (after the closing quote) of the JSON string literal whose opening quote is at
/// `start`: escapes skipped, not checked.
pub(super) fn string_end(data: &[u8], start: usize) -> Result<usize, Unwalkable> {
    let mut i = start + 1;
    loop {
        let Some(at) = memchr::memchr2(b'"', b'\\', &data[i..]) else {
            return Err(Unwalkable);
        };
        i += at;
        if data[i] == b'\\' {
            i += 2;
            if i > data.len() {
                return Err(Unwalkable);
            }
        } else {
            return Ok(i + 1);
        }
    }
}

/// True when `name` is `step` or one of its `|`-separated spellings (a list is longer than
/// any of its spellings, so a plain step costs one comparison).
fn step_matches(step: &str, name: &[u8]) -> bool {
    let step = step.as_bytes();
    // Called for every key of every request against every free-form path: a byte split, not
    // `str::split`'s char searcher (which cost ~5 % of a streamed answer's instructions).
    step == name || (step.len() > name.len() && step.split(|&b| b == b'|').any(|s| s == name))
}

/// True when the container on top of `stack` is at `path` from the top.
fn at_path(stack: &[Level], data: &[u8], path: &[&str]) -> bool {
    path.len() + 1 == stack.len()
        && stack[1..]
            .iter()
            .zip(path)
            .all(|(level, step)| match level.key {
                Some((a, b)) => step_matches(step, &data[a..b]),
                None => *step == "[]",
            })
}

/// The JSON could not be walked (the decoders accepted it, so this is not expected): the
/// caller fails closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwalkable;

/// Nesting deeper than serde_json's own limit is refused.
const MAX_DEPTH: usize = 128;

#[derive(Clone, Copy)]
struct Level {
    object: bool,
    /// Identifies the path of keys from the top to this container (array positions left out).
    path: u32,
    /// Everything below is structure (the value of an exempt key).
    exempt: bool,
    /// Everything below is free-form JSON (see [`Structural::free`]).
    free: bool,
    /// The key whose value this container is, when it is an object member.
    key: Option<(usize, usize)>,
    /// In an object: the next string is a key.
    expect_key: bool,
    /// In an object: the current member's key, and whether its value is exempt (a string
    /// value only, `member_scalar`; or whatever the value is, `member_exempt`).
    member: Option<(usize, usize)>,
    member_exempt: bool,
    member_scalar: bool,
    /// In an object: the current member's value is free-form.
    member_free: bool,
}

/// FNV-1a over a path step, from the path so far.
fn step(path: u32, bytes: &[u8]) -> u32 {
    let mut h = path ^ 0x811c_9dc5;
    for &b in bytes.iter().chain(b"/") {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// Appends to `out` the range (quotes included) of every string value of `data` that is not
/// under a structural key and not inside one of `known` (sorted by start: the literals, or raw
/// JSON values, a decoder turned into deltas), with an id of its path of keys: strings of one
/// path are one text across frames (an unknown event type streaming text in pieces).
pub fn residual_strings(
    data: &[u8],
    structural: &Structural,
    known: &[Range<usize>],
    out: &mut Vec<(Range<usize>, u32)>,
) -> Result<(), Unwalkable> {
    walk(data, structural, known, out, None, None)
}

/// [`residual_strings`], and in `identifiers` the literal of every identifier-shaped value it
/// left out as structure ([`crate::protocol::identifier`]): what the secret and PII patterns
/// still read.
pub fn residual_and_identifiers(
    data: &[u8],
    structural: &Structural,
    known: &[Range<usize>],
    out: &mut Vec<(Range<usize>, u32)>,
    identifiers: &mut Vec<Range<usize>>,
) -> Result<(), Unwalkable> {
    walk(data, structural, known, out, Some(identifiers), None)
}

/// [`residual_and_identifiers`], with the strings at a schema's places of structure that are no
/// identifiers ([`Place::Structure`]: text in a field the protocol names) in `structure`
/// instead of `out`: they are read whatever `unknown_content` says.
pub fn residual_parts(
    data: &[u8],
    structural: &Structural,
    known: &[Range<usize>],
    out: &mut Vec<(Range<usize>, u32)>,
    structure: &mut Vec<(Range<usize>, u32)>,
    identifiers: &mut Vec<Range<usize>>,
) -> Result<(), Unwalkable> {
    walk(
        data,
        structural,
        known,
        out,
        Some(identifiers),
        Some(structure),
    )
}

fn walk(
    data: &[u8],
    structural: &Structural,
    known: &[Range<usize>],
    out: &mut Vec<(Range<usize>, u32)>,
    mut identifiers: Option<&mut Vec<Range<usize>>>,
    mut structure: Option<&mut Vec<(Range<usize>, u32)>>,
) -> Result<(), Unwalkable> {
    if let Some(schema) = structural.schema {
        let mut left = Vec::new();
        schema_strings(data, schema, known, &mut left)?;
        for l in left {
            let to = match l.place {
                Place::Identifier => {
                    if let Some(ids) = identifiers.as_deref_mut() {
                        ids.push(l.literal);
                    }
                    continue;
                }
                Place::Structure => structure.as_deref_mut().unwrap_or(&mut *out),
                Place::Text | Place::Unknown => &mut *out,
            };
            to.push((l.literal, l.path));
        }
        return Ok(());
    }
    let mut stack: Vec<Level> = Vec::with_capacity(8);
    let mut known_at = 0;
    let mut i = 0;
    // Exempt state of the value about to be read (top level: not exempt).
    let value_exempt = |stack: &[Level]| match stack.last() {
        None => false,
        Some(l) if l.object => l.exempt || l.member_exempt,
        Some(l) => l.exempt,
    };
    // The same for a string value (its literal): also under a key structural for strings,
    // when it has the shape of structure.
    let string_exempt = |stack: &[Level], literal: &[u8]| match stack.last() {
        Some(l) if l.object => {
            l.exempt || l.member_exempt || (l.member_scalar && structure_shaped(literal))
        }
        _ => value_exempt(stack),
    };
    // Under a structural key for strings, and in the shape of structure: an identifier.
    let is_identifier = |stack: &[Level], literal: &[u8]| match stack.last() {
        Some(l) if l.object => !(l.exempt || l.member_exempt) && l.member_scalar,
        _ => false,
    } && literal.len() > 2;
    let key_of = |stack: &[Level]| stack.last().and_then(|l| l.member);
    // The path id of the value about to be read.
    let value_path = |stack: &[Level]| match stack.last() {
        None => 0,
        Some(l) => match l.member {
            Some((a, b)) if l.object => step(l.path, &data[a..b]),
            _ => step(l.path, b"[]"),
        },
    };
    while i < data.len() {
        match data[i] {
            b'"' => {
                let start = i;
                i = string_end(data, i)?;
                let lit = start..i.min(data.len());
                let in_key = stack.last().is_some_and(|l| l.object && l.expect_key);
                if in_key {
                    let key = &data[lit.start + 1..lit.end - 1];
                    // Inside free-form JSON no key is structure and every key is text.
                    let free = stack.last().is_some_and(|l| l.free);
                    let tree = !free && structural.exempt_tree(&stack, data, key);
                    let scalar = !free && structural.is_structural_key(key);
                    let member_free = free
                        || (!structural.free.is_empty() && structural.free_tree(&stack, data, key));
                    if !value_exempt(&stack)
                        && (free
                            || (!structural.text_keys.is_empty()
                                && structural.keys_are_text(&stack, data)))
                    {
                        out.push((lit.clone(), value_path(&stack)));
                    } else if !value_exempt(&stack) && !name_shaped(key) {
                        // A key is a name only in the shape of one: the SDKs keep an unknown
                        // member's key (and show it), so any other key is read — as an
                        // identifier by the secret and PII patterns, else as text.
                        if crate::protocol::identifier::literal_is_identifier(&data[lit.clone()]) {
                            if let Some(ids) = identifiers.as_deref_mut() {
                                ids.push(lit.clone());
                            }
                        } else {
                            out.push((lit.clone(), value_path(&stack)));
                        }
                    }
                    let l = stack.last_mut().ok_or(Unwalkable)?;
                    l.expect_key = false;
                    l.member = Some((lit.start + 1, lit.end - 1));
                    l.member_exempt = l.exempt || tree;
                    l.member_scalar = scalar;
                    l.member_free = member_free;
                } else if string_exempt(&stack, &data[lit.clone()]) {
                    if let Some(ids) = identifiers.as_deref_mut() {
                        if is_identifier(&stack, &data[lit.clone()]) {
                            ids.push(lit);
                        }
                    }
                } else {
                    while known.get(known_at).is_some_and(|k| k.end <= lit.start) {
                        known_at += 1;
                    }
                    let inside = known
                        .get(known_at)
                        .is_some_and(|k| k.start <= lit.start && lit.end <= k.end);
                    if !inside {
                        let path = value_path(&stack);
                        out.push((lit, path));
                    }
                }
            }
            c @ (b'{' | b'[') => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Unwalkable);
                }
                let exempt = value_exempt(&stack);
                let free = match stack.last() {
                    Some(l) if l.object => l.free || l.member_free,
                    Some(l) => l.free,
                    None => false,
                };
                let key = key_of(&stack);
                let path = value_path(&stack);
                stack.push(Level {
                    object: c == b'{',
                    path,
                    exempt,
                    free,
                    key,
                    expect_key: c == b'{',
                    member: None,
                    member_exempt: false,
                    member_scalar: false,
                    member_free: false,
                });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop().ok_or(Unwalkable)?;
                i += 1;
            }
            b',' => {
                if let Some(l) = stack.last_mut() {
                    if l.object {
                        l.expect_key = true;
                        l.member = None;
                        l.member_exempt = false;
                        l.member_scalar = false;
                        l.member_free = false;
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(Unwalkable)
    }
}

const RESPONSES_PART: &[&str] = &["input", "[]", "content", "[]"];

/// Keys of requests (every protocol) whose string values are settings, ids or opaque data the
/// model does not read as text.
pub static REQUEST_STRUCTURAL: Structural = Structural {
    keys: &[
        "tool_choice",
        "tool_call_id",
        "tool_use_id",
        "call_id",
        "media_type",
        "mime_type",
        "mimeType",
        "detail",
        "format",
        "encoding_format",
        "service_tier",
        "reasoning_effort",
        "effort",
        "previous_response_id",
        "prompt_cache_key",
        "safety_identifier",
        "signature",
        "encrypted_content",
        "thoughtSignature",
        "thought_signature",
        "responseMimeType",
        "response_mime_type",
    ],
    // Inline media: base64 (or a data: URL) is no text.
    nested: &[
        (&["messages", "[]", "content", "[]", "image_url"], "url"),
        (&["messages", "[]", "content", "[]", "input_audio"], "data"),
        (&["messages", "[]", "content", "[]", "file"], "file_data"),
        (RESPONSES_PART, "image_url"),
        (RESPONSES_PART, "file_data"),
        (
            &["contents", "[]", "parts", "[]", "inlineData|inline_data"],
            "data",
        ),
        // Gemini's multimodal function responses: media and documents as in a part.
        (
            &[
                "contents",
                "[]",
                "parts",
                "[]",
                "functionResponse|function_response",
                "parts",
                "[]",
                "inlineData|inline_data",
            ],
            "data",
        ),
        // Anthropic images and documents: base64, or a text the decoder reads.
        (&["messages", "[]", "content", "[]", "source"], "data"),
        (
            &["messages", "[]", "content", "[]", "content", "[]", "source"],
            "data",
        ),
        (&["system", "[]", "source"], "data"),
    ],
    text_keys: &[],
    schema: None,
    // Free-form JSON the model reads: tool parameter schemas, response schemas, tool calls'
    // arguments and tools' results given as JSON values.
    free: &[
        // OpenAI Chat.
        (&["tools", "[]", "function"], "parameters"),
        (&["functions", "[]"], "parameters"),
        (&["response_format", "json_schema"], "schema"),
        // OpenAI Responses.
        (&["tools", "[]"], "parameters"),
        (&["input", "[]"], "output"),
        (&["text", "format"], "schema"),
        (&["prompt"], "variables"),
        // Anthropic Messages.
        (&["tools", "[]"], "input_schema"),
        (&["messages", "[]", "content", "[]"], "input"),
        (&["output_format"], "schema"),
        (&["output_config", "format"], "schema"),
        // Gemini (either spelling of every field).
        (GEMINI_RESPONSE, "response"),
        (GEMINI_CALL, "args"),
        (GEMINI_DECLARATION, "parameters"),
        (
            GEMINI_DECLARATION,
            "parametersJsonSchema|parameters_json_schema",
        ),
        (GEMINI_DECLARATION, "response"),
        (
            GEMINI_DECLARATION,
            "responseJsonSchema|response_json_schema",
        ),
        (GEMINI_CONFIG, "responseSchema|response_schema"),
        (GEMINI_CONFIG, "responseJsonSchema|response_json_schema"),
        (GEMINI_CONFIG, "_responseJsonSchema"),
    ],
};

const GEMINI_RESPONSE: &[&str] = &[
    "contents",
    "[]",
    "parts",
    "[]",
    "functionResponse|function_response",
];
const GEMINI_CALL: &[&str] = &[
    "contents",
    "[]",
    "parts",
    "[]",
    "functionCall|function_call",
];
const GEMINI_DECLARATION: &[&str] = &[
    "tools",
    "[]",
    "functionDeclarations|function_declarations",
    "[]",
];
const GEMINI_CONFIG: &[&str] = &["generationConfig|generation_config"];

/// Adds to `conversation` every string of the request `body` that its decoder did not read
/// into the conversation and that is not structure (tool descriptions and schemas, document
/// blocks, prompt variables, fields guardwire does not know): one message each, so the input
/// checks read everything the model will. The identifier-shaped values left out as structure
/// join one message of role [`crate::delta::Role::Identifiers`] (the secret and PII patterns
/// read them), unless the conversation has them already.
pub fn add_request_residuals(
    body: &[u8],
    structural: &Structural,
    conversation: &mut crate::delta::Conversation,
) -> Result<(), Unwalkable> {
    use crate::delta::{Message, Role};
    let mut left = Vec::new();
    let mut identifiers = Vec::new();
    residual_and_identifiers(body, structural, &[], &mut left, &mut identifiers)?;
    if left.is_empty() && identifiers.is_empty() {
        return Ok(());
    }
    // What the decoder read, by value, each occurrence once.
    let mut read = ReadTexts::new(
        conversation
            .messages
            .iter()
            .flat_map(Message::read_strings)
            .map(String::as_str),
    );
    let mut take = |text: &str| read.take(text);
    let mut extra = Vec::new();
    for (lit, _) in left {
        let text: std::borrow::Cow<'_, str> =
            serde_json::from_slice(&body[lit]).map_err(|_| Unwalkable)?;
        if text.is_empty() || take(&text) {
            continue;
        }
        extra.push(Message::text(
            Role::Other("unmodelled".into()),
            vec![text.into_owned()],
        ));
    }
    let mut values = Vec::new();
    for lit in identifiers {
        let value =
            std::str::from_utf8(&body[lit.start + 1..lit.end - 1]).map_err(|_| Unwalkable)?;
        if !take(value) {
            values.push(value.to_owned());
        }
    }
    extra.extend(crate::protocol::identifier::message(values));
    conversation.messages.extend(extra);
    Ok(())
}

#[cfg(test)]
mod tests;
