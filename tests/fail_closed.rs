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

/// The protocol's own error frame for `err`, as guardwire renders it.
fn error_frame(p: &Proto, err: &GatewayError) -> String {
    let protocol = guardwire::protocol::by_name(p.name).unwrap();
    String::from_utf8(protocol.stream_error_frame(err).to_vec()).unwrap()
}

/// guardwire in front of a mock that answers every request with `reply()`, and a streamed
/// request of `p`: the answer, and the metrics after it.
async fn ask_through(
    p: &Proto,
    reply: impl Fn() -> Reply + Send + Sync + 'static,
) -> (Answer, String) {
    let mock = MockUpstream::start(move |_| reply()).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let a = send(
        proxy.addr(),
        "POST",
        p.stream_path,
        (p.stream_body)("hi"),
        &[("content-type", "application/json")],
    )
    .await;
    let m = metrics(proxy.addr()).await;
    (a, m)
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
        // Comments and a numeric retry are keep-alives: they pass.
        let mut with_comments = frames.clone();
        with_comments.insert(first, ": keep-alive\n\nretry: 3000\n\n".into());
        let (a, _) = stream_through(&p, with_comments.concat(), vec![]).await;
        assert_eq!(a.text(), with_comments.concat(), "{}", p.name);
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
