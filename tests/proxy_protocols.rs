//! The same guarantees for every protocol: exact bytes for clean and blocked streams (text and
//! tool arguments), whole-response and input blocks in the provider's error shape, unknown
//! events passed through, malformed frames ended with the protocol's error frame.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{MockUpstream, Reply};
use common::protocols::*;
use common::proxy::*;
use serde_json::json;
use std::time::Duration;

const PACK: &str = r#"
validators:
  - id: no-forbidden
    type: banned_words
    message: "Blocked: forbidden word."
    params: { words: ["forbidden fruit"] }
  - id: no-ssn
    type: regex
    params: { pattern: "\\b\\d{3}-\\d{2}-\\d{4}\\b", expect_match: false }
  - id: no-secret-input
    type: content_excludes
    params: { patterns: ["top secret"], direction: input }
  - id: private-thoughts
    type: banned_words
    params: { words: ["launch codes"], direction: reasoning }
"#;

/// Guardwire with `pack` in front of a mock answering `answer` as a whole (non-streamed)
/// response; the client's answer to a plain request.
async fn whole_answer(p: &Proto, answer: &str, pack: &str) -> Answer {
    let whole = (p.whole)(answer);
    let mock = MockUpstream::start(move |_| Reply::json(200, &whole)).await;
    let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
    send(
        proxy.addr(),
        "POST",
        p.plain_path,
        (p.plain_body)("hi"),
        &[("content-type", "application/json")],
    )
    .await
}

#[tokio::test]
async fn clean_streams_are_byte_identical_at_every_split() {
    for p in all() {
        let (mut frames, _) =
            (p.text_frames)(&["Hello, ", "a forbidden ", "apple and café. ", "123-45-678"]);
        frames.insert(1, p.unknown_frame.to_owned());
        let body = frames.concat();
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        for split in 0..body.len() {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.status, 200, "{}", p.name);
            assert_eq!(a.text(), body, "{} split at {split}", p.name);
        }
    }
}

#[tokio::test]
async fn blocked_text_never_leaks_a_prefix() {
    for p in all() {
        let (frames, first) = (p.text_frames)(&["Eat the ", "forbid", "den fr", "uit. Yum"]);
        let body = frames.concat();
        let mut expected = frames[..first + 1].concat(); // "Eat the " is clean
        expected.push_str(&(p.block_frame)("Blocked: forbidden word."));
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        for split in (0..body.len()).step_by(3) {
            let a = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 11)).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
        let m = metrics(proxy.addr()).await;
        let needle = format!(
            r#"guardwire_blocked_total{{validator="no-forbidden",phase="stream",route="{}"}}"#,
            p.name
        );
        assert!(m.contains(&needle), "{m}");
    }
}

#[tokio::test]
async fn blocked_tool_arguments_never_leak_a_prefix() {
    for p in all() {
        let (frames, first) = (p.tool_frames)(&["{\"ssn\": \"12", "3-45-67", "89\"}"]);
        let body = frames.concat();
        let mut expected = frames[..first].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'no-ssn'"));
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        for split in (0..body.len()).step_by(5) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
    }
}

