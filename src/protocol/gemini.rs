//! Google Gemini (`/v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
//! and the same under `/v1/models/`).
//!
//! Stream frames are `data: <GenerateContentResponse>` only — no event names, no end marker (the
//! stream ends at EOF) — and google-genai raises on any other line, so guardwire never injects
//! comments or `event:` lines here. Function calls arrive whole (`functionCall {name, args}`).

use super::documents::{self, Documents, StoredKind};
use super::residual::Structural;
use super::{AuthHeader, ProtocolId, Provider};
use super::{DecodeError, ParsedRequest, Protocol, StreamDecoder};
use crate::delta::{Conversation, Delta, Message, Role, ToolCall, ToolSpec};
use crate::error::GatewayError;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

pub struct Gemini;

// ---- requests ----
//
// Google's JSON parser takes every field in camelCase or in snake_case (its own REST examples
// write `system_instruction`), so every field read here has both spellings: a field the
// decoder does not see would reach the provider unchecked. One given both ways is refused.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    contents: Vec<RequestContent>,
    #[serde(default, alias = "system_instruction")]
    system_instruction: Option<RequestContent>,
    #[serde(default)]
    tools: Vec<RequestTool>,
    /// Content cached at the provider (`cachedContents/…`): text the proxy never sees.
    #[serde(default, alias = "cached_content")]
    cached_content: Option<String>,
    #[serde(default, alias = "generation_config")]
    generation_config: Option<GenerationConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    /// How many candidates the answer holds.
    #[serde(default, alias = "candidate_count")]
    candidate_count: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RequestContent {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    parts: Vec<RequestPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default, alias = "function_call")]
    function_call: Option<FunctionCall>,
    #[serde(default, alias = "function_response")]
    function_response: Option<FunctionResponse>,
    /// Inline bytes: a text document is read, images and audio are exempt.
    #[serde(default, alias = "inline_data")]
    inline_data: Option<InlineData>,
    /// A file uploaded to the provider (or any URI it fetches): stored context.
    #[serde(default, alias = "file_data")]
    file_data: Option<FileData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InlineData {
    #[serde(default, alias = "mime_type")]
    mime_type: Option<String>,
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileData {
    #[serde(default, alias = "mime_type")]
    mime_type: Option<String>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct FunctionResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    response: Option<Box<RawValue>>,
    /// Media and documents the function returned (multimodal function responses).
    #[serde(default)]
    parts: Vec<ResponsePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePart {
    #[serde(default, alias = "inline_data")]
    inline_data: Option<InlineData>,
    #[serde(default, alias = "file_data")]
    file_data: Option<FileData>,
}

/// A part's inline bytes and file reference, at `path` (`contents[0].parts[1]`).
fn part_documents(
    inline_data: Option<InlineData>,
    file_data: Option<FileData>,
    path: &str,
    docs: &mut Documents,
    text: &mut Vec<String>,
) -> Result<(), GatewayError> {
    if let Some(inline) = inline_data {
        let at = format!("{path}.inlineData.data");
        text.extend(docs.base64(inline.mime_type.as_deref(), &inline.data, &at)?);
    }
    if let Some(file) = file_data {
        // An image or audio file is exempt like inline media; anything else is text the
        // proxy never sees.
        if !documents::is_media(file.mime_type.as_deref()) {
            docs.stored(StoredKind::File, format!("{path}.fileData"));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestTool {
    #[serde(default, alias = "function_declarations")]
    function_declarations: Vec<FunctionDeclaration>,
    /// Tools the API runs that put content in the model's context: stored files, the web,
    /// a Vertex AI Search data store.
    #[serde(default, alias = "file_search")]
    file_search: Option<serde::de::IgnoredAny>,
    #[serde(default, alias = "url_context")]
    url_context: Option<serde::de::IgnoredAny>,
    #[serde(default, alias = "google_search")]
    google_search: Option<serde::de::IgnoredAny>,
    #[serde(default, alias = "google_search_retrieval")]
    google_search_retrieval: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    retrieval: Option<serde::de::IgnoredAny>,
    #[serde(default, alias = "enterprise_web_search")]
    enterprise_web_search: Option<serde::de::IgnoredAny>,
    #[serde(default, alias = "google_maps")]
    google_maps: Option<serde::de::IgnoredAny>,
}

impl RequestTool {
    /// The first of its tools that reads content no input check can read.
    fn hosted_reader(&self) -> Option<&'static str> {
        [
            (self.file_search.is_some(), "fileSearch"),
            (self.url_context.is_some(), "urlContext"),
            (self.google_search.is_some(), "googleSearch"),
            (
                self.google_search_retrieval.is_some(),
                "googleSearchRetrieval",
            ),
            (self.retrieval.is_some(), "retrieval"),
            (self.enterprise_web_search.is_some(), "enterpriseWebSearch"),
            (self.google_maps.is_some(), "googleMaps"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}

#[derive(Deserialize)]
struct FunctionDeclaration {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

/// The message of `content`, found at `path` (`contents[2]`); its documents are read (or
/// noted) into `docs`.
fn message_of(
    content: RequestContent,
    default_role: Role,
    path: &str,
    docs: &mut Documents,
) -> Result<Message, GatewayError> {
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    let mut tool_call_id = None;
    for (i, part) in content.parts.into_iter().enumerate() {
        text.extend(part.text);
        let at = format!("{path}.parts[{i}]");
        part_documents(part.inline_data, part.file_data, &at, docs, &mut text)?;
        if let Some(call) = part.function_call {
            tool_calls.push(ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.args.map(|a| a.get().to_owned()).unwrap_or_default(),
            });
        }
        if let Some(resp) = part.function_response {
            tool_call_id = resp.id.or(resp.name);
            text.extend(resp.response.map(|r| r.get().to_owned()));
            for (j, p) in resp.parts.into_iter().enumerate() {
                let at = format!("{at}.functionResponse.parts[{j}]");
                part_documents(p.inline_data, p.file_data, &at, docs, &mut text)?;
            }
        }
    }
    let role = match (&tool_call_id, content.role) {
        (Some(_), _) => Role::Tool,
        (None, Some(r)) => Role::parse(&r),
        (None, None) => default_role,
    };
    let is_error =
        tool_call_id.is_some() && text.iter().any(|t| crate::delta::result_reports_error(t));
    Ok(Message {
        role,
        text,
        tool_calls,
        tool_call_id,
        is_error,
        name: None,
    })
}

// ---- responses ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    #[serde(borrow, default)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default, alias = "usage_metadata")]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    content: Option<CandidateContent<'a>>,
    #[serde(
        borrow,
        default,
        alias = "finish_reason",
        deserialize_with = "super::borrow_opt_str"
    )]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(borrow, default)]
    parts: Vec<Part<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default, alias = "function_call")]
    function_call: Option<ResponseCall<'a>>,
    /// Code the model wrote for the built-in code execution tool: a call of that tool, its
    /// code the call's free-form input. (The tool's `codeExecutionResult` is no text of the
    /// model's; the fallback checks it.)
    #[serde(borrow, default, alias = "executable_code")]
    executable_code: Option<ExecutableCode<'a>>,
}

#[derive(Deserialize)]
struct ExecutableCode<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    code: Option<Cow<'a, str>>,
}

