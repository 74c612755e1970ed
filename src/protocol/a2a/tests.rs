#![allow(clippy::unwrap_used)]
use super::*;
use crate::delta::{Channel, Role};
use crate::protocol::a2a::wire::JOINED;
use crate::protocol::residual::residual_and_identifiers;
use proptest::prelude::*;

fn texts(deltas: &[Delta<'_>]) -> Vec<(u32, String)> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text {
                choice,
                channel: Channel::Content,
                text,
            } => Some((*choice, text.to_string())),
            _ => None,
        })
        .collect()
}

fn decode_all(frames: &[&str]) -> (Vec<(u32, String)>, bool) {
    let mut dec = A2a.stream_decoder();
    let mut all = Vec::new();
    for f in frames {
        let mut out = Vec::new();
        dec.decode(None, f.as_bytes(), &mut out).unwrap();
        all.extend(texts(&out));
    }
    (all, dec.complete_without_terminal())
}

#[test]
fn requests_read_message_parts_of_both_versions_as_input() {
    let v1 = br#"{"jsonrpc":"2.0","id":"7","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"forbid"},{"text":"den fruit"}]}}}"#;
    let p = A2a.parse_request(v1, "/").unwrap();
    assert!(!p.stream);
    assert_eq!(p.conversation.messages[0].text, ["forbid", "den fruit"]);
    assert_eq!(p.conversation.messages[1].text, ["forbidden fruit"]);
    let v03 = br#"{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"},{"kind":"file","file":{"bytes":"c2VjcmV0","mimeType":"text/plain"}}]}}}"#;
    let p = A2a.parse_request(v03, "/").unwrap();
    assert!(p.stream);
    assert_eq!(p.conversation.messages[0].text, ["hi", "secret"]);
    assert_eq!(A2a.reply_to(v03).rpc_id.unwrap().get(), "1");
    assert_eq!(A2a.reply_to(v1).rpc_id.unwrap().get(), r#""7""#);
    assert_eq!(A2a.reply_to(b"not json").rpc_id.unwrap().get(), "null");
    assert_eq!(
        A2a.reply_to(br#"{"id":{"a":1}}"#).rpc_id.unwrap().get(),
        "null"
    );
}

#[test]
fn push_notifications_batches_and_the_extended_card_are_refused() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"SetTaskPushNotificationConfig","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfig","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/PUSHNOTIFICATIONCONFIG/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]},"configuration":{"taskPushNotificationConfig":{"url":"http://x"}}}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}]"#,
        r#"{"id":1,"method":"GetTask","params":{}}"#,
    ] {
        assert!(
            matches!(
                A2a.parse_request(body.as_bytes(), "/"),
                Err(GatewayError::InvalidRequest(_))
            ),
            "{body}"
        );
    }
}

