//! OpenAI legacy Completions (`POST /v1/completions`): `prompt` (and `suffix`) in,
//! `choices[].text` out, streamed (`data:` chunks, then `data: [DONE]`) or whole. Every
//! OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, LiteLLM) serves it, so routes of
//! `openai_chat` serve it too (see [`super::family`]). Errors use the OpenAI shape.

use super::residual::Structural;
use super::{DecodeError, FrameKind, ParsedRequest, Protocol, StreamDecoder};
use super::{ProtocolId, Provider};
use crate::delta::{Channel, Conversation, Delta, Message, Role};
use crate::error::GatewayError;
use serde::Deserialize;
use std::borrow::Cow;

pub struct OpenAiCompletions;

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<TextsOrTokens>,
    #[serde(default)]
    suffix: Option<String>,
    /// Choices per prompt.
    #[serde(default)]
    n: Option<serde_json::Value>,
}

/// OpenAI's text inputs (a Completions `prompt`, an Embeddings `input`): a text, a list of
/// texts, or token ids (one list or several), which carry no text guardwire can read without
/// the model's tokenizer.
#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)] // token ids are read only to accept the shape
pub(super) enum TextsOrTokens {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

impl TextsOrTokens {
    /// The texts, and whether token ids were given instead.
    pub(super) fn texts(self) -> (Vec<String>, bool) {
        match self {
            TextsOrTokens::Text(t) => (vec![t], false),
            TextsOrTokens::Texts(ts) => (ts, false),
            TextsOrTokens::Tokens(_) | TextsOrTokens::TokenLists(_) => (Vec::new(), true),
        }
    }
}

/// One user message per text: each is read (completed, embedded) apart.
pub(super) fn separate_texts(texts: Vec<String>) -> Conversation {
    Conversation {
        messages: texts
            .into_iter()
            .map(|t| Message::text(Role::User, vec![t]))
            .collect(),
        tools: Vec::new(),
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn chunk_deltas<'a>(chunk: Chunk<'a>, out: &mut Vec<Delta<'a>>) {
    for c in chunk.choices {
        if let Some(text) = c.text.filter(|t| !t.is_empty()) {
            out.push(Delta::Text {
                choice: c.index,
                channel: Channel::Content,
                text,
            });
        }
        if let Some(reason) = c.finish_reason {
            out.push(Delta::Finish {
                choice: c.index,
                reason,
            });
        }
    }
    if let Some(u) = chunk.usage {
        out.push(Delta::Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cache: None,
        });
    }
}

fn parse_chunk(data: &[u8]) -> Result<Chunk<'_>, DecodeError> {
    serde_json::from_slice(data).map_err(|e| DecodeError::json("malformed completion", &e))
}

#[derive(Default)]
struct CompletionsStream {
    /// The last frame was a usage-only chunk.
    usage_only: bool,
}

impl StreamDecoder for CompletionsStream {
    fn decode<'a>(
        &mut self,
        _event: Option<&[u8]>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        self.usage_only = false;
        if data.trim_ascii() == b"[DONE]" {
            return Ok(FrameKind::Terminal);
        }
        let chunk = parse_chunk(data)?;
        if chunk.error.is_some() {
            return Ok(FrameKind::UpstreamError);
        }
        self.usage_only = chunk.choices.is_empty() && chunk.usage.is_some();
        chunk_deltas(chunk, out);
        Ok(FrameKind::Data)
    }

    fn usage_only(&self) -> bool {
        self.usage_only
    }
}

static STRUCTURAL: Structural = Structural {
    keys: &["finish_reason", "system_fingerprint", "service_tier"],
    nested: &[],
    // `logprobs.top_logprobs` maps each alternative token to its log-probability.
    text_keys: &[&["choices", "[]", "logprobs", "top_logprobs", "[]"]],
    free: &[],
    schema: None,
};

impl Protocol for OpenAiCompletions {
    fn id(&self) -> ProtocolId {
        ProtocolId::OpenAiCompletions
    }

    fn matches(&self, path: &str) -> bool {
        path == "/v1/completions"
    }

    fn serves(&self, path: &str) -> bool {
        path.ends_with("/completions") && !path.ends_with("/chat/completions")
    }

    fn provider(&self) -> Provider {
        super::openai_chat::PROVIDER
    }

    fn structural(&self) -> &'static Structural {
        &STRUCTURAL
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        // `n` choices for each prompt of a list.
        let prompts = match &req.prompt {
            Some(TextsOrTokens::Texts(ts)) => ts.len(),
            Some(TextsOrTokens::TokenLists(ls)) => ls.len(),
            _ => 1,
        };
        let choices = super::choices_param(req.n.as_ref())
            .saturating_mul(u32::try_from(prompts.max(1)).unwrap_or(u32::MAX));
        let (mut texts, tokens) = req.prompt.map_or((Vec::new(), false), TextsOrTokens::texts);
        texts.extend(req.suffix);
        Ok(ParsedRequest {
            session: None,
            stream: req.stream.unwrap_or(false),
            choices: Some(choices),
            model: req.model,
            conversation: separate_texts(texts),
            unreadable_input: tokens,
            documents: Default::default(),
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(CompletionsStream::default())
    }

    fn usage_on_request(&self) -> bool {
        true
    }

    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        chunk_deltas(parse_chunk(body)?, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn prompts_of_every_shape_are_read() {
        let p = OpenAiCompletions;
        let texts = |body: &str| {
            p.parse_request(body.as_bytes(), "/v1/completions")
                .unwrap()
                .conversation
                .messages
                .into_iter()
                .flat_map(|m| m.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(r#"{"prompt":"a","suffix":"z"}"#), ["a", "z"]);
        assert_eq!(texts(r#"{"prompt":["a","b"],"stream":true}"#), ["a", "b"]);
        assert!(texts(r#"{"prompt":[1,2,3]}"#).is_empty());
        assert!(texts(r#"{"prompt":[[1],[2]]}"#).is_empty());
        assert!(p.parse_request(br#"{"prompt":{"x":1}}"#, "/").is_err());
    }

    #[test]
    fn chunks_decode_to_text_per_choice() {
        let mut out = Vec::new();
        let kind = CompletionsStream::default()
            .decode(
                None,
                br#"{"id":"c","object":"text_completion","choices":[{"index":1,"text":"hi","logprobs":null,"finish_reason":"stop"}]}"#,
                &mut out,
            )
            .unwrap();
        assert_eq!(kind, FrameKind::Data);
        assert_eq!(
            out,
            [
                Delta::Text {
                    choice: 1,
                    channel: Channel::Content,
                    text: "hi".into()
                },
                Delta::Finish {
                    choice: 1,
                    reason: "stop".into()
                }
            ]
        );
        assert_eq!(
            CompletionsStream::default()
                .decode(None, b"[DONE]", &mut out)
                .unwrap(),
            FrameKind::Terminal
        );
    }
}
