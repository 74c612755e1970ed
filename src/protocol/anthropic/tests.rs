#![allow(clippy::unwrap_used)]
use super::*;
use crate::protocol::FrameKind;

fn decode_all<'a>(
    dec: &mut MessagesStream,
    frames: &[&'a str],
) -> Vec<(FrameKind, Vec<Delta<'a>>)> {
    frames
        .iter()
        .map(|f| {
            let mut out = Vec::new();
            let k = dec.decode(None, f.as_bytes(), &mut out).unwrap();
            (k, out)
        })
        .collect()
}

#[test]
fn routes_block_deltas_by_block_kind() {
    let mut dec = MessagesStream::default();
    let got = decode_all(
        &mut dec,
        &[
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"get","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
        ],
    );
    assert_eq!(
        got[2].1,
        vec![Delta::Text {
            choice: 0,
            channel: Channel::Reasoning,
            text: "hmm".into()
        }]
    );
    assert!(got[3].1.is_empty());
    assert_eq!(
        got[5].1,
        vec![Delta::Text {
            choice: 0,
            channel: Channel::Content,
            text: "Hi".into()
        }]
    );
    assert_eq!(
        got[6].1,
        vec![Delta::ToolCallStart {
            choice: 0,
            index: 2,
            id: Some("t1".into()),
            name: "get".into()
        }]
    );
    assert_eq!(
        got[7].1,
        vec![Delta::Text {
            choice: 0,
            channel: Channel::ToolArgs(2),
            text: "{\"a\"".into()
        }]
    );
    assert_eq!(got[8].0, FrameKind::Passthrough);
    assert_eq!(got[10].0, FrameKind::Terminal);
}

#[test]
fn parses_system_messages_tools_and_results() {
    let r = AnthropicMessages
        .parse_request(
            br#"{"model":"c","stream":true,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","description":"d","input_schema":{}}]}"#,
            "/v1/messages",
        )
        .unwrap();
    assert!(r.stream);
    let m = &r.conversation.messages;
    assert_eq!(m[0].role, Role::System);
    assert_eq!(m[2].tool_calls[0].arguments, r#"{"x":1}"#);
    assert_eq!(
        (m[3].role.clone(), m[3].text.clone()),
        (Role::Tool, vec!["r".to_string()])
    );
    assert_eq!(r.conversation.tools[0].name, "f");
}

#[test]
fn error_frame_keeps_the_event_name() {
    let f = AnthropicMessages.stream_error_frame(
        &GatewayError::Blocked {
            message: "no".into(),
        },
        &crate::protocol::ReplyTo::default(),
    );
    assert_eq!(
        &f[..],
        &b"event: error\ndata: {\"error\":{\"message\":\"no\",\"type\":\"invalid_request_error\"},\"type\":\"error\"}\n\n"[..]
    );
}

#[test]
fn document_blocks_are_read_and_stored_content_noted() {
    let body = r#"{"model":"c","max_tokens":1,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"text/markdown","data":"Zm9yYmlkZGVuIGZydWl0"}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain doc"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!"}},{"type":"document","source":{"type":"file","file_id":"f"}},{"type":"container_upload","file_id":"g"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AAAA"}}]}]}]}"#;
    let r = AnthropicMessages
        .parse_request(body.as_bytes(), "/v1/messages")
        .unwrap();
    assert_eq!(
        r.conversation.messages[1].text,
        ["forbidden fruit", "plain doc"]
    );
    assert_eq!(
        r.documents.unreadable,
        ["messages[0].content[5].content[0].source.data (application/pdf)"]
    );
    let stored: Vec<&str> = r.documents.stored.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        stored,
        [
            "messages[0].content[3].source.file_id",
            "messages[0].content[4].file_id"
        ]
    );
}

/// Review 12: blocks are indexed (linear work) and bounded; past the bound the answer is not
/// decoded (fail closed), and so is a block started anywhere but at its place.
#[test]
fn content_blocks_are_bounded() {
    let mut dec = MessagesStream::default();
    let start = |i: usize| {
        format!(
            r#"{{"type":"content_block_start","index":{i},"content_block":{{"type":"text","text":""}}}}"#
        )
    };
    for i in 0..MAX_BLOCKS {
        let mut out = Vec::new();
        dec.decode(None, start(i).as_bytes(), &mut out).unwrap();
    }
    let (again, past) = (start(0), start(MAX_BLOCKS));
    // Started again: not at its place (the SDK would append another block).
    let mut out = Vec::new();
    assert!(dec.decode(None, again.as_bytes(), &mut out).is_err());
    let mut out = Vec::new();
    assert!(dec.decode(None, past.as_bytes(), &mut out).is_err());
}

#[test]
fn the_prompt_caches_tokens_are_input_priced_apart() {
    let mut dec = MessagesStream::default();
    let start = br#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}"#;
    let mut out = Vec::new();
    dec.decode(Some(b"message_start"), start, &mut out).unwrap();
    let cache = Some(crate::delta::CacheTokens {
        write: 100,
        read: 1000,
    });
    assert_eq!(
        out,
        [Delta::Usage {
            input_tokens: Some(1110),
            output_tokens: Some(1),
            cache
        }]
    );
    // A later report of the output alone leaves the input as it was.
    let end = br#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}"#;
    let mut out = Vec::new();
    dec.decode(Some(b"message_delta"), end, &mut out).unwrap();
    assert!(out.contains(&Delta::Usage {
        input_tokens: None,
        output_tokens: Some(5),
        cache: None
    }));
    let price = crate::config::Price {
        input_per_mtok: 1.0,
        output_per_mtok: 4.0,
        cache_read_per_mtok: Some(0.1),
        cache_write_per_mtok: None,
    };
    let usd = price.usd_cached(
        1110,
        5,
        crate::delta::CacheTokens {
            write: 100,
            read: 1000,
        },
    ) * 1e6;
    // 10 plain, 100 written at twice the input price, 1,000 read at 0.1, 5 output at 4.
    assert!((usd - (10.0 + 200.0 + 100.0 + 20.0)).abs() < 1e-6, "{usd}");
}
