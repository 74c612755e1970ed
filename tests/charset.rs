//! The charset rule (docs/protocols.md, "Charsets"): every relayed answer and forwarded request
//! carries the text that was checked. An upstream that declares UTF-16 cannot hand a client a
//! banned phrase guardwire read as other text (on every protocol, whole and streamed, at any
//! split); a clean UTF-16 answer reaches the client as the same text in UTF-8, said to be
//! UTF-8; a charset guardwire cannot decode (`utf-7`) is refused with the protocol's error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{Chunk, MockUpstream, Reply};
use common::protocols::all;
use common::proxy::{send, start_config, start_proxy_all, Answer};
use serde_json::{json, Value};

const PACK: &str = "validators:\n  - id: banned-phrase\n    type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: both }\n";

/// The mock reads what to answer from these.
const FORWARD: &str = "forward_headers: [x-split, x-charset, x-whole]\n";

/// `text` in UTF-16 (`be`: big-endian).
fn utf16(text: &str, be: bool) -> Vec<u8> {
    text.encode_utf16()
        .flat_map(|u| match be {
            true => u.to_be_bytes(),
            false => u.to_le_bytes(),
        })
        .collect()
}

/// The body in the charset `label` names (UTF-8 for a label guardwire refuses).
fn encode(label: &str, text: &str) -> Vec<u8> {
    match label {
        "utf-16be" => utf16(text, true),
        "utf-16" | "utf-16le" => utf16(text, false),
        _ => text.as_bytes().to_vec(),
    }
}

/// `status`, `content-type: <media>; charset=<label>`, `body` in pieces of `every` bytes.
fn reply(media: &str, label: &str, body: &[u8], every: usize) -> Reply {
    let every = if every == 0 { body.len().max(1) } else { every };
    Reply::Chunks {
        status: 200,
        headers: vec![(
            "content-type".to_owned(),
            format!("{media}; charset={label}"),
        )],
        chunks: body
            .chunks(every)
            .map(|c| Chunk::now(Bytes::copy_from_slice(c)))
            .collect(),
    }
}

/// A mock answering `stream` (SSE) or `whole` (JSON) in the charset of the request's
/// `x-charset` header, in pieces of `x-split` bytes; `x-whole` asks for the whole answer.
async fn charset_mock(stream: String, whole: String) -> MockUpstream {
    MockUpstream::start(move |req| {
        let label = req.header("x-charset").unwrap_or("utf-16le").to_owned();
        let every = req
            .header("x-split")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        match req.header("x-whole").is_some() {
            true => reply("application/json", &label, &encode(&label, &whole), every),
            false => reply("text/event-stream", &label, &encode(&label, &stream), every),
        }
    })
    .await
}

/// No byte of the phrase in the answer, in UTF-8 or UTF-16.
fn clean_of_the_phrase(body: &[u8]) -> bool {
    let hay = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    !hay(b"forbidden") && !hay(&utf16("forbidden", false)) && !hay(&utf16("forbidden", true))
}

