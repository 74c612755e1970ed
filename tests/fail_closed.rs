//! Fail closed at the framing level: nothing reaches the client looking complete, or unchecked,
//! when the upstream's stream is cut or carries bytes outside the protocol's frames.
//! - a stream that ends without its protocol's terminal event (`[DONE]`, `response.completed`,
//!   `message_stop`; for Gemini, which has none, a last chunk with `finishReason`) ends with the
//!   protocol's `upstream_incomplete` error frame, at every split;
//! - a frame with no data that carries anything but comments, and bytes of an unfinished frame
//!   at the end of the body, end the stream with the error frame;
//! - every `Content-Encoding` value is checked, not only the first.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::protocols::{all, Proto};
use common::proxy::{metrics, send, start_proxy_all, Answer};
use guardwire::error::GatewayError;
use http::StatusCode;
use std::time::Duration;

const PACK: &str =
    "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"] }\n";

/// A POST of the JSON `body` to `path`.
async fn post_json(addr: std::net::SocketAddr, path: &str, body: String) -> Answer {
    send(
        addr,
        "POST",
        path,
        body,
        &[("content-type", "application/json")],
    )
    .await
}

/// The protocol's own error frame for `err`, as guardwire renders it.
fn error_frame(p: &Proto, err: &GatewayError) -> String {
    let protocol = guardwire::protocol::by_name(p.name).unwrap();
    String::from_utf8(
        protocol
            .stream_error_frame(err, &Default::default())
            .to_vec(),
    )
    .unwrap()
}

/// guardwire (with `pack` and `extra` config) in front of a mock that answers every request
/// with `reply()`, and a streamed request of `p`: the answer, and the metrics after it.
async fn ask(
    p: &Proto,
    reply: impl Fn() -> Reply + Send + Sync + 'static,
    pack: &str,
    extra: &str,
) -> (Answer, String) {
    let mock = MockUpstream::start(move |_| reply()).await;
    let proxy = start_proxy_all(&mock.base_url(), pack, extra).await;
    let a = post_json(proxy.addr(), p.stream_path, (p.stream_body)("hi")).await;
    let m = metrics(proxy.addr()).await;
    (a, m)
}

/// The same with the file's pack.
async fn ask_through(
    p: &Proto,
    reply: impl Fn() -> Reply + Send + Sync + 'static,
) -> (Answer, String) {
    ask(p, reply, PACK, "").await
}

/// The answer to a streamed request of `p` when the upstream streams `body`, through guardwire
/// with `pack` and `extra` config.
async fn stream_with(p: &Proto, body: String, pack: &str, extra: &str) -> Answer {
    ask(p, move || Reply::sse(body.as_bytes()), pack, extra)
        .await
        .0
}

/// The same, for a stream of `body` split at `splits`.
async fn stream_through(p: &Proto, body: String, splits: Vec<usize>) -> (Answer, String) {
    ask_through(p, move || {
        Reply::sse_split(body.as_bytes(), &splits, Duration::ZERO)
    })
    .await
}

#[tokio::test]
async fn a_stream_cut_before_its_terminal_event_ends_with_the_incomplete_error_frame() {
    for p in all() {
        let (frames, _) = (p.text_frames)(&["Hello", ", wor", "ld"]);
        // Every frame but the last: the terminal event (Gemini: the finishReason chunk).
        let cut = frames[..frames.len() - 1].concat();
        let incomplete = error_frame(&p, &GatewayError::UpstreamIncomplete);
        for split in [vec![], vec![1], vec![cut.len() / 2], vec![cut.len() - 1]] {
            let (a, m) = stream_through(&p, cut.clone(), split.clone()).await;
            let text = a.text();
            assert_eq!(a.status, StatusCode::OK, "{}", p.name);
            assert!(
                text.ends_with(&incomplete),
                "{} split {split:?}: {text}",
                p.name
            );
            let released = &text[..text.len() - incomplete.len()];
            assert!(cut.starts_with(released), "{}: {text}", p.name);
            assert!(
                m.contains(&format!(
                    "guardwire_upstream_errors_total{{route=\"{}\",kind=\"incomplete\"}} 1",
                    p.name
                )),
                "{}: {m}",
                p.name
            );
        }
        // The whole stream, terminal event included, still passes byte for byte.
        let whole = frames.concat();
        let (a, _) = stream_through(&p, whole.clone(), vec![7]).await;
        assert_eq!(a.text(), whole, "{}", p.name);
    }
}

#[tokio::test]
async fn a_violation_completed_by_a_cut_stream_is_still_blocked() {
    for p in all() {
        let (frames, _) = (p.text_frames)(&["the forbidden ", "fruit"]);
        let cut = frames[..frames.len() - 1].concat();
        let (a, _) = stream_through(&p, cut, vec![]).await;
        let text = a.text();
        assert!(!text.contains("forbidden"), "{}: {text}", p.name);
        assert!(
            text.contains("guardrail") || text.contains("blocked"),
            "{}: {text}",
            p.name
        );
    }
}

#[tokio::test]
async fn frames_without_data_carrying_text_and_unfinished_frames_fail_closed() {
    let malformed = |p: &Proto| {
        error_frame(
            p,
            &GatewayError::Upstream("the upstream sent a frame without data".into()),
        )
    };
    for p in all() {
        let (frames, first) = (p.text_frames)(&["Hello", " world"]);
        // Comments and a numeric retry are keep-alives: they pass, a comment without its text
        // (google-genai puts a line that is not `data: …` in the exception it raises).
        let mut with_comments = frames.clone();
        with_comments.insert(first, ": forbidden fruit\n\nretry: 3000\n\n".into());
        let (a, _) = stream_through(&p, with_comments.concat(), vec![]).await;
        let mut relayed = frames.clone();
        relayed.insert(first, ":\n\nretry: 3000\n\n".into());
        assert_eq!(a.text(), relayed.concat(), "{}", p.name);
        // An unknown field or an event name alone carries bytes no check sees.
        for odd in [
            "secret: the forbidden fruit\n\n",
            "event: forbidden fruit\n\n",
        ] {
            let mut f = frames.clone();
            f.insert(first, odd.into());
            let (a, _) = stream_through(&p, f.concat(), vec![]).await;
            let text = a.text();
            assert!(text.ends_with(&malformed(&p)), "{} {odd:?}: {text}", p.name);
            assert!(!text.contains("forbidden"), "{}: {text}", p.name);
        }
        // A line of no SSE field beside data: ignored by the standard, read by a client that
        // hands lines that are not `data:` to its JSON reader (google-genai).
        let unknown = error_frame(
            &p,
            &GatewayError::Upstream(
                "the upstream sent a line that is no field of the SSE standard (some clients read it)"
                    .into(),
            ),
        );
        for line in [
            "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"the forbidden fruit\"}]}}]}",
            "\u{feff}data: the forbidden fruit",
        ] {
            let mut f = frames.clone();
            let frame = f[first].trim_end().to_owned();
            f[first] = format!("{frame}\n{line}\n\n");
            let (a, _) = stream_through(&p, f.concat(), vec![]).await;
            let text = a.text();
            assert!(text.ends_with(&unknown), "{} {line:?}: {text}", p.name);
            assert!(!text.contains("forbidden"), "{}: {text}", p.name);
        }
        // The `event`, `id` and `retry` values of a frame with data reach a client too (the
        // text of google-genai's exception): checked, an identifier by the secret patterns and
        // anything else as text. A blocked one ends the stream with the block.
        for line in [
            "event: the forbidden fruit",
            "id: the forbidden fruit",
            "retry: forbidden fruit",
        ] {
            let mut f = frames.clone();
            f[first] = format!("{line}\n{}", f[first]);
            let (a, _) = stream_through(&p, f.concat(), vec![]).await;
            let text = a.text();
            assert!(
                !text.contains("forbidden fruit"),
                "{} {line:?}: {text}",
                p.name
            );
            assert!(blocked(&text), "{} {line:?}: {text}", p.name);
        }
        // A character Python's line reader (httpx's `aiter_lines`, the a2a-sdk's) breaks lines
        // at, in any line of a frame: the rest is a line of its own to that reader (`data: …`).
        let breaks = error_frame(
            &p,
            &GatewayError::Upstream(
                "the upstream sent a line holding a line break some clients read (U+2028, NEL, VT, FF, …)"
                    .into(),
            ),
        );
        for (field, ch) in [
            ("event", '\u{2028}'),
            ("id", '\u{2029}'),
            ("data", '\u{85}'),
            ("event", '\u{b}'),
            (":", '\u{1e}'),
        ] {
            let mut f = frames.clone();
            f[first] = format!("{field}: x{ch}data: the forbidden fruit\n{}", f[first]);
            let (a, _) = stream_through(&p, f.concat(), vec![]).await;
            let text = a.text();
            assert!(text.ends_with(&breaks), "{} {field} {ch:?}: {text}", p.name);
            assert!(!text.contains("forbidden"), "{}: {text}", p.name);
        }
        // Bytes of a frame that never ends.
        let mut f = frames[..frames.len() - 1].to_vec();
        f.push(frames[frames.len() - 1].trim_end().to_owned());
        let (a, _) = stream_through(&p, f.concat(), vec![]).await;
        let text = a.text();
        let unfinished = error_frame(
            &p,
            &GatewayError::Upstream("the upstream stream ended inside a frame".into()),
        );
        assert!(text.ends_with(&unfinished), "{}: {text}", p.name);
    }
}