#[test]
fn streamed_artifact_chunks_are_one_text_per_artifact_and_joined_as_the_sdk_joins_them() {
    let (t, done) = decode_all(&[
        r#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","parts":[{"text":"the forb"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"b","parts":[{"text":"other"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","append":true,"lastChunk":true,"artifact":{"artifactId":"a","parts":[{"text":"idden"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","append":true,"artifact":{"artifactId":"b","parts":[{"text":" fruit"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"done"}]}}}}}"#,
    ]);
    assert_eq!(
        t,
        [
            (1, "the forb".into()),
            (JOINED, "the forb".into()),
            (2, "other".into()),
            (JOINED, "other".into()),
            (1, "idden".into()),
            (1, "\n".into()),
            // `a` grew after `b` began: the client's task reads "the forbidden" then "other",
            // read again whole.
            (JOINED, "\n".into()),
            (JOINED, "the forb".into()),
            (JOINED, "idden".into()),
            (JOINED, "other".into()),
            // `b` is last: read on.
            (2, " fruit".into()),
            (JOINED, " fruit".into()),
            (0, "done".into()),
            (0, "\n".into()),
        ]
    );
    assert!(done);
    // A phrase across two artifacts is in the joined text however they were streamed: in
    // order, interleaved, or by replacing the first once the second is there.
    let chunk = |id: &str, text: &str, append: bool| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"1","result":{{"artifactUpdate":{{"taskId":"t","append":{append},"artifact":{{"artifactId":"{id}","parts":[{{"text":"{text}"}}]}}}}}}}}"#
        )
    };
    let joined = |frames: &[String]| {
        let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
        let (t, _) = decode_all(&refs);
        // The joined text's last reading, run on.
        let mut reading = String::new();
        for (choice, text) in t.into_iter().filter(|(c, _)| *c == JOINED) {
            let _ = choice;
            if text == "\n" {
                reading.clear();
            } else {
                reading.push_str(&text);
            }
        }
        reading
    };
    let in_order = [
        chunk("a", "the forbidden ", false),
        chunk("b", "fruit", false),
    ];
    assert_eq!(joined(&in_order), "the forbidden fruit");
    let interleaved = [
        chunk("a", "the ", false),
        chunk("b", "fruit", false),
        chunk("a", "forbidden ", true),
    ];
    assert_eq!(joined(&interleaved), "the forbidden fruit");
    let replaced = [
        chunk("a", "x", false),
        chunk("b", "fruit", false),
        chunk("a", "the forbidden ", false),
    ];
    assert_eq!(joined(&replaced), "the forbidden fruit");
    // What is read again is bounded: an agent alternating two artifacts past it fails.
    let big = "y".repeat(64 << 10);
    let mut dec = A2a.stream_decoder();
    let mut failed = None;
    for i in 0..400 {
        let frame = chunk(if i % 2 == 0 { "a" } else { "b" }, &big, true);
        if let Err(e) = dec.decode(None, frame.as_bytes(), &mut Vec::new()) {
            failed = Some((i, e.to_string()));
            break;
        }
    }
    let (i, e) = failed.unwrap();
    assert!(i > 2 && e.contains("out of the order"), "{i}: {e}");
    // Empty parts count too: many of them cannot make keeping and reading again free.
    let empties = format!(
        r#"[{{"text":"x"}},{}]"#,
        vec![r#"{"text":""}"#; 20_000].join(",")
    );
    let mut dec = A2a.stream_decoder();
    let mut failed = None;
    for i in 0..400 {
        let id = if i % 2 == 0 { "a" } else { "b" };
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":"1","result":{{"artifactUpdate":{{"taskId":"t","append":true,"artifact":{{"artifactId":"{id}","parts":{empties}}}}}}}}}"#
        );
        if dec.decode(None, frame.as_bytes(), &mut Vec::new()).is_err() {
            failed = Some(i);
            break;
        }
    }
    assert!(failed.is_some_and(|i| i < 8), "{failed:?}");
    // 0.3: kinds at the top, `final`.
    let (t, done) = decode_all(&[
        r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"x"}]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"y"}]}}}"#,
    ]);
    assert_eq!(
        t,
        [
            (1, "x".into()),
            (JOINED, "x".into()),
            (1, "\n".into()),
            (1, "y".into()),
            (JOINED, "\n".into()),
            (JOINED, "y".into()),
        ]
    );
    assert!(!done, "a stream without its final event is cut short");
    let (_, done) = decode_all(&[
        r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t","status":{"state":"working"},"final":true}}"#,
    ]);
    assert!(done);
}

