//! Each protocol's wire format, enough to script an upstream and read guardwire's answers:
//! request bodies, stream frames (text, tool arguments, reasoning), whole answers and the
//! error shapes guardwire answers in. Shared by the protocol tests and the real-server interop
//! tests.

use super::mock_upstream::{MockUpstream, Reply};
use super::proxy::{block_frame, send, Answer};
use serde_json::json;
use std::time::Duration;

/// One protocol's wire format, enough to script an upstream and read guardwire's answers.
pub struct Proto {
    pub name: &'static str,
    pub stream_path: &'static str,
    pub plain_path: &'static str,
    pub stream_body: fn(&str) -> String,
    pub plain_body: fn(&str) -> String,
    /// A streamed request whose turn called `lookup` and got back this result (a JSON object).
    pub history_body: fn(&serde_json::Value) -> String,
    /// Stream frames carrying these text deltas, and the index of the first delta's frame.
    pub text_frames: fn(&[&str]) -> (Vec<String>, usize),
    /// Stream frames of one tool call whose arguments arrive in these pieces.
    pub tool_frames: fn(&[&str]) -> (Vec<String>, usize),
    /// Frames of reasoning deltas (one frame each, with the protocol's opaque signature or
    /// encrypted copy where it has one) followed by answer text, and the index of the first
    /// reasoning frame.
    pub thinking_frames: fn(&[&str], &str) -> (Vec<String>, usize),
    /// A whole (non-streamed) response with this answer text.
    pub whole: fn(&str) -> String,
    /// A whole response with this reasoning (and its opaque signature) and this answer text.
    pub thinking_whole: fn(&str, &str) -> String,
    /// The in-band error frame guardwire sends for a block with this message.
    pub block_frame: fn(&str) -> String,
    /// Reads the message of a 400 error body.
    pub error_message: fn(&serde_json::Value) -> String,
    /// A frame of an event type this protocol does not know.
    pub unknown_frame: &'static str,
}

pub fn sse(data: &serde_json::Value) -> String {
    format!("data: {data}\n\n")
}

