//! OpenAI Embeddings (`POST /v1/embeddings`): `input` checked before the call (BeforeCall);
//! the answer is vectors, no text, so it is relayed whole (never streamed). Served by every
//! OpenAI-compatible server, and so by routes of `openai_chat` too (see [`super::family`]).

use super::openai_completions::{separate_texts, TextsOrTokens};
use super::residual::Structural;
use super::{DecodeError, FrameKind, ParsedRequest, Protocol, StreamDecoder};
use super::{ProtocolId, Provider};
use crate::delta::Delta;
use crate::error::GatewayError;
use serde::Deserialize;

pub struct OpenAiEmbeddings;

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    model: Option<String>,
    input: TextsOrTokens,
}

/// Embeddings are never streamed: a stream of them is malformed.
struct NoStream;

impl StreamDecoder for NoStream {
    fn decode<'a>(
        &mut self,
        _event: Option<&[u8]>,
        _data: &'a [u8],
        _out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        Err(DecodeError("embeddings are not streamed".into()))
    }
}

static STRUCTURAL: Structural = Structural {
    // `embedding` is a vector, or base64 with `encoding_format: base64`: no text.
    keys: &["embedding", "encoding_format"],
    nested: &[],
    text_keys: &[],
    free: &[],
    schema: None,
};

impl Protocol for OpenAiEmbeddings {
    fn id(&self) -> ProtocolId {
        ProtocolId::OpenAiEmbeddings
    }

    fn matches(&self, path: &str) -> bool {
        path == "/v1/embeddings"
    }

    fn serves(&self, path: &str) -> bool {
        path.ends_with("/embeddings")
    }

    fn provider(&self) -> Provider {
        super::openai_chat::PROVIDER
    }

    fn structural(&self) -> &'static Structural {
        &STRUCTURAL
    }

    fn parse_request(&self, body: &[u8], _path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        let (texts, tokens) = req.input.texts();
        Ok(ParsedRequest {
            session: None,
            stream: false,
            choices: None,
            model: req.model,
            conversation: separate_texts(texts),
            unreadable_input: tokens,
            documents: Default::default(),
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(NoStream)
    }

    /// The vectors carry no text; any string outside the structural keys is still checked by
    /// the fallback.
    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        _out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map(|_| ())
            .map_err(|e| DecodeError::json("malformed embeddings response", &e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn inputs_of_every_shape_are_read() {
        let texts = |body: &str| {
            OpenAiEmbeddings
                .parse_request(body.as_bytes(), "/v1/embeddings")
                .unwrap()
                .conversation
                .messages
                .into_iter()
                .flat_map(|m| m.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(r#"{"input":"a","model":"m"}"#), ["a"]);
        assert_eq!(texts(r#"{"input":["a","b"]}"#), ["a", "b"]);
        assert!(texts(r#"{"input":[1,2]}"#).is_empty());
        assert!(OpenAiEmbeddings.parse_request(b"{}", "/").is_err());
    }
}
