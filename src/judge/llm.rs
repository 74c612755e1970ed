//! LLM judges: the prompt (PromptKit's, with G-Eval's steps and scale), the request in the
//! judge's protocol (asking for JSON where the protocol can), and the verdict read from the
//! reply's text.

use super::gate::{AttemptError, Gate};
use super::{http_call, verdict, ErrorKind, JudgeEnv, JudgeError, Subject, Verdict};
use crate::config::{JudgeConfig, ProtocolId};
use crate::policy::judged::{LlmJudge, Scale};
use crate::proxy::upstream::UpstreamBase;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

/// PromptKit's judge instruction, the reply shape spelled out.
const SYSTEM_PROMPT: &str = "You are an impartial evaluation judge. Judge the content against the criteria. \
Reply with a JSON object only, no other text: \
{\"score\": <number>, \"pass\": <true or false>, \"reason\": \"<one sentence>\", \"label\": \"<one word>\"}.";

pub struct JudgeClient {
    pub config: JudgeConfig,
    protocol: ProtocolId,
    base: UpstreamBase,
    api_key: Option<String>,
    gate: Gate,
}

impl JudgeClient {
    pub fn new(config: &JudgeConfig) -> Result<JudgeClient, String> {
        let checked = config
            .checked
            .as_ref()
            .ok_or_else(|| format!("judges ({}): the config was not validated", config.name))?;
        Ok(JudgeClient {
            protocol: checked.protocol,
            base: UpstreamBase::new(&checked.base_url)
                .map_err(|e| format!("judges ({}): base_url {e}", config.name))?,
            api_key: checked.api_key.clone(),
            gate: Gate::new(
                config.name.clone(),
                config.retry.clone(),
                config.breaker.clone(),
                config.max_concurrency,
                config.max_queue,
                &config.cache,
            ),
            config: config.clone(),
        })
    }

    pub async fn judge(
        &self,
        env: &JudgeEnv,
        check: &LlmJudge,
        subject: &Subject,
        deadline: tokio::time::Instant,
    ) -> Result<Verdict, JudgeError> {
        let Some(content) = subject.render(&check.judged) else {
            return Ok(Verdict {
                score: 1.0,
                reason: Some("no tool calls to judge".into()),
                label: None,
            });
        };
        let system = system_prompt(check);
        let user = user_prompt(check, &content);
        let model = check.model.as_deref().unwrap_or(&self.config.model);
        let (path, body) = self.request(model, &system, &user);
        let key = env.judges.cache_key(&[
            self.config.name.as_bytes(),
            model.as_bytes(),
            system.as_bytes(),
            user.as_bytes(),
        ]);
        let headers = self.headers();
        self.gate
            .call(&env.metrics, Some(key), deadline, || {
                let (path, body, headers) = (&path, body.clone(), headers.clone());
                async move {
                    let reply =
                        http_call(env, &self.base, http::Method::POST, path, headers, body).await?;
                    let text = reply_text(self.protocol, &reply)
                        .map_err(|e| AttemptError::new(ErrorKind::Malformed, e, false))?;
                    verdict::parse(&text, check.scale, true)
                        .map_err(|e| AttemptError::new(ErrorKind::Malformed, e, false))
                }
            })
            .await
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        let Some(key) = &self.api_key else {
            return h;
        };
        let value = |v: String| HeaderValue::from_str(&v).ok();
        match self.protocol {
            ProtocolId::AnthropicMessages => {
                if let Some(v) = value(key.clone()) {
                    h.insert("x-api-key", v);
                }
            }
            ProtocolId::Gemini => {
                if let Some(v) = value(key.clone()) {
                    h.insert("x-goog-api-key", v);
                }
            }
            _ => {
                if let Some(v) = value(format!("Bearer {key}")) {
                    h.insert(http::header::AUTHORIZATION, v);
                }
            }
        }
        if self.protocol == ProtocolId::AnthropicMessages {
            h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        }
        h
    }

