//! The one model every provider protocol is decoded into.
//!
//! Checks, the hold-back and the metrics only ever see these types, never a wire format:
//! [`Delta`] for what a response streams, [`Conversation`] for what a request carries.

use std::borrow::Cow;

/// Which text stream of a choice a piece of text belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The answer text.
    Content,
    /// A refusal message (OpenAI `refusal`).
    Refusal,
    /// Reasoning / thinking text, checked only by validators whose direction includes it.
    Reasoning,
    /// The JSON arguments of tool call number `n` of the choice.
    ToolArgs(u32),
    /// The free-form input of custom tool call number `n` (not JSON: read as it comes).
    ToolInput(u32),
    /// Strings that no decoder models (unknown events and fields), one channel per path of
    /// JSON keys (an id, see `protocol::residual`), so a text streamed in pieces across frames
    /// is checked as one.
    Other(u32),
}

/// The [`Channel::Other`] where a decoder writes a second reading of the texts it writes on
/// [`Channel::Content`] (A2A's parts one per line, as the a2a-sdk's `get_message_text` joins
/// them, beside the parts run together): checked under the same hold-back, never kept as
/// answer text (judges and lengths read `Content`).
pub const READ_APART: u32 = u32::MAX - 1;

impl Channel {
    /// True for channels that are part of the model's output proper (not reasoning).
    pub fn is_output(self) -> bool {
        !matches!(self, Channel::Reasoning)
    }
}

/// One incremental event of a streamed (or whole) response.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<'a> {
    /// A piece of text of `channel` in choice `choice`.
    Text {
        choice: u32,
        channel: Channel,
        text: Cow<'a, str>,
    },
    /// A tool call begins: its name is known before any argument byte.
    ToolCallStart {
        choice: u32,
        index: u32,
        id: Option<Cow<'a, str>>,
        name: Cow<'a, str>,
    },
    /// The choice finished, with the provider's reason.
    Finish { choice: u32, reason: Cow<'a, str> },
    /// Text of `channel` sent again (Responses `.done` and `response.completed` events repeat
    /// what the deltas carried): not checked again, but held and masked like the original.
    /// `start` is its channel position; `None` when it is the channel's latest text.
    Repeat {
        choice: u32,
        channel: Channel,
        text: Cow<'a, str>,
        start: Option<u64>,
    },
    /// Token usage as reported by the provider (counts so far: a later report replaces an
    /// earlier one only upward).
    Usage {
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        /// The part of `input_tokens` written to or read from a prompt cache, billed at prices
        /// of its own (Anthropic reports it beside `input_tokens`; its decoder adds it in).
        cache: Option<CacheTokens>,
    },
}

/// Input tokens a provider's prompt cache wrote or read (a part of the input's count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheTokens {
    pub write: u64,
    pub read: u64,
}

impl Delta<'_> {
    /// The choice the delta belongs to (usage belongs to none).
    pub fn choice(&self) -> Option<u32> {
        match self {
            Delta::Text { choice, .. }
            | Delta::ToolCallStart { choice, .. }
            | Delta::Finish { choice, .. }
            | Delta::Repeat { choice, .. } => Some(*choice),
            Delta::Usage { .. } => None,
        }
    }
}

/// Who wrote a message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
    Other(String),
    /// Not a participant: identifier-shaped values of a request's structure (ids, kinds,
    /// media types) that only the secret and PII patterns read
    /// ([`crate::protocol::identifier`]). No wire role parses to it.
    Identifiers,
}

impl Role {
    pub fn parse(s: &str) -> Role {
        match s {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" | "model" => Role::Assistant,
            "tool" | "function" => Role::Tool,
            other => Role::Other(other.to_owned()),
        }
    }
}

/// A tool call made by the assistant earlier in the conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    /// The arguments as the JSON text the model produced.
    pub arguments: String,
}

/// One message of a request's conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: Role,
    /// Text parts, in order (multi-part content keeps its parts apart).
    pub text: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    /// For tool results: the id of the call this answers.
    pub tool_call_id: Option<String>,
    /// For tool results: the tool reported a failure (see [`result_reports_error`]).
    pub is_error: bool,
    /// The participant's name, where the protocol has one (OpenAI's `name`).
    pub name: Option<String>,
}

impl Message {
    /// Every string of this message a decoder read: its text parts, then its tool calls'
    /// arguments.
    pub fn read_strings(&self) -> impl Iterator<Item = &String> {
        self.text
            .iter()
            .chain(self.tool_calls.iter().map(|c| &c.arguments))
    }

    /// A message with text only.
    pub fn text(role: Role, text: Vec<String>) -> Message {
        Message {
            role,
            text,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            name: None,
        }
    }
}

/// A message's text parts as the model reads them, one text: providers put a line break
/// between parts, so the words of two parts stay apart (`["…x", "bomb"]` is no `xbomb`).
/// Where a part already ends or the next begins with whitespace, they are joined as they are
/// (`["the forbidden", " fruit"]` reads `the forbidden fruit`, the phrase the model sees with
/// its line break); words in two parts with nothing between (`["forbidden", "fruit"]`) read
/// as two lines, `forbidden\nfruit`, which a pattern with a plain space does not match (the
/// normalised view folds Unicode spaces, not line breaks).
pub fn join_parts(parts: &[String]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in parts {
        let apart = out.is_empty()
            || part.is_empty()
            || out.ends_with(char::is_whitespace)
            || part.starts_with(char::is_whitespace);
        if !apart {
            out.push('\n');
        }
        out.push_str(part);
    }
    out
}

/// True when a tool result's text reports a failure, for protocols without an explicit flag:
/// a JSON object with a non-null top-level `error` key, or `"status": "error"`.
pub fn result_reports_error(text: &str) -> bool {
    let t = text.trim_start();
    if !t.starts_with('{') {
        return false;
    }
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(t) {
        Ok(obj) => {
            obj.get("error")
                .is_some_and(|e| !e.is_null() && e != &serde_json::Value::Bool(false))
                || obj.get("status").and_then(|s| s.as_str()) == Some("error")
        }
        Err(_) => false,
    }
}

/// A tool the client offers the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
}

/// What a request asks of the model, in one shape for every protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

impl Conversation {
    /// The messages a participant reads: without the carrier of identifier-shaped values
    /// ([`Role::Identifiers`]), which only the input checks' secret and PII patterns read — a
    /// judge, an eval's session key or a token estimate never sees it.
    pub fn read_messages(&self) -> impl Iterator<Item = &Message> {
        self.messages.iter().filter(|m| m.role != Role::Identifiers)
    }
}
