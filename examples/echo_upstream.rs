//! A stand-in for a provider, for trying guardwire without an account or a network: an
//! OpenAI-compatible `POST /v1/chat/completions` that answers "You said: <the last user
//! message>", streamed a word per chunk (`"stream": true`, with a usage chunk when
//! `stream_options.include_usage` asks) or whole. Every other path answers 404 in OpenAI's
//! error shape. The README's tryout runs it with `examples/tryout.yaml`:
//!
//! ```sh
//! cargo run --example echo_upstream              # listens on 127.0.0.1:8081
//! cargo run --example echo_upstream -- 127.0.0.1:9999
//! ```

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    let listener = TcpListener::bind(&addr).await?;
    println!("echo upstream on http://{}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        tokio::spawn(async move {
            let served = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service_fn(answer))
                .await;
            if let Err(e) = served {
                eprintln!("connection ended: {e}");
            }
        });
    }
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    if req.method() != http::Method::POST || req.uri().path() != "/v1/chat/completions" {
        let error = json!({"error": {
            "message": format!("the echo upstream serves only POST /v1/chat/completions, not {} {}", req.method(), req.uri().path()),
            "type": "invalid_request_error",
            "code": "not_found",
        }});
        return Ok(reply(
            StatusCode::NOT_FOUND,
            "application/json",
            error.to_string(),
        ));
    }
    let body = req.into_body().collect().await?.to_bytes();
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        let error =
            json!({"error": {"message": "the body is not JSON", "type": "invalid_request_error"}});
        return Ok(reply(
            StatusCode::BAD_REQUEST,
            "application/json",
            error.to_string(),
        ));
    };
    let model = request["model"].as_str().unwrap_or("echo").to_owned();
    let text = format!("You said: {}", last_user_text(&request));
    let words = text.split_inclusive(' ').collect::<Vec<_>>();
    let (prompt_tokens, completion_tokens) = (8, words.len());
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    });
    if request["stream"] != json!(true) {
        let whole = json!({
            "id": "chatcmpl-echo", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        });
        return Ok(reply(StatusCode::OK, "application/json", whole.to_string()));
    }
    let chunk = |delta: Value, finish: Value| {
        let frame = json!({
            "id": "chatcmpl-echo", "object": "chat.completion.chunk", "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {frame}\n\n")
    };
    let mut sse = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    for word in words {
        sse.push_str(&chunk(json!({"content": word}), Value::Null));
    }
    sse.push_str(&chunk(json!({}), json!("stop")));
    if request["stream_options"]["include_usage"] == json!(true) {
        let frame = json!({
            "id": "chatcmpl-echo", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [], "usage": usage,
        });
        sse.push_str(&format!("data: {frame}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    Ok(reply(StatusCode::OK, "text/event-stream", sse))
}

/// The text of the last user message: a string, or its text parts joined.
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