#[tokio::test]
async fn utf16_answers_are_checked_as_decoded_and_sent_as_utf8_on_every_llm_protocol() {
    for p in all() {
        let (bad, _) = (p.text_frames)(&["the forbidden", " fruit is near"]);
        let (good, _) = (p.text_frames)(&["caf\u{e9} \u{1F600}", " is open"]);
        for (frames, whole_text, violating) in [
            (bad, "the forbidden fruit is near", true),
            (good, "caf\u{e9} \u{1F600} is open", false),
        ] {
            let stream = frames.concat();
            let mock = charset_mock(stream.clone(), (p.whole)(whole_text)).await;
            let proxy = start_proxy_all(&mock.base_url(), PACK, FORWARD).await;
            for label in ["utf-16le", "utf-16be", "utf-16"] {
                for every in [0, 1, 3, 7] {
                    let split = every.to_string();
                    let headers = [
                        ("content-type", "application/json"),
                        ("x-charset", label),
                        ("x-split", split.as_str()),
                    ];
                    let a = send(
                        proxy.addr(),
                        "POST",
                        p.stream_path,
                        (p.stream_body)("hi"),
                        &headers,
                    )
                    .await;
                    let what = format!("{} {label} every {every}: {}", p.name, a.text());
                    assert_eq!(a.status, 200, "{what}");
                    if violating {
                        assert!(clean_of_the_phrase(&a.body), "{what}");
                        assert!(a.text().contains("banned-phrase"), "{what}");
                    } else {
                        // The same text, as UTF-8, said to be UTF-8.
                        assert_eq!(a.text(), stream, "{what}");
                        assert_eq!(
                            a.headers["content-type"], "text/event-stream; charset=utf-8",
                            "{what}"
                        );
                    }
                }
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("x-charset", label),
                    ("x-whole", "1"),
                ];
                headers.push(("x-split", "5"));
                let a = send(
                    proxy.addr(),
                    "POST",
                    p.plain_path,
                    (p.plain_body)("hi"),
                    &headers,
                )
                .await;
                let what = format!("{} whole {label}: {}", p.name, a.text());
                if violating {
                    assert_eq!(a.status, 400, "{what}");
                    assert!(clean_of_the_phrase(&a.body), "{what}");
                } else {
                    assert_eq!(a.status, 200, "{what}");
                    assert_eq!(a.text(), (p.whole)(whole_text), "{what}");
                    assert_eq!(a.headers["content-type"], "application/json; charset=utf-8");
                    assert_eq!(
                        a.headers["content-length"],
                        a.body.len().to_string().as_str()
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn charsets_guardwire_cannot_decode_are_refused_on_every_llm_protocol() {
    for p in all() {
        let (frames, _) = (p.text_frames)(&["fine words"]);
        let mock = charset_mock(frames.concat(), (p.whole)("fine words")).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, FORWARD).await;
        for label in ["utf-7", "utf-32", "x-klingon", "\"utf-8, utf-16\""] {
            for (path, body, whole) in [
                (p.stream_path, (p.stream_body)("hi"), None),
                (p.plain_path, (p.plain_body)("hi"), Some(("x-whole", "1"))),
            ] {
                let mut headers = vec![("content-type", "application/json"), ("x-charset", label)];
                headers.extend(whole);
                let a = send(proxy.addr(), "POST", path, body, &headers).await;
                assert_eq!(a.status, 502, "{} {label}: {}", p.name, a.text());
                assert!(!a.text().contains("fine words"), "{}: {}", p.name, a.text());
            }
        }
        // Four labels, streamed and whole: each counted as a body guardwire cannot decode.
        let m = common::proxy::metrics(proxy.addr()).await;
        assert!(m.contains("kind=\"encoded\"} 8"), "{}: {m}", p.name);
    }
}

#[tokio::test]
async fn requests_in_a_declared_charset_are_checked_and_forwarded_as_utf8() {
    let mock = MockUpstream::start(|_| Reply::json(200, &(all()[0].whole)("ok"))).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, FORWARD).await;
    let p = &all()[0];
    let addr = proxy.addr();
    let post = |body: Vec<u8>, ct: &'static str| async move {
        send(
            addr,
            "POST",
            "/v1/chat/completions",
            body,
            &[("content-type", ct)],
        )
        .await
    };
    // The phrase in UTF-16: blocked before the call.
    let bad = (p.plain_body)("where is the forbidden fruit?");
    for (body, ct) in [
        (utf16(&bad, false), "application/json; charset=utf-16"),
        (utf16(&bad, true), "application/json; charset=UTF-16BE"),
        // A byte-order mark decides, and is dropped.
        (
            [&[0xFE, 0xFF][..], &utf16(&bad, true)].concat(),
            "application/json",
        ),
    ] {
        let a = post(body, ct).await;
        assert_eq!(a.status, 400, "{ct}: {}", a.text());
        assert!(a.text().contains("banned-phrase"), "{}", a.text());
    }
    assert_eq!(mock.request_count(), 0);
    // A clean one goes on as UTF-8, and says so.
    let good = (p.plain_body)("caf\u{e9} \u{1F600}");
    let a = post(utf16(&good, false), "application/json; charset=utf-16le").await;
    assert_eq!(a.status, 200, "{}", a.text());
    let sent = &mock.requests()[0];
    assert_eq!(sent.body_str(), good);
    assert_eq!(
        sent.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    let a = post(
        [b"\xEF\xBB\xBF", good.as_bytes()].concat(),
        "application/json",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(mock.requests()[1].body_str(), good);
    // One guardwire cannot decode: 415, nothing forwarded.
    for ct in [
        "application/json; charset=utf-7",
        "application/json; charset=utf-32",
        "application/json; charset*=utf-8''utf-16",
    ] {
        let a = post(good.clone().into_bytes(), ct).await;
        assert_eq!(a.status, 415, "{ct}: {}", a.text());
    }
    assert_eq!(mock.request_count(), 2);
}

fn mcp_result(id: u32, text: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":text}],"isError":false}})
        .to_string()
}

async fn mcp_post(addr: std::net::SocketAddr, label: &str, every: &str) -> Answer {
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","arguments":{}}});
    send(
        addr,
        "POST",
        "/mcp",
        call.to_string(),
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("x-charset", label),
            ("x-split", every),
        ],
    )
    .await
}

#[tokio::test]
async fn mcp_answers_in_utf16_are_checked_json_and_sse_alike() {
    for (text, violating) in [
        ("the forbidden fruit, in a note", true),
        ("caf\u{e9} \u{1F600}", false),
    ] {
        let json_answer = mcp_result(7, text);
        let sse_answer = format!("event: message\nid: ev-1\ndata: {json_answer}\n\n");
        for sse in [false, true] {
            let (json_answer, sse_answer) = (json_answer.clone(), sse_answer.clone());
            let mock = MockUpstream::start(move |req| {
                let label = req.header("x-charset").unwrap_or("utf-16le").to_owned();
                let every = req
                    .header("x-split")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                match sse {
                    true => reply(
                        "text/event-stream",
                        &label,
                        &encode(&label, &sse_answer),
                        every,
                    ),
                    false => reply(
                        "application/json",
                        &label,
                        &encode(&label, &json_answer),
                        every,
                    ),
                }
            })
            .await;
            let routes = format!(
                "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}/mcp\"\n",
                mock.base_url()
            );
            let proxy = start_config("", PACK, &format!("{routes}{FORWARD}")).await;
            for label in ["utf-16le", "utf-16be"] {
                for every in ["0", "1", "3"] {
                    let a = mcp_post(proxy.addr(), label, every).await;
                    let what = format!("sse {sse} {label} every {every}: {}", a.text());
                    assert_eq!(a.status, 200, "{what}");
                    assert!(clean_of_the_phrase(&a.body), "{what}");
                    let body = a.text();
                    let data = body
                        .lines()
                        .find_map(|l| l.strip_prefix("data: "))
                        .unwrap_or(&body);
                    let msg: Value = serde_json::from_str(data).unwrap();
                    assert_eq!(msg["id"], 7, "{what}");
                    if violating {
                        assert_eq!(msg["error"]["code"], -32010, "{what}");
                    } else {
                        assert_eq!(msg["result"]["content"][0]["text"], text, "{what}");
                        let ct = a.headers["content-type"].to_str().unwrap();
                        assert!(
                            ct.ends_with("charset=utf-8") || ct == "application/json",
                            "{ct}"
                        );
                    }
                }
            }
            // A charset guardwire cannot decode: the request's error, nothing of the server's.
            let a = mcp_post(proxy.addr(), "utf-7", "0").await;
            let msg: Value = serde_json::from_slice(&a.body).unwrap();
            assert_eq!(msg["id"], 7, "{}", a.text());
            assert!(
                msg["error"]["message"].as_str().unwrap().contains("utf-7"),
                "{}",
                a.text()
            );
            assert!(
                !a.text().contains("note") && !a.text().contains("caf"),
                "{}",
                a.text()
            );
        }
    }
}

#[tokio::test]
async fn a2a_answers_and_cards_in_utf16_are_checked() {
    let result = |text: &str| json!({"jsonrpc":"2.0","id":"r1","result":{"message":{"messageId":"m2","role":"ROLE_AGENT","parts":[{"text":text}]}}});
    let card = json!({
        "name": "Agent", "description": "The forbidden fruit agent.", "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://agent/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []
    });
    let (bad, good) = (result("the forbidden fruit"), result("caf\u{e9}"));
    let mock = MockUpstream::start(move |req| {
        let label = req.header("x-charset").unwrap_or("utf-16le").to_owned();
        if req.path_and_query.ends_with("agent-card.json") {
            return reply(
                "application/json",
                "utf-16be",
                &utf16(&card.to_string(), true),
                3,
            );
        }
        let answer = match req.body_str().contains("bad") {
            true => &bad,
            false => &good,
        };
        match req.body_str().contains("message/stream")
            || req.body_str().contains("SendStreamingMessage")
        {
            true => reply(
                "text/event-stream",
                &label,
                &encode(&label, &format!("data: {answer}\n\n")),
                3,
            ),
            false => reply(
                "application/json",
                &label,
                &encode(&label, &answer.to_string()),
                3,
            ),
        }
    })
    .await;
    let routes = format!(
        "routes:\n  - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{}\"\n",
        mock.base_url()
    );
    let proxy = start_config("", PACK, &format!("{routes}{FORWARD}")).await;
    let call = |method: &str, text: &str| {
        json!({"jsonrpc":"2.0","id":"r1","method":method,"params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":text}]}}})
            .to_string()
    };
    for method in ["SendMessage", "SendStreamingMessage"] {
        for label in ["utf-16le", "utf-16be", "utf-7"] {
            for which in ["bad", "good"] {
                let a = send(
                    proxy.addr(),
                    "POST",
                    "/agent/a2a",
                    call(method, which),
                    &[("content-type", "application/json"), ("x-charset", label)],
                )
                .await;
                let what = format!("{method} {label} {which}: {}", a.text());
                assert!(clean_of_the_phrase(&a.body), "{what}");
                match (label, which) {
                    ("utf-7", _) => assert!(!a.text().contains("caf"), "{what}"),
                    (_, "bad") => assert!(a.text().contains("-32090"), "{what}"),
                    _ => assert!(a.text().contains("caf\u{e9}"), "{what}"),
                }
            }
        }
    }
    // The card's texts, in UTF-16, are checked as the card's reader decodes them.
    let a = send(
        proxy.addr(),
        "GET",
        "/agent/.well-known/agent-card.json",
        String::new(),
        &[("host", "gw.test:8080")],
    )
    .await;
    assert_ne!(a.status, 200, "{}", a.text());
    assert!(clean_of_the_phrase(&a.body), "{}", a.text());
}

