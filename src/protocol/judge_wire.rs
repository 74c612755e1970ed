//! What a judge sends and reads in each protocol judges may speak: the request of a judge call
//! (temperature 0, JSON output asked for where the protocol has a switch for it), the text and
//! the log probabilities of its reply, and the embeddings request and reply of
//! `cosine_similarity`. `judge/llm.rs` holds what is the same in every protocol (the prompt,
//! the verdict, the calls); the registry says which shape a protocol has.

use serde_json::{json, Value};

/// One generated token with its alternatives: (token, [(alternative, log probability)]).
pub type TokenLogprobs = (String, Vec<(String, f64)>);

/// A judge request's parameters.
pub struct JudgeAsk<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub user: &'a str,
    pub max_tokens: u32,
    /// How many alternatives per token to ask for, when the score is to be weighted by them.
    pub top_logprobs: Option<u32>,
}

/// A protocol's judge shapes.
pub trait JudgeWire: Send + Sync + 'static {
    /// The request path and JSON body of a judge call.
    fn request(&self, ask: &JudgeAsk<'_>) -> (String, Value);

    /// The texts of a reply, in order (none: the reply has no text).
    fn reply_texts<'v>(&self, reply: &'v Value) -> Vec<&'v str>;

    /// The tokens of a reply with their alternatives, where the protocol reports them.
    fn reply_logprobs(&self, _reply: &Value) -> Vec<TokenLogprobs> {
        Vec::new()
    }

    /// Headers every judge call of the protocol carries (besides its key).
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The request path and JSON body asking for the embeddings of `inputs`; by default
    /// OpenAI's `/v1/embeddings`.
    fn embeddings_request(&self, model: &str, inputs: &[&str]) -> (String, Value) {
        (
            "/v1/embeddings".to_owned(),
            json!({"model": model, "input": inputs}),
        )
    }

    /// The vectors of an embeddings reply (each a JSON value), in input order; by default
    /// OpenAI's `data[].embedding`, ordered by `index`.
    fn embeddings(&self, reply: &Value) -> Vec<Value> {
        let mut data: Vec<&Value> = reply["data"]
            .as_array()
            .map(|d| d.iter().collect())
            .unwrap_or_default();
        data.sort_by_key(|d| d["index"].as_u64().unwrap_or(0));
        data.iter().map(|d| d["embedding"].clone()).collect()
    }
}

/// OpenAI Chat Completions.
pub struct OpenAiChat;

impl JudgeWire for OpenAiChat {
    fn request(&self, ask: &JudgeAsk<'_>) -> (String, Value) {
        let mut body = json!({
            "model": ask.model,
            "messages": [
                {"role": "system", "content": ask.system},
                {"role": "user", "content": ask.user},
            ],
            "max_tokens": ask.max_tokens,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        });
        if let Some(top) = ask.top_logprobs {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(top);
        }
        ("/v1/chat/completions".to_owned(), body)
    }

    fn reply_texts<'v>(&self, reply: &'v Value) -> Vec<&'v str> {
        reply["choices"][0]["message"]["content"]
            .as_str()
            .into_iter()
            .collect()
    }

    fn reply_logprobs(&self, reply: &Value) -> Vec<TokenLogprobs> {
        openai_logprobs(&reply["choices"][0]["logprobs"]["content"])
    }
}

/// OpenAI Responses.
pub struct OpenAiResponses;

impl JudgeWire for OpenAiResponses {
    fn request(&self, ask: &JudgeAsk<'_>) -> (String, Value) {
        let mut body = json!({
            "model": ask.model,
            "instructions": ask.system,
            "input": ask.user,
            "max_output_tokens": ask.max_tokens,
            "temperature": 0,
            "text": {"format": {"type": "json_object"}},
        });
        if let Some(top) = ask.top_logprobs {
            body["include"] = json!(["message.output_text.logprobs"]);
            body["top_logprobs"] = json!(top);
        }
        ("/v1/responses".to_owned(), body)
    }