#[tokio::test]
async fn every_content_encoding_value_is_checked() {
    let p = &all()[0];
    let (frames, _) = (p.text_frames)(&["Hello"]);
    let body = frames.concat();
    for (first, second) in [
        ("identity", Some("gzip")),
        ("identity, br", None),
        ("gzip", None),
    ] {
        let body = body.clone();
        let (a, _) = ask_through(p, move || {
            let mut r = Reply::sse(body.as_bytes()).with_header("content-encoding", first);
            if let Some(s) = second {
                r = r.with_header("content-encoding", s);
            }
            r
        })
        .await;
        assert_eq!(
            a.status,
            StatusCode::BAD_GATEWAY,
            "{first} {second:?}: {}",
            a.text()
        );
    }
}

/// Text in the fields a protocol decodes is checked as a client's JSON parser reads it: a
/// banned phrase written with a `\u` escape is the banned phrase, on every protocol, at every
/// split inside the escape.
#[tokio::test]
async fn escaped_text_is_checked_as_the_client_decodes_it() {
    for p in all() {
        let (frames, _) = (p.text_frames)(&["the forbidden ", "fruit", " is sweet"]);
        let body = frames.concat().replace("fruit", "\\u0066ruit");
        assert!(body.contains("\\u0066ruit"), "{}", p.name);
        let at = body.find("\\u0066").unwrap();
        for split in [vec![], vec![at + 1], vec![at + 3], vec![at + 6]] {
            let (a, _) = stream_through(&p, body.clone(), split.clone()).await;
            let text = a.text();
            assert!(
                text.contains("guardrail") || text.contains("blocked"),
                "{} {split:?}: {text}",
                p.name
            );
            assert!(
                !text.contains("u0066ruit") && !text.contains("fruit"),
                "{} {split:?}: {text}",
                p.name
            );
        }
    }
}

/// Gemini answers read in snake_case too (Google's parser takes both): a function call given
/// as `function_call`, which passed unread before, has its arguments checked.
#[tokio::test]
async fn gemini_answers_in_snake_case_are_checked() {
    let p = all().into_iter().find(|p| p.name == "gemini").unwrap();
    let frame = serde_json::json!({"candidates":[{"content":{"role":"model","parts":[{"function_call":{"name":"f","args":{"q":"the forbidden fruit"}}}]},"finish_reason":"STOP","index":0}]});
    let (a, _) = stream_through(&p, format!("data: {frame}\n\n"), vec![]).await;
    let text = a.text();
    assert!(text.contains("INVALID_ARGUMENT"), "{text}");
    assert!(!text.contains("forbidden"), "{text}");
    // The same answer, clean, passes byte for byte (and counts as complete: finish_reason).
    let clean = frame.to_string().replace("the forbidden fruit", "an apple");
    let (a, _) = stream_through(&p, format!("data: {clean}\n\n"), vec![]).await;
    assert_eq!(a.text(), format!("data: {clean}\n\n"));
}

/// The frames of one tool call whose arguments (JSON text) arrive in `pieces`, on `p`. Gemini
/// sends arguments as a JSON object in the frame, so the escapes are written into it after.
fn tool_call_body(p: &Proto, pieces: &[&str]) -> String {
    if p.name != "gemini" {
        return (p.tool_frames)(pieces).0.concat();
    }
    let plain: String = pieces.concat();
    let decoded: serde_json::Value = serde_json::from_str(&plain).unwrap();
    let body = (p.tool_frames)(&[&decoded.to_string()]).0.concat();
    // Put the arguments back as written: the object is the only one with key "q".
    let at = body.find("{\"q\"").unwrap();
    let end = at + decoded.to_string().len();
    format!("{}{}{}", &body[..at], plain, &body[end..])
}

fn blocked(text: &str) -> bool {
    text.contains("guardrail") || text.contains("blocked") || text.contains("INVALID_ARGUMENT")
}