#[test]
fn whole_answers_read_tasks_messages_and_files() {
    let body = br#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"status"}]}},"artifacts":[{"artifactId":"a","parts":[{"text":"one"},{"raw":"dHdv","mediaType":"text/plain"}]}],"history":[{"role":"ROLE_USER","parts":[{"text":"asked"}]}]}}}"#;
    let mut out = Vec::new();
    A2a.decode_response(body, &mut out).unwrap();
    assert_eq!(
        texts(&out),
        // The history, then the status message: in the order they were said.
        [
            (0, "asked".into()),
            (0, "\n".into()),
            (0, "status".into()),
            (0, "\n".into()),
            (1, "one".into()),
            (1, "two".into()),
            (1, "\n".into()),
            // The artifacts joined, as the SDK's `get_stream_response_text` reads a task.
            (JOINED, "one".into()),
            (JOINED, "two".into()),
        ]
    );
    let pdf = br#"{"jsonrpc":"2.0","id":"1","result":{"message":{"parts":[{"raw":"JVBERi0=","mediaType":"application/pdf"}]}}}"#;
    assert!(A2a.decode_response(pdf, &mut Vec::new()).is_err());
    let image = br#"{"jsonrpc":"2.0","id":"1","result":{"message":{"parts":[{"raw":"iVBORw==","mediaType":"image/png"}]}}}"#;
    assert!(A2a.decode_response(image, &mut Vec::new()).is_ok());
    // A result object guardwire cannot read as a task, a message or an event fails closed;
    // a result of another kind (a method guardwire does not know) is left to the fallback.
    // Review 14: an error beside a result (the a2a-sdk reads the result when the error is
    // empty or false) fails closed.
    for error in [
        "{}",
        "false",
        "0",
        "\"\"",
        "[]",
        "{\"code\":1,\"message\":\"m\"}",
    ] {
        let both = format!(
            r#"{{"jsonrpc":"2.0","id":"1","error":{error},"result":{{"message":{{"messageId":"r","role":"ROLE_AGENT","parts":[{{"text":"a"}}]}}}}}}"#
        );
        assert!(
            A2a.decode_response(both.as_bytes(), &mut Vec::new())
                .is_err(),
            "{error}"
        );
    }
    let odd = br#"{"jsonrpc":"2.0","id":"1","result":{"parts":"not a list","note":"x"}}"#;
    assert!(A2a.decode_response(odd, &mut Vec::new()).is_err());
    let other = br#"{"jsonrpc":"2.0","id":"1","result":["x"]}"#;
    let mut out = Vec::new();
    A2a.decode_response(other, &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn errors_are_json_rpc_errors_for_the_call() {
    let to = A2a.reply_to(br#"{"jsonrpc":"2.0","id":"abc","method":"SendMessage"}"#);
    let err = GatewayError::Blocked {
        message: "blocked by banned_words".into(),
    };
    let body: serde_json::Value = serde_json::from_slice(&A2a.error_body(&err, &to)).unwrap();
    assert_eq!(body["id"], "abc");
    assert_eq!(body["error"]["code"], codes::BLOCKED);
    assert_eq!(body["error"]["message"], "blocked by banned_words");
    assert_eq!(body["error"]["data"][0]["reason"], "CONTENT_BLOCKED");
    assert_eq!(A2a.error_status(&err, &to), http::StatusCode::OK);
    let frame = String::from_utf8(A2a.stream_error_frame(&err, &to).to_vec()).unwrap();
    assert!(frame.starts_with("event: error\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"abc\","));
    assert!(frame.ends_with("\n\n"));
    // Not a call (the agent card): the HTTP status stays.
    let none = ReplyTo::default();
    assert_eq!(
        A2a.error_status(&GatewayError::NotFound("x".into()), &none),
        http::StatusCode::NOT_FOUND
    );
}

#[test]
fn cards_of_both_versions_point_at_guardwire() {
    let map = |u: &str| {
        u.strip_prefix("http://agent:9")
            .map(|rest| format!("http://gw/a{rest}"))
    };
    let v1 = br#"{"name":"x","supportedInterfaces":[{"url":"http://agent:9/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://agent:9/grpc","protocolBinding":"GRPC"},{"url":"http://elsewhere/a2a","protocolBinding":"JSONRPC"}],"capabilities":{"streaming":true,"pushNotifications":true}}"#;
    let out: serde_json::Value =
        serde_json::from_slice(&A2a.rewrite_discovery(v1, &map).unwrap()).unwrap();
    assert_eq!(
        out["supportedInterfaces"],
        serde_json::json!([{"url":"http://gw/a/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}])
    );
    assert_eq!(out["capabilities"]["pushNotifications"], false);
    let v03 = br#"{"name":"x","url":"http://agent:9/rest","preferredTransport":"HTTP+JSON","additionalInterfaces":[{"url":"http://agent:9/rest","transport":"HTTP+JSON"},{"url":"http://agent:9/rpc","transport":"JSONRPC"}],"supportsAuthenticatedExtendedCard":true}"#;
    let out: serde_json::Value =
        serde_json::from_slice(&A2a.rewrite_discovery(v03, &map).unwrap()).unwrap();
    assert_eq!(out["url"], "http://gw/a/rpc");
    assert_eq!(out["preferredTransport"], "JSONRPC");
    assert_eq!(out["additionalInterfaces"].as_array().unwrap().len(), 1);
    assert_eq!(out["supportsAuthenticatedExtendedCard"], false);
    let unreachable = br#"{"url":"http://elsewhere/rpc"}"#;
    assert!(A2a.rewrite_discovery(unreachable, &map).is_err());
    assert!(A2a.rewrite_discovery(b"[]", &map).is_err());
}

/// The request's values at places of structure: (texts read as text, identifiers).
fn structure_of(body: &str) -> (Vec<String>, Vec<String>) {
    let p = A2a.parse_request(body.as_bytes(), "/").unwrap();
    let of = |want: &dyn Fn(&Role) -> bool| -> Vec<String> {
        p.conversation
            .messages
            .iter()
            .filter(|m| want(&m.role))
            .flat_map(|m| m.text.clone())
            .collect()
    };
    (
        of(&|r| *r == Role::Other("structure".into())),
        of(&|r| *r == Role::Identifiers),
    )
}

#[test]
fn a_context_id_is_text_unless_it_has_an_identifiers_shape() {
    let body = r#"{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m-1","contextId":"forbidden fruit","role":"ROLE_USER","referenceTaskIds":["t-1","sk-0123456789abcdef"],"parts":[{"text":"hi"}]}}}"#;
    let (texts, ids) = structure_of(body);
    assert_eq!(texts, ["forbidden fruit"]);
    assert_eq!(
        ids,
        [
            "2.0",
            "r1",
            "SendMessage",
            "m-1",
            "ROLE_USER",
            "t-1",
            "sk-0123456789abcdef"
        ]
    );
    // The same under a method guardwire does not know: its params are text (for the
    // fallback); its envelope's structure is read here.
    let (texts, ids) =
        structure_of(r#"{"jsonrpc":"2.0","id":"forbidden fruit","method":"x/y","params":{}}"#);
    assert_eq!(
        (texts, ids),
        (
            vec!["forbidden fruit".into()],
            vec!["2.0".into(), "x/y".into()]
        )
    );
}

/// Positions of a request that were structure by position alone.
const CALL_PLACES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"contextId":VALUE,"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":VALUE,"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":VALUE,"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[VALUE],"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"extensions":[VALUE],"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":VALUE,"kind":VALUE,"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"context_id":VALUE,"parts":[{"text":"x","media_type":VALUE}]}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]},"configuration":{"acceptedOutputModes":[VALUE]},"tenant":VALUE}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":VALUE,"contextId":VALUE}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":VALUE,"status":VALUE}}"#,
];

/// Positions of an answer that were structure by position alone.
const ANSWER_PLACES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":VALUE,"contextId":VALUE,"status":{"state":VALUE,"timestamp":VALUE}}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":VALUE,"role":VALUE,"extensions":[VALUE],"referenceTaskIds":[VALUE],"parts":[]}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":VALUE,"artifact":{"artifactId":VALUE,"parts":[{"text":"x","mediaType":VALUE}]}}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"status_update":{"task_id":VALUE,"context_id":VALUE,"status":{"state":VALUE}}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"kind":VALUE,"taskId":VALUE,"nextPageToken":VALUE}}"#,
    r#"{"jsonrpc":"2.0","id":VALUE,"result":{"tasks":[]}}"#,
];

fn identifier_value() -> impl Strategy<Value = String> {
    // (Not `x`: the templates' own values, which would be found at their own places.)
    "[A-Za-z0-9_./:@-]{1,40}".prop_filter("a template's own value", |v| v != "x")
}

fn text_value() -> impl Strategy<Value = String> {
    (
        "[a-z]{1,10}",
        prop_oneof![
            Just(" "),
            Just("\u{a0}"),
            Just("é"),
            Just("\u{200b}"),
            Just("\t")
        ],
        "[a-z ]{0,10}",
    )
        .prop_map(|(a, odd, b)| format!("{a}{odd}{b}"))
}

proptest! {
    /// At every formerly exempt place of a request, an identifier-shaped value reaches the
    /// secret and PII patterns and any other value is read as text, whatever
    /// `unknown_content` says (the parser reads them).
    #[test]
    fn request_structure_is_exempt_only_by_shape(
        place in 0..CALL_PLACES.len(),
        id in identifier_value(),
        text in text_value(),
    ) {
        let lit = |v: &str| serde_json::to_string(v).unwrap();
        let (texts, ids) = structure_of(&CALL_PLACES[place].replace("VALUE", &lit(&id)));
        prop_assert!(ids.contains(&id), "{ids:?}");
        prop_assert!(texts.is_empty(), "{texts:?}");
        let (texts, ids) = structure_of(&CALL_PLACES[place].replace("VALUE", &lit(&text)));
        prop_assert!(texts.contains(&text), "{texts:?}");
        prop_assert!(!ids.contains(&text));
    }

    /// The same in answers: the fallback reads a text-shaped value as text, and hands an
    /// identifier-shaped one to the secret and PII patterns.
    #[test]
    fn answer_structure_is_exempt_only_by_shape(
        place in 0..ANSWER_PLACES.len(),
        id in identifier_value(),
        text in text_value(),
    ) {
        let lit = |v: &str| serde_json::to_string(v).unwrap();
        for (value, is_id) in [(&id, true), (&text, false)] {
            let body = ANSWER_PLACES[place].replace("VALUE", &lit(value));
            let mut out = Vec::new();
            prop_assert!(A2a.decode_response(body.as_bytes(), &mut out).is_ok(), "{body}");
            let (mut left, mut ids) = (Vec::new(), Vec::new());
            residual_and_identifiers(body.as_bytes(), A2a.structural(), &[], &mut left, &mut ids)
                .unwrap();
            let read = |r: &std::ops::Range<usize>| {
                serde_json::from_str::<String>(&body[r.clone()]).unwrap()
            };
            let left: Vec<String> = left.iter().map(|(r, _)| read(r)).collect();
            let ids: Vec<String> = ids.iter().map(read).collect();
            prop_assert_eq!(left.contains(value), !is_id, "{}: {:?}", body, left);
            prop_assert_eq!(ids.contains(value), is_id, "{}: {:?}", body, ids);
        }
    }
}

/// The texts an answer's frames decode to, or the error.
fn decoded(frames: &[String]) -> Result<Vec<(u32, String)>, DecodeError> {
    let mut dec = A2a.stream_decoder();
    let mut all = Vec::new();
    for f in frames {
        let mut out = Vec::new();
        dec.decode(None, f.as_bytes(), &mut out)?;
        all.extend(texts(&out));
    }
    Ok(all)
}

/// Fields of the answers in camelCase, as the decoder models them, with their snake_case name.
const SPELLINGS: &[(&str, &str)] = &[
    ("statusUpdate", "status_update"),
    ("artifactUpdate", "artifact_update"),
    ("artifactId", "artifact_id"),
    ("lastChunk", "last_chunk"),
    ("mediaType", "media_type"),
    ("contextId", "context_id"),
    ("taskId", "task_id"),
];

fn spelled(frame: &str, snake: &[bool]) -> String {
    let mut f = frame.to_owned();
    for ((camel, s), &use_snake) in SPELLINGS.iter().zip(snake) {
        if use_snake {
            f = f.replace(&format!("\"{camel}\""), &format!("\"{s}\""));
        }
    }
    f
}

const SPELLED_FRAMES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"the forb"}]}}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","append":true,"lastChunk":true,"artifact":{"artifactId":"a","parts":[{"text":"idden","metadata":null},{"raw":"ZnJ1aXQ=","mediaType":"text/plain"}]}}}}"#,
    r#"{"jsonrpc":"2.0","id":"1","result":{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"done"}]}}}}}"#,
];

