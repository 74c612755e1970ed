//! Answers whose parts a hostile upstream numbers against the reader: the official SDKs build
//! each part of an answer (a choice, a candidate, a content block, an output item's part) from
//! its own deltas, or take `choices[0]` of each chunk by position, while guardwire reads each
//! channel in arrival order. A banned word split across two parts that the reader joins — a
//! choice index past the request's `n`, a Gemini candidate past `candidateCount`, Anthropic
//! blocks or Responses parts whose deltas interleave or that start out of place — must not
//! reach the reader: the stream ends with the protocol's error (docs/protocols.md, "Parts of
//! an answer").
//!
//! `#[ignore]`d like every SDK test: `tests/run` runs them with the SDK venv.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{sse_data_frames, Reply};
use common::sdk::{sse_events, Harness, Sdk, BANNED};
use serde_json::{json, Value};
use std::time::Duration;

/// The halves of [`BANNED`] a hostile upstream puts in two parts.
const HEAD: &str = "forbid";
const TAIL: &str = "den";

/// Every split of the body into pieces of `every` bytes: the decision cannot depend on where
/// the upstream's writes fall.
const SPLITS: [usize; 3] = [1, 7, 4096];

/// The reader got an SDK error, and none of what it built holds the banned word.
fn assert_stopped_without_leak(report: &Value, built: &[&str]) {
    assert!(
        report["exception"].is_string() && !report["exception"].is_null(),
        "the stream was not ended with an error: {report:#}"
    );
    for text in built {
        assert!(
            !text.contains(BANNED),
            "the reader built {text:?}: {report:#}"
        );
    }
}

async fn run(body: &[u8], sdk: &Sdk, scenario: &str) -> Vec<Value> {
    run_with(body, sdk, scenario, common::sdk::PACK).await
}

/// [`run`] with guardwire enforcing `pack`.
async fn run_with(body: &[u8], sdk: &Sdk, scenario: &str, pack: &str) -> Vec<Value> {
    let mut reports = Vec::new();
    for every in SPLITS {
        let h = Harness::start_with(Reply::sse_every(body, every, Duration::ZERO), pack).await;
        reports.push(h.run(sdk, scenario).await);
        h.stop().await;
    }
    reports
}

