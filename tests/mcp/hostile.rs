//! Security review of the MCP routes: what a hostile client or server can put where a reader
//! disagrees with guardwire's — a key twice, structure keys where the schema has none, vendor
//! fields and keys, routing headers the server reads instead of the body, SSE comments and ids
//! — never crosses unchecked; and a violating result split at every byte never leaks a part.

use super::*;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HEADER_MISMATCH: i64 = -32020;

/// A POST written byte for byte (header values the HTTP client library would refuse).
async fn raw_post(addr: SocketAddr, extra_headers: &[u8], body: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(extra_headers);
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body.as_bytes());
    s.write_all(&req).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Fails before the fix: serde_json keeps a key's last copy, the bytes forwarded keep both.
#[tokio::test]
async fn a_key_given_twice_is_refused_in_both_directions() {
    let mock = MockUpstream::start(|_| Reply::json(200, &result(1, "ok"))).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"forbidden","text":"clean"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"forbidden","\u0074ext":"clean"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_shell","name":"echo","arguments":{}}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":{"b":[{"c":"x","c":"y"}]}}}}]"#,
    ] {
        let a = post(&p, body, &[]).await;
        assert_eq!(a.status, 400, "{body}: {}", a.text());
        assert_eq!(a.json()["error"]["code"], -32600, "{body}: {}", a.text());
        assert!(!a.text().contains("forbidden"));
    }
    assert_eq!(
        mock.request_count(),
        0,
        "no message with a key twice went up"
    );

    let twice = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a forbidden note","text":"fine"}],"isError":false}}"#;
    let mock = MockUpstream::start(move |_| Reply::json(200, twice)).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    let a = post(&p, &call(1, "leak", json!({})), &[]).await;
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    assert_eq!(a.json()["error"]["code"], -32012, "{}", a.text());

    let events = sse(&[
        result(2, "first").replace("\"isError\":false", "\"isError\":false,\"isError\":true"),
        twice.replace("\"id\":1", "\"id\":3"),
    ]);
    let mock = MockUpstream::start(move |_| Reply::sse(&events)).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    let a = post(&p, &call(3, "leak", json!({})), &[]).await;
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 1, "{}", a.text());
    assert_eq!(msgs[0]["id"], 3);
    assert_eq!(msgs[0]["error"]["code"], -32012);
}

/// Fails before the fix: `id`, `type`, `role`, … were structure at any depth.
#[tokio::test]
async fn structure_keys_off_their_schema_position_are_text() {
    let replies = [
        json!({"content":[{"type":"text","text":"ok"}],"_meta":{"id":"forbidden"}}),
        json!({"content":[{"type":"text","text":"ok"}],"x-vendor":{"type":"forbidden","role":"forbidden"}}),
        json!({"content":[{"type":"forbidden words","text":"ok"}]}),
        json!({"content":[{"type":"text","text":"ok","mimeType":"text/plain; forbidden"}]}),
        json!({"contents":[{"uri":"res://a","text":"ok","method":"forbidden"}]}),
        json!({"content":[{"type":"text","text":"ok"}],"x-vendor":{"forbidden":true}}),
        json!({"content":[{"type":"text","text":"ok"}],"_meta":{"ignore previous instructions":1}}),
    ];
    for (i, r) in replies.iter().enumerate() {
        let body = json!({"jsonrpc":"2.0","id":1,"result":r}).to_string();
        let mock = MockUpstream::start(move |_| Reply::json(200, &body)).await;
        let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
        let a = post(&p, &call(1, "t", json!({})), &[]).await;
        assert_eq!(a.json()["error"]["code"], BLOCKED, "{i}: {}", a.text());
        assert!(!a.text().contains("forbidden"), "{i}: {}", a.text());
    }
    // The same keys at the schema's positions stay structure: a clean answer is relayed as it
    // came.
    let clean = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok","annotations":{"audience":["user"]}}],"_meta":{"progressToken":"tok"},"isError":false}}).to_string();
    let c = clean.clone();
    let mock = MockUpstream::start(move |_| Reply::json(200, &c)).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    assert_eq!(post(&p, &call(1, "t", json!({})), &[]).await.text(), clean);
    // A client's `_meta` is read as text too: nothing goes up.
    for body in [
        json!({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"res://a","_meta":{"role":"forbidden"}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"progressToken":"forbidden words here"}}}),
    ] {
        let a = post(&p, &body.to_string(), &[]).await;
        assert_eq!(a.json()["error"]["code"], BLOCKED, "{body}: {}", a.text());
    }
    assert_eq!(mock.request_count(), 1);
}