/// Tool-call arguments are scanned as the client's JSON parser reads them: a banned phrase
/// spelled with `\u` escapes is found, with the arguments split inside the escape, on every
/// protocol, and none of it reaches the client.
#[tokio::test]
async fn escaped_tool_arguments_are_checked_as_the_client_decodes_them() {
    for p in all() {
        for pieces in [
            vec![r#"{"q":"\u0066orbidden fruit"}"#],
            vec![r#"{"q":"\u00"#, r#"66orbidden fr"#, r#"uit"}"#],
            vec![
                r#"{"q":"the \ud83d"#,
                r#"\ude00 forbidden \u0066"#,
                r#"ruit"}"#,
            ],
            vec![r#"{"q":"forbidden\u0020fruit"}"#],
        ] {
            let body = tool_call_body(&p, &pieces);
            let escape = body.find("\\\\u").or_else(|| body.find("\\u")).unwrap();
            for split in [vec![], vec![escape + 1], vec![escape + 3, escape + 5]] {
                let (a, _) = stream_through(&p, body.clone(), split.clone()).await;
                let text = a.text();
                assert!(blocked(&text), "{} {pieces:?} {split:?}: {text}", p.name);
                assert!(
                    !text.contains("orbidden") && !text.contains("ruit"),
                    "{} {pieces:?} {split:?}: {text}",
                    p.name
                );
            }
        }
    }
}

/// Word boundaries are judged on the decoded text: a line break written `\n` before the phrase
/// is a boundary (blocked), and `\u00c4` after it is the letter Ä, no boundary (passes, byte
/// for byte).
#[tokio::test]
async fn word_boundaries_in_tool_arguments_are_judged_on_the_decoded_text() {
    for p in all() {
        let body = tool_call_body(&p, &[r#"{"q":"alpha\nforbidden fruit"}"#]);
        let (a, _) = stream_through(&p, body, vec![]).await;
        assert!(blocked(&a.text()), "{}: {}", p.name, a.text());
        let body = tool_call_body(&p, &[r#"{"q":"forbidden fruit\u00c4 and \t tabs"}"#]);
        let (a, _) = stream_through(&p, body.clone(), vec![]).await;
        assert_eq!(a.text(), body, "{}", p.name);
    }
}

/// BeforeCall reads the tool-call history's arguments decoded too.
#[tokio::test]
async fn escaped_arguments_in_the_request_history_are_checked() {
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let proxy = start_proxy_all(&mock.base_url(), both, "").await;
    let body = serde_json::json!({"model":"m","messages":[
        {"role":"user","content":"q"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"q\":\"\\u0066orbidden fruit\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"ok"}]})
    .to_string();
    assert!(body.contains(r#"\\u0066orbidden"#));
    let a = post_json(proxy.addr(), "/v1/chat/completions", body).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
    assert_eq!(mock.request_count(), 0);
}

/// A redaction in tool arguments that hold escapes masks the raw bytes of the match (its escape
/// included) and leaves every other escape as it was.
#[tokio::test]
async fn redactions_in_escaped_tool_arguments_mask_the_match() {
    let pack = "validators:\n  - type: content_excludes\n    mode: redact\n    mask: \"***\"\n    params: { patterns: [\"XK-99\"] }\n";
    for p in all() {
        let body = tool_call_body(&p, &[r#"{"q": "a\n\u0058K"#, r#"-99 now\t"}"#]);
        let want = tool_call_body(&p, &[r#"{"q": "a\n***"#, r#" now\t"}"#]);
        let a = stream_with(&p, body, pack, "").await;
        assert_eq!(a.text(), want, "{}", p.name);
    }
}

/// The Responses protocol, a stream of `pieces` as its events, the indexes of the four events
/// that repeat the text (`.done` events and `response.completed`), and the error frame that
/// ends a stream whose repeat is not what streamed.
fn responses_repeats(pieces: &[&str]) -> (Proto, Vec<String>, Vec<usize>, String) {
    let p = all()
        .into_iter()
        .find(|p| p.name == "openai_responses")
        .unwrap();
    let body = String::from_utf8(common::openai_responses::text_stream(pieces)).unwrap();
    let events: Vec<String> = body.split_inclusive("\n\n").map(str::to_owned).collect();
    let full = pieces.concat();
    let repeats: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].contains(&full))
        .collect();
    assert_eq!(repeats.len(), 4, "{body}");
    let unverified = error_frame(
        &p,
        &GatewayError::Upstream("the upstream repeated text that it had not streamed".into()),
    );
    (p, events, repeats, unverified)
}

/// Responses repeats its texts in `.done` events and `response.completed` (where the SDK's
/// `output_text` comes from). A repeat is released only when it is exactly what streamed (and
/// was checked) at that place: one carrying other text — banned or not — ends the stream with
/// the error frame, whichever aggregate event carries it.
#[tokio::test]
async fn responses_aggregates_that_did_not_stream_fail_closed() {
    let (p, events, aggregates, unverified) = responses_repeats(&["Hello", " world"]);
    let (a, _) = stream_through(&p, events.concat(), vec![]).await;
    assert_eq!(a.text(), events.concat());
    for i in aggregates {
        for other in ["the forbidden fruit", "Hello there"] {
            let mut changed = events.clone();
            changed[i] = changed[i].replace("Hello world", other);
            let (a, _) = stream_through(&p, changed.concat(), vec![]).await;
            let text = a.text();
            assert!(!text.contains(other), "event {i}: {text}");
            assert!(text.ends_with(&unverified), "event {i}: {text}");
        }
    }
}

/// The same at every split, for an answer longer than 128 bytes (what a reader recognising
/// repeats by their bytes would keep; see docs/load-bench.md): a closing event whose text
/// differs — the banned words in place of others of the same length, the streamed text and
/// more, the banned words in an escape form, one word short — ends the stream with the error
/// frame, nothing of it released, in the first closing event or a later one.
#[tokio::test]
async fn a_repeat_unlike_the_streamed_text_is_blocked_at_every_split() {
    let pieces = [
        "Plain words and plain words, ".repeat(4),
        "then the permitted fruit.".into(),
    ];
    let streamed = pieces.concat();
    assert!(streamed.len() > 128);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let (p, events, aggregates, unverified) = responses_repeats(&pieces);
    let others = [
        streamed.replace("permitted", "forbidden"),
        format!("{streamed} Then the forbidden fruit."),
        streamed.replace("permitted", "\\u0066orbidden"),
        streamed.replace("then the permitted fruit.", "the forbidden fruit"),
    ];
    // Three in a closing event after the first, one in the first.
    let places = [aggregates[1], aggregates[2], aggregates[3], aggregates[0]];
    for (other, at) in others.iter().zip(places) {
        let mut changed = events.clone();
        changed[at] = changed[at].replace(&streamed, other);
        let body = changed.concat();
        for split in 0..body.len() {
            let (a, _) = stream_through(&p, body.clone(), vec![split]).await;
            let text = a.text();
            assert!(text.ends_with(&unverified), "split at {split}: {text}");
            assert!(!text.contains("orbidden"), "split at {split}: {text}");
        }
    }
}

/// Frames of shapes the decoders did not model, each carrying `text` in a place a client would
/// show it: (protocol, frames). Legacy and custom tool calls, Responses custom/MCP/code
/// deltas, Anthropic server-tool blocks, Gemini code execution parts. (Some are decoded as
/// tool calls now; the rest is what the fallback checks.)
fn unknown_shapes(text: &str) -> Vec<(&'static str, String)> {
    use common::protocols::{ev, sse};
    use serde_json::json;
    let chat = |delta: serde_json::Value| {
        sse(
            &json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":null}]}),
        ) + &sse(
            &json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
        ) + "data: [DONE]\n\n"
    };
    let responses = |events: Vec<(&str, serde_json::Value)>| {
        let mut s: String = events.into_iter().map(|(n, d)| ev(n, d)).collect();
        s += &ev(
            "response.completed",
            json!({"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}),
        );
        s
    };
    let anthropic = |block: serde_json::Value| {
        ev(
            "message_start",
            json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}),
        ) + &ev(
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":block}),
        ) + &ev(
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ) + &ev(
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}),
        ) + &ev("message_stop", json!({"type":"message_stop"}))
    };
    let gemini = |part: serde_json::Value| {
        sse(
            &json!({"candidates":[{"content":{"role":"model","parts":[part]},"finishReason":"STOP","index":0}]}),
        )
    };
    let (first, rest) = text.split_at(text.len() / 2);
    vec![
        (
            "openai_chat",
            chat(json!({"function_call":{"name":"f","arguments":json!({"q":text}).to_string()}})),
        ),
        (
            "openai_chat",
            chat(
                json!({"tool_calls":[{"index":0,"id":"c1","type":"custom","custom":{"name":"f","input":text}}]}),
            ),
        ),
        (
            "openai_chat",
            chat(json!({"content":"","annotations":[{"type":"note","note":text}]})),
        ),
        (
            "openai_responses",
            responses(vec![
                (
                    "response.custom_tool_call_input.delta",
                    json!({"type":"response.custom_tool_call_input.delta","output_index":0,"item_id":"i","delta":first}),
                ),
                (
                    "response.custom_tool_call_input.delta",
                    json!({"type":"response.custom_tool_call_input.delta","output_index":0,"item_id":"i","delta":rest}),
                ),
            ]),
        ),
        (
            "openai_responses",
            responses(vec![(
                "response.mcp_call_arguments.delta",
                json!({"type":"response.mcp_call_arguments.delta","output_index":0,"item_id":"i","delta":json!({"q":text}).to_string()}),
            )]),
        ),
        (
            "openai_responses",
            responses(vec![
                (
                    "response.code_interpreter_call_code.delta",
                    json!({"type":"response.code_interpreter_call_code.delta","output_index":0,"item_id":"i","delta":first}),
                ),
                (
                    "response.code_interpreter_call_code.delta",
                    json!({"type":"response.code_interpreter_call_code.delta","output_index":0,"item_id":"i","delta":rest}),
                ),
            ]),
        ),
        (
            "anthropic_messages",
            anthropic(
                json!({"type":"server_tool_use","id":"s","name":"web_search","input":{"query":text}}),
            ),
        ),
        (
            "anthropic_messages",
            anthropic(
                json!({"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","title":text,"url":"https://e.x"}]}),
            ),
        ),
        (
            "gemini",
            gemini(
                json!({"executableCode":{"language":"PYTHON","code":format!("print('{text}')")}}),
            ),
        ),
        (
            "gemini",
            gemini(json!({"codeExecutionResult":{"outcome":"OUTCOME_OK","output":text}})),
        ),
    ]
}

/// Text in shapes no decoder models is checked by the fallback (`unknown_content: scan`, the
/// default): banned text ends the stream with the error frame and none of it reaches the
/// client, also when it streams in pieces across frames; clean text passes byte for byte.
#[tokio::test]
async fn text_in_unmodelled_shapes_is_checked() {
    let bad = unknown_shapes("the forbidden fruit");
    let good = unknown_shapes("an apple a day");
    for ((name, bad), (_, good)) in bad.into_iter().zip(good) {
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        let (a, _) = stream_through(&p, bad.clone(), vec![]).await;
        let text = a.text();
        assert!(blocked(&text), "{name}: {bad}\n=> {text}");
        assert!(!text.contains("fruit"), "{name}: {bad}\n=> {text}");
        let (a, _) = stream_through(&p, good.clone(), vec![]).await;
        assert_eq!(a.text(), good, "{name}");
    }
}

/// The fallback reads unmodelled text as the client decodes it and as a reader sees it: a
/// `\u` escape, an invisible character and a look-alike letter in one phrase, with the stream
/// split at every byte, on every unmodelled shape of every protocol.
#[tokio::test]
async fn escaped_obfuscated_text_in_unmodelled_shapes_is_checked_at_every_split() {
    for (name, bad) in unknown_shapes("the forbidd\u{200b}en fru\u{456}t") {
        let bad = bad.replace("forbid", "\\u0066orbid");
        assert!(bad.contains("\\u0066orbid"), "{name}: {bad}");
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        for split in 0..bad.len() {
            let (a, _) = stream_through(&p, bad.clone(), vec![split]).await;
            let text = a.text();
            assert!(blocked(&text), "{name} split at {split}: {bad}\n=> {text}");
            assert!(!text.contains("fru"), "{name} split at {split}: {text}");
        }
    }
}

/// Shapes decoded as tool calls now (legacy and custom calls, MCP calls) are not unknown.
fn modelled(body: &str) -> bool {
    [
        "function_call",
        "\"custom\"",
        "custom_tool_call",
        "mcp_call",
        "code_interpreter_call",
        "executableCode",
    ]
    .iter()
    .any(|s| body.contains(s))
}

/// `unknown_content: block` ends any answer with unmodelled text (clean or not);
/// `unknown_content: pass` relays it unchecked (the documented escape hatch).
#[tokio::test]
async fn unknown_content_block_and_pass() {
    for (name, body) in unknown_shapes("an apple a day") {
        if modelled(&body) {
            continue;
        }
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        let a = stream_with(&p, body.clone(), PACK, "unknown_content: block\n").await;
        assert!(
            a.text().ends_with(&error_frame(
                &p,
                &GatewayError::Upstream(
                    "the upstream sent content guardwire does not model (unknown_content: block)"
                        .into()
                )
            )),
            "{name}: {}",
            a.text()
        );
        assert!(!a.text().contains("apple"), "{name}: {}", a.text());
    }
    for (name, body) in unknown_shapes("the forbidden fruit") {
        if modelled(&body) {
            continue;
        }
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        let a = stream_with(&p, body.clone(), PACK, "unknown_content: pass\n").await;
        assert_eq!(a.text(), body, "{name}");
    }
}

/// A vLLM-style route (`protocol: openai_chat`) also serves legacy Completions and Embeddings,
/// checked: prompts and inputs before the call, completion text while it streams and whole.
#[tokio::test]
async fn completions_and_embeddings_are_checked_on_openai_routes() {
    use serde_json::json;
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let chunk = |t: &str| {
        format!(
            "data: {}\n\n",
            json!({"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":t,"logprobs":null,"finish_reason":null}]})
        )
    };
    let streamed = chunk("the forbidden ") + &chunk("fruit") + "data: [DONE]\n\n";
    let clean = chunk("an ") + &chunk("apple") + "data: [DONE]\n\n";
    let whole = json!({"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"the forbidden fruit","logprobs":null,"finish_reason":"stop"}]}).to_string();
    // The alternatives a legacy completion's logprobs list are keys of maps.
    let alternatives = json!({"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"an apple","logprobs":{"tokens":["an"," apple"],"token_logprobs":[-0.1,-0.2],"top_logprobs":[{"an":-0.1},{" apple":-0.2," forbidden fruit":-3.5}],"text_offset":[0,2]},"finish_reason":"stop"}]}).to_string();
    let vectors = json!({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}).to_string();
    let (s, c, w, v, alt) = (
        streamed.clone(),
        clean.clone(),
        whole.clone(),
        vectors.clone(),
        alternatives.clone(),
    );
    let mock = MockUpstream::start(move |req| {
        let body = req.body_str();
        if req.path_and_query.ends_with("/embeddings") {
            Reply::json(200, &v)
        } else if body.contains("\"stream\":true") && body.contains("clean") {
            Reply::sse(c.as_bytes())
        } else if body.contains("\"stream\":true") {
            Reply::sse(s.as_bytes())
        } else if body.contains("alternatives") {
            Reply::json(200, &alt)
        } else {
            Reply::json(200, &w)
        }
    })
    .await;
    let extra = format!(
        "routes:\n  - {{ name: vllm, protocol: openai_chat, path_prefix: /vllm/, strip_prefix: /vllm, upstream: \"{}\" }}\n",
        mock.base_url()
    );
    let proxy = start_proxy_all(&mock.base_url(), both, &extra).await;
    let post = |path: &'static str, body: serde_json::Value| {
        let addr = proxy.addr();
        async move {
            send(
                addr,
                "POST",
                path,
                body.to_string(),
                &[("content-type", "application/json")],
            )
            .await
        }
    };
    for prefix in ["/vllm", ""] {
        let completions: &'static str = if prefix.is_empty() {
            "/v1/completions"
        } else {
            "/vllm/v1/completions"
        };
        let embeddings: &'static str = if prefix.is_empty() {
            "/v1/embeddings"
        } else {
            "/vllm/v1/embeddings"
        };
        // Streamed completion text: blocked mid-stream, nothing of it leaks.
        let a = post(
            completions,
            json!({"model":"m","prompt":"hi","stream":true}),
        )
        .await;
        assert!(a.text().contains("content_blocked"), "{}", a.text());
        assert!(!a.text().contains("fruit"), "{}", a.text());
        let a = post(
            completions,
            json!({"model":"m","prompt":"clean","stream":true}),
        )
        .await;
        assert_eq!(a.text(), clean);
        // Whole completion: 400.
        let a = post(completions, json!({"model":"m","prompt":"hi"})).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
        // Alternative tokens (keys of `top_logprobs` maps) are text the client reads.
        let a = post(
            completions,
            json!({"model":"m","prompt":"alternatives","logprobs":2}),
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
        // Prompts and embedding inputs, every shape: checked before the call.
        let before = mock.request_count();
        for body in [
            json!({"model":"m","prompt":"the forbidden fruit"}),
            json!({"model":"m","prompt":["ok","the forbidden fruit"],"stream":true}),
            json!({"model":"m","prompt":"ok","suffix":"the forbidden fruit"}),
        ] {
            let a = post(completions, body).await;
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
        }
        for input in [
            json!("the forbidden fruit"),
            json!(["a", "the forbidden fruit"]),
        ] {
            let a = post(embeddings, json!({"model":"m","input":input})).await;
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
        }
        assert_eq!(
            mock.request_count(),
            before,
            "blocked inputs never reach the upstream"
        );
        let a = post(embeddings, json!({"model":"m","input":["a","b"]})).await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.text(), vectors);
    }
}

/// Every string the model will read is checked before the call, also where no decoder looks:
/// tool descriptions and schemas, Anthropic document blocks, Responses prompt variables,
/// fields guardwire does not know. Inline media (base64) is not text.
#[tokio::test]
async fn request_text_outside_the_modelled_fields_is_checked() {
    use serde_json::json;
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, "").await;
    let bad = "the forbidden fruit";
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"f","description":bad,"parameters":{"type":"object"}}}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],
            "response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","description":bad}}}}),
        ),
        (
            "/v1/chat/completions",
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],"my_new_field":bad}),
        ),
        // Under a key structural for strings, an object is still read (a schema property
        // named `status`; Responses' `text.format` schema).
        (
            "/v1/chat/completions",
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],
                "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"status":{"type":"string","description":bad}}}}}]}),
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"description":bad}}}}),
        ),
        // Token ids cannot be read: refused.
        (
            "/v1/completions",
            json!({"model":"m","prompt":[[1234,5678]]}),
        ),
        ("/v1/embeddings", json!({"model":"m","input":[1,2,3]})),
        (
            "/v1/messages",
            json!({"model":"c","max_tokens":5,"messages":[{"role":"user","content":[
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":bad}}]}]}),
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":"hi","prompt":{"id":"p","variables":{"topic":bad}}}),
        ),
        (
            "/v1beta/models/g:generateContent",
            json!({"contents":[{"role":"user","parts":[{"text":"hi"}]}],
            "tools":[{"functionDeclarations":[{"name":"f","description":bad}]}]}),
        ),
    ];
    for (path, body) in cases {
        let a = post_json(proxy.addr(), path, body.to_string()).await;
        assert_eq!(
            a.status,
            StatusCode::BAD_REQUEST,
            "{path} {body}: {}",
            a.text()
        );
    }
    assert_eq!(mock.request_count(), 0);
    // Inline media and settings are not text; a clean request with them goes through.
    let clean = json!({"model":"m","messages":[{"role":"user","content":[
        {"type":"text","text":"what is this"},
        {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg=="}}]}],
        "tools":[{"type":"function","function":{"name":"f","description":"looks things up"}}]});
    let a = post_json(proxy.addr(), "/v1/chat/completions", clean.to_string()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
}

/// Redaction covers every copy: a frame whose masked text is also spelled out token by token
/// in `logprobs` cannot be rewritten faithfully, so it ends the stream instead of leaking.
#[tokio::test]
async fn redaction_never_leaves_a_copy_in_logprobs() {
    use serde_json::json;
    let pack = "validators:\n  - type: content_excludes\n    mode: redact\n    mask: \"***\"\n    params: { patterns: [\"XK-99\"] }\n";
    let frame = |t: &str, lp: serde_json::Value| {
        format!(
            "data: {}\n\n",
            json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":t},"logprobs":lp,"finish_reason":null}]})
        )
    };
    let tokens = |t: &str| json!({"content":[{"token":t,"logprob":-0.1,"bytes":t.as_bytes(),"top_logprobs":[]}]});
    let body =
        frame("code ", tokens("code ")) + &frame("XK-99", tokens("XK-99")) + "data: [DONE]\n\n";
    let a = stream_with(&all()[0], body.clone(), pack, "").await;
    let text = a.text();
    assert!(!text.contains("XK") && !text.contains("88,75"), "{text}");
    assert!(text.contains("\"error\""), "{text}");
    // Without logprobs the same answer is masked in place.
    let body = frame("code ", json!(null)) + &frame("XK-99", json!(null)) + "data: [DONE]\n\n";
    let a = stream_with(&all()[0], body, pack, "").await;
    assert!(a.text().contains("\"content\":\"***\""), "{}", a.text());
}

/// The legacy Chat `function_call` and custom tool calls are tool calls: the tool checks see
/// their names (a forbidden tool is blocked before any argument is released) and their
/// arguments/input are checked as arguments.
#[tokio::test]
async fn legacy_and_custom_chat_tool_calls_are_tool_calls() {
    use serde_json::json;
    let pack = "validators:\n  - id: no-f\n    type: tools_not_called\n    params: { tool_names: [f] }\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"] }\n";
    let chat = |delta: serde_json::Value| {
        format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":null}]})
        )
    };
    let cases = [
        (
            chat(json!({"function_call":{"name":"f","arguments":"{}"}})),
            "no-f",
        ),
        (
            chat(
                json!({"tool_calls":[{"index":0,"id":"c1","type":"custom","custom":{"name":"f","input":"x"}}]}),
            ),
            "no-f",
        ),
        (
            chat(
                json!({"function_call":{"name":"g","arguments":"{\"q\":\"the forbidden fruit\"}"}}),
            ),
            "forbidden",
        ),
        (
            chat(
                json!({"tool_calls":[{"index":0,"id":"c1","type":"custom","custom":{"name":"g","input":"the forbidden fruit"}}]}),
            ),
            "forbidden",
        ),
        // A custom input is free text, read as it comes: `\u0073` is a backslash to the
        // client (a word boundary), not an `s`.
        (
            chat(
                json!({"tool_calls":[{"index":0,"id":"c1","type":"custom","custom":{"name":"g","input":"the forbidden fruit\\u0073"}}]}),
            ),
            "forbidden",
        ),
        // A call with both shapes: neither goes unread.
        (
            chat(
                json!({"tool_calls":[{"index":0,"id":"c1","type":"custom","function":{"arguments":""},"custom":{"name":"g","input":"the forbidden fruit"}}]}),
            ),
            "forbidden",
        ),
    ];
    let p = all().into_iter().find(|p| p.name == "openai_chat").unwrap();
    for (body, why) in cases {
        let b = body.clone();
        let (a, m) = ask(&p, move || Reply::sse(b.as_bytes()), pack, "").await;
        let text = a.text();
        assert!(text.contains("content_blocked"), "{body}: {text}");
        assert!(
            !text.contains("\"name\":\"f\"") && !text.contains("fruit"),
            "{body}: {text}"
        );
        if why == "no-f" {
            assert!(m.contains("validator=\"no-f\""), "{m}");
        }
    }
}

/// Responses echoes the request's settings (instructions, tools…) in its response object: the
/// whole answer is that object, events carry it under `response`. They were checked as input,
/// so a banned phrase in the instructions does not block the answer — but only there: the same
/// field anywhere else in an answer is checked.
#[tokio::test]
async fn responses_echoes_of_the_request_are_exempt_only_where_they_echo() {
    let p = all()
        .into_iter()
        .find(|p| p.name == "openai_responses")
        .unwrap();
    let echo = "Never say forbidden fruit";
    let with = |v: &mut serde_json::Value| {
        v["instructions"] = echo.into();
        v["tools"] =
            serde_json::json!([{"type":"function","name":"f","description":echo,"parameters":{}}]);
    };
    // The whole answer.
    let mut whole: serde_json::Value =
        serde_json::from_str(&common::openai_responses::whole_response("Hello")).unwrap();
    with(&mut whole);
    let elsewhere = serde_json::json!({"response": {"instructions": echo}});
    let mut moved = whole.clone();
    moved["output"][0]["content"][0]["extra"] = elsewhere.clone();
    for (body, ok) in [(whole.to_string(), true), (moved.to_string(), false)] {
        let mock = MockUpstream::start(move |_| Reply::json(200, &body)).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = post_json(proxy.addr(), p.plain_path, (p.plain_body)("hi")).await;
        assert_eq!(a.status == StatusCode::OK, ok, "{}", a.text());
    }
    // The stream: every event's `response` object carries the echo.
    let body =
        String::from_utf8(common::openai_responses::text_stream(&["Hello", " world"])).unwrap();
    let echoed: String = body
        .split_inclusive("\n\n")
        .map(|e| {
            let Some((head, data)) = e.split_once("data: ") else {
                return e.to_owned();
            };
            let mut v: serde_json::Value = serde_json::from_str(data.trim_end()).unwrap();
            if v.get("response").is_some() {
                with(&mut v["response"]);
            }
            format!("{head}data: {v}\n\n")
        })
        .collect();
    assert!(echoed.matches(echo).count() >= 6, "{echoed}");
    let (a, _) = stream_through(&p, echoed.clone(), vec![]).await;
    assert_eq!(a.text(), echoed);
    let moved = echoed.replacen(
        "\"delta\":\"Hello\"",
        &format!("\"delta\":\"Hello\",\"x\":{elsewhere}"),
        1,
    );
    assert_ne!(moved, echoed);
    let (a, _) = stream_through(&p, moved, vec![]).await;
    assert!(blocked(&a.text()), "{}", a.text());
}

/// The built-in code tools are tool calls: Responses' code interpreter (its code streamed by
/// `response.code_interpreter_call_code.delta`, repeated by `.done`) and Gemini's code
/// execution (`executableCode`). The tool checks see them by the names `code_interpreter` and
/// `code_execution`; their code is checked as free text.
#[tokio::test]
async fn code_tools_are_tool_calls() {
    use common::protocols::{ev, sse};
    use serde_json::json;
    let pack = "validators:\n  - id: no-code\n    type: tools_not_called\n    params: { tool_names: [code_interpreter, code_execution] }\n";
    let responses = |code: &str| {
        let (first, rest) = code.split_at(code.len() / 2);
        let item = |status: &str, code: Option<&str>| json!({"type":"code_interpreter_call","id":"ci","status":status,"code":code,"container_id":"cntr_1","outputs":null});
        ev(
            "response.output_item.added",
            json!({"type":"response.output_item.added","output_index":0,"item":item("in_progress", None)}),
        ) + &ev(
            "response.code_interpreter_call_code.delta",
            json!({"type":"response.code_interpreter_call_code.delta","output_index":0,"item_id":"ci","delta":first}),
        ) + &ev(
            "response.code_interpreter_call_code.delta",
            json!({"type":"response.code_interpreter_call_code.delta","output_index":0,"item_id":"ci","delta":rest}),
        ) + &ev(
            "response.code_interpreter_call_code.done",
            json!({"type":"response.code_interpreter_call_code.done","output_index":0,"item_id":"ci","code":code}),
        ) + &ev(
            "response.output_item.done",
            json!({"type":"response.output_item.done","output_index":0,"item":item("completed", Some(code))}),
        ) + &ev(
            "response.completed",
            json!({"type":"response.completed","response":{"id":"r","status":"completed","output":[item("completed", Some(code))]}}),
        )
    };
    let gemini = |code: &str| {
        sse(
            &json!({"candidates":[{"content":{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":code}}]},"index":0}]}),
        ) + &sse(
            &json!({"candidates":[{"content":{"role":"model","parts":[{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"4"}}]},"finishReason":"STOP","index":0}]}),
        )
    };
    for (name, body) in [
        ("openai_responses", responses("print(2 + 2)")),
        ("gemini", gemini("print(2 + 2)")),
    ] {
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        // Without the tool check, the call passes byte for byte …
        let (a, _) = stream_through(&p, body.clone(), vec![]).await;
        assert_eq!(a.text(), body, "{name}");
        // … with it, the call is blocked before any of it is released.
        let a = stream_with(&p, body.clone(), pack, "").await;
        let text = a.text();
        assert!(
            text.contains("no-code") || text.contains("tools_not_called"),
            "{name}: {text}"
        );
        assert!(!text.contains("print"), "{name}: {text}");
    }
    // The code is checked as the text the client reads, also split between deltas.
    let (a, _) = stream_through(
        &all()
            .into_iter()
            .find(|p| p.name == "openai_responses")
            .unwrap(),
        responses("# the forbidden fruit"),
        vec![],
    )
    .await;
    assert!(blocked(&a.text()), "{}", a.text());
    // Also when the code is written with JSON escapes (the client's parser resolves them).
    let escaped = responses("# the forbidden fruit").replace("forbidden", "\\u0066orbidden");
    assert!(escaped.contains(r"\u0066orbidden"), "{escaped}");
    for name in ["openai_responses", "gemini"] {
        let p = all().into_iter().find(|p| p.name == name).unwrap();
        let body = if name == "gemini" {
            gemini("# the forbidden fruit").replace("forbidden", "\\u0066orbidden")
        } else {
            escaped.clone()
        };
        let (a, _) = stream_through(&p, body, vec![]).await;
        assert!(blocked(&a.text()), "{name}: {}", a.text());
        assert!(!a.text().contains("fruit"), "{name}: {}", a.text());
    }
}

/// Every string of a request is read decoded wherever it sits: a key structural in the
/// protocol's envelope (`status`, `type`, `id`) exempts nothing inside free-form JSON (tool
/// results, arguments, schemas, Gemini's `functionResponse`), JSON escapes are resolved, JSON
/// held in a string is read decoded, and the object keys of free-form JSON are text. Nothing
/// of a refused request reaches the upstream.
#[tokio::test]
async fn request_strings_are_read_decoded_wherever_they_sit() {
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\", \"xbomb\"], direction: both }\n";
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, "").await;
    let gemini = "/v1beta/models/g:generateContent";
    let schema = r#"{"type":"object","properties":{"forbidden fruit":{"type":"string"}}}"#;
    let cases = [
        // Gemini: a function's response and a call's args under keys structural elsewhere.
        (
            gemini,
            r#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"status":"\u0066orbidden fruit"}}}]}]}"#.to_owned(),
        ),
        (
            gemini,
            r#"{"contents":[{"role":"model","parts":[{"function_call":{"name":"f","args":{"id":"\u0066orbidden fruit"}}}]}]}"#.to_owned(),
        ),
        (
            gemini,
            format!(r#"{{"contents":[{{"parts":[{{"text":"hi"}}]}}],"tools":[{{"functionDeclarations":[{{"name":"f","parameters":{schema}}}]}}]}}"#),
        ),
        // Chat: a tool result whose text is JSON with an escape; a schema's property name.
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"{\"status\":\"\\u0066orbidden fruit\"}"}]}"#.to_owned(),
        ),
        (
            "/v1/chat/completions",
            format!(r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{schema}}}}}]}}"#),
        ),
        // Review 19 (P19-03, V19-05): JSON with text around it, cut short, JSON lines, and
        // escapes in a user's text: read decoded wherever they stand.
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"Result: {\"a\":\"the forbidden\\u0020fruit\"} (2 rows)"}]}"#.to_owned(),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"{\"x\":1}\n{\"a\":\"forbidden\\u0020fruit\", \"b\":"}]}"#.to_owned(),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"user","content":"decode this: forbidden\\u0020fruit"}]}"#.to_owned(),
        ),
        // Responses: a function_call_output, as a JSON value and as JSON in a string.
        (
            "/v1/responses",
            r#"{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok","status":"\u0066orbidden fruit"}]}]}"#.to_owned(),
        ),
        (
            "/v1/responses",
            r#"{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"{\"type\":\"\\u0066orbidden fruit\"}"}]}"#.to_owned(),
        ),
        (
            "/v1/responses",
            format!(r#"{{"model":"m","input":"hi","tools":[{{"type":"function","name":"f","parameters":{schema}}}]}}"#),
        ),
        // Anthropic: a tool_use input, a tool_result holding JSON text, an input schema.
        (
            "/v1/messages",
            r#"{"model":"c","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"status":"\u0066orbidden fruit"}}]}]}"#.to_owned(),
        ),
        (
            "/v1/messages",
            r#"{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"{\"id\":\"\\u0066orbidden fruit\"}"}]}]}"#.to_owned(),
        ),
        (
            "/v1/messages",
            format!(r#"{{"model":"c","max_tokens":5,"messages":[{{"role":"user","content":"hi"}}],"tools":[{{"name":"f","input_schema":{schema}}}]}}"#),
        ),
    ];
    for (path, body) in cases {
        serde_json::from_str::<serde_json::Value>(&body).unwrap();
        let a = post_json(proxy.addr(), path, body.clone()).await;
        assert_eq!(
            a.status,
            StatusCode::BAD_REQUEST,
            "{path} {body}: {}",
            a.text()
        );
    }
    assert_eq!(mock.request_count(), 0);
    // A message's parts are read one per line, as the model reads them: `x` and `bomb` of two
    // parts are two words, not `xbomb`.
    let parts = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"the letter x"},{"type":"text","text":"bomb is a word"}]}]}"#;
    let a = post_json(proxy.addr(), "/v1/chat/completions", parts.to_owned()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(mock.request_count(), 1);
}