fn chat_chunk(index: u32, content: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
           "choices": [{"index": index, "delta": {"content": content}, "finish_reason": null}]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn a_chat_choice_past_n_is_refused_for_a_reader_by_position() {
    let frames = [
        chat_chunk(0, "Here is a "),
        chat_chunk(0, HEAD),
        chat_chunk(1, TAIL),
        chat_chunk(0, " door."),
    ];
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut body = sse_data_frames(&refs);
    body.extend_from_slice(b"data: [DONE]\n\n");
    for report in run(&body, &Sdk::openai_chat(), "chat_by_position").await {
        assert_stopped_without_leak(&report, &[report["text"].as_str().unwrap()]);
    }
}

/// Secret and PII patterns over answers, for identifiers the stream helper joins.
const IDENTIFIER_PACK: &str = r#"
validators:
  - id: no-keys
    type: regex
    params: { pattern: "sk-[A-Za-z0-9]{32,}", expect_match: false }
  - id: no-emails
    type: pii
    params: { types: [email] }
"#;

/// openai-python's stream helper joins each string of a tool call's deltas: an id or a name
/// in pieces is a key or an address to the app though no piece is one. A joined id is checked
/// as the helper joins it; a name in pieces ends the stream (openai-node keeps the last piece:
/// the readers would call different tools).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn a_tool_call_id_or_name_in_pieces_is_read_as_the_stream_helper_joins_it() {
    let key_tail = "A".repeat(40);
    let call = |id: Option<&str>, name: Option<&str>, args: &str| {
        let mut c = json!({"index": 0, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-4o",
               "choices": [{"index": 0, "delta": {"tool_calls": [c]}, "finish_reason": null}]})
        .to_string()
    };
    let end = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                     "model": "gpt-4o",
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    .to_string();
    let shapes = [
        // The id in two pieces (the second without a name: the fallback's way).
        [
            call(Some("sk-"), Some("search_archive"), ""),
            call(Some(&key_tail), None, "{}"),
        ],
        // The name in two pieces.
        [
            call(Some("call_1"), Some("bob@exa"), ""),
            call(None, Some("mple.com"), "{}"),
        ],
    ];
    for frames in shapes {
        let mut refs: Vec<&str> = frames.iter().map(String::as_str).collect();
        refs.push(&end);
        let mut body = sse_data_frames(&refs);
        body.extend_from_slice(b"data: [DONE]\n\n");
        let sdk = Sdk::openai_chat();
        for report in run_with(&body, &sdk, "final_tool_calls", IDENTIFIER_PACK).await {
            assert!(
                report["exception"].is_string(),
                "the stream was not ended with an error: {report:#}"
            );
            for call in report["calls"].as_array().unwrap() {
                let (id, name) = (
                    call["id"].as_str().unwrap_or(""),
                    call["name"].as_str().unwrap_or(""),
                );
                assert!(
                    !id.contains(&key_tail) && !name.contains("bob@example.com"),
                    "{report:#}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn a_completions_choice_past_n_is_refused_for_a_reader_by_position() {
    let chunk = |index: u32, text: &str| {
        json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-4o",
               "choices": [{"index": index, "text": text, "logprobs": null, "finish_reason": null}]})
        .to_string()
    };
    let frames = [chunk(0, HEAD), chunk(1, TAIL)];
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut body = sse_data_frames(&refs);
    body.extend_from_slice(b"data: [DONE]\n\n");
    for report in run(&body, &Sdk::openai_chat(), "completion_by_position").await {
        assert_stopped_without_leak(&report, &[report["text"].as_str().unwrap()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn a_gemini_candidate_past_candidate_count_is_refused_for_chunk_text() {
    let chunk = |index: Option<u32>, text: &str| {
        let mut c = json!({"content": {"role": "model", "parts": [{"text": text}]}});
        if let Some(i) = index {
            c["index"] = json!(i);
        }
        json!({"candidates": [c], "modelVersion": "gemini-2.5-flash"}).to_string()
    };
    // By index, and by position (a second candidate without one is candidate 1).
    let last =
        json!({"candidates": [{"index": 0, "content": {"role": "model", "parts": [{"text": ""}]},
                                      "finishReason": "STOP"}]})
        .to_string();
    let by_position = json!({"candidates": [
        {"content": {"role": "model", "parts": [{"text": "x"}]}},
        {"content": {"role": "model", "parts": [{"text": TAIL}]}}
    ]})
    .to_string();
    for frames in [
        vec![chunk(Some(0), HEAD), chunk(Some(1), TAIL), last.clone()],
        vec![chunk(None, HEAD), by_position, last.clone()],
    ] {
        let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
        let body = sse_data_frames(&refs);
        for report in run(&body, &Sdk::gemini(), "text_by_position").await {
            assert_stopped_without_leak(&report, &[report["text"].as_str().unwrap()]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn anthropic_blocks_whose_deltas_interleave_are_refused() {
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4",
                         "content": [], "stop_reason": null, "stop_sequence": null,
                         "usage": {"input_tokens": 1, "output_tokens": 1}});
    let start = |i: u32| json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}});
    let delta = |i: u32, t: &str| json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}});
    let body = sse_events(&[
        (
            "message_start",
            json!({"type": "message_start", "message": message}),
        ),
        ("content_block_start", start(0)),
        ("content_block_start", start(1)),
        ("content_block_delta", delta(0, HEAD)),
        ("content_block_delta", delta(1, " ")),
        ("content_block_delta", delta(0, TAIL)),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                   "usage": {"output_tokens": 3}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    // The SDK appends a started block to its list whatever its `index`, and applies a delta
    // to the block at that position: blocks started out of place (index 1 first) would be
    // other blocks to it than to the checks.
    let out_of_place = sse_events(&[
        (
            "message_start",
            json!({"type": "message_start", "message": message}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": HEAD}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "x "}}),
        ),
        ("content_block_delta", delta(0, TAIL)),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    // Both in place, block 1's delta before block 0's: `get_final_text()` joins the blocks in
    // their order, guardwire's channel in arrival order; a delta is for the block started last.
    let swapped = sse_events(&[
        (
            "message_start",
            json!({"type": "message_start", "message": message}),
        ),
        ("content_block_start", start(0)),
        ("content_block_start", start(1)),
        ("content_block_delta", delta(1, TAIL)),
        ("content_block_delta", delta(0, HEAD)),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let mut reports = run(&body, &Sdk::anthropic(), "blocks_as_built").await;
    reports.extend(run(&out_of_place, &Sdk::anthropic(), "blocks_as_built").await);
    reports.extend(run(&swapped, &Sdk::anthropic(), "blocks_as_built").await);
    for report in reports {
        let blocks: Vec<&str> = report["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap())
            .collect();
        let joined = blocks.concat();
        assert_stopped_without_leak(&report, &[&blocks[..], &[joined.as_str()]].concat());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the SDK venv: run tests/run"]
async fn responses_parts_whose_deltas_interleave_are_refused() {
    let response = json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
                          "model": "gpt-4o", "output": [], "parallel_tool_calls": true,
                          "tool_choice": "auto", "tools": []});
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": response}),
    )];
    for i in 0..2 {
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": i,
                   "item": {"type": "message", "id": format!("msg_{i}"), "status": "in_progress",
                            "role": "assistant", "content": []}}),
        ));
        events.push((
            "response.content_part.added",
            json!({"type": "response.content_part.added", "item_id": format!("msg_{i}"),
                   "output_index": i, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
        ));
    }
    for (i, t) in [(0, HEAD), (1, "x"), (0, TAIL)] {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": format!("msg_{i}"),
                   "output_index": i, "content_index": 0, "delta": t, "logprobs": []}),
        ));
    }
    let body = sse_events(&events);
    // The SDK appends an added part to its item's list whatever its `content_index`, and
    // applies a delta to the part at that position: a part added out of place is refused.
    let mut out_of_place = events[..2].to_vec();
    for (ci, text) in [(1, HEAD), (0, "x ")] {
        out_of_place.push((
            "response.content_part.added",
            json!({"type": "response.content_part.added", "item_id": "msg_0", "output_index": 0,
                   "content_index": ci, "part": {"type": "output_text", "text": text, "annotations": []}}),
        ));
    }
    out_of_place.push((
        "response.output_text.delta",
        json!({"type": "response.output_text.delta", "item_id": "msg_0", "output_index": 0,
               "content_index": 0, "delta": TAIL, "logprobs": []}),
    ));
    let mut reports = run(&body, &Sdk::openai_responses(), "snapshots").await;
    reports.extend(
        run(
            &sse_events(&out_of_place),
            &Sdk::openai_responses(),
            "snapshots",
        )
        .await,
    );
    for report in reports {
        let snapshots: Vec<&str> = report["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap())
            .collect();
        assert_stopped_without_leak(&report, &snapshots);
    }
}
