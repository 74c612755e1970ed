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
//! [`Structural`]), and the literals the decoder turned into deltas. Everything else,
//! including `logprobs` tokens and annotations, counts.

use std::ops::Range;

/// The keys whose string values are structure, not text, for one protocol.
pub struct Structural {
    /// Keys whose *string* value is exempt wherever they appear (an object or array under
    /// one is still read: a JSON schema's property named `status` has a description).
    pub keys: &'static [&'static str],
    /// (path of an object from the top, key of it): the whole value is exempt. The path lists
    /// the keys leading to the object, `[]` for a position in an array, and must match from the
    /// top (`(&["response"], "instructions")`: the request's instructions echoed in a Responses
    /// event, not a field of that name anywhere in an answer).
    pub nested: &'static [(&'static [&'static str], &'static str)],
    /// Paths (as in `nested`) of objects whose keys are text, not names: maps such as legacy
    /// Completions' `top_logprobs` (`{" token": -0.1}`). Their keys are reported with the
    /// strings. Elsewhere keys are names and are not checked.
    pub text_keys: &'static [&'static [&'static str]],
    /// (path of an object, key of it) as in `nested`: the value is free-form JSON (a tool's
    /// parameter schema, a tool call's arguments, a function's response): no key is structural
    /// anywhere inside it, no nested exemption applies, and its object keys are text, reported
    /// with the strings. A step may list alternative spellings (`functionCall|function_call`).
    pub free: &'static [(&'static [&'static str], &'static str)],
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
    let mut stack: Vec<Level> = Vec::with_capacity(8);
    let mut known_at = 0;
    let mut i = 0;
    // Exempt state of the value about to be read (top level: not exempt).
    let value_exempt = |stack: &[Level]| match stack.last() {
        None => false,
        Some(l) if l.object => l.exempt || l.member_exempt,
        Some(l) => l.exempt,
    };
    // The same for a string value: also under a key structural for strings.
    let string_exempt = |stack: &[Level]| match stack.last() {
        Some(l) if l.object => l.exempt || l.member_exempt || l.member_scalar,
        _ => value_exempt(stack),
    };
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
                i += 1;
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
                        i += 1;
                        break;
                    }
                }
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
                    }
                    let l = stack.last_mut().ok_or(Unwalkable)?;
                    l.expect_key = false;
                    l.member = Some((lit.start + 1, lit.end - 1));
                    l.member_exempt = l.exempt || tree;
                    l.member_scalar = scalar;
                    l.member_free = member_free;
                } else if !string_exempt(&stack) {
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
/// checks read everything the model will.
pub fn add_request_residuals(
    body: &[u8],
    conversation: &mut crate::delta::Conversation,
) -> Result<(), Unwalkable> {
    use crate::delta::{Message, Role};
    let mut left = Vec::new();
    residual_strings(body, &REQUEST_STRUCTURAL, &[], &mut left)?;
    if left.is_empty() {
        return Ok(());
    }
    // What the decoder read, by value, each occurrence once: sorted, so a long conversation
    // costs n log n, not n².
    let mut read: Vec<(&str, bool)> = conversation
        .messages
        .iter()
        .flat_map(|m| {
            m.text
                .iter()
                .chain(m.tool_calls.iter().map(|c| &c.arguments))
        })
        .map(|t| (t.as_str(), false))
        .collect();
    read.sort_unstable();
    let mut extra = Vec::new();
    for (lit, _) in left {
        let text: std::borrow::Cow<'_, str> =
            serde_json::from_slice(&body[lit]).map_err(|_| Unwalkable)?;
        if text.is_empty() {
            continue;
        }
        let from = read.partition_point(|(t, _)| *t < &*text);
        let unused = read[from..]
            .iter_mut()
            .take_while(|(t, _)| *t == &*text)
            .find(|(_, used)| !*used);
        match unused {
            Some((_, used)) => *used = true,
            None => extra.push(Message::text(
                Role::Other("unmodelled".into()),
                vec![text.into_owned()],
            )),
        }
    }
    conversation.messages.extend(extra);
    Ok(())
}

/// How deep JSON held in strings held in JSON is unwrapped.
const MAX_JSON_IN_STRING: usize = 8;

/// JSON held in a string (a tool result or arguments whose text is itself JSON): its escapes
/// are text to the model (`{"status":"\u0066orbidden"}` reads `forbidden`), so every text of
/// the conversation that is JSON with an escape in it gets one more message: its strings and
/// object keys decoded, one per line, and the same again for strings that are JSON themselves.
/// A text without a backslash needs none: its strings and keys stand in it as they are.
/// These are the modelled texts read right, so it runs whatever `unknown_content` says (after
/// [`add_request_residuals`], whose strings it reads too).
pub fn add_json_views(conversation: &mut crate::delta::Conversation) {
    use crate::delta::{Message, Role};
    let mut views = Vec::new();
    for m in &conversation.messages {
        let texts = m
            .text
            .iter()
            .chain(m.tool_calls.iter().map(|c| &c.arguments));
        for t in texts {
            let mut view = String::new();
            json_view(t, 0, &mut view);
            if !view.is_empty() {
                views.push(Message::text(Role::Other("decoded".into()), vec![view]));
            }
        }
    }
    conversation.messages.extend(views);
}

/// Appends to `out` the decoded strings and keys of `text` when it is JSON with an escape,
/// every literal in its order (a duplicated key's values included, as the model reads both).
fn json_view(text: &str, depth: usize, out: &mut String) {
    let t = text.trim();
    if depth >= MAX_JSON_IN_STRING
        || !t.starts_with(['{', '[', '"'])
        || memchr::memchr(b'\\', t.as_bytes()).is_none()
        || serde_json::from_str::<serde::de::IgnoredAny>(t).is_err()
    {
        return;
    }
    // Valid JSON: outside string literals there is no quote, inside one a quote is escaped.
    let bytes = t.as_bytes();
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'"', &bytes[i..]) {
        let start = i + at;
        let mut end = start + 1;
        while let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[end..]) {
            end += at;
            if bytes[end] == b'\\' {
                end += 2;
            } else {
                break;
            }
        }
        let lit = t.get(start..=end).unwrap_or_default();
        i = end + 1;
        let Ok(s) = serde_json::from_str::<String>(lit) else {
            return;
        };
        if !s.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&s);
            json_view(&s, depth + 1, out);
        }
        if i >= bytes.len() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::single_range_in_vec_init)]
    use super::*;

    const NONE: Structural = Structural {
        keys: &["finish_reason"],
        nested: &[(&["response"], "instructions"), (&["x", "[]"], "data")],
        text_keys: &[&["m", "[]"]],
        free: &[],
    };

    fn residual(data: &str, known: &[Range<usize>]) -> Vec<String> {
        let mut out = Vec::new();
        residual_strings(data.as_bytes(), &NONE, known, &mut out).unwrap();
        out.into_iter().map(|(r, _)| data[r].to_owned()).collect()
    }

    #[test]
    fn reports_strings_outside_structure_and_known_texts() {
        let data = r#"{"id":"x","choices":[{"delta":{"content":"hi","mystery":"forbidden"},"finish_reason":"stop"}],"extra":["a",{"type":"t"},"b\"c"]}"#;
        let content = data.find(r#""hi""#).unwrap();
        assert_eq!(
            residual(data, &[content..content + 4]),
            [r#""forbidden""#, r#""a""#, r#""b\"c""#]
        );
        // A structural key inside an array does not exempt the array's later strings.
        assert_eq!(residual(r#"{"x":[{"type":"t"},"z"]}"#, &[]), [r#""z""#]);
        // A structural key exempts a string value only; nested exemptions exempt the whole
        // value and need their parent.
        assert_eq!(residual(r#"{"type":{"a":["b"]}}"#, &[]), [r#""b""#]);
        assert_eq!(residual(r#"{"finish_reason":["s"]}"#, &[]), [r#""s""#]);
        assert!(residual(r#"{"response":{"instructions":{"a":["b"]}}}"#, &[]).is_empty());
        assert!(residual(r#"{"response":{"instructions":"i"}}"#, &[]).is_empty());
        assert_eq!(residual(r#"{"instructions":"i"}"#, &[]), [r#""i""#]);
        // Nested exemptions match their whole path from the top, array positions included.
        for elsewhere in [
            r#"{"a":{"response":{"instructions":"i"}}}"#,
            r#"{"response":[{"instructions":"i"}]}"#,
            r#"{"x":{"data":"i"}}"#,
            r#"{"x":[{"y":{"data":"i"}}]}"#,
            r#"{"\u0078":[{"data":"i"}]}"#,
        ] {
            assert_eq!(residual(elsewhere, &[]), [r#""i""#], "{elsewhere}");
        }
        assert!(residual(r#"{"x":[{"data":"i"},{"data":"j"}]}"#, &[]).is_empty());
        // Keys are names, except in the objects whose keys are text.
        assert_eq!(
            residual(r#"{"m":[{" a":1,"b\u0020c":{"d":"e"}}],"n":{" f":2}}"#, &[]),
            [r#"" a""#, r#""b\u0020c""#, r#""e""#]
        );
        // Keys are not values; escaped keys are never structural.
        assert_eq!(residual(r#"{"\u0074ype":"v"}"#, &[]), [r#""v""#]);
        // Inside a known raw value (Gemini's args object) nothing is left over.
        let raw = r#"{"args":{"q":"text"},"other":"o"}"#;
        assert_eq!(residual(raw, &[8..20]), [r#""o""#]);
    }

    #[test]
    fn strings_of_one_path_share_an_id_across_frames() {
        let path = |data: &str| {
            let mut out = Vec::new();
            residual_strings(data.as_bytes(), &NONE, &[], &mut out).unwrap();
            out.iter().map(|(_, p)| *p).collect::<Vec<_>>()
        };
        let a = path(r#"{"type":"x.delta","delta":"forbidden "}"#);
        let b = path(r#"{"delta":"fruit","type":"x.delta","n":1}"#);
        assert_eq!(a, b);
        let c = path(r#"{"item":{"delta":"x"},"list":["y",{"delta":"z"}]}"#);
        assert_eq!(c.len(), 3);
        assert!(c[0] != a[0] && c[0] != c[1] && c[1] != c[2] && c[0] != c[2]);
    }

    #[test]
    fn a_request_message_name_is_still_read_by_the_input_checks() {
        // The chat decoder keeps `name` (RAG context selection) but not as text: it is a
        // string the model reads, so it stays a residual, unescaped.
        use crate::protocol::Protocol;
        let body =
            br#"{"model":"m","messages":[{"role":"user","name":"evil-bot","content":"hi"}]}"#;
        let mut parsed = crate::protocol::openai_chat::OpenAiChat
            .parse_request(body, "/v1/chat/completions")
            .unwrap();
        assert_eq!(
            parsed.conversation.messages[0].name.as_deref(),
            Some("evil-bot")
        );
        add_request_residuals(body, &mut parsed.conversation).unwrap();
        let texts: Vec<&String> = parsed
            .conversation
            .messages
            .iter()
            .flat_map(|m| &m.text)
            .collect();
        assert!(texts.iter().any(|t| *t == "evil-bot"), "{texts:?}");
    }

    /// Every text the input checks read for `body` of `protocol` (decoder and fallback).
    fn request_texts(
        protocol: &dyn crate::protocol::Protocol,
        path: &str,
        body: &str,
    ) -> Vec<String> {
        let mut parsed = protocol.parse_request(body.as_bytes(), path).unwrap();
        add_request_residuals(body.as_bytes(), &mut parsed.conversation).unwrap();
        add_json_views(&mut parsed.conversation);
        parsed
            .conversation
            .messages
            .iter()
            .flat_map(|m| {
                m.text
                    .iter()
                    .chain(m.tool_calls.iter().map(|c| &c.arguments))
            })
            .cloned()
            .collect()
    }

    fn reads(texts: &[String], phrase: &str) -> bool {
        texts.iter().any(|t| t.lines().any(|l| l == phrase))
    }

    #[test]
    fn structural_keys_do_not_exempt_free_form_json() {
        use crate::protocol::{anthropic, gemini, openai_chat, openai_responses};
        let gemini_path = "/v1beta/models/g:generateContent";
        // Gemini: a function's response and a call's args, either spelling; escapes decoded.
        for (part, key) in [
            ("functionResponse", "response"),
            ("function_response", "response"),
            ("functionCall", "args"),
            ("function_call", "args"),
        ] {
            let body = format!(
                r#"{{"contents":[{{"role":"user","parts":[{{"{part}":{{"name":"f","{key}":{{"status":"\u0066orbidden fruit","id":{{"type":"forbidden fruit"}}}}}}}}]}}]}}"#
            );
            let texts = request_texts(&gemini::Gemini, gemini_path, &body);
            assert_eq!(
                texts.iter().filter(|t| *t == "forbidden fruit").count(),
                2,
                "{part}: {texts:?}"
            );
        }
        // Tool parameter schemas: keys are text, `type`/`status` read inside them.
        let schema = r#"{"type":"object","properties":{"forbidden fruit":{"type":"string"},"status":{"type":"string","enum":["forbidden fruit"]}}}"#;
        let chat = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{schema}}}}}]}}"#
        );
        let responses = format!(
            r#"{{"model":"m","input":"hi","tools":[{{"type":"function","name":"f","parameters":{schema}}}]}}"#
        );
        let anthropic_body = format!(
            r#"{{"model":"m","max_tokens":1,"messages":[{{"role":"user","content":"hi"}}],"tools":[{{"name":"f","input_schema":{schema}}}]}}"#
        );
        let gemini_body = format!(
            r#"{{"contents":[{{"parts":[{{"text":"hi"}}]}}],"tools":[{{"function_declarations":[{{"name":"f","parameters":{schema}}}]}}]}}"#
        );
        for (protocol, path, body) in [
            (
                &openai_chat::OpenAiChat as &dyn crate::protocol::Protocol,
                "/v1/chat/completions",
                chat,
            ),
            (
                &openai_responses::OpenAiResponses,
                "/v1/responses",
                responses,
            ),
            (
                &anthropic::AnthropicMessages,
                "/v1/messages",
                anthropic_body,
            ),
            (&gemini::Gemini, gemini_path, gemini_body),
        ] {
            let texts = request_texts(protocol, path, &body);
            assert_eq!(
                texts.iter().filter(|t| *t == "forbidden fruit").count(),
                2,
                "{}: {texts:?}",
                protocol.name()
            );
            // The protocol's own structure stays exempt.
            assert!(!reads(&texts, "function"), "{}: {texts:?}", protocol.name());
        }
        // Anthropic tool_use input and Responses function_call_output values.
        let body = r#"{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"status":"\u0066orbidden fruit"}}]}]}"#;
        assert!(reads(
            &request_texts(&anthropic::AnthropicMessages, "/v1/messages", body),
            "forbidden fruit"
        ));
        let body = r#"{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x","status":"\u0066orbidden fruit"}]}]}"#;
        assert!(reads(
            &request_texts(&openai_responses::OpenAiResponses, "/v1/responses", body),
            "forbidden fruit"
        ));
    }

    #[test]
    fn json_held_in_strings_is_read_decoded() {
        use crate::protocol::openai_chat::OpenAiChat;
        // A tool result whose text is JSON with an escape, and one more level inside it.
        let body = r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"{\"status\":\"\\u0066orbidden fruit\"}"},{"role":"tool","tool_call_id":"2","content":"[\"{\\\"id\\\":\\\"\\\\u0066orbidden apple\\\"}\"]"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"q\":\"{\\\"type\\\":\\\"\\\\u0066orbidden pear\\\"}\"}"}}]}]}"#;
        let texts = request_texts(&OpenAiChat, "/v1/chat/completions", body);
        for phrase in [
            "forbidden fruit",
            "forbidden apple",
            "forbidden pear",
            "status",
        ] {
            assert!(reads(&texts, phrase), "{phrase}: {texts:?}");
        }
        // Duplicated keys: both values are read.
        let mut view = String::new();
        json_view(r#"{"a":"\u0078","a":"\u0079"}"#, 0, &mut view);
        assert_eq!(view, "a\nx\na\ny");
        // No escape, or no JSON: nothing more to read.
        for plain in [
            r#"{"a":"forbidden"}"#,
            r"not json \u0066",
            r#"{"a":"\u0066"#,
        ] {
            let mut view = String::new();
            json_view(plain, 0, &mut view);
            assert!(view.is_empty(), "{plain}");
        }
    }

    #[test]
    fn unbalanced_or_too_deep_input_is_refused() {
        let mut out = Vec::new();
        for bad in [r#"{"a":"#, r#"{"a":"x}"#, "]", &"[".repeat(200)] {
            assert_eq!(
                residual_strings(bad.as_bytes(), &NONE, &[], &mut out),
                Err(Unwalkable),
                "{bad}"
            );
        }
    }
}
