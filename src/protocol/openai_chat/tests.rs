#![allow(clippy::unwrap_used)]
use super::fast::structural;
use super::*;

#[test]
fn structural_keys_match_the_lists() {
    let listed: Vec<&str> = super::super::residual::COMMON_KEYS
        .iter()
        .chain(STRUCTURAL.keys)
        .copied()
        .collect();
    for k in &listed {
        assert!(structural(k.as_bytes()), "{k}");
    }
    // Every key the match accepts is listed (the match has 12 arms).
    assert_eq!(listed.len(), 12);
    for k in [
        "content", "delta", "choices", "logprobs", "ids", "", "name", "text",
    ] {
        assert!(!structural(k.as_bytes()), "{k}");
    }
}

fn decode(data: &str) -> (FrameKind, Vec<Delta<'_>>) {
    let mut out = Vec::new();
    let kind = ChatStream::default()
        .decode(None, data.as_bytes(), &mut out)
        .unwrap();
    (kind, out)
}

#[test]
fn texts_are_borrowed_from_the_frame_unless_escaped() {
    let (_, out) = decode(
        r#"{"choices":[{"index":0,"delta":{"content":"plain"}},{"index":1,"delta":{"content":"a\nb\u00e9"}}]}"#,
    );
    let texts: Vec<&Cow<str>> = out
        .iter()
        .filter_map(|d| match d {
            Delta::Text { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert!(matches!(texts[0], Cow::Borrowed("plain")), "{out:?}");
    assert_eq!(texts[1], "a\nbé");
}

#[test]
fn decodes_text_of_every_choice_and_tool_arguments() {
    let (kind, d) = decode(
        r#"{"choices":[{"index":0,"delta":{"content":"hi \"x\""}},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},"finish_reason":null}]}"#,
    );
    assert_eq!(kind, FrameKind::Data);
    assert_eq!(
        d,
        vec![
            Delta::Text {
                choice: 0,
                channel: Channel::Content,
                text: "hi \"x\"".into()
            },
            Delta::ToolCallStart {
                choice: 1,
                index: 0,
                id: Some("c1".into()),
                name: "f".into()
            },
            Delta::Text {
                choice: 1,
                channel: Channel::ToolArgs(0),
                text: "{\"a\"".into()
            },
        ]
    );
}

#[test]
fn recognises_done_errors_and_azure_frames() {
    assert_eq!(decode("[DONE]").0, FrameKind::Terminal);
    assert_eq!(
        decode(r#"{"error":{"message":"x"}}"#).0,
        FrameKind::UpstreamError
    );
    let (k, d) = decode(r#"{"id":"","choices":[],"prompt_filter_results":[{"prompt_index":0}]}"#);
    assert_eq!((k, d.len()), (FrameKind::Data, 0));
    assert!(ChatStream::default()
        .decode(None, b"{not json", &mut Vec::new())
        .is_err());
}

#[test]
fn parses_request_conversation() {
    let r = OpenAiChat
            .parse_request(
                br#"{"model":"m","stream":true,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","description":"d"}}]}"#,
                "/v1/chat/completions",
            )
            .unwrap();
    assert!(r.stream);
    let m = &r.conversation.messages;
    assert_eq!(m.len(), 4);
    assert_eq!(m[1].text, vec!["a".to_string()]);
    assert_eq!(m[2].tool_calls[0].name, "f");
    assert_eq!(m[3].tool_call_id.as_deref(), Some("1"));
    assert_eq!(r.conversation.tools[0].name, "f");
    assert!(OpenAiChat.parse_request(b"{", "/").is_err());
}

#[test]
fn a_prediction_is_input_the_model_reads() {
    for prediction in [
        r#"{"type":"content","content":"the predicted text"}"#,
        r#"{"type":"content","content":[{"type":"text","text":"the predicted text"}]}"#,
    ] {
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"prediction":{prediction}}}"#
        );
        let r = OpenAiChat
            .parse_request(body.as_bytes(), "/v1/chat/completions")
            .unwrap();
        let texts: Vec<&str> = r
            .conversation
            .messages
            .iter()
            .flat_map(|m| m.text.iter().map(String::as_str))
            .collect();
        assert_eq!(texts, ["hi", "the predicted text"], "{prediction}");
    }
}

#[test]
fn file_parts_are_read_and_stored_files_noted() {
    let body = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"file","file":{"file_data":"data:text/csv;base64,Zm9yYmlkZGVuIGZydWl0"}},{"type":"file","file":{"filename":"n.txt","file_data":"Zm9yYmlkZGVuIGZydWl0"}},{"type":"file","file":{"filename":"n.pdf","file_data":"AAAA"}},{"type":"file","file":{"file_id":"file-1"}}]}]}"#;
    let r = OpenAiChat
        .parse_request(body.as_bytes(), "/v1/chat/completions")
        .unwrap();
    assert_eq!(
        r.conversation.messages[0].text,
        ["a", "forbidden fruit", "forbidden fruit"]
    );
    assert_eq!(
        r.documents.unreadable,
        ["messages[0].content[3].file.file_data (no media type)"]
    );
    assert_eq!(r.documents.stored.len(), 1);
    assert_eq!(
        r.documents.stored[0].1,
        "messages[0].content[4].file.file_id"
    );
    let bad = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/plain;base64,#"}}]}]}"#;
    let e = OpenAiChat
        .parse_request(bad.as_bytes(), "/v1/chat/completions")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("messages[0].content[0].file.file_data is not valid base64"),
        "{e}"
    );
}