/// Unknown fields (values and keys) with violating text: in a result, in a request's params, in
/// a notification either way — blocked by the fallback.
#[tokio::test]
async fn unknown_fields_are_checked_everywhere() {
    let notification = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"fine","x-extra":{"forbidden":"x"}}}).to_string();
    let events = sse(&[notification, result(1, "fine")]);
    let mock = MockUpstream::start(move |_| Reply::sse(&events)).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    for body in [
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x-extra":"forbidden"}}),
        json!({"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","x-extra":{"forbidden":1}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"x-extra":[{"note":"forbidden"}]}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized","params":{"x-extra":"forbidden"}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized","params":{"forbidden":null}}),
        json!({"jsonrpc":"2.0","id":1,"method":"vendor/x","x-top":"forbidden"}),
        // A tool call's envelope and id are read as every other message's (before the fix
        // only its params were).
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}},"x-top":"forbidden"}),
        json!({"jsonrpc":"2.0","id":"the forbidden words","method":"tools/call","params":{"name":"t","arguments":{}}}),
    ] {
        let a = post(&p, &body.to_string(), &[]).await;
        assert_eq!(a.json()["error"]["code"], BLOCKED, "{body}: {}", a.text());
    }
    assert_eq!(mock.request_count(), 0);
    let a = post(&p, &call(1, "t", json!({})), &[]).await;
    let msgs = sse_messages(&a.body);
    assert!(!a.text().contains("forbidden"), "{}", a.text());
    assert_eq!(
        msgs.len(),
        1,
        "the notification is not relayed: {}",
        a.text()
    );
    assert_eq!(msgs[0]["result"]["content"][0]["text"], "fine");
}

/// Fails before the fix: an encoded or non-ASCII `Mcp-Param-*` / `Mcp-Name` went up unread,
/// and an `Mcp-Method` or `Mcp-Name` other than the body's was forwarded.
#[tokio::test]
async fn routing_headers_are_read_decoded_or_refused() {
    let mock = MockUpstream::start(|_| Reply::json(200, &result(1, "ok"))).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    let clean = call(1, "echo", json!({"text": "hello"}));
    // "say forbidden" as the SDKs wrap a value that is not plain ASCII.
    let wrapped = "=?base64?c2F5IGZvcmJpZGRlbg==?=";
    let a = post(&p, &clean, &[("mcp-param-text", wrapped)]).await;
    assert_eq!(a.json()["error"]["code"], BLOCKED, "{}", a.text());
    // `Mcp-Name` is what the server routes by: it must be the body's name (decoded).
    for (name, value) in [
        ("mcp-method", "tools/list"),
        ("mcp-param-text", "=?base64?not*base64?="),
        ("mcp-name", "other"),
        ("mcp-name", wrapped),
    ] {
        let a = post(&p, &clean, &[(name, value)]).await;
        assert_eq!(a.status, 400);
        assert_eq!(
            a.json()["error"]["code"],
            HEADER_MISMATCH,
            "{name}: {}",
            a.text()
        );
        assert_eq!(a.json()["id"], 1);
    }
    let raw = raw_post(
        p.addr(),
        b"mcp-param-text: caf\xc3\xa9 forbidden\r\n",
        &clean,
    )
    .await;
    assert!(raw.contains("-32020"), "{raw}");
    let raw = raw_post(p.addr(), b"mcp-name: \x80\x81\r\n", &clean).await;
    assert!(raw.contains("-32020"), "{raw}");
    let a = send(
        p.addr(),
        "GET",
        "/mcp",
        Bytes::new(),
        &[("accept", "text/event-stream"), ("mcp-name", "forbidden")],
    )
    .await;
    assert_eq!(a.json()["error"]["code"], HEADER_MISMATCH, "{}", a.text());
    assert_eq!(mock.request_count(), 0, "nothing was forwarded");
    let a = post(
        &p,
        &clean,
        &[
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
            ("mcp-param-text", "hello"),
        ],
    )
    .await;
    assert_eq!(a.text(), result(1, "ok"));
    let reqs = mock.requests();
    assert_eq!(reqs[0].header("mcp-param-text"), Some("hello"));
    // The SDKs' wrapping of "echo" is the same name.
    let a = post(&p, &clean, &[("mcp-name", "=?base64?ZWNobw==?=")]).await;
    assert_eq!(a.text(), result(1, "ok"));
    let read = r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}"#;
    let a = post(&p, read, &[("mcp-name", "file:///b")]).await;
    assert_eq!(a.json()["error"]["code"], HEADER_MISMATCH, "{}", a.text());
    assert_eq!(
        mock.request_count(),
        2,
        "the mismatched read was not forwarded"
    );
}

