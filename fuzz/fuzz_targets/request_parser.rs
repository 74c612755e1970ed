//! Every protocol's request parser (`Protocol::parse_request`) and error rendering.
//!
//! Input: byte 0's low 4 bits pick the protocol (`protocol::all()[b % n]`, as in
//! `stream_decoder`); with bit 4 (0x10) set, the request path is the input's first line (up to
//! `\n`), else the first standard path the protocol serves; the rest is the request body.
//!
//! Asserts: no panic in `matches`, `serves`, `reply_to` or `parse_request`; for the parser's error when the
//! body is refused, and for a block whose message is the body's text: the error answer is JSON
//! (`error_body`), and the in-band error frame (`stream_error_frame`) is one terminated SSE
//! frame whose data is JSON.
#![no_main]

use guardwire::error::GatewayError;
use guardwire::protocol;
use guardwire::sse::SseFramer;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;

const PATHS: [&str; 6] = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    "/v1/completions",
    "/v1/embeddings",
];

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let all = protocol::all();
    let proto = all[usize::from(head & 0x0f) % all.len()];
    let (path, body) = if head & 0x10 != 0 {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let Ok(path) = std::str::from_utf8(&rest[..end]) else {
            return;
        };
        (path, &rest[(end + 1).min(rest.len())..])
    } else {
        let path = PATHS.into_iter().find(|p| proto.matches(p)).unwrap_or("/");
        (path, rest)
    };
    let _ = proto.matches(path);
    let _ = proto.serves(path);
    // What an error answer repeats of the request (the JSON-RPC id): any body at all.
    let to = proto.reply_to(body);
    if let Err(err) = proto.parse_request(body, path) {
        check_error_answers(proto, &err, &to);
    }
    // A block's message comes from the pack (and a finding's text): any text at all.
    let message = String::from_utf8_lossy(body).into_owned();
    check_error_answers(proto, &GatewayError::Blocked { message }, &to);
});

fn check_error_answers(
    proto: &dyn protocol::Protocol,
    err: &GatewayError,
    to: &protocol::ReplyTo,
) {
    let answer = proto.error_body(err, to);
    assert!(
        serde_json::from_slice::<IgnoredAny>(&answer).is_ok(),
        "error body is not JSON: {answer:?}"
    );
    let frame = proto.stream_error_frame(err, to);
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    framer.push(&frame, &mut frames).expect("small frame");
    assert!(
        framer.finish().is_none(),
        "error frame is not terminated: {frame:?}"
    );
    assert_eq!(
        frames.len(),
        1,
        "error frame is {} frames: {frame:?}",
        frames.len()
    );
    let payload = frames[0].fields().data.expect("error frame has data");
    assert!(
        serde_json::from_slice::<IgnoredAny>(&payload).is_ok(),
        "error frame data is not JSON: {frame:?}"
    );
}