pub fn ev(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

pub fn chat() -> Proto {
    Proto {
        name: "openai_chat",
        stream_path: "/v1/chat/completions",
        plain_path: "/v1/chat/completions",
        stream_body: |t| {
            json!({"model":"m","stream":true,"messages":[{"role":"user","content":t}]}).to_string()
        },
        plain_body: |t| json!({"model":"m","messages":[{"role":"user","content":t}]}).to_string(),
        history_body: |r| {
            json!({"model":"m","stream":true,"messages":[
            {"role":"user","content":"q"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":r.to_string()}]}).to_string()
        },
        text_frames: |texts| {
            let mut f = vec![sse(
                &json!({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}),
            )];
            f.extend(
                texts
                    .iter()
                    .map(|t| sse(&json!({"choices":[{"index":0,"delta":{"content":t}}]}))),
            );
            f.push(sse(
                &json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
            ));
            f.push("data: [DONE]\n\n".into());
            (f, 1)
        },
        tool_frames: |args| {
            let mut f = vec![sse(
                &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}}]}),
            )];
            f.extend(args.iter().map(|a| sse(&json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":a}}]}}]}))));
            f.push("data: [DONE]\n\n".into());
            (f, 1)
        },
        thinking_frames: |think, text| {
            let mut f: Vec<String> = think
                .iter()
                .map(|t| sse(&json!({"choices":[{"index":0,"delta":{"reasoning_content":t}}]})))
                .collect();
            f.push(sse(
                &json!({"choices":[{"index":0,"delta":{"content":text}}]}),
            ));
            f.push("data: [DONE]\n\n".into());
            (f, 0)
        },
        whole: |t| {
            json!({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":t},"finish_reason":"stop"}]}).to_string()
        },
        thinking_whole: |think, t| {
            json!({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":think,"content":t},"finish_reason":"stop"}]}).to_string()
        },
        block_frame: |m| block_frame(m),
        error_message: |v| v["error"]["message"].as_str().unwrap().to_owned(),
        unknown_frame: "data: {\"choices\":[],\"future_field\":{\"x\":1}}\n\n",
    }
}

pub fn responses() -> Proto {
    Proto {
        name: "openai_responses",
        stream_path: "/v1/responses",
        plain_path: "/v1/responses",
        stream_body: |t| json!({"model":"m","stream":true,"input":t}).to_string(),
        plain_body: |t| json!({"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":t}]}]}).to_string(),
        history_body: |r| json!({"model":"m","stream":true,"input":[
            {"role":"user","content":"q"},
            {"type":"function_call","call_id":"c1","name":"lookup","arguments":"{}"},
            {"type":"function_call_output","call_id":"c1","output":r.to_string()}]}).to_string(),
        text_frames: |texts| {
            let mut f = vec![
                ev("response.created", json!({"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}})),
                ev("response.output_item.added", json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"m","role":"assistant","content":[]}})),
            ];
            f.extend(texts.iter().enumerate().map(|(i, t)| ev("response.output_text.delta", json!({"type":"response.output_text.delta","sequence_number":2 + i,"item_id":"m","output_index":0,"content_index":0,"delta":t}))));
            f.push(ev("response.output_text.done", json!({"type":"response.output_text.done","sequence_number":90,"item_id":"m","output_index":0,"content_index":0,"text":texts.concat()})));
            f.push(ev("response.completed", json!({"type":"response.completed","sequence_number":91,"response":{"id":"r","status":"completed","output":[]}})));
            (f, 2)
        },
        tool_frames: |args| {
            let mut f = vec![ev("response.output_item.added", json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc","call_id":"c1","name":"f","arguments":""}}))];
            f.extend(args.iter().enumerate().map(|(i, a)| ev("response.function_call_arguments.delta", json!({"type":"response.function_call_arguments.delta","sequence_number":2 + i,"item_id":"fc","output_index":0,"delta":a}))));
            f.push(ev("response.completed", json!({"type":"response.completed","sequence_number":50,"response":{"id":"r","status":"completed","output":[]}})));
            (f, 1)
        },
        thinking_frames: |think, text| {
            let mut f = vec![
                ev("response.output_item.added", json!({"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"type":"reasoning","id":"rs","summary":[]}})),
                ev("response.reasoning_summary_part.added", json!({"type":"response.reasoning_summary_part.added","sequence_number":1,"item_id":"rs","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}})),
            ];
            f.extend(think.iter().enumerate().map(|(i, t)| ev("response.reasoning_summary_text.delta", json!({"type":"response.reasoning_summary_text.delta","sequence_number":2 + i,"item_id":"rs","output_index":0,"summary_index":0,"delta":t}))));
            f.push(ev("response.reasoning_summary_text.done", json!({"type":"response.reasoning_summary_text.done","sequence_number":40,"item_id":"rs","output_index":0,"summary_index":0,"text":think.concat()})));
            f.push(ev("response.reasoning_summary_part.done", json!({"type":"response.reasoning_summary_part.done","sequence_number":41,"item_id":"rs","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":think.concat()}})));
            f.push(ev("response.output_item.done", json!({"type":"response.output_item.done","sequence_number":42,"output_index":0,"item":{"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":think.concat()}],"encrypted_content":"gAAAAABopaque=="}})));
            f.push(ev("response.output_text.delta", json!({"type":"response.output_text.delta","sequence_number":43,"item_id":"m","output_index":1,"content_index":0,"delta":text})));
            f.push(ev("response.completed", json!({"type":"response.completed","sequence_number":44,"response":{"id":"r","status":"completed","output":[]}})));
            (f, 2)
        },
        whole: |t| json!({"id":"r","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":t,"annotations":[]}]}]}).to_string(),
        thinking_whole: |think, t| json!({"id":"r","object":"response","status":"completed","output":[
            {"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":think}],"encrypted_content":"gAAAAABopaque=="},
            {"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":t,"annotations":[]}]}]}).to_string(),
        block_frame: |m| format!("event: error\ndata: {}\n\n", json!({"type":"error","code":"content_blocked","message":m,"param":null,"sequence_number":0,"error":{"type":"guardrail_violation","code":"content_blocked","message":m,"param":null}})),
        error_message: |v| v["error"]["message"].as_str().unwrap().to_owned(),
        unknown_frame: "event: response.future_thing\ndata: {\"type\":\"response.future_thing\",\"sequence_number\":99}\n\n",
    }
}