proptest! {
    /// Every field in either spelling the SDKs read decodes to the same texts.
    #[test]
    fn snake_case_and_camel_case_decode_alike(snake in proptest::collection::vec(any::<bool>(), SPELLINGS.len())) {
        let camel: Vec<String> = SPELLED_FRAMES.iter().map(|f| f.to_string()).collect();
        let mixed: Vec<String> = SPELLED_FRAMES.iter().map(|f| spelled(f, &snake)).collect();
        let want = decoded(&camel).unwrap();
        prop_assert!(want.iter().any(|(_, t)| t == "fruit"));
        prop_assert_eq!(decoded(&mixed).unwrap(), want);
    }

    /// A spelling no SDK reads (another case, a stray underscore) is not decoded: its text is
    /// left to the fallback, which reads it as text; a known field in two spellings fails.
    #[test]
    fn unknown_spellings_are_read_as_text_or_refused(
        field in 0..SPELLINGS.len(),
        variant in 0..3usize,
    ) {
        let (camel, snake) = SPELLINGS[field];
        let odd = match variant {
            0 => camel.to_ascii_uppercase(),
            1 => format!("{snake}_"),
            _ => format!("_{camel}"),
        };
        let frame = r#"{"jsonrpc":"2.0","id":"1","result":{"FIELD":{"parts":[{"text":"forbidden fruit"}]}}}"#
            .replace("FIELD", &odd);
        let mut out = Vec::new();
        prop_assert!(A2a.decode_response(frame.as_bytes(), &mut out).is_ok());
        prop_assert!(texts(&out).is_empty());
        let mut left = Vec::new();
        residual_and_identifiers(frame.as_bytes(), A2a.structural(), &[], &mut left, &mut Vec::new()).unwrap();
        prop_assert!(left.iter().any(|(r, _)| &frame[r.clone()] == "\"forbidden fruit\""));
        // Both spellings of one modelled field: refused, as protobuf's reader refuses it.
        let both = format!(
            r#"{{"jsonrpc":"2.0","id":"1","result":{{"{camel}":{{}},"{snake}":{{}}}}}}"#
        );
        if ["statusUpdate", "artifactUpdate"].contains(&camel) {
            prop_assert!(A2a.decode_response(both.as_bytes(), &mut Vec::new()).is_err());
        }
    }
}

