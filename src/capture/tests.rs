#![allow(clippy::unwrap_used, clippy::panic)]
use super::*;
use serde_json::Value;

/// A capture whose writer never reads: `(capture, its queue)`.
fn stalled(queue: usize) -> (Capture, Receiver<Line>) {
    let (tx, rx) = sync_channel(queue);
    let settings = CaptureConfig {
        path: Some("unused".into()),
        queue,
        ..CaptureConfig::default()
    };
    let capture = Capture {
        settings,
        tx,
        offered: AtomicU64::new(0),
    };
    (capture, rx)
}

fn count(metrics: &Metrics, result: &'static str) -> u64 {
    metrics
        .capture
        .records
        .get_or_create(&crate::metrics::CaptureLabels { result })
        .get()
}

#[test]
fn a_full_queue_drops_the_record_without_waiting() {
    let metrics = Arc::new(Metrics::new());
    let (capture, rx) = stalled(1);
    for i in 0..3 {
        let c = capture
            .start(
                "openai_chat",
                "openai_chat",
                "/v1/chat/completions",
                &format!("r{i}"),
                Some("alice"),
                &metrics,
            )
            .unwrap();
        c.request(&Bytes::from_static(br#"{"model":"m","messages":[]}"#));
        c.response_head(200, false);
        c.data(br#"{"choices":"#);
        c.data(br#"[]}"#);
        c.finish(200, "ok");
    }
    assert_eq!(count(&metrics, "queue_full"), 2);
    let line: Value =
        serde_json::from_slice(&rx.try_recv().unwrap().record.line().unwrap()).unwrap();
    // The record's own id; the request id and the key's are metadata.
    assert_eq!(line["id"].as_str().map(str::len), Some(32));
    assert_eq!(line["metadata"]["request_id"], "r0");
    assert_eq!(line["metadata"]["key_id"], "alice");
    assert_eq!(line["response_body"], r#"{"choices":[]}"#);
    assert_eq!(line["metadata"]["status"], 200);
}

#[test]
fn oversized_exchanges_are_counted_not_written() {
    let metrics = Arc::new(Metrics::new());
    let (capture, rx) = stalled(8);
    let start = || {
        capture
            .start(
                "openai_chat",
                "openai_chat",
                "/v1/chat/completions",
                "r",
                None,
                &metrics,
            )
            .unwrap()
    };
    // Not JSON: written as it came (a replay refuses it, as the proxy did).
    start().request(&Bytes::from_static(b"not json"));
    // No request body at all: nothing to replay (found by the writer).
    drop(start());
    // An answer over max_record_bytes (1 MiB).
    let c = start();
    c.request(&Bytes::from_static(b"{}"));
    c.response_head(200, true);
    for _ in 0..20 {
        c.data(&[b'x'; 64 * 1024]);
    }
    drop(c);
    // A whole answer that is not JSON is kept as text; an error status's body is not.
    let c = start();
    c.request(&Bytes::from_static(b"{}"));
    c.response_head(200, false);
    c.data(b"<html>oops</html>");
    drop(c);
    let c = start();
    c.request(&Bytes::from_static(b"{}"));
    c.response_head(503, false);
    c.data(b"overloaded");
    drop(c);
    assert_eq!(count(&metrics, "too_large"), 1);
    let not_json: Value =
        serde_json::from_slice(&rx.try_recv().unwrap().record.line().unwrap()).unwrap();
    assert_eq!(not_json["request_body"], "not json");
    assert_eq!(rx.try_recv().unwrap().record.line(), Err("unreadable"));
    let text: Value =
        serde_json::from_slice(&rx.try_recv().unwrap().record.line().unwrap()).unwrap();
    assert_eq!(text["response_body"], "<html>oops</html>");
    let error: Value =
        serde_json::from_slice(&rx.try_recv().unwrap().record.line().unwrap()).unwrap();
    assert!(error.get("response_body").is_none() && error.get("response").is_none());
    assert_eq!(error["metadata"]["upstream_status"], 503);
    assert_eq!(error["metadata"]["outcome"], "unfinished");
}

#[test]
fn every_nth_exchange_is_sampled() {
    let metrics = Arc::new(Metrics::new());
    let (mut capture, _rx) = stalled(64);
    capture.settings.sample = 0.25;
    let taken = (0..40)
        .filter(|_| {
            capture
                .start("openai_chat", "openai_chat", "/p", "r", None, &metrics)
                .is_some()
        })
        .count();
    assert_eq!(taken, 10);
    capture.settings.routes = vec!["other".into()];
    assert!(capture
        .start("openai_chat", "openai_chat", "/p", "r", None, &metrics)
        .is_none());
}

/// The record of an exchange with these parts, as the writer would get it.
fn record_of(id: &str, path: &str, request: &[u8], response: Option<(bool, &[u8])>) -> Vec<u8> {
    let metrics = Arc::new(Metrics::new());
    let (capture, rx) = stalled(1);
    let c = capture
        .start("openai_chat", "openai_chat", path, id, None, &metrics)
        .unwrap();
    c.request(&Bytes::copy_from_slice(request));
    if let Some((sse, body)) = response {
        c.response_head(200, sse);
        c.data(body);
    }
    c.finish(200, "ok");
    drop(c);
    rx.try_recv().unwrap().record.line().unwrap()
}

/// Reads `line` back as `eval --replay` does, checking it is one line and holds exactly
/// what was captured.
fn round_trips(line: &[u8], id: &str, path: &str, request: &[u8], response: Option<(bool, &[u8])>) {
    use crate::suite::record::{read, Answer};
    assert_eq!(
        line.iter().filter(|&&b| b == b'\n' || b == b'\r').count(),
        1,
        "one line, ended once: {}",
        String::from_utf8_lossy(line)
    );
    assert_eq!(line.last(), Some(&b'\n'));
    let ex = read(&line[..line.len() - 1], 1).unwrap();
    let record: Value = serde_json::from_slice(line).unwrap();
    assert_eq!(record["metadata"]["request_id"], id);
    assert_eq!(ex.id, record["id"].as_str().unwrap());
    assert_eq!(ex.path.as_deref(), Some(path));
    assert_eq!(&*ex.request, request);
    match (response, &ex.answer) {
        (None, Answer::None) => {}
        (Some((false, body)), Answer::Whole(got)) => assert_eq!(&**got, body),
        (Some((true, body)), Answer::Sse(got)) => assert_eq!(&got[..], body),
        _ => panic!("another answer was read back"),
    }
}

#[test]
fn a_body_holding_a_record_of_its_own_stays_inside_its_line() {
    // Valid JSON whose whitespace is line breaks, the middle line a whole record: copied
    // raw, it was a record of its own that a replay trusted.
    let forged =
        br#"{"id":"forged","request":{"model":"m","messages":[]},"response":{"choices":[]}}"#;
    let mut request = br#"{"model":"m","messages":[],"x":"#.to_vec();
    request.extend_from_slice(b"\n");
    request.extend_from_slice(forged);
    request.extend_from_slice(b"\r\n}");
    let response = b"{\"choices\":\n[]}\n";
    let line = record_of(
        "r1",
        "/v1/chat/completions",
        &request,
        Some((false, response)),
    );
    round_trips(
        &line,
        "r1",
        "/v1/chat/completions",
        &request,
        Some((false, response)),
    );
    // Not UTF-8: base64, and still the same bytes once read.
    let bytes = b"\xff\n{\"id\":\"x\"}\n";
    let line = record_of("r2", "/p", bytes, Some((true, bytes)));
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert!(v.get("request_body").is_none() && v["request_body_base64"].is_string());
    round_trips(&line, "r2", "/p", bytes, Some((true, bytes)));
}

fn bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        // Text made of what ends lines and builds records, and the characters JSON
        // readers disagree about (U+2028, NUL, escapes).
        "[\n\r{}\\[\\]\\\\\":, a-z\u{0}-\u{1f}\u{7f}\u{85}\u{2028}\u{2029}\u{feff}é]{0,128}"
            .prop_map(String::into_bytes),
    ]
}

proptest::proptest! {
    #[test]
    fn any_bytes_round_trip_as_one_line(
        request in bytes(),
        body in bytes(),
        answer in 0u8..3,
        id in "\\PC{0,40}|[\n\r\"{}]{0,8}",
        path in "/[\\PC\n\r]{0,40}",
    ) {
        let response = match answer {
            0 => None,
            1 => Some((false, &body[..])),
            _ => Some((true, &body[..])),
        };
        let line = record_of(&id, &path, &request, response);
        round_trips(&line, &id, &path, &request, response);
    }
}