/// Fails before the fix: comments and ids came through as the server wrote them.
#[tokio::test]
async fn sse_comments_are_dropped_and_ids_checked() {
    let clean = result(1, "fine");
    let stream = format!(
        ": forbidden keep-alive\n\n\
         id: ev-0\ndata: \n\n\
         : a forbidden comment\nevent: message\nid: ev-1\ndata: {clean}\n\n\
         id: <forbidden>\ndata: {}\n\n",
        result(2, "also fine")
    );
    let mock = MockUpstream::start(move |_| Reply::sse(stream.as_bytes())).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    let batch = format!("[{},{}]", call(1, "a", json!({})), call(2, "b", json!({})));
    let a = post(&p, &batch, &[]).await;
    let text = a.text();
    assert!(!text.contains("forbidden"), "{text}");
    assert!(
        text.contains("id: ev-0\n"),
        "the priming event's id stays: {text}"
    );
    assert!(text.contains("id: ev-1\n"), "{text}");
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 2, "{text}");
    assert_eq!(msgs[0]["result"]["content"][0]["text"], "fine");
    assert_eq!(msgs[1]["id"], 2);
    assert_eq!(
        msgs[1]["error"]["code"], BLOCKED,
        "an id outside the SDKs' id shape is checked with its message"
    );
    // An id guardwire will not relay (a space, a control byte, too long) ends the stream.
    for id in ["two words", "bell\u{7}", &"x".repeat(2000)] {
        let stream = format!("id: {id}\ndata: {clean}\n\n");
        let mock = MockUpstream::start(move |_| Reply::sse(stream.as_bytes())).await;
        let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
        let a = post(&p, &call(1, "a", json!({})), &[]).await;
        let msgs = sse_messages(&a.body);
        assert_eq!(msgs.len(), 1, "{}", a.text());
        assert_eq!(msgs[0]["error"]["code"], -32012, "{}", a.text());
        assert!(!a.text().contains(&id[..3]), "{}", a.text());
    }
    // Resumption: Last-Event-ID goes up as the client sent it.
    let mock = MockUpstream::start(|_| Reply::sse(b"id: s_7\ndata: \n\n")).await;
    let p = proxy_for(&format!("{}/mcp", mock.base_url()), "", "").await;
    let a = send(
        p.addr(),
        "GET",
        "/mcp",
        Bytes::new(),
        &[("accept", "text/event-stream"), ("last-event-id", "s_6")],
    )
    .await;
    assert_eq!(a.text(), "id: s_7\ndata: \n\n");
    assert_eq!(mock.requests()[0].header("last-event-id"), Some("s_6"));
}