/// The tool name under which guardwire's tool checks see Gemini's code execution.
pub const CODE_EXECUTION: &str = "code_execution";

#[derive(Deserialize)]
struct ResponseCall<'a> {
    #[serde(borrow, default, deserialize_with = "super::borrow_opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default, alias = "prompt_token_count")]
    prompt_token_count: Option<u64>,
    #[serde(default, alias = "candidates_token_count")]
    candidates_token_count: Option<u64>,
    /// Billed as output, not part of `candidatesTokenCount`.
    #[serde(default, alias = "thoughts_token_count")]
    thoughts_token_count: Option<u64>,
    /// Billed as input (what tools gave the model), not part of `promptTokenCount`.
    #[serde(default, alias = "tool_use_prompt_token_count")]
    tool_use_prompt_token_count: Option<u64>,
}

impl UsageMetadata {
    /// The usage as billed: thoughts are output, tool-use prompts input.
    fn delta<'a>(&self) -> Delta<'a> {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        Delta::Usage {
            input_tokens: sum(self.prompt_token_count, self.tool_use_prompt_token_count),
            output_tokens: sum(self.candidates_token_count, self.thoughts_token_count),
            cache: None,
        }
    }
}

/// The keys of Gemini answers that are structure, not text (see `residual`).
static STRUCTURAL: Structural = Structural {
    keys: &[
        "finishReason",
        "finish_reason",
        "modelVersion",
        "model_version",
        "responseId",
        "response_id",
        "thoughtSignature",
        "thought_signature",
        "blockReason",
        "block_reason",
        "category",
        "probability",
        "severity",
        "mimeType",
        "mime_type",
        "trafficType",
        "traffic_type",
        "modality",
        "outcome",
        "language",
    ],
    // Inline media (base64) is no text.
    nested: &[
        (
            &["candidates", "[]", "content", "parts", "[]", "inlineData"],
            "data",
        ),
        (
            &["candidates", "[]", "content", "parts", "[]", "inline_data"],
            "data",
        ),
    ],
    text_keys: &[],
    free: &[],
    schema: None,
};