/// guardwire in front of a mock answering `{}`: each request of `cases` (path, body) answers
/// 400 in the provider's own shape, with `says` in its message, and none reaches the upstream.
async fn refused_before_the_call(extra: &str, cases: &[(&str, serde_json::Value, &str)]) {
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, extra).await;
    for (path, body, says) in cases {
        let a = post_json(proxy.addr(), path, body.to_string()).await;
        let text = a.text();
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path} {body}: {text}");
        assert!(text.contains(says), "{path} {body}: {text}");
        // The provider's own error shape.
        let shape = match *path {
            "/v1/messages" => r#""type":"error""#,
            p if p.starts_with("/v1beta") => "INVALID_ARGUMENT",
            _ => r#"{"error":{"message":"#,
        };
        assert!(text.contains(shape), "{path}: {text}");
    }
    assert_eq!(mock.request_count(), 0);
}

const GEMINI: &str = "/v1beta/models/g:generateContent";
/// "the forbidden fruit" and "a clean note", base64.
const BAD_B64: &str = "dGhlIGZvcmJpZGRlbiBmcnVpdA==";
const CLEAN_B64: &str = "YSBjbGVhbiBub3Rl";
/// A whole 1×1 PNG: no text.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg==";

fn gemini_inline(mime: &str, data: &str) -> serde_json::Value {
    serde_json::json!({"contents":[{"role":"user","parts":[{"text":"read this"},{"inlineData":{"mimeType":mime,"data":data}}]}]})
}
fn chat_file(file: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"read this"},{"type":"file","file":file}]}]})
}
fn anthropic_document(source: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":source},{"type":"text","text":"read this"}]}]})
}
fn responses_file(file: serde_json::Value) -> serde_json::Value {
    let mut part = serde_json::json!({"type":"input_file","filename":"f"});
    part.as_object_mut()
        .unwrap()
        .extend(file.as_object().unwrap().clone());
    serde_json::json!({"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"read this"},part]}]})
}

/// Inline text documents are decoded and read by the input checks on every protocol; the
/// proxy refuses (400, provider's shape, naming the field) documents it cannot read, malformed
/// base64 and data URLs; images and audio stay exempt; clean documents go through.
#[tokio::test]
async fn inline_documents_are_read_and_unreadable_or_malformed_ones_refused() {
    use serde_json::json;
    let text_url = format!("data:text/plain;base64,{BAD_B64}");
    let pdf_url = format!("data:application/pdf;base64,{CLEAN_B64}");
    let blocked = "blocked by guardrail";
    let unreadable = "cannot read as text";
    // Valid UTF-8 that spells the phrase in the charset declared (UTF-7, ISO-2022-JP).
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    let utf7_url = format!(
        "data:text/plain;charset=utf-7;base64,{}",
        b64(b"the +AGYAbwByAGIAaQBkAGQAZQBu- fruit")
    );
    let jis = b64(b"the \x1b$B#f#o#r#b#i#d#d#e#n\x1b(B fruit");
    // (Review 20, round 2: two escape sequences in a row, which Python reads and the Encoding
    // Standard marks an error; a byte-order mark against the label; a quoted `;`.)
    let jis_twice = format!(
        "data:text/plain;charset=iso-2022-jp;base64,{}",
        b64(b"the forbid\x1b(B\x1b(Bden fruit")
    );
    let mut bom_le = vec![0xfe, 0xff];
    bom_le.extend(
        "the forbidden fruit"
            .encode_utf16()
            .flat_map(u16::to_le_bytes),
    );
    let bom_url = format!("data:text/plain;charset=utf-16le;base64,{}", b64(&bom_le));
    let quoted_url = format!(
        "data:text/plain;foo=\"a;charset=utf-8\";charset=utf-7;base64,{}",
        b64(b"the +AGYAbwByAGIAaQBkAGQAZQBu- fruit")
    );
    refused_before_the_call(
        "",
        &[
            // Text documents holding the phrase.
            (GEMINI, gemini_inline("text/plain", BAD_B64), blocked),
            // Said to be media, text all the same: read as the text it is.
            (GEMINI, gemini_inline("image/png", BAD_B64), blocked),
            (GEMINI, gemini_inline("audio/wav", BAD_B64), blocked),
            ("/v1/chat/completions", chat_file(json!({"file_data":utf7_url})), blocked),
            ("/v1/chat/completions", chat_file(json!({"file_data":jis_twice})), blocked),
            ("/v1/chat/completions", chat_file(json!({"file_data":bom_url})), blocked),
            ("/v1/chat/completions", chat_file(json!({"file_data":quoted_url})), blocked),
            (GEMINI, gemini_inline("text/plain; charset=iso-2022-jp", &jis), blocked),
            (
                GEMINI,
                gemini_inline("text/plain; charset=hz-gb-2312", CLEAN_B64),
                "(charset hz-gb-2312 is not read)",
            ),
            (
                GEMINI,
                json!({"contents":[{"parts":[{"inline_data":{"mime_type":"application/json","data":BAD_B64}}]}]}),
                blocked,
            ),
            ("/v1/chat/completions", chat_file(json!({"file_data":text_url})), blocked),
            (
                "/v1/chat/completions",
                chat_file(json!({"file_data":BAD_B64,"filename":"notes.md"})),
                blocked,
            ),
            (
                "/v1/messages",
                anthropic_document(json!({"type":"base64","media_type":"text/plain","data":BAD_B64})),
                blocked,
            ),
            ("/v1/responses", responses_file(json!({"file_data":text_url})), blocked),
            // Documents the proxy cannot read.
            (GEMINI, gemini_inline("application/pdf", CLEAN_B64), "contents[0].parts[1].inlineData.data (application/pdf)"),
            (GEMINI, gemini_inline("video/mp4", CLEAN_B64), unreadable),
            ("/v1/chat/completions", chat_file(json!({"file_data":pdf_url})), "messages[0].content[1].file.file_data (application/pdf)"),
            ("/v1/chat/completions", chat_file(json!({"file_data":CLEAN_B64,"filename":"a.docx"})), unreadable),
            (
                "/v1/messages",
                anthropic_document(json!({"type":"base64","media_type":"application/pdf","data":CLEAN_B64})),
                "messages[0].content[0].source.data (application/pdf)",
            ),
            ("/v1/responses", responses_file(json!({"file_data":pdf_url})), "input[0].content[1].file_data (application/pdf)"),
            // Not UTF-8.
            (GEMINI, gemini_inline("text/plain", "//79"), "(not UTF-8)"),
            // Malformed input.
            (GEMINI, gemini_inline("text/plain", "not base64!"), "contents[0].parts[1].inlineData.data is not valid base64"),
            (
                "/v1/chat/completions",
                chat_file(json!({"file_data":"data:text/plain;base64,@@"})),
                "messages[0].content[1].file.file_data is not valid base64",
            ),
            (
                "/v1/messages",
                anthropic_document(json!({"type":"base64","media_type":"text/plain","data":"%%"})),
                "messages[0].content[0].source.data is not valid base64",
            ),
            (
                "/v1/responses",
                responses_file(json!({"file_data":"data:text/plain;base64"})),
                "input[0].content[1].file_data is not a data URL",
            ),
        ],
    )
    .await;
    // Clean documents, and images and audio (exempt unless their bytes are text), go through.
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let proxy = start_proxy_all(&mock.base_url(), both, "").await;
    let clean_url = format!("data:text/plain;base64,{CLEAN_B64}");
    let clean = [
        (GEMINI, gemini_inline("text/plain", CLEAN_B64)),
        (GEMINI, gemini_inline("image/png", PNG_B64)),
        (GEMINI, gemini_inline("audio/wav", PNG_B64)),
        (
            "/v1/chat/completions",
            chat_file(json!({"file_data":clean_url})),
        ),
        (
            "/v1/messages",
            anthropic_document(
                json!({"type":"text","media_type":"text/plain","data":"a clean note"}),
            ),
        ),
        (
            "/v1/messages",
            json!({"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":PNG_B64}}]}]}),
        ),
        (
            "/v1/responses",
            responses_file(json!({"file_data":clean_url})),
        ),
    ];
    for (path, body) in &clean {
        let a = post_json(proxy.addr(), path, body.to_string()).await;
        assert_eq!(a.status, StatusCode::OK, "{path} {body}: {}", a.text());
    }
    assert_eq!(mock.request_count(), clean.len());
    // `unknown_content: pass` lets documents the proxy cannot read through (malformed ones
    // stay refused).
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, "unknown_content: pass\n").await;
    for (body, status) in [
        (gemini_inline("application/pdf", CLEAN_B64), StatusCode::OK),
        (
            gemini_inline("application/pdf", "not base64!"),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let a = post_json(proxy.addr(), GEMINI, body.to_string()).await;
        assert_eq!(a.status, status, "{body}: {}", a.text());
    }
    assert_eq!(mock.request_count(), 1);
}