#[tokio::test]
async fn reasoning_is_checked_under_its_own_direction() {
    for p in all() {
        // "launch codes" is banned only in reasoning; in the answer it passes.
        let clean = (p.thinking_frames)(&["thinking hard"], "the launch codes are safe")
            .0
            .concat();
        let mock = split_mock(clean.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert_eq!(a.text(), clean, "{}", p.name);

        let (frames, _) = (p.thinking_frames)(&["the launch codes are 42"], "ok");
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert!(!a.text().contains("launch"), "{}: {}", p.name, a.text());
        assert!(
            a.text()
                .ends_with(&(p.block_frame)("blocked by guardrail 'private-thoughts'")),
            "{}: {}",
            p.name,
            a.text()
        );
    }
}

/// One phrase banned from the answer, with the default direction (`output`), and `extra`
/// params.
fn reasoning_pack(extra: &str) -> String {
    format!(
        "validators:\n  - id: no-launch\n    type: banned_words\n    message: \"Blocked: launch codes.\"\n    params: {{ words: [\"launch codes\"]{extra} }}\n"
    )
}

/// Reasoning is output: with the default direction, a banned phrase split across reasoning
/// deltas is blocked on every protocol, wherever the stream is cut, and no byte of it reaches
/// the client (the frames before it, then the error frame); the same stream with the opaque
/// signature or encrypted copy of the reasoning passes byte for byte when clean, and with
/// `reasoning: skip` even with the phrase.
#[tokio::test]
async fn reasoning_is_checked_as_output_by_default_and_never_leaks_a_prefix() {
    let pieces = ["I recall the ", "laun", "ch co", "des are 42. "];
    for p in all() {
        let (frames, first) = (p.thinking_frames)(&pieces, "The answer is 42.");
        let body = frames.concat();
        let released = frames[..first + 1].concat(); // "I recall the " is clean
        assert!(!released.contains("laun"));
        let expected = released + &(p.block_frame)("Blocked: launch codes.");
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), &reasoning_pack(""), "").await;
        for split in (0..body.len()).step_by(3) {
            let a = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 11)).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
        let m = metrics(proxy.addr()).await;
        let needle = format!(
            r#"guardwire_blocked_total{{validator="no-launch",phase="stream",route="{}"}}"#,
            p.name
        );
        assert!(m.contains(&needle), "{m}");

        let clean = (p.thinking_frames)(&["I recall ", "the launch", " window"], "ok")
            .0
            .concat();
        let mock = split_mock(clean.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), &reasoning_pack(""), "").await;
        for split in (0..clean.len()).step_by(7) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), clean, "{} split at {split}", p.name);
        }

        let mock = split_mock(body.clone()).await;
        let skip = reasoning_pack(", reasoning: skip");
        let proxy = start_proxy_all(&mock.base_url(), &skip, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert_eq!(a.text(), body, "{}: reasoning: skip", p.name);
        // The answer is still checked.
        let (frames, _) = (p.thinking_frames)(&["fine"], "the launch codes are 42");
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), &skip, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert!(
            a.text()
                .ends_with(&(p.block_frame)("Blocked: launch codes.")),
            "{}: {}",
            p.name,
            a.text()
        );
    }
}

/// The same for whole (non-streamed) answers: violating reasoning answers 400 in the
/// provider's shape, and `reasoning: skip` relays the answer unchanged.
#[tokio::test]
async fn whole_answers_with_violating_reasoning_are_blocked() {
    for p in all() {
        let body = (p.thinking_whole)("I recall the launch codes are 42.", "The answer is 42.");
        let reply = body.clone();
        let mock = MockUpstream::start(move |_| Reply::json(200, &reply)).await;
        let proxy = start_proxy_all(&mock.base_url(), &reasoning_pack(""), "").await;
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("hi"),
            &[("content-type", "application/json")],
        )
        .await;
        assert_eq!(a.status, 400, "{}: {}", p.name, a.text());
        assert_eq!(
            (p.error_message)(&a.json()),
            "Blocked: launch codes.",
            "{}",
            p.name
        );
        assert!(!a.text().contains("launch codes are"), "{}", p.name);

        let proxy =
            start_proxy_all(&mock.base_url(), &reasoning_pack(", reasoning: skip"), "").await;
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("hi"),
            &[("content-type", "application/json")],
        )
        .await;
        assert_eq!((a.status.as_u16(), a.text()), (200, body), "{}", p.name);
    }
}