    /// The request path and body: temperature 0, and JSON output asked for where the protocol
    /// has a switch for it (Anthropic has none: the prompt asks, and the reply is read
    /// tolerantly).
    fn request(&self, model: &str, system: &str, user: &str) -> (String, Vec<u8>) {
        let max_tokens = self.config.max_tokens;
        let (path, body) = match self.protocol {
            ProtocolId::AnthropicMessages => (
                "/v1/messages".to_owned(),
                json!({
                    "model": model,
                    "system": system,
                    "messages": [{"role": "user", "content": user}],
                    "max_tokens": max_tokens,
                    "temperature": 0,
                }),
            ),
            ProtocolId::OpenAiResponses => (
                "/v1/responses".to_owned(),
                json!({
                    "model": model,
                    "instructions": system,
                    "input": user,
                    "max_output_tokens": max_tokens,
                    "temperature": 0,
                    "text": {"format": {"type": "json_object"}},
                }),
            ),
            ProtocolId::Gemini => (
                format!("/v1beta/models/{}:generateContent", model),
                json!({
                    "systemInstruction": {"parts": [{"text": system}]},
                    "contents": [{"role": "user", "parts": [{"text": user}]}],
                    "generationConfig": {
                        "temperature": 0,
                        "maxOutputTokens": max_tokens,
                        "responseMimeType": "application/json",
                    },
                }),
            ),
            _ => (
                "/v1/chat/completions".to_owned(),
                json!({
                    "model": model,
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    "max_tokens": max_tokens,
                    "temperature": 0,
                    "response_format": {"type": "json_object"},
                }),
            ),
        };
        (path, body.to_string().into_bytes())
    }
}

fn system_prompt(check: &LlmJudge) -> String {
    let mut s = check
        .system_prompt
        .clone()
        .unwrap_or_else(|| SYSTEM_PROMPT.to_owned());
    if check.scale == Scale::OneToFive {
        s.push_str(" The score is a whole number from 1 (worst) to 5 (best).");
    } else if check.system_prompt.is_none() {
        s.push_str(" The score is from 0 (fails the criteria) to 1 (meets them).");
    }
    s
}

/// PromptKit's user message, with G-Eval's steps when given.
fn user_prompt(check: &LlmJudge, content: &str) -> String {
    let mut s = format!(
        "Content to evaluate:\n{content}\n\nCriteria: {}",
        check.criteria
    );
    if let Some(r) = &check.rubric {
        s.push_str("\n\nRubric: ");
        s.push_str(r);
    }
    if !check.evaluation_steps.is_empty() {
        s.push_str("\n\nEvaluation steps:");
        for (i, step) in check.evaluation_steps.iter().enumerate() {
            s.push_str(&format!("\n{}. {step}", i + 1));
        }
    }
    s
}

/// The text of a judge's reply, in its protocol's shape.
pub fn reply_text(protocol: ProtocolId, body: &[u8]) -> Result<String, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| "the judge's reply is not JSON".to_owned())?;
    let texts: Vec<&str> = match protocol {
        ProtocolId::AnthropicMessages => v["content"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str())
                    .collect()
            })
            .unwrap_or_default(),
        ProtocolId::OpenAiResponses => v["output"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["content"].as_array())
                    .flatten()
                    .filter(|p| p["type"] == "output_text")
                    .filter_map(|p| p["text"].as_str())
                    .collect()
            })
            .unwrap_or_default(),
        ProtocolId::Gemini => v["candidates"][0]["content"]["parts"]
            .as_array()
            .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default(),
        _ => v["choices"][0]["message"]["content"]
            .as_str()
            .into_iter()
            .collect(),
    };
    if texts.is_empty() {
        return Err("the judge's reply has no text".into());
    }
    Ok(texts.concat())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn reply_texts_of_each_protocol() {
        for (protocol, body) in [
            (
                ProtocolId::OpenAiChat,
                r#"{"choices":[{"message":{"role":"assistant","content":"{\"score\":1}"}}]}"#,
            ),
            (
                ProtocolId::AnthropicMessages,
                r#"{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"{\"score\":1}"}]}"#,
            ),
            (
                ProtocolId::OpenAiResponses,
                r#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"{\"score\":1}"}]}]}"#,
            ),
            (
                ProtocolId::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"text":"{\"score\":"},{"text":"1}"}]}}]}"#,
            ),
        ] {
            assert_eq!(
                reply_text(protocol, body.as_bytes()).as_deref(),
                Ok("{\"score\":1}"),
                "{protocol:?}"
            );
            assert!(reply_text(protocol, b"{}").is_err());
            assert!(reply_text(protocol, b"not json").is_err());
        }
    }
}