/// References to content stored at the provider are refused by default (`stored_context:
/// refuse`), forwarded with `stored_context: pass`, and counted either way.
#[tokio::test]
async fn references_to_provider_stored_content_follow_stored_context() {
    use serde_json::json;
    let cases = [
        (
            "/v1/responses",
            json!({"model":"m","input":"go on","previous_response_id":"resp_1"}),
            "previous_response_id refers to content stored at the provider (previous_response)",
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":"go on","conversation":"conv_1"}),
            "conversation refers",
        ),
        (
            "/v1/responses",
            responses_file(json!({"file_id":"file-1"})),
            "input[0].content[1].file_id refers",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":"cachedContents/c"}),
            "cachedContent refers",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"file_data":{"mime_type":"application/pdf","file_uri":"https://x/files/f"}}]}]}),
            "contents[0].parts[0].fileData refers",
        ),
        (
            "/v1/chat/completions",
            chat_file(json!({"file_id":"file-1"})),
            "messages[0].content[1].file.file_id refers",
        ),
        (
            "/v1/messages",
            anthropic_document(json!({"type":"file","file_id":"file_1"})),
            "messages[0].content[0].source.file_id refers",
        ),
        (
            "/v1/messages",
            anthropic_document(json!({"type":"url","url":"https://example.com/a.pdf"})),
            "messages[0].content[0].source.url refers",
        ),
        // Tools the provider runs that put content in the model's context.
        (
            "/v1/responses",
            json!({"model":"m","input":"hi","tools":[{"type":"function","name":"f"},
                {"type":"file_search","vector_store_ids":["vs_1"]}]}),
            "tools[1] (file_search) is a tool the provider runs",
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":"hi","tools":[{"type":"code_interpreter",
                "container":{"type":"auto","file_ids":["file-1"]}}]}),
            "tools[0] (code_interpreter) is a tool",
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"x",
                "server_url":"https://mcp.example.com"}]}),
            "tools[0] (mcp) is a tool",
        ),
        (
            "/v1/chat/completions",
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}),
            "web_search_options is a tool",
        ),
        (
            "/v1/messages",
            json!({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
                "mcp_servers":[{"type":"url","url":"https://mcp.example.com","name":"x"}]}),
            "mcp_servers is a tool",
        ),
        (
            "/v1/messages",
            json!({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
                "tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}),
            "tools[0] (web_fetch_20250910) is a tool",
        ),
        (
            "/v1/messages",
            json!({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
                "container":{"skills":[{"type":"custom","skill_id":"s"}]}}),
            "container.skills is a tool",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"url_context":{}}]}),
            "tools[0].urlContext is a tool",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"text":"hi"}]}],
                "tools":[{"fileSearch":{"fileSearchStoreNames":["s"]}}]}),
            "tools[0].fileSearch is a tool",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"enterprise_web_search":{}}]}),
            "tools[0].enterpriseWebSearch is a tool",
        ),
        (
            GEMINI,
            json!({"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"googleMaps":{}}]}),
            "tools[0].googleMaps is a tool",
        ),
        (
            "/v1/responses",
            json!({"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}),
            "input[0].id refers to content stored at the provider (item)",
        ),
        (
            "/v1/messages",
            json!({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
                "container":"container_1","tools":[{"type":"code_execution_20250825","name":"code_execution"}]}),
            "container is a tool",
        ),
    ];
    refused_before_the_call("", &cases).await;
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "stored_context: pass\n").await;
    for (path, body, _) in &cases {
        let a = post_json(proxy.addr(), path, body.to_string()).await;
        assert_eq!(a.status, StatusCode::OK, "{path} {body}: {}", a.text());
    }
    assert_eq!(mock.request_count(), cases.len());
    let m = metrics(proxy.addr()).await;
    for line in [
        r#"guardwire_stored_context_total{route="openai_responses",protocol="openai_responses",kind="previous_response"} 1"#,
        r#"guardwire_stored_context_total{route="openai_responses",protocol="openai_responses",kind="file"} 1"#,
        r#"guardwire_stored_context_total{route="gemini",protocol="gemini",kind="cached_content"} 1"#,
        r#"guardwire_stored_context_total{route="anthropic_messages",protocol="anthropic_messages",kind="url"} 1"#,
    ] {
        assert!(m.contains(line), "{line}\n{m}");
    }
    // A route of its own may refuse while the top level passes.
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let route = format!(
        "stored_context: pass\nroutes:\n  - {{name: strict, protocol: openai_responses, path_prefix: /strict/, upstream: \"{}\", strip_prefix: /strict, stored_context: refuse}}\n",
        mock.base_url()
    );
    let proxy = start_proxy_all(&mock.base_url(), PACK, &route).await;
    let a = post_json(proxy.addr(), "/strict/v1/responses", cases[0].1.to_string()).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
    assert_eq!(mock.request_count(), 0);
}

/// JSON held in a modelled text (a tool result) is read decoded even with
/// `unknown_content: pass`, which only skips the strings no decoder models.
#[tokio::test]
async fn json_in_a_tool_result_is_read_decoded_whatever_unknown_content_says() {
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, "unknown_content: pass\n").await;
    let body = r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"{\"status\":\"\\u0066orbidden fruit\"}"}]}"#;
    let a = post_json(proxy.addr(), "/v1/chat/completions", body.to_owned()).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
    assert_eq!(mock.request_count(), 0);
}