pub fn anthropic() -> Proto {
    Proto {
        name: "anthropic_messages",
        stream_path: "/v1/messages",
        plain_path: "/v1/messages",
        stream_body: |t| {
            json!({"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":t}]}).to_string()
        },
        plain_body: |t| {
            json!({"model":"c","max_tokens":100,"system":"be kind","messages":[{"role":"user","content":[{"type":"text","text":t}]}]}).to_string()
        },
        // Anthropic flags failed tool results with `is_error`.
        history_body: |r| {
            json!({"model":"c","max_tokens":100,"stream":true,"messages":[
            {"role":"user","content":"q"},
            {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"lookup","input":{}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","is_error":r.get("error").is_some(),"content":r.to_string()}]}]}).to_string()
        },
        text_frames: |texts| {
            let mut f = vec![
                ev(
                    "message_start",
                    json!({"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":3,"output_tokens":1}}}),
                ),
                ev(
                    "content_block_start",
                    json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
                ),
                ev("ping", json!({"type":"ping"})),
            ];
            f.extend(texts.iter().map(|t| ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":t}}))));
            f.push(ev(
                "content_block_stop",
                json!({"type":"content_block_stop","index":0}),
            ));
            f.push(ev("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}})));
            f.push(ev("message_stop", json!({"type":"message_stop"})));
            (f, 3)
        },
        tool_frames: |args| {
            let mut f = vec![ev(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}),
            )];
            f.extend(args.iter().map(|a| ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":a}}))));
            f.push(ev("message_stop", json!({"type":"message_stop"})));
            (f, 1)
        },
        thinking_frames: |think, text| {
            let mut f = vec![ev(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            )];
            f.extend(think.iter().map(|t| ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":t}}))));
            f.extend([
                ev(
                    "content_block_delta",
                    json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIMopaque"}}),
                ),
                ev(
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":0}),
                ),
                ev(
                    "content_block_start",
                    json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
                ),
                ev(
                    "content_block_delta",
                    json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":text}}),
                ),
                ev("message_stop", json!({"type":"message_stop"})),
            ]);
            (f, 1)
        },
        whole: |t| {
            json!({"id":"msg","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":t}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}).to_string()
        },
        thinking_whole: |think, t| {
            json!({"id":"msg","type":"message","role":"assistant","model":"c","content":[
                {"type":"thinking","thinking":think,"signature":"EqQBCgIYAhIMopaque"},
                {"type":"text","text":t}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}).to_string()
        },
        block_frame: |m| {
            format!(
                "event: error\ndata: {}\n\n",
                json!({"type":"error","error":{"type":"invalid_request_error","message":m}})
            )
        },
        error_message: |v| {
            assert_eq!(v["type"], "error");
            v["error"]["message"].as_str().unwrap().to_owned()
        },
        unknown_frame:
            "event: content_block_future\ndata: {\"type\":\"content_block_future\",\"index\":0}\n\n",
    }
}

pub fn gemini() -> Proto {
    Proto {
        name: "gemini",
        stream_path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        plain_path: "/v1beta/models/gemini-2.5-flash:generateContent",
        stream_body: |t| json!({"contents":[{"role":"user","parts":[{"text":t}]}]}).to_string(),
        plain_body: |t| {
            json!({"contents":[{"role":"user","parts":[{"text":t}]}],"systemInstruction":{"parts":[{"text":"s"}]}}).to_string()
        },
        history_body: |r| {
            json!({"contents":[
            {"role":"user","parts":[{"text":"q"}]},
            {"role":"model","parts":[{"functionCall":{"name":"lookup","args":{}}}]},
            {"role":"user","parts":[{"functionResponse":{"name":"lookup","response":r}}]}]})
            .to_string()
        },
        text_frames: |texts| {
            let mut f: Vec<String> = texts.iter().map(|t| sse(&json!({"candidates":[{"content":{"role":"model","parts":[{"text":t}]},"index":0}],"modelVersion":"g"}))).collect();
            f.push(sse(&json!({"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":5}})));
            (f, 0)
        },
        tool_frames: |args| {
            // Gemini sends function calls whole: the pieces become one args object. Its
            // streams have no terminal event; the last chunk carries the finishReason.
            let args: serde_json::Value = serde_json::from_str(&args.concat()).unwrap();
            (
                vec![sse(
                    &json!({"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":args}}]},"finishReason":"STOP","index":0}]}),
                )],
                0,
            )
        },
        thinking_frames: |think, text| {
            let mut f: Vec<String> = think
                .iter()
                .map(|t| sse(&json!({"candidates":[{"content":{"role":"model","parts":[{"text":t,"thought":true}]},"index":0}]})))
                .collect();
            f.push(sse(
                &json!({"candidates":[{"content":{"role":"model","parts":[{"text":text,"thoughtSignature":"CiQBopaque"}]},"finishReason":"STOP","index":0}]}),
            ));
            (f, 0)
        },
        whole: |t| {
            json!({"candidates":[{"content":{"role":"model","parts":[{"text":t}]},"finishReason":"STOP","index":0}]}).to_string()
        },
        thinking_whole: |think, t| {
            json!({"candidates":[{"content":{"role":"model","parts":[
                {"text":think,"thought":true},
                {"text":t,"thoughtSignature":"CiQBopaque"}]},"finishReason":"STOP","index":0}]})
            .to_string()
        },
        block_frame: |m| {
            format!(
                "data: {}\n\n",
                json!({"error":{"code":400,"message":m,"status":"INVALID_ARGUMENT"}})
            )
        },
        error_message: |v| {
            assert!(v["error"]["code"].is_u64(), "{v}");
            v["error"]["message"].as_str().unwrap().to_owned()
        },
        unknown_frame: "data: {\"candidates\":[],\"futureField\":true}\n\n",
    }
}