/// A redacting validator of the answer masks its reasoning too, in the deltas and in every
/// repeat of them, streamed and whole, on every protocol.
#[tokio::test]
async fn redaction_masks_reasoning_by_default() {
    let pack = "validators:\n  - id: no-launch\n    type: banned_words\n    mode: redact\n    mask: \"[codes]\"\n    params: { words: [\"launch codes\"] }\n";
    for p in all() {
        let (frames, _) = (p.thinking_frames)(&["I recall the launch codes are 42. "], "ok");
        let (masked, _) = (p.thinking_frames)(&["I recall the [codes] are 42. "], "ok");
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert_eq!(a.text(), masked.concat(), "{}", p.name);

        let whole = (p.thinking_whole)("I recall the launch codes are 42.", "ok");
        let mock = MockUpstream::start(move |_| Reply::json(200, &whole)).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("hi"),
            &[("content-type", "application/json")],
        )
        .await;
        assert_eq!(
            (a.status.as_u16(), a.text()),
            (
                200,
                (p.thinking_whole)("I recall the [codes] are 42.", "ok")
            ),
            "{}",
            p.name
        );
    }
}

/// Anthropic's `redacted_thinking` blocks carry encrypted reasoning no reader sees: relayed
/// unchanged when opaque, and never relayed unchecked (the fallback reads their `data` as an
/// unknown string, so readable text there is checked like the answer).
#[tokio::test]
async fn redacted_thinking_is_relayed_and_its_data_is_still_checked() {
    let p = anthropic();
    let redacted = |data: &str, text: &str| {
        [
            ev(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":data}}),
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
        ]
        .concat()
    };
    let opaque = redacted(
        "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
        "ok",
    );
    let mock = split_mock(opaque.clone()).await;
    let proxy = start_proxy_all(&mock.base_url(), &reasoning_pack(""), "").await;
    let a = stream(&p, proxy.addr(), "hi", "").await;
    assert_eq!(a.text(), opaque);

    let readable = redacted("the launch codes are 42", "ok");
    let mock = split_mock(readable).await;
    let proxy = start_proxy_all(&mock.base_url(), &reasoning_pack(""), "").await;
    let a = stream(&p, proxy.addr(), "hi", "").await;
    assert_eq!(a.text(), (p.block_frame)("Blocked: launch codes."));
}

#[tokio::test]
async fn whole_responses_and_inputs_are_blocked_in_the_providers_shape() {
    for p in all() {
        let body = (p.whole)("this is the forbidden fruit!");
        let mock = split_mock(body).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("whole"),
            &[],
        )
        .await;
        assert_eq!(a.status, 400, "{}: {}", p.name, a.text());
        assert_eq!(a.headers["x-should-retry"], "false");
        assert_eq!(
            (p.error_message)(&a.json()),
            "Blocked: forbidden word.",
            "{}",
            p.name
        );

        let clean = (p.whole)("a fine answer");
        let mock = split_mock(clean.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("whole"),
            &[],
        )
        .await;
        assert_eq!((a.status.as_u16(), a.text()), (200, clean), "{}", p.name);

        let a = send(
            proxy.addr(),
            "POST",
            p.stream_path,
            (p.stream_body)("it is TOP SECRET"),
            &[],
        )
        .await;
        assert_eq!(a.status, 400, "{}", p.name);
        assert_eq!(
            (p.error_message)(&a.json()),
            "blocked by guardrail 'no-secret-input'"
        );
        let a = send(
            proxy.addr(),
            "POST",
            p.plain_path,
            (p.plain_body)("top secret stuff"),
            &[],
        )
        .await;
        assert_eq!(a.status, 400, "{}", p.name);
        assert_eq!(
            mock.request_count(),
            1,
            "{}: input blocks never reach the upstream",
            p.name
        );
    }
}