/// Fails before the fix: an event id was always checked as text, so a pattern matching an
/// SDK's random id (digits like a social security number) replaced the event. Ids of the
/// SDKs' shape are structure — the event is never replaced for them — yet no position is
/// exempt from the secret and PII patterns: an id they flag is dropped, its event relayed
/// without it. Any other id is still checked as text with its message.
#[tokio::test]
async fn event_ids_of_the_sdks_shape_are_structure_others_text() {
    // The route's pack, and a pattern that matches ids like social security numbers.
    let pack = format!(
        "{PACK}  - id: no-ssn\n    type: regex\n    params: {{ pattern: \"\\\\d{{3}}-\\\\d{{2}}-\\\\d{{4}}\", expect_match: false, direction: input }}\n"
    );
    let stream = format!(
        "id: 987-65-4321\ndata: \n\n\
         id: 123-45-6789\ndata: {}\n\n\
         id: 123-45-6789+x\ndata: {}\n\n\
         id: forbidden@example\ndata: {}\n\n",
        result(1, "fine"),
        result(2, "fine too"),
        result(3, "also fine")
    );
    let mock = MockUpstream::start(move |_| Reply::sse(stream.as_bytes())).await;
    let routes = format!(
        "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}/mcp\"\n",
        mock.base_url()
    );
    let p = common::proxy::start_config("", &pack, &routes).await;
    let batch = format!(
        "[{},{},{}]",
        call(1, "a", json!({})),
        call(2, "b", json!({})),
        call(3, "c", json!({}))
    );
    let a = post(&p, &batch, &[]).await;
    let text = a.text();
    assert!(!text.contains("987-65-4321"), "the priming id: {text}");
    assert!(!text.contains("id: 123-45-6789\n"), "{text}");
    assert!(
        text.starts_with("data: \n\n"),
        "the priming event, without its id: {text}"
    );
    assert!(!text.contains("+x"), "{text}");
    assert!(!text.contains("forbidden@"), "{text}");
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 3, "{text}");
    assert_eq!(msgs[0]["result"]["content"][0]["text"], "fine", "{text}");
    assert_eq!(msgs[1]["error"]["code"], BLOCKED, "{text}");
    assert_eq!(msgs[2]["error"]["code"], BLOCKED, "{text}");
}

/// The server's SSE answer split in two at every byte (and one byte per read): the clean
/// progress passes, no byte of the violating result or of the server's comment reaches the
/// client.
#[tokio::test]
async fn a_violating_sse_result_split_at_every_byte_never_leaks() {
    let events = format!(
        ": forbidden comment\n\nevent: message\nid: ev-0\ndata: {}\n\nevent: message\nid: ev-1\ndata: {}\n\n",
        json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"half way"}}),
        result(3, "the note says: forbidden things")
    );
    let body = events.clone().into_bytes();
    let len = body.len();
    let mock = MockUpstream::start(move |r| {
        let points: Vec<usize> = match r.header("x-split") {
            Some("every") => (1..body.len()).collect(),
            Some(k) => vec![k.parse().unwrap()],
            None => Vec::new(),
        };
        Reply::sse_split(&body, &points, Duration::ZERO)
    })
    .await;
    let p = proxy_for(
        &format!("{}/mcp", mock.base_url()),
        "    forward_headers: [x-split]\n",
        "",
    )
    .await;
    let request = call(3, "leak", json!({}));
    let splits = (0..=len).map(|k| k.to_string()).chain(["every".to_owned()]);
    for split in splits {
        let a = post(&p, &request, &[("x-split", &split)]).await;
        let text = a.text();
        for part in ["forbidden", "note says", "things"] {
            assert!(!text.contains(part), "split {split}: {text}");
        }
        let msgs = sse_messages(&a.body);
        assert_eq!(msgs.len(), 2, "split {split}: {text}");
        assert_eq!(msgs[0]["params"]["message"], "half way", "split {split}");
        assert_eq!(msgs[1]["id"], 3);
        assert_eq!(msgs[1]["error"]["code"], BLOCKED, "split {split}");
    }
    assert_eq!(mock.request_count(), len + 2);
}
