#![allow(clippy::unwrap_used)]
use super::*;

fn decode(data: &str) -> (FrameKind, Vec<Delta<'_>>) {
    let mut out = Vec::new();
    let k = ResponsesStream::default()
        .decode(None, data.as_bytes(), &mut out)
        .unwrap();
    (k, out)
}

#[test]
#[rustfmt::skip]
fn custom_and_mcp_calls_are_tool_calls() {
    assert_eq!(
        decode(r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"custom_tool_call","call_id":"c2","name":"grep","input":"a"}}"#).1,
        vec![
            Delta::ToolCallStart { choice: 0, index: 2, id: Some("c2".into()), name: "grep".into() },
            Delta::Text { choice: 0, channel: Channel::ToolInput(2), text: "a".into() },
        ]
    );
    for (kind, channel) in [("custom_tool_call_input", Channel::ToolInput(2)), ("mcp_call_arguments", Channel::ToolArgs(2))] {
        assert_eq!(
            decode(&format!(r#"{{"type":"response.{kind}.delta","output_index":2,"delta":"b"}}"#)).1,
            vec![Delta::Text { choice: 0, channel, text: "b".into() }]
        );
    }
    assert_eq!(
        decode(r#"{"type":"response.custom_tool_call_input.done","output_index":2,"input":"ab"}"#).1,
        vec![Delta::Repeat { choice: 0, channel: Channel::ToolInput(2), text: "ab".into(), start: None }]
    );
}

#[test]
fn decodes_text_refusals_and_tool_arguments() {
    assert_eq!(
        decode(r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi","sequence_number":3}"#).1,
        vec![Delta::Text { choice: 0, channel: Channel::Content, text: "Hi".into() }]
    );
    assert_eq!(
        decode(r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc","call_id":"c1","name":"get","arguments":""},"sequence_number":4}"#).1,
        vec![Delta::ToolCallStart { choice: 0, index: 1, id: Some("c1".into()), name: "get".into() }]
    );
    assert_eq!(
        decode(r#"{"type":"response.function_call_arguments.delta","item_id":"fc","output_index":1,"delta":"{\"a","sequence_number":5}"#).1,
        vec![Delta::Text { choice: 0, channel: Channel::ToolArgs(1), text: "{\"a".into() }]
    );
    assert_eq!(
        decode(r#"{"type":"response.refusal.delta","delta":"no"}"#).1[0],
        Delta::Text {
            choice: 0,
            channel: Channel::Refusal,
            text: "no".into()
        }
    );
    // `.done` repeats the text: held and masked with it, not checked again.
    assert_eq!(
        decode(r#"{"type":"response.output_text.done","text":"Hi"}"#),
        (
            FrameKind::Data,
            vec![Delta::Repeat {
                choice: 0,
                channel: Channel::Content,
                text: "Hi".into(),
                start: None
            }]
        )
    );
    // So does a reasoning summary's finished part, as reasoning.
    assert_eq!(
        decode(r#"{"type":"response.reasoning_summary_part.done","item_id":"rs","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"Hm"}}"#).1,
        vec![Delta::Repeat {
            choice: 0,
            channel: Channel::Reasoning,
            text: "Hm".into(),
            start: None
        }]
    );
    assert_eq!(
        decode(r#"{"type":"response.completed","response":{"status":"completed","output":[]}}"#).0,
        FrameKind::Terminal
    );
    // `code` is a code interpreter's code elsewhere: any other value is still an error.
    for code in [r#""x""#, "429", "null", r#"{"a":[1]}"#] {
        let data = format!(r#"{{"type":"error","code":{code},"message":"m"}}"#);
        assert_eq!(decode(&data).0, FrameKind::UpstreamError, "{data}");
    }
}

#[test]
fn parses_string_and_item_inputs() {
    let r = OpenAiResponses
        .parse_request(
            br#"{"model":"m","input":"hello","instructions":"be brief","stream":true}"#,
            "/v1/responses",
        )
        .unwrap();
    assert!(r.stream);
    assert_eq!(r.conversation.messages.len(), 2);
    let r = OpenAiResponses
        .parse_request(
            br#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"q"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f"}]}"#,
            "/v1/responses",
        )
        .unwrap();
    let m = &r.conversation.messages;
    assert_eq!(m[0].text, vec!["q".to_string()]);
    assert_eq!(m[1].tool_calls[0].name, "f");
    assert_eq!(
        (m[2].role.clone(), m[2].tool_call_id.as_deref()),
        (Role::Tool, Some("c"))
    );
    assert_eq!(r.conversation.tools[0].name, "f");
}

#[test]
fn input_files_are_read_and_stored_content_noted() {
    let body = r#"{"model":"m","previous_response_id":"r","conversation":{"id":"c"},"prompt":{"id":"p"},"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_file","file_data":"data:text/plain;base64,Zm9yYmlkZGVuIGZydWl0"},{"type":"input_file","filename":"x.json","file_data":"eyJhIjoxfQ"},{"type":"input_file","file_url":"https://x/y.pdf"}]},{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_data":"data:application/pdf;base64,AAAA"}]}]}"#;
    let r = OpenAiResponses
        .parse_request(body.as_bytes(), "/v1/responses")
        .unwrap();
    assert_eq!(
        r.conversation.messages[0].text,
        ["a", "forbidden fruit", "{\"a\":1}"]
    );
    assert_eq!(
        r.documents.unreadable,
        ["input[1].output[0].file_data (application/pdf)"]
    );
    let stored: Vec<(&str, &str)> = r
        .documents
        .stored
        .iter()
        .map(|(k, p)| (k.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        stored,
        [
            ("url", "input[0].content[3].file_url"),
            ("previous_response", "previous_response_id"),
            ("conversation", "conversation"),
            ("prompt", "prompt.id")
        ]
    );
}

/// Review round 5: two parts added in place, the second's delta first — for the SDK the parts
/// join in their order, for the checks in arrival order: a delta is for the part added last.
#[test]
fn a_delta_is_for_the_part_added_last() {
    let added = |ci: u32| {
        format!(
            r#"{{"type":"response.content_part.added","item_id":"m","output_index":0,"content_index":{ci},"part":{{"type":"output_text","text":"","annotations":[]}}}}"#
        )
    };
    let delta = |ci: u32| {
        format!(
            r#"{{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":{ci},"delta":"x"}}"#
        )
    };
    // A fresh decoder reads `ok` and then refuses part 0's delta.
    let refuses_part_0_after = |ok: &[String]| {
        let mut dec = ResponsesStream::default();
        for ok in ok {
            assert!(
                dec.decode(None, ok.as_bytes(), &mut Vec::new()).is_ok(),
                "{ok}"
            );
        }
        assert!(dec
            .decode(None, delta(0).as_bytes(), &mut Vec::new())
            .is_err());
        dec
    };
    refuses_part_0_after(&[added(0), delta(0), added(1), delta(1)]);
    let mut dec = refuses_part_0_after(&[added(0), added(1)]);
    // A call's arguments are no part's text.
    let args = r#"{"type":"response.function_call_arguments.delta","item_id":"f","output_index":1,"delta":"{}"}"#;
    assert!(dec.decode(None, args.as_bytes(), &mut Vec::new()).is_ok());
}
