//! Realistic OpenAI Responses API bodies for mock upstreams: event streams as the API sends them
//! (`event: <type>` + data with the same `type` and a running `sequence_number`, every
//! lifecycle event the SDKs' stream helpers need) and whole response objects.

use serde_json::{json, Value};

/// A Responses event stream: `event: <type>` + data carrying the same `type` and a running
/// `sequence_number`, as the API sends them.
#[derive(Default)]
struct Events {
    seq: u64,
    body: Vec<u8>,
}

impl Events {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.body
            .extend_from_slice(format!("event: {kind}\ndata: {data}\n\n").as_bytes());
    }
}

fn response(status: &str, output: Value) -> Value {
    let usage = if status == "completed" {
        json!({
            "input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 14
        })
    } else {
        Value::Null
    };
    json!({
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-4o",
        "output": output,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "temperature": 1.0,
        "top_p": 1.0,
        "metadata": {},
        "usage": usage
    })
}

fn message_item(status: &str, text: Option<&str>) -> Value {
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t, "annotations": [], "logprobs": []}]),
        None => json!([]),
    };
    json!({"id": "msg_1", "type": "message", "status": status, "role": "assistant", "content": content})
}

fn function_call_item(name: &str, status: &str, arguments: &str) -> Value {
    json!({
        "id": "fc_1", "type": "function_call", "status": status, "call_id": "call_1",
        "name": name, "arguments": arguments
    })
}

/// A complete text answer streamed as one output_text delta per piece.
pub fn text_stream(texts: &[&str]) -> Vec<u8> {
    let full = texts.concat();
    let mut e = Events::default();
    e.push(
        "response.created",
        json!({"response": response("in_progress", json!([]))}),
    );
    e.push(
        "response.in_progress",
        json!({"response": response("in_progress", json!([]))}),
    );
    e.push(
        "response.output_item.added",
        json!({"output_index": 0, "item": message_item("in_progress", None)}),
    );
    e.push(
        "response.content_part.added",
        json!({"item_id": "msg_1", "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
    );
    for t in texts {
        e.push(
            "response.output_text.delta",
            json!({"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": t,
                   "logprobs": []}),
        );
    }
    e.push(
        "response.output_text.done",
        json!({"item_id": "msg_1", "output_index": 0, "content_index": 0, "text": full,
               "logprobs": []}),
    );
    e.push(
        "response.content_part.done",
        json!({"item_id": "msg_1", "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": full, "annotations": []}}),
    );
    let done = message_item("completed", Some(&full));
    e.push(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
    );
    e.push(
        "response.completed",
        json!({"response": response("completed", json!([done]))}),
    );
    e.body
}

/// One call of function `name` whose arguments arrive in these pieces.
pub fn tool_call_stream(name: &str, argument_pieces: &[&str]) -> Vec<u8> {
    let full = argument_pieces.concat();
    let mut e = Events::default();
    e.push(
        "response.created",
        json!({"response": response("in_progress", json!([]))}),
    );
    e.push(
        "response.output_item.added",
        json!({"output_index": 0, "item": function_call_item(name, "in_progress", "")}),
    );
    for piece in argument_pieces {
        e.push(
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_1", "output_index": 0, "delta": piece}),
        );
    }
    e.push(
        "response.function_call_arguments.done",
        json!({"item_id": "fc_1", "output_index": 0, "arguments": full}),
    );
    let done = function_call_item(name, "completed", &full);
    e.push(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
    );
    e.push(
        "response.completed",
        json!({"response": response("completed", json!([done]))}),
    );
    e.body
}

pub fn whole_response(text: &str) -> String {
    response("completed", json!([message_item("completed", Some(text))])).to_string()
}