#[test]
fn error_frame_is_the_native_shape() {
    let f = OpenAiChat.stream_error_frame(
        &GatewayError::Blocked {
            message: "no".into(),
        },
        &crate::protocol::ReplyTo::default(),
    );
    assert_eq!(
            &f[..],
            &b"data: {\"error\":{\"message\":\"no\",\"type\":\"guardrail_violation\",\"param\":null,\"code\":\"content_blocked\"}}\n\n"[..]
        );
}

#[test]
fn a_tool_call_id_in_pieces_is_joined_and_a_name_in_pieces_refused() {
    let call = |id: Option<&str>, name: Option<&str>| {
        let mut c = serde_json::json!({"index": 2, "function": {"arguments": ""}});
        if let Some(id) = id {
            c["id"] = id.into();
        }
        if let Some(name) = name {
            c["function"]["name"] = name.into();
        }
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [c]}}]}).to_string()
    };
    let decode =
        |d: &mut ChatStream, f: &str| d.decode(None, f.as_bytes(), &mut Vec::new()).map(drop);
    let mut d = ChatStream::default();
    let frames = [
        call(Some("sk-"), Some("get")),
        call(Some("abc"), None),
        call(Some("def"), None),
    ];
    let mut joined = Vec::new();
    for f in &frames {
        decode(&mut d, f).unwrap();
        joined.extend(d.joined_values().iter().cloned());
    }
    assert_eq!(joined, ["sk-abc", "sk-abcdef"]);
    // A frame that joins nothing lists nothing (the last frame's values only).
    decode(&mut d, &call(None, None)).unwrap();
    assert!(d.joined_values().is_empty());
    // A second name for the call: the readers disagree (joined, or the last piece).
    assert!(decode(&mut d, &call(None, Some("x"))).is_err());
    // An empty piece changes nothing for either reader; another call's name is its own.
    let mut d = ChatStream::default();
    decode(&mut d, &call(Some("c"), Some("get"))).unwrap();
    decode(&mut d, &call(None, Some(""))).unwrap();
    let other = r#"{"choices": [{"index": 1, "delta": {"tool_calls": [{"index": 2, "function": {"name": "get"}}]}}]}"#;
    decode(&mut d, other).unwrap();
    // An id in more pieces than any provider sends is refused (each joined id is checked
    // again whole: the bound keeps that work linear).
    let mut d = ChatStream::default();
    for i in 0..8 {
        decode(&mut d, &call(Some("a"), (i == 0).then_some("get"))).unwrap();
    }
    assert!(decode(&mut d, &call(Some("a"), None)).is_err());
}