/// The method part of a Gemini model path: `/v1beta/models/gemini-2.0:streamGenerateContent`.
fn method_of(path: &str) -> Option<&str> {
    model_and_method(path).map(|(_, method)| method)
}

/// `/v1beta/models/{model}:{method}` → (model, method).
fn model_and_method(path: &str) -> Option<(&str, &str)> {
    let rest = path
        .strip_prefix("/v1beta/models/")
        .or_else(|| path.strip_prefix("/v1/models/"))?;
    model_call(rest)
}

/// `{model}:{method}`, a path's last segment → (model, method).
fn model_call(segment: &str) -> Option<(&str, &str)> {
    let (model, method) = segment.rsplit_once(':')?;
    (!model.is_empty() && !model.contains('/')).then_some((model, method))
}

/// The methods guardwire checks: generating an answer, whole or streamed.
fn generates(method: Option<&str>) -> bool {
    matches!(method, Some("generateContent" | "streamGenerateContent"))
}

/// Gemini: `upstreams.gemini`.
const PROVIDER: Provider = Provider::new(Some("gemini"), "gcp.gemini");

/// google-genai's request headers: its telemetry and server-side timeout; the key
/// (`x-goog-api-key`, or Vertex AI's Bearer token) and the project billed
/// (`x-goog-user-project`) only when they are the client's own.
static HEADERS: super::HeaderAllowlist = super::HeaderAllowlist {
    names: &["x-goog-api-client", "x-server-timeout"],
    prefixes: &[],
    client_account: &["x-goog-api-key", "authorization", "x-goog-user-project"],
};

impl Protocol for Gemini {
    fn id(&self) -> ProtocolId {
        ProtocolId::Gemini
    }

    fn matches(&self, path: &str) -> bool {
        generates(method_of(path))
    }

    fn serves(&self, path: &str) -> bool {
        let last = path.rsplit('/').next().unwrap_or_default();
        generates(model_call(last).map(|(_, method)| method))
    }