pub fn all() -> Vec<Proto> {
    vec![chat(), responses(), anthropic(), gemini()]
}

/// A mock serving `body` split at the offsets in the `x-split` header (as a whole JSON answer
/// when the request says `"whole"`).
pub async fn split_mock(body: String) -> MockUpstream {
    MockUpstream::start(move |req| {
        if req.body_str().contains("\"whole\"") {
            return Reply::json(200, &body);
        }
        let splits: Vec<usize> = req
            .header("x-split")
            .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default();
        Reply::sse_split(body.as_bytes(), &splits, Duration::ZERO)
    })
    .await
}

/// A streamed request of `p` with this prompt, asking a [`split_mock`] for these splits.
pub async fn stream(p: &Proto, addr: std::net::SocketAddr, prompt: &str, splits: &str) -> Answer {
    send(
        addr,
        "POST",
        p.stream_path,
        (p.stream_body)(prompt),
        &[("content-type", "application/json"), ("x-split", splits)],
    )
    .await
}

/// An MCP server's SSE body: each JSON-RPC message one `message` event with an id.
pub fn mcp_sse<T: std::fmt::Display>(events: &[T]) -> Vec<u8> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| format!("event: message\nid: ev-{i}\ndata: {e}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// The JSON-RPC messages of an SSE body.
pub fn sse_messages(body: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(body)
        .split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            (!data.is_empty() && !data.concat().trim().is_empty())
                .then(|| serde_json::from_str(&data.join("\n")).unwrap())
        })
        .collect()
}

/// A pack of MCP session tool checks (tests/mcp/session.rs, tests/fleet.rs): a count over the
/// session, an anti-pattern across calls, and the injection phrase that removes a tool from a
/// `tools/list`.
pub const MCP_SESSION_PACK: &str = r#"
validators:
  - { id: call-count, type: tool_call_count, params: { max: 3 } }
  - id: anti-patterns
    type: tool_anti_pattern
    params:
      patterns:
        - { sequence: [read_secret, send_email], message: "No mail after reading a secret." }
  - id: no-injection
    type: regex
    params: { pattern: "(?i)ignore previous instructions", expect_match: false, direction: input }
"#;
