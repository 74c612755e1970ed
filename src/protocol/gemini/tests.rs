#![allow(clippy::unwrap_used)]
use super::*;
use crate::delta::Channel;
use crate::protocol::FrameKind;

#[test]
fn snake_case_fields_are_read_like_camel_case_ones() {
    let camel = r#"{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"q":"a"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"r":"b"}}}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}]}"#;
    let snake = r#"{"system_instruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"model","parts":[{"function_call":{"name":"f","args":{"q":"a"}}}]},{"role":"user","parts":[{"function_response":{"name":"f","response":{"r":"b"}}}]}],"tools":[{"function_declarations":[{"name":"f"}]}]}"#;
    let path = "/v1beta/models/g:generateContent";
    let (a, b) = (
        Gemini.parse_request(camel.as_bytes(), path).unwrap(),
        Gemini.parse_request(snake.as_bytes(), path).unwrap(),
    );
    assert_eq!(
        format!("{:?}", a.conversation),
        format!("{:?}", b.conversation)
    );
    assert_eq!(a.conversation.messages[0].text, ["sys"]);
    assert_eq!(a.conversation.tools.len(), 1);
    // Both spellings at once: refused, not one of them silently unchecked.
    let both = r#"{"systemInstruction":{"parts":[{"text":"a"}]},"system_instruction":{"parts":[{"text":"b"}]},"contents":[]}"#;
    assert!(Gemini.parse_request(both.as_bytes(), path).is_err());
    // Answers too.
    let mut out = Vec::new();
    Gemini
        .decode_response(
            br#"{"candidates":[{"content":{"parts":[{"text":"hi"},{"function_call":{"name":"f","args":{}}}]},"finish_reason":"STOP"}],"usage_metadata":{"prompt_token_count":2,"candidates_token_count":3}}"#,
            &mut out,
        )
        .unwrap();
    let shown = format!("{out:?}");
    assert!(
        shown.contains("Finish") && shown.contains("Usage") && shown.contains("ToolCall"),
        "{shown}"
    );
}

#[test]
fn matches_model_paths_only() {
    assert!(Gemini.matches("/v1beta/models/gemini-2.5-flash:streamGenerateContent"));
    assert!(Gemini.matches("/v1/models/gemini-pro:generateContent"));
    assert!(!Gemini.matches("/v1beta/models/gemini-pro:countTokens"));
    assert!(!Gemini.matches("/v1beta/models/:generateContent"));
    assert!(!Gemini.matches("/v1/chat/completions"));
}

#[test]
fn decodes_text_thoughts_and_whole_function_calls() {
    let mut dec = GeminiStream::default();
    let data = br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true},{"text":"Hi"},{"functionCall":{"name":"f","args":{"q":"x"}}}]},"index":0}],"usageMetadata":{"promptTokenCount":3}}"#;
    let mut out = Vec::new();
    assert_eq!(dec.decode(None, data, &mut out).unwrap(), FrameKind::Data);
    assert_eq!(
        out[0],
        Delta::Text {
            choice: 0,
            channel: Channel::Reasoning,
            text: "plan".into()
        }
    );
    assert_eq!(
        out[1],
        Delta::Text {
            choice: 0,
            channel: Channel::Content,
            text: "Hi".into()
        }
    );
    assert_eq!(
        out[2],
        Delta::ToolCallStart {
            choice: 0,
            index: 0,
            id: None,
            name: "f".into()
        }
    );
    assert_eq!(
        out[3],
        Delta::Text {
            choice: 0,
            channel: Channel::ToolArgs(0),
            text: r#"{"q":"x"}"#.into()
        }
    );
    let mut out = Vec::new();
    assert_eq!(
        dec.decode(None, br#"{"error":{"code":500}}"#, &mut out)
            .unwrap(),
        FrameKind::UpstreamError
    );
}

#[test]
fn streaming_comes_from_the_path() {
    let body = br#"{"contents":[{"role":"user","parts":[{"text":"q"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}"#;
    let s = Gemini
        .parse_request(body, "/v1beta/models/m:streamGenerateContent")
        .unwrap();
    assert!(s.stream);
    assert_eq!(s.conversation.messages[0].role, Role::System);
    assert!(
        !Gemini
            .parse_request(body, "/v1beta/models/m:generateContent")
            .unwrap()
            .stream
    );
}

#[test]
fn error_frame_puts_error_first_with_an_integer_code() {
    let f = Gemini.stream_error_frame(
        &GatewayError::Blocked {
            message: "no".into(),
        },
        &crate::protocol::ReplyTo::default(),
    );
    assert_eq!(
        &f[..],
        &b"data: {\"error\":{\"code\":400,\"message\":\"no\",\"status\":\"INVALID_ARGUMENT\"}}\n\n"
            [..]
    );
}

#[test]
fn inline_text_documents_are_read_and_stored_content_noted() {
    let body = r#"{"contents":[{"parts":[{"text":"a"},{"inlineData":{"mimeType":"text/plain","data":"Zm9yYmlkZGVuIGZydWl0"}},{"inline_data":{"mime_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg=="}},{"inlineData":{"mimeType":"application/pdf","data":"AAAA"}},{"fileData":{"mimeType":"video/mp4","fileUri":"u"}},{"file_data":{"mime_type":"image/png","file_uri":"u"}}]}],"cachedContent":"cachedContents/c"}"#;
    let r = Gemini
        .parse_request(body.as_bytes(), "/v1beta/models/g:generateContent")
        .unwrap();
    assert_eq!(r.conversation.messages[0].text, ["a", "forbidden fruit"]);
    assert_eq!(
        r.documents.unreadable,
        ["contents[0].parts[3].inlineData.data (application/pdf)"]
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
            ("file", "contents[0].parts[4].fileData"),
            ("cached_content", "cachedContent")
        ]
    );
    let bad = r#"{"contents":[{"parts":[{"inlineData":{"mimeType":"text/plain","data":"@"}}]}]}"#;
    let e = Gemini
        .parse_request(bad.as_bytes(), "/v1beta/models/g:generateContent")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("contents[0].parts[0].inlineData.data is not valid base64"),
        "{e}"
    );
}

#[test]
fn documents_returned_by_a_function_are_read() {
    let body = r#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"ok":true},"parts":[{"inlineData":{"mimeType":"text/plain","data":"Zm9yYmlkZGVuIGZydWl0"}},{"inline_data":{"mime_type":"application/pdf","data":"AAAA"}}]}}]}]}"#;
    let r = Gemini
        .parse_request(body.as_bytes(), "/v1beta/models/g:generateContent")
        .unwrap();
    assert_eq!(
        r.conversation.messages[0].text,
        [r#"{"ok":true}"#, "forbidden fruit"]
    );
    assert_eq!(
        r.documents.unreadable,
        ["contents[0].parts[0].functionResponse.parts[1].inlineData.data (application/pdf)"]
    );
}