#[test]
fn null_lists_and_snake_case_requests_are_read() {
    let body = br#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","history":null,"artifacts":[{"artifact_id":"a","parts":[{"text":"x"}]}],"status":{"state":"completed","message":{"parts":null}}}}}"#;
    let mut out = Vec::new();
    A2a.decode_response(body, &mut out).unwrap();
    assert_eq!(
        texts(&out),
        [(1, "x".into()), (1, "\n".into()), (JOINED, "x".into())]
    );
    // A request's file by its snake_case media type is read as text.
    let req = br#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"message_id":"m","parts":[{"kind":"file","file":{"bytes":"c2VjcmV0","mime_type":"text/plain"}},{"raw":"Zm9yYmlk","media_type":"text/plain"}]}}}"#;
    let p = A2a.parse_request(req, "/").unwrap();
    assert_eq!(p.conversation.messages[0].text, ["secret", "forbid"]);
    // One field in both spellings is refused; a push config in snake_case too.
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"raw":"eA==","mediaType":"image/png","media_type":"text/plain"}]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]},"configuration":{"task_push_notification_config":{"url":"http://x"}}}}"#,
    ] {
        assert!(A2a.parse_request(body.as_bytes(), "/").is_err(), "{body}");
    }
}

#[test]
fn a_snake_case_card_is_rewritten_too() {
    let map = |u: &str| {
        u.strip_prefix("http://agent:9")
            .map(|rest| format!("http://gw/a{rest}"))
    };
    let card = br#"{"name":"x","supported_interfaces":[{"url":"http://agent:9/a2a","protocol_binding":"JSONRPC"},{"url":"http://agent:9/grpc","protocol_binding":"GRPC"}],"capabilities":{"push_notifications":true}}"#;
    let out: serde_json::Value =
        serde_json::from_slice(&A2a.rewrite_discovery(card, &map).unwrap()).unwrap();
    assert_eq!(
        out["supportedInterfaces"],
        serde_json::json!([{"url":"http://gw/a/a2a","protocolBinding":"JSONRPC"}])
    );
    assert!(out.get("supported_interfaces").is_none());
    assert_eq!(out["capabilities"]["pushNotifications"], false);
    let both =
        br#"{"url":"http://agent:9/a2a","supported_interfaces":[],"supportedInterfaces":[]}"#;
    assert!(A2a.rewrite_discovery(both, &map).is_err());
}