/// Puts `notes[i]` as an unknown member `note` into the i-th text event of `p`'s stream of
/// `texts`.
fn with_notes(p: &Proto, texts: &[&str], notes: &[&str]) -> String {
    with_member(p, texts, "note", notes)
}

/// Puts `values[i]` as a top-level member `key` into the i-th text event of `p`'s stream of
/// `texts`.
fn with_member(p: &Proto, texts: &[&str], key: &str, values: &[&str]) -> String {
    let (mut frames, first) = (p.text_frames)(texts);
    for (i, value) in values.iter().enumerate() {
        let frame = &mut frames[first + i];
        let at = frame.find("data: {").unwrap() + "data: {".len();
        frame.insert_str(at, &format!("\"{key}\":\"{value}\","));
    }
    frames.concat()
}

/// The stream templates (`frame_template.rs`, `openai_chat/template.rs`) read an event that
/// repeats the last text event's bytes around other values without the full decoder: an
/// unknown member whose value changes between such events — here to a `\u` escape, an
/// invisible character and a look-alike letter — is still read by the fallback, at every split.
/// Also after a plain run longer than the skim reader's eight-byte steps (`skim::long_run`).
#[tokio::test]
async fn an_unknown_member_changing_between_templated_text_events_is_checked_at_every_split() {
    let last = "the \\u0066orbidd\u{200b}en fru\u{456}t";
    let long = format!("plain words, plain words and plain words again: {last}");
    for p in all() {
        for last in [last, &long] {
            let notes = ["plain words", "plain words", last];
            let body = with_notes(&p, &["Hello, ", "and ", "then "], &notes);
            blocked_at_every_split(&p, &body, "fru").await;
        }
    }
}

