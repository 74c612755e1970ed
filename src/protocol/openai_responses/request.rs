//! The Responses API's request body, as guardwire reads it: the model's input (instructions,
//! items and their parts, tools) and references to context stored at the provider.

use crate::delta::{Message, Role, ToolCall};
use crate::error::GatewayError;
use crate::protocol::documents::{self, Documents, StoredKind};
use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct Request {
    #[serde(default)]
    pub(super) stream: Option<bool>,
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    pub(super) instructions: Option<String>,
    #[serde(default)]
    pub(super) input: Option<Input>,
    #[serde(default)]
    pub(super) tools: Vec<RequestTool>,
    /// Context stored at the provider: an earlier response, a conversation, a stored prompt.
    #[serde(default)]
    pub(super) previous_response_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) conversation: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) prompt: Option<StoredPrompt>,
}

#[derive(Deserialize)]
pub(super) struct StoredPrompt {
    #[serde(default)]
    pub(super) id: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Input {
    Text(String),
    Items(Vec<Item>),
}

#[derive(Deserialize)]
pub(super) struct Item {
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) role: Option<String>,
    #[serde(default)]
    pub(super) content: Option<ItemContent>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
    #[serde(default)]
    pub(super) call_id: Option<String>,
    #[serde(default)]
    pub(super) output: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum ItemContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub(super) struct ContentPart {
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) refusal: Option<String>,
    /// `input_file`: inline (`file_data`, a data URL), uploaded (`file_id`) or by URL.
    #[serde(default)]
    pub(super) file_data: Option<String>,
    #[serde(default)]
    pub(super) file_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) file_url: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) filename: Option<String>,
}

/// A content part's texts (and an `input_file`'s, read or noted in `docs`), at `path`.
pub(super) fn part_texts(
    p: ContentPart,
    path: &str,
    docs: &mut Documents,
    text: &mut Vec<String>,
) -> Result<(), GatewayError> {
    text.extend(p.text);
    text.extend(p.refusal);
    if p.kind.as_deref() == Some("input_file") || p.file_data.is_some() {
        if let Some(data) = p.file_data {
            let at = format!("{path}.file_data");
            let read = if documents::is_data_url(&data) {
                docs.data_url(&data, &at)?
            } else {
                let media_type = documents::media_type_of_name(p.filename.as_deref());
                docs.base64(media_type, &data, &at)?
            };
            text.extend(read);
        } else if p.file_id.is_some() {
            docs.stored(StoredKind::File, format!("{path}.file_id"));
        } else if p.file_url.is_some() {
            docs.stored(StoredKind::Url, format!("{path}.file_url"));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
pub(super) struct RequestTool {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    /// A hosted tool's type (`file_search`, `mcp`, `web_search`, `code_interpreter`, …).
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) container: Option<serde_json::Value>,
}

/// The message of input item `item`, found at `path` (`input[3]`).
pub(super) fn item_message(
    item: Item,
    path: &str,
    docs: &mut Documents,
) -> Result<Option<Message>, GatewayError> {
    let kind = item.kind.as_deref().unwrap_or("message");
    Ok(match kind {
        "message" => {
            let mut text = Vec::new();
            match item.content {
                Some(ItemContent::Text(t)) => text.push(t),
                Some(ItemContent::Parts(parts)) => {
                    for (i, p) in parts.into_iter().enumerate() {
                        part_texts(p, &format!("{path}.content[{i}]"), docs, &mut text)?;
                    }
                }
                None => {}
            }
            Some(Message::text(
                Role::parse(item.role.as_deref().unwrap_or("user")),
                text,
            ))
        }
        "function_call" => Some(Message {
            role: Role::Assistant,
            text: Vec::new(),
            tool_calls: vec![ToolCall {
                id: item.call_id,
                name: item.name.unwrap_or_default(),
                arguments: item.arguments.unwrap_or_default(),
            }],
            tool_call_id: None,
            is_error: false,
            name: None,
        }),
        "function_call_output" => {
            // An output given as parts may hold files: read or noted like a message's.
            if let Some(serde_json::Value::Array(parts)) = &item.output {
                for (i, p) in parts.iter().enumerate() {
                    if let Ok(part) = ContentPart::deserialize(p) {
                        if part.kind.as_deref() == Some("input_file") {
                            let mut files = Vec::new();
                            part_texts(part, &format!("{path}.output[{i}]"), docs, &mut files)?;
                        }
                    }
                }
            }
            let text: Vec<String> = item
                .output
                .map(|o| match o {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .into_iter()
                .collect();
            Some(Message {
                role: Role::Tool,
                is_error: text.iter().any(|t| crate::delta::result_reports_error(t)),
                name: None,
                text,
                tool_calls: Vec::new(),
                tool_call_id: item.call_id,
            })
        }
        "item_reference" => {
            docs.stored(StoredKind::Item, format!("{path}.id"));
            None
        }
        _ => None,
    })
}