proptest! {
    /// However an agent streams its artifacts — in order, interleaved, replacing one, task
    /// snapshots between (an id twice in one, none at all) — the joined text guardwire last
    /// read is the text the a2a-sdk's client joins from its task (`append_artifact_to_task`):
    /// a task replaces the list, a new artifact is appended, a chunk changes the first entry of
    /// its id (appended parts, or replaced); run on.
    #[test]
    fn the_joined_reading_is_the_clients_task(
        events in proptest::collection::vec(
            prop_oneof![
                4 => (0usize..3, "[a-z ]{0,6}", any::<bool>()).prop_map(|(id, t, a)| (Some((id, t, a)), Vec::new())),
                1 => proptest::collection::vec((0usize..3, "[a-z ]{0,6}"), 0..4).prop_map(|task| (None, task)),
            ],
            1..12,
        )
    ) {
        let mut task: Vec<(usize, String)> = Vec::new();
        let mut frames = Vec::new();
        for event in events {
            match event {
                (Some((id, text, append)), _) => {
                    let at = task.iter().position(|(a, _)| *a == id);
                    // The SDK refuses an append to an artifact it does not have: start with one.
                    let append = append && at.is_some();
                    match (at, append) {
                        (Some(i), true) => task[i].1.push_str(&text),
                        (Some(i), false) => task[i].1 = text.clone(),
                        (None, _) => task.push((id, text.clone())),
                    }
                    frames.push(format!(
                        r#"{{"jsonrpc":"2.0","id":"1","result":{{"artifactUpdate":{{"taskId":"t","append":{append},"artifact":{{"artifactId":"a{id}","parts":[{{"text":"{text}"}}]}}}}}}}}"#
                    ));
                }
                (None, snapshot) => {
                    let artifacts: Vec<String> = snapshot
                        .iter()
                        .map(|(id, text)| format!(r#"{{"artifactId":"a{id}","parts":[{{"text":"{text}"}}]}}"#))
                        .collect();
                    task = snapshot;
                    frames.push(format!(
                        r#"{{"jsonrpc":"2.0","id":"1","result":{{"task":{{"id":"t","status":{{"state":"TASK_STATE_WORKING"}},"artifacts":[{}]}}}}}}"#,
                        artifacts.join(",")
                    ));
                }
            }
        }
        let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
        let (t, _) = decode_all(&refs);
        let mut reading = String::new();
        for (_, text) in t.into_iter().filter(|(c, _)| *c == JOINED) {
            if text == "\n" {
                reading.clear();
            } else {
                reading.push_str(&text);
            }
        }
        let joined: String = task.iter().map(|(_, t)| t.as_str()).collect();
        prop_assert_eq!(reading, joined);
    }
}