#[tokio::test]
async fn malformed_frames_end_the_stream_with_the_protocols_error_frame() {
    for p in all() {
        let (mut frames, _) = (p.text_frames)(&["fine"]);
        let last = frames.len() - 1;
        frames.insert(last, "data: {not json\n\n".into());
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        let text = a.text();
        assert!(text.contains("fine"), "{}: {text}", p.name);
        let tail = &text[text.rfind("data: ").unwrap() + 6..];
        let err: serde_json::Value = serde_json::from_str(tail.trim()).unwrap();
        assert_eq!(
            (p.error_message)(&err),
            "the upstream sent a malformed stream frame",
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn unconfigured_providers_answer_404_in_their_own_shape() {
    let server = guardwire::server::start(
        guardwire::config::Config::from_yaml("listen: \"127.0.0.1:0\"\n").unwrap(),
    )
    .await
    .unwrap();
    for p in all() {
        let a = send(
            server.addr,
            "POST",
            p.stream_path,
            (p.stream_body)("hi"),
            &[],
        )
        .await;
        assert_eq!(a.status, 404, "{}", p.name);
        assert!(
            (p.error_message)(&a.json()).contains("no upstream"),
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn a_forbidden_tool_is_blocked_before_anything_of_its_call_is_released() {
    let pack =
        "validators:\n  - id: no-f\n    type: tools_not_called\n    params: { tool_names: [f] }\n";
    for p in all() {
        let (frames, _) = (p.tool_frames)(&["{\"q\": ", "1}"]);
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        assert_eq!(
            a.text(),
            (p.block_frame)("blocked by guardrail 'no-f'"),
            "{}",
            p.name
        );
    }
}

const REDACT_PACK: &str = r#"
validators:
  - id: no-fruit
    type: content_excludes
    mode: redact
    params: { patterns: ["forbidden fruit"], match_mode: word_boundary }
  - id: codes
    type: content_excludes
    mode: redact
    mask: "***"
    params: { patterns: ["XK-99"] }
"#;

#[tokio::test]
async fn redaction_masks_exactly_the_match_on_every_protocol_and_split() {
    for p in all() {
        let pieces = ["Eat the ", "forbid", "den fr", "uit. Code XK-", "99 ok"];
        let (frames, _) = (p.text_frames)(&pieces);
        let body = frames.concat();
        let (redacted, _) =
            (p.text_frames)(&["Eat the ", "[REDACTED:no-fruit]", "", ". Code ***", " ok"]);
        let expected = redacted.concat();
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), REDACT_PACK, "").await;
        for split in (0..body.len()).step_by(7) {
            let a = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 13)).await;
            assert_eq!(a.status, 200, "{}", p.name);
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
        let m = metrics(proxy.addr()).await;
        let needle = format!(
            r#"guardwire_redactions_total{{validator="no-fruit",phase="stream",route="{}"}}"#,
            p.name
        );
        assert!(m.contains(&needle), "{m}");
        // A whole response is rewritten the same way.
        let a = whole_answer(&p, "Eat the forbidden fruit, XK-99.", REDACT_PACK).await;
        assert_eq!(a.status, 200, "{}", p.name);
        assert_eq!(
            a.text(),
            (p.whole)("Eat the [REDACTED:no-fruit], ***."),
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn redaction_masks_tool_arguments() {
    for p in all() {
        let (frames, _) = (p.tool_frames)(&["{\"note\": \"XK", "-99 now\"}"]);
        let (expected, _) = (p.tool_frames)(&["{\"note\": \"***", " now\"}"]);
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), REDACT_PACK, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        // (Gemini sends arguments as one JSON object; it is rewritten in place.)
        assert_eq!(a.text(), expected.concat(), "{}", p.name);
    }
}

#[tokio::test]
async fn tool_results_in_the_history_are_judged_before_the_call() {
    let pack = r#"
validators:
  - id: tools-ok
    type: no_tool_errors
  - id: has-status
    type: tool_result_includes
    params: { tool_name: lookup, patterns: [status] }
"#;
    for p in all() {
        let (frames, _) = (p.text_frames)(&["fine"]);
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        let ask = |result: serde_json::Value| {
            send(
                proxy.addr(),
                "POST",
                p.stream_path,
                (p.history_body)(&result),
                &[("content-type", "application/json")],
            )
        };
        let a = ask(json!({"status": "ok"})).await;
        assert_eq!(a.status, 200, "{}: {}", p.name, a.text());
        let a = ask(json!({"error": "backend down", "status": 503})).await;
        assert_eq!(a.status, 400, "{}", p.name);
        assert_eq!(
            (p.error_message)(&a.json()),
            "blocked by guardrail 'tools-ok'"
        );
        let a = ask(json!({"ok": true})).await;
        assert_eq!(
            (p.error_message)(&a.json()),
            "blocked by guardrail 'has-status'"
        );
        assert_eq!(
            mock.requests().len(),
            1,
            "{}: blocked requests reached the provider",
            p.name
        );
    }
}

#[tokio::test]
async fn excluded_argument_values_are_blocked_before_they_are_released() {
    let pack = r#"
validators:
  - id: no-mallory
    type: tool_args_excluded_session
    params: { tool_name: f, excluded_args: { to: mallory } }
"#;
    for p in all() {
        let (frames, first) =
            (p.tool_frames)(&["{\"memo\": \"hi\", \"to\": \"mal", "lory\", \"n\": 1}"]);
        let body = frames.concat();
        // The frame where the watched value starts is held until the value is judged.
        let mut expected = frames[..first].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'no-mallory'"));
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        for split in (0..body.len()).step_by(9) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
        let (ok, _) = (p.tool_frames)(&["{\"to\": \"bob\"}"]);
        let mock = split_mock(ok.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        assert_eq!(
            stream(&p, proxy.addr(), "hi", "").await.text(),
            ok.concat(),
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn sentence_and_token_limits_stop_before_the_excess_is_released() {
    let pack = r#"
validators:
  - id: two-sentences
    type: max_sentences
    params: { max_sentences: 2 }
"#;
    for p in all() {
        let (frames, first) = (p.text_frames)(&[
            "Dr. Who paid 3.5 pounds. Then",
            " he left",
            ". Nobody",
            " saw.",
        ]);
        let body = frames.concat();
        let mut expected = frames[..first + 2].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'two-sentences'"));
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        for split in (0..body.len()).step_by(11) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
    }
    let tokens =
        "validators:\n  - id: short\n    type: max_length\n    params: { max_tokens: 5 }\n";
    for p in all() {
        // "one two three four five" is five o200k tokens; " six" the sixth. " five" is counted
        // only when the next word shows where its token ends, so its frame is still held then.
        let (frames, first) = (p.text_frames)(&["one two three", " four five", " six seven"]);
        let mut expected = frames[..first + 1].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'short'"));
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), tokens, "").await;
        assert_eq!(
            stream(&p, proxy.addr(), "hi", "").await.text(),
            expected,
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn budgets_read_each_protocols_usage_and_end_slow_streams() {
    let pack = r#"
validators:
  - id: tokens
    type: cost_budget
    on_error: fail_open
    params: { max_total_tokens: 10 }
"#;
    for p in all() {
        let (frames, _) = (p.text_frames)(&["hello"]);
        let mock = split_mock(frames.concat()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        // Anthropic's fixture reports 3 + 9 tokens, Gemini's 2 + 5; the OpenAI fixtures report
        // none, and guardwire's estimate (a few tokens) is under the budget.
        let blocked = a
            .text()
            .ends_with(&(p.block_frame)("blocked by guardrail 'tokens'"));
        assert_eq!(
            blocked,
            p.name == "anthropic_messages",
            "{}: {}",
            p.name,
            a.text()
        );
    }
    let slow = "validators:\n  - id: fast\n    type: latency_budget\n    params: { max_ms: 300 }\n";
    for p in all() {
        let (frames, first) = (p.text_frames)(&["quick ", "and slow"]);
        let head = frames[..first + 1].concat();
        let rest = frames[first + 1..].concat();
        let mock = MockUpstream::start(move |_| {
            Reply::sse_split(
                format!("{head}{rest}").as_bytes(),
                &[head.len()],
                Duration::from_millis(1500),
            )
        })
        .await;
        let proxy = start_proxy_all(&mock.base_url(), slow, "").await;
        let a = stream(&p, proxy.addr(), "hi", "").await;
        let mut expected = frames[..first + 1].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'fast'"));
        assert_eq!(a.text(), expected, "{}", p.name);
        assert!(
            mock.wait_for_cancelled(1, Duration::from_secs(5)).await,
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn pii_is_blocked_or_masked_on_every_protocol_and_split() {
    let redact = r#"
validators:
  - id: pii
    type: pii_leakage
    mode: redact
    params: { entities: [email, phone, credit_card] }
"#;
    let block = "validators:\n  - id: cards\n    type: pii\n    params: { types: [credit_card] }\n";
    for p in all() {
        let pieces = [
            "Mail jo",
            "hn@exam",
            "ple.com or call 415-555-0132 now; card 4111 1111 ",
            "1111 1111 please, not 4111 1111 1111 1112.",
        ];
        let (frames, first) = (p.text_frames)(&pieces);
        let body = frames.concat();
        let (masked, _) = (p.text_frames)(&[
            "Mail [REDACTED:email]",
            "",
            " or call [REDACTED:phone] now; card [REDACTED:credit_card]",
            " please, not 4111 1111 1111 1112.",
        ]);
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), redact, "").await;
        for split in (0..body.len()).step_by(13) {
            let a = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 5)).await;
            assert_eq!(a.text(), masked.concat(), "{} split at {split}", p.name);
        }
        // Enforced: nothing from the frame where the card starts on.
        let proxy = start_proxy_all(&mock.base_url(), block, "").await;
        let mut expected = frames[..first + 2].concat();
        expected.push_str(&(p.block_frame)("blocked by guardrail 'cards'"));
        for split in (0..body.len()).step_by(17) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), expected, "{} split at {split}", p.name);
        }
    }
}

#[tokio::test]
async fn structured_output_checks_judge_the_whole_answer_on_every_protocol() {
    let pack = r#"
validators:
  - id: schema
    type: json_schema
    params: { schema: { type: object, required: [status] }, allow_wrapped: true }
  - id: shipped
    type: json_path
    params: { expression: status, expected: shipped, allow_wrapped: true }
  - id: fields
    type: required_fields
    params: { fields: [order.id] }
"#;
    for p in all() {
        for (answer, verdict) in [
            (r#"{"status": "shipped", "order": {"id": 7}}"#, None),
            (
                "```json\n{\"status\": \"shipped\", \"order\": {\"id\": 7}}\n```",
                None,
            ),
            (r#"{"state": "shipped"}"#, Some("schema")),
            (r#"{"status": "lost", "order": {"id": 7}}"#, Some("shipped")),
            (r#"{"status": "shipped", "order": {}}"#, Some("fields")),
        ] {
            // Streamed in pieces: the text is released, the end is replaced by the error frame.
            let pieces: Vec<&str> = answer.split_inclusive(',').collect();
            let (frames, _) = (p.text_frames)(&pieces);
            let mock = split_mock(frames.concat()).await;
            let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
            let a = stream(&p, proxy.addr(), "hi", "").await;
            match verdict {
                None => assert_eq!(a.text(), frames.concat(), "{}: {answer}", p.name),
                Some(v) => assert!(
                    a.text()
                        .ends_with(&(p.block_frame)(&format!("blocked by guardrail '{v}'"))),
                    "{}: {answer}: {}",
                    p.name,
                    a.text()
                ),
            }
            // Whole: 400 in the provider's shape, or the body unchanged.
            let a = whole_answer(&p, answer, pack).await;
            match verdict {
                None => assert_eq!(a.text(), (p.whole)(answer), "{}", p.name),
                Some(v) => {
                    assert_eq!(a.status, 400, "{}", p.name);
                    assert_eq!(
                        (p.error_message)(&a.json()),
                        format!("blocked by guardrail '{v}'")
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn redacting_regexes_mask_whole_matches_on_every_protocol() {
    let pack = r#"
validators:
  - id: keys
    type: regex
    mode: redact
    params: { pattern: "sk-[A-Za-z0-9]{20,}", expect_match: false }
"#;
    for p in all() {
        let (frames, _) =
            (p.text_frames)(&["key sk-abcdefghij", "klmnopqrstuvwxyz0123", " and more"]);
        let body = frames.concat();
        let (masked, _) = (p.text_frames)(&["key [REDACTED:keys]", "", " and more"]);
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
        for split in (0..body.len()).step_by(11) {
            let a = stream(&p, proxy.addr(), "hi", &split.to_string()).await;
            assert_eq!(a.text(), masked.concat(), "{} split at {split}", p.name);
        }
    }
}

#[tokio::test]
async fn a_monitor_mode_latency_budget_counts_a_slow_stream_and_lets_it_finish() {
    let pack = "validators:\n  - id: slow\n    type: latency_budget\n    mode: monitor\n    params: { max_ms: 100 }\n";
    let p = chat();
    let (frames, first) = (p.text_frames)(&["quick ", "and slow"]);
    let body = frames.concat();
    let head = frames[..first + 1].concat().len();
    let mock = MockUpstream::start(move |_| {
        Reply::sse_split(body.as_bytes(), &[head], Duration::from_millis(300))
    })
    .await;
    let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
    let a = stream(&p, proxy.addr(), "hi", "").await;
    assert_eq!(a.text(), frames.concat());
    let m = metrics(proxy.addr()).await;
    assert!(
        m.contains(
            r#"guardwire_monitor_hits_total{validator="slow",phase="stream",route="openai_chat"} 1"#
        ),
        "{m}"
    );
}

/// A stream's identifier-shaped strings skip the word and phrase checks but not the secret
/// patterns — on every protocol's fast path too, where a text event that repeats the last one
/// but for its text and a few unread members is read from its template and skips the
/// fallback: a key in such a member of a later event ends the stream before it reaches the
/// client (before the fix it was relayed), and changing clean values pass.
#[tokio::test]
async fn identifiers_a_template_skips_meet_the_secret_patterns() {
    const KEY: &str = "sk-ABCDEFGHIJKLMNOPQRSTUVWX";
    let pack = "validators:\n  - id: no-keys\n    type: regex\n    params: { pattern: \"sk-[A-Za-z0-9]{24}\", expect_match: false }\n";
    for p in all() {
        // A member each protocol's text events carry and its decoder does not read.
        let member = match p.name {
            "openai_chat" => "system_fingerprint",
            "openai_responses" => "obfuscation",
            "anthropic_messages" => "id",
            _ => "responseId",
        };
        for (values, leaks) in [(["v1", "v2", KEY], true), (["v1", "v2", "v3"], false)] {
            let (mut frames, first) = (p.text_frames)(&["Hello", " there", " friend"]);
            for (k, value) in values.iter().enumerate() {
                let frame = &mut frames[first + k];
                let at = frame.find("data: ").unwrap() + "data: ".len();
                let end = frame[at..].find('\n').unwrap() + at;
                let mut data: serde_json::Value = serde_json::from_str(&frame[at..end]).unwrap();
                data[member] = json!(value);
                frame.replace_range(at..end, &data.to_string());
            }
            let body = frames.concat();
            let mock = split_mock(body).await;
            let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
            let a = stream(&p, proxy.addr(), "hi", "").await;
            let text = a.text();
            assert!(!text.contains(KEY), "{}: {text}", p.name);
            assert_eq!(text.contains("no-keys"), leaks, "{}: {text}", p.name);
            assert_eq!(text.contains(" friend"), !leaks, "{}: {text}", p.name);
        }
    }
}

/// Round 11: an object key is read unless it has the shape of a field name — the SDKs keep an
/// unknown member (its key too) and show it. A key spelling the banned phrase, or a secret,
/// in a streamed answer ends the stream before it reaches the client, on every protocol's
/// fast path; in a request it is refused before the provider is called; a new member under a
/// field-name key passes.
#[tokio::test]
async fn keys_that_are_not_field_names_are_read() {
    const KEY: &str = "sk-ABCDEFGHIJKLMNOPQRSTUVWX";
    let pack = "validators:\n  - id: no-keys\n    type: regex\n    params: { pattern: \"sk-[A-Za-z0-9]{24}\", expect_match: false, direction: both }\n  - id: no-fruit\n    type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";
    for p in all() {
        for (key, blocked_by) in [
            (KEY, Some("no-keys")),
            ("the forbidden fruit", Some("no-fruit")),
            ("newField", None),
        ] {
            let (mut frames, first) = (p.text_frames)(&["Hello", " there", " friend"]);
            let frame = &mut frames[first + 2];
            let at = frame.find("data: ").unwrap() + "data: ".len();
            let end = frame[at..].find('\n').unwrap() + at;
            let mut data: serde_json::Value = serde_json::from_str(&frame[at..end]).unwrap();
            data[key] = json!(1);
            frame.replace_range(at..end, &data.to_string());
            let body = frames.concat();
            let mock = split_mock(body).await;
            let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
            let a = stream(&p, proxy.addr(), "hi", "").await;
            let text = a.text();
            assert!(!text.contains(KEY), "{}: {text}", p.name);
            assert!(!text.contains("forbidden fruit"), "{}: {text}", p.name);
            match blocked_by {
                Some(id) => {
                    assert!(!text.contains(" friend"), "{} {key}: {text}", p.name);
                    assert!(text.contains(id), "{} {key}: {text}", p.name);
                }
                None => assert!(text.contains(" friend"), "{} {key}: {text}", p.name),
            }
        }
        // A request with such a key in an unmodelled member is refused before the call.
        for key in [KEY, "the forbidden fruit"] {
            let mock = MockUpstream::start(|_| Reply::json(200, "{}")).await;
            let proxy = start_proxy_all(&mock.base_url(), pack, "").await;
            let mut body: serde_json::Value = serde_json::from_str(&(p.plain_body)("hi")).unwrap();
            body["metadata_x"] = json!({ key: "v" });
            let a = send(
                proxy.addr(),
                "POST",
                p.plain_path,
                body.to_string(),
                &[("content-type", "application/json")],
            )
            .await;
            assert_eq!(a.status, 400, "{} {key}: {}", p.name, a.text());
            assert_eq!(mock.requests().len(), 0, "{}", p.name);
        }
    }
}

/// Round 11: work per answer and per request is bounded. An answer with more tool calls than
/// one answer may make fails closed (502, nothing of it relayed) rather than be checked call
/// by call without end; a request of many identical messages (matched once each against what
/// the decoder read) is checked and forwarded.
#[tokio::test]
async fn answers_past_the_tool_call_bound_fail_closed_and_repeated_messages_are_read() {
    let calls: Vec<_> = (0..1100)
        .map(|i| json!({"id": format!("c{i}"), "type": "function", "function": {"name": "f", "arguments": "{}"}}))
        .collect();
    let whole = json!({"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": calls}}]});
    let mock = MockUpstream::start(move |_| Reply::json(200, &whole.to_string())).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let p = chat();
    let a = send(
        proxy.addr(),
        "POST",
        p.plain_path,
        (p.plain_body)("hi"),
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(a.text().contains("too many"), "{}", a.text());
    // 20,000 identical messages, and the banned phrase once among them at the end.
    let ok = MockUpstream::start(|_| Reply::json(200, &(chat().whole)("fine"))).await;
    let proxy = start_proxy_all(&ok.base_url(), &reasoning_pack(", direction: both"), "").await;
    for (last, status) in [("a", 200), ("the launch codes", 400)] {
        let mut messages = vec![json!({"role": "user", "content": "a"}); 20_000];
        messages.push(json!({"role": "user", "content": last}));
        let body = json!({"model": "m", "messages": messages}).to_string();
        let a = send(
            proxy.addr(),
            "POST",
            "/v1/chat/completions",
            body,
            &[("content-type", "application/json")],
        )
        .await;
        assert_eq!(a.status, status, "{last}: {}", a.text());
    }
}