/// Streams `body` split at each byte in turn: every time blocked, `hidden` never released.
async fn blocked_at_every_split(p: &Proto, body: &str, hidden: &str) {
    for split in 0..body.len() {
        let (a, _) = stream_through(p, body.to_owned(), vec![split]).await;
        let text = a.text();
        assert!(blocked(&text), "{} split at {split}: {text}", p.name);
        assert!(
            !text.contains(hidden),
            "{} split at {split}: {text}",
            p.name
        );
    }
}

/// An unknown member's strings on one path are read as one text streamed in pieces, and each
/// also as a value of its own: a banned value between two others whose letters touch it
/// ("say plain" + "forbidden fruit" + "plain words" reads "…plainforbidden fruitplain…" joined)
/// is still found, at every split; so is a word redacted only in the whole value.
#[tokio::test]
async fn a_whole_unknown_value_between_others_on_its_path_is_checked_as_a_value() {
    let notes = ["say plain", "forbidden fruit", "plain words"];
    for p in all() {
        let body = with_notes(&p, &["Hello, ", "and ", "then "], &notes);
        blocked_at_every_split(&p, &body, "fruit").await;
    }
    // Redaction: the word "XK" is the middle value alone, not in the joined text ("aXKb").
    let pack = "validators:\n  - type: banned_words\n    mode: redact\n    mask: \"***\"\n    params: { words: [\"XK\"] }\n";
    for p in all() {
        let body = with_notes(&p, &["Hello, ", "and ", "then "], &["a", "XK", "b"]);
        let a = stream_with(&p, body, pack, "").await;
        let text = a.text();
        assert!(!text.contains("XK"), "{}: {text}", p.name);
        assert!(text.contains("\"note\":\"***\""), "{}: {text}", p.name);
    }
}