/// Round 11: an upstream's error answer, relayed on the LLM routes (the SDKs show its
/// message), carries the text that was checked too: a charset guardwire cannot decode is
/// refused; UTF-16 is decoded, checked and sent as UTF-8; a message with the banned phrase —
/// or a key holding it — is answered with the block; a clean error reaches the client with its
/// status and text, on every protocol.
#[tokio::test]
async fn error_answers_are_checked_as_decoded() {
    let mock = MockUpstream::start(|req| {
        let label = req.header("x-charset").unwrap_or("utf-8").to_owned();
        let message = req.header("x-message").unwrap_or("slow down").to_owned();
        let body = match req.header("x-key").is_some() {
            true => json!({"error": {"message": "x", message.clone(): 1}}),
            false => json!({"error": {"message": message, "type": "rate_limit_error"}}),
        };
        let raw = match req.header("x-raw") {
            Some("utf16-nobom") => Some(utf16(r#"{"error":"the forbidden fruit"}"#, false)),
            Some(x) => Some(format!(r#"{{"error":{{"message":"{x}"}}}}"#).into_bytes()),
            None => None,
        };
        Reply::Chunks {
            status: 429,
            headers: vec![(
                "content-type".to_owned(),
                format!("application/json; charset={label}"),
            )],
            chunks: vec![Chunk::now(Bytes::from(
                raw.unwrap_or_else(|| encode(&label, &body.to_string())),
            ))],
        }
    })
    .await;
    let forward = "forward_headers: [x-charset, x-message, x-key, x-raw]\n";
    let proxy = start_proxy_all(&mock.base_url(), PACK, forward).await;
    for p in all() {
        for (path, body) in [
            (p.stream_path, (p.stream_body)("hi")),
            (p.plain_path, (p.plain_body)("hi")),
        ] {
            let ask = |extra: Vec<(&'static str, &'static str)>| {
                let (addr, body) = (proxy.addr(), body.clone());
                async move {
                    let mut headers = vec![("content-type", "application/json")];
                    headers.extend(extra);
                    send(addr, "POST", path, body, &headers).await
                }
            };
            // Clean, in UTF-16: relayed with its status, as UTF-8.
            let a = ask(vec![("x-charset", "utf-16le")]).await;
            assert_eq!(a.status, 429, "{}: {}", p.name, a.text());
            assert!(a.text().contains("slow down"), "{}: {}", p.name, a.text());
            assert_eq!(
                a.headers["content-type"], "application/json; charset=utf-8",
                "{}",
                p.name
            );
            // A body guardwire cannot read as the reader does: refused — one bad `\u` escape
            // (not JSON, and its other escapes spell text), UTF-16 without its mark read as UTF-8.
            for x in ["\\ud800 the \\u0066orbidden fruit", "utf16-nobom"] {
                let a = ask(vec![("x-raw", x)]).await;
                assert_eq!(a.status, 502, "{} {x}: {}", p.name, a.text());
            }
            // A charset guardwire cannot read: refused.
            let a = ask(vec![
                ("x-charset", "utf-7"),
                ("x-message", "+AGY-orbidden fruit"),
            ])
            .await;
            assert_eq!(a.status, 502, "{}: {}", p.name, a.text());
            assert!(!a.text().contains("orbidden"), "{}: {}", p.name, a.text());
            // The phrase in the message, in UTF-16, or as a key: blocked.
            for extra in [
                vec![("x-message", "the forbidden fruit")],
                vec![
                    ("x-message", "the forbidden fruit"),
                    ("x-charset", "utf-16be"),
                ],
                vec![("x-message", "the forbidden fruit"), ("x-key", "1")],
            ] {
                let a = ask(extra.clone()).await;
                assert_eq!(a.status, 400, "{} {extra:?}: {}", p.name, a.text());
                assert!(clean_of_the_phrase(a.text().as_bytes()), "{}", p.name);
            }
        }
    }
}