    fn forward_headers(&self) -> &'static super::HeaderAllowlist {
        &HEADERS
    }

    fn auth_header(&self) -> AuthHeader {
        AuthHeader::XGoogApiKey
    }

    fn structural(&self) -> &'static super::residual::Structural {
        &STRUCTURAL
    }

    fn provider(&self) -> Provider {
        PROVIDER
    }

    fn parse_request(&self, body: &[u8], path: &str) -> Result<ParsedRequest, GatewayError> {
        let req: Request = super::request_json(body)?;
        let mut messages = Vec::new();
        let mut documents = Documents::default();
        if let Some(system) = req.system_instruction {
            let mut m = message_of(system, Role::System, "systemInstruction", &mut documents)?;
            m.role = Role::System;
            messages.push(m);
        }
        for (i, c) in req.contents.into_iter().enumerate() {
            let path = format!("contents[{i}]");
            messages.push(message_of(c, Role::User, &path, &mut documents)?);
        }
        if req.cached_content.is_some() {
            documents.stored(StoredKind::CachedContent, "cachedContent");
        }
        for (i, t) in req.tools.iter().enumerate() {
            if let Some(name) = t.hosted_reader() {
                documents.stored(StoredKind::HostedTool, format!("tools[{i}].{name}"));
            }
        }
        let tools = req
            .tools
            .into_iter()
            .flat_map(|t| t.function_declarations)
            .map(|f| ToolSpec {
                name: f.name,
                description: f.description,
            })
            .collect();
        Ok(ParsedRequest {
            session: None,
            stream: method_of(path) == Some("streamGenerateContent"),
            choices: Some(super::choices_param(
                req.generation_config
                    .as_ref()
                    .and_then(|g| g.candidate_count.as_ref()),
            )),
            model: model_and_method(path).map(|(model, _)| model.to_owned()),
            conversation: Conversation { messages, tools },
            unreadable_input: false,
            documents,
        })
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<GeminiStream>::default()
    }

    /// A whole response: one object, or (`streamGenerateContent` without `alt=sse`) a JSON
    /// array of them.
    fn decode_response<'a>(
        &self,
        body: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<(), DecodeError> {
        let mut dec = GeminiStream::default();
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            let all: Vec<Response<'a>> = serde_json::from_slice(body)
                .map_err(|e| DecodeError::json("malformed Gemini response", &e))?;
            for r in all {
                dec.response_deltas(r, out);
            }
        } else {
            let r: Response<'a> = serde_json::from_slice(body)
                .map_err(|e| DecodeError::json("malformed Gemini response", &e))?;
            dec.response_deltas(r, out);
        }
        Ok(())
    }

    fn error_body(&self, err: &GatewayError, _to: &super::ReplyTo) -> Bytes {
        gemini_error_json(err).into()
    }

    fn stream_error_frame(&self, err: &GatewayError, _to: &super::ReplyTo) -> Bytes {
        format!("data: {}\n\n", gemini_error_json(err)).into()
    }
}

/// `{"error":{"code":400,"message":…,"status":"INVALID_ARGUMENT"}}` — `error` first and an
/// integer `code`, which is what makes google-genai raise `ClientError` mid-stream.
fn gemini_error_json(err: &GatewayError) -> String {
    #[derive(serde::Serialize)]
    struct Body {
        error: Detail,
    }
    #[derive(serde::Serialize)]
    struct Detail {
        code: u16,
        message: String,
        status: &'static str,
    }
    let status = match err {
        GatewayError::NotFound(_) => "NOT_FOUND",
        GatewayError::Unauthorized(_) => "UNAUTHENTICATED",
        GatewayError::Upstream(_)
        | GatewayError::UpstreamIncomplete
        | GatewayError::Internal(_)
        | GatewayError::Overloaded
        | GatewayError::BufferFull
        | GatewayError::ShuttingDown
        | GatewayError::StateUnavailable => "UNAVAILABLE",
        GatewayError::KeyLimit | GatewayError::AddressLimit | GatewayError::RateLimited { .. } => {
            "RESOURCE_EXHAUSTED"
        }
        GatewayError::UpstreamTimeout(_) | GatewayError::BodyTimeout { .. } => "DEADLINE_EXCEEDED",
        GatewayError::Blocked { .. }
        | GatewayError::InvalidRequest(_)
        | GatewayError::MethodNotAllowed(_)
        | GatewayError::PayloadTooLarge { .. }
        | GatewayError::UnsupportedMediaType(_)
        | GatewayError::HoldbackExceeded { .. } => "INVALID_ARGUMENT",
    };
    let body = Body {
        error: Detail {
            code: err.status().as_u16(),
            message: err.to_string(),
            status,
        },
    };
    serde_json::to_string(&body).unwrap_or_default()
}

mod stream;
use stream::GeminiStream;
#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;