/// A value under a structural key (an id, a finish reason, a status) is exempt only while it
/// has the shape of structure — printable ASCII without spaces or escapes: words there reach
/// the client's SDK like any other text and are checked, on the stream templates' fast paths
/// too, at every split. Ids and reasons of that shape still pass.
#[tokio::test]
async fn words_under_a_structural_key_are_checked_as_text() {
    for p in all() {
        // Every text event's `id` (structure in every protocol), changed in the last one to
        // words, then to an escaped, invisible and look-alike spelling of them.
        for last in [
            "the forbidden fruit",
            "the \\u0066orbidd\u{200b}en fru\u{456}t",
        ] {
            let ids = ["evt_1", "evt_1", last];
            let body = with_member(&p, &["Hello, ", "and ", "then "], "id", &ids);
            blocked_at_every_split(&p, &body, "fru").await;
        }
        let plain = with_member(&p, &["Hello, ", "and ", "then "], "id", &["evt_1"; 3]);
        let (a, _) = stream_through(&p, plain.clone(), vec![]).await;
        assert_eq!(a.text(), plain, "{}", p.name);
        // The finish reason (Responses: the response's status), escaped or in words.
        let (frames, _) = (p.text_frames)(&["Hello, ", "and "]);
        for reason in ["the forbidden fruit", "\\u0066orbidden\\u0020fruit"] {
            let mut body = frames.concat();
            let mut replaced = false;
            for stop in ["\"stop\"", "\"STOP\"", "\"end_turn\"", "\"completed\""] {
                if body.contains(stop) {
                    body = body.replace(stop, &format!("\"{reason}\""));
                    replaced = true;
                }
            }
            assert!(replaced, "{}: no finish reason in {body}", p.name);
            let (a, _) = stream_through(&p, body, vec![]).await;
            let text = a.text();
            assert!(blocked(&text), "{} {reason}: {text}", p.name);
        }
    }
}

/// The same on the request: a `tool_call_id` in words is read by the input checks.
#[tokio::test]
async fn words_under_a_structural_request_key_are_checked_as_input() {
    let both = "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
    let proxy = start_proxy_all(&mock.base_url(), both, "").await;
    let body = r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"the forbidden fruit","content":"ok"}]}"#;
    let a = post_json(proxy.addr(), "/v1/chat/completions", body.to_owned()).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text());
    assert_eq!(mock.request_count(), 0);
}

/// Responses echoes the request's settings (`instructions`, `text`, `metadata`, …) in the
/// response object: exempt there only — under `response` in a stream's events, at the top of
/// a whole answer. An event type guardwire does not model with a top-level `text` is text.
#[tokio::test]
async fn a_responses_event_of_an_unknown_type_with_a_top_level_text_is_checked() {
    let p = all()
        .into_iter()
        .find(|p| p.name == "openai_responses")
        .unwrap();
    let (mut frames, first) = (p.text_frames)(&["Hello, ", "and "]);
    for key in ["text", "instructions", "metadata"] {
        let odd = format!(
            "event: response.new_kind\ndata: {{\"type\":\"response.new_kind\",\"{key}\":\"the forbidden fruit\"}}\n\n"
        );
        frames.insert(first + 1, odd);
        let (a, _) = stream_through(&p, frames.concat(), vec![]).await;
        let text = a.text();
        assert!(blocked(&text), "{key}: {text}");
        assert!(!text.contains("fruit"), "{key}: {text}");
        frames.remove(first + 1);
    }
}
