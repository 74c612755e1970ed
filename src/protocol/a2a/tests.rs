#![allow(clippy::unwrap_used)]
use super::*;
use crate::delta::Channel;

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
fn streamed_artifact_chunks_are_one_text_per_artifact() {
    let (t, done) = decode_all(&[
        r#"{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","parts":[{"text":"the forb"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"b","parts":[{"text":"other"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","append":true,"lastChunk":true,"artifact":{"artifactId":"a","parts":[{"text":"idden"}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"done"}]}}}}}"#,
    ]);
    assert_eq!(
        t,
        [
            (1, "the forb".into()),
            (2, "other".into()),
            (1, "idden".into()),
            (1, "\n".into()),
            (0, "done".into()),
            (0, "\n".into()),
        ]
    );
    assert!(done);
    // 0.3: kinds at the top, `final`.
    let (t, done) = decode_all(&[
        r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"x"}]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"y"}]}}}"#,
    ]);
    assert_eq!(t, [(1, "x".into()), (1, "\n".into()), (1, "y".into())]);
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
        [
            (0, "status".into()),
            (0, "\n".into()),
            (0, "asked".into()),
            (0, "\n".into()),
            (1, "one".into()),
            (1, "two".into()),
            (1, "\n".into()),
        ]
    );
    let pdf = br#"{"jsonrpc":"2.0","id":"1","result":{"message":{"parts":[{"raw":"JVBERi0=","mediaType":"application/pdf"}]}}}"#;
    assert!(A2a.decode_response(pdf, &mut Vec::new()).is_err());
    let image = br#"{"jsonrpc":"2.0","id":"1","result":{"message":{"parts":[{"raw":"iVBORw==","mediaType":"image/png"}]}}}"#;
    assert!(A2a.decode_response(image, &mut Vec::new()).is_ok());
    // An unknown result shape: no delta (the fallback reads its strings).
    let odd = br#"{"jsonrpc":"2.0","id":"1","result":{"parts":"not a list","note":"x"}}"#;
    let mut out = Vec::new();
    A2a.decode_response(odd, &mut out).unwrap();
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