    fn reply_texts<'v>(&self, reply: &'v Value) -> Vec<&'v str> {
        let parts = reply["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["content"].as_array())
            .flatten();
        texts_of_type(parts, "output_text")
    }

    fn reply_logprobs(&self, reply: &Value) -> Vec<TokenLogprobs> {
        reply["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["content"].as_array())
            .flatten()
            .flat_map(|p| openai_logprobs(&p["logprobs"]))
            .collect()
    }
}

/// Anthropic Messages: no JSON switch (the prompt asks, and the reply is read tolerantly), no
/// log probabilities, no embeddings of its own.
pub struct AnthropicMessages;

impl JudgeWire for AnthropicMessages {
    fn request(&self, ask: &JudgeAsk<'_>) -> (String, Value) {
        let body = json!({
            "model": ask.model,
            "system": ask.system,
            "messages": [{"role": "user", "content": ask.user}],
            "max_tokens": ask.max_tokens,
            "temperature": 0,
        });
        ("/v1/messages".to_owned(), body)
    }

    fn reply_texts<'v>(&self, reply: &'v Value) -> Vec<&'v str> {
        texts_of_type(reply["content"].as_array().into_iter().flatten(), "text")
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", "2023-06-01")]
    }
}

/// Gemini `generateContent`.
pub struct Gemini;

impl JudgeWire for Gemini {
    fn request(&self, ask: &JudgeAsk<'_>) -> (String, Value) {
        let mut body = json!({
            "systemInstruction": {"parts": [{"text": ask.system}]},
            "contents": [{"role": "user", "parts": [{"text": ask.user}]}],
            "generationConfig": {
                "temperature": 0,
                "maxOutputTokens": ask.max_tokens,
                "responseMimeType": "application/json",
            },
        });
        if let Some(top) = ask.top_logprobs {
            body["generationConfig"]["responseLogprobs"] = json!(true);
            body["generationConfig"]["logprobs"] = json!(top);
        }
        (
            format!("/v1beta/models/{}:generateContent", ask.model),
            body,
        )
    }

    fn reply_texts<'v>(&self, reply: &'v Value) -> Vec<&'v str> {
        reply["candidates"][0]["content"]["parts"]
            .as_array()
            .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default()
    }

    fn reply_logprobs(&self, reply: &Value) -> Vec<TokenLogprobs> {
        let r = &reply["candidates"][0]["logprobsResult"];
        let chosen = r["chosenCandidates"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let top = r["topCandidates"].as_array().cloned().unwrap_or_default();
        chosen
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let alts = top
                    .get(i)
                    .map(|t| alternatives(&t["candidates"], "logProbability"))
                    .unwrap_or_default();
                (c["token"].as_str().unwrap_or("").to_owned(), alts)
            })
            .collect()
    }

    fn embeddings_request(&self, model: &str, inputs: &[&str]) -> (String, Value) {
        (
            format!("/v1beta/models/{model}:batchEmbedContents"),
            json!({
                "requests": inputs
                    .iter()
                    .map(|t| json!({"model": format!("models/{model}"), "content": {"parts": [{"text": t}]}}))
                    .collect::<Vec<_>>(),
            }),
        )
    }

    fn embeddings(&self, reply: &Value) -> Vec<Value> {
        reply["embeddings"]
            .as_array()
            .map(|e| e.iter().map(|x| x["values"].clone()).collect())
            .unwrap_or_default()
    }
}

/// The `text` of the parts whose `type` is `kind`.
fn texts_of_type<'v>(parts: impl Iterator<Item = &'v Value>, kind: &str) -> Vec<&'v str> {
    parts
        .filter(|p| p["type"] == kind)
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// OpenAI's `[{token, logprob, top_logprobs: [{token, logprob}]}]`.
fn openai_logprobs(items: &Value) -> Vec<TokenLogprobs> {
    items
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    let top = alternatives(&t["top_logprobs"], "logprob");
                    (t["token"].as_str().unwrap_or("").to_owned(), top)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A list of `{token, <key>: log probability}` alternatives, those readable.
fn alternatives(list: &Value, key: &str) -> Vec<(String, f64)> {
    list.as_array()
        .map(|alts| {
            alts.iter()
                .filter_map(|x| Some((x["token"].as_str()?.to_owned(), x[key].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}
