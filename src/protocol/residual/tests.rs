#![allow(clippy::unwrap_used, clippy::single_range_in_vec_init)]
use super::*;

const NONE: Structural = Structural {
    keys: &["finish_reason"],
    nested: &[(&["response"], "instructions"), (&["x", "[]"], "data")],
    text_keys: &[&["m", "[]"]],
    free: &[],
    schema: None,
};

fn residual(data: &str, known: &[Range<usize>]) -> Vec<String> {
    let mut out = Vec::new();
    residual_strings(data.as_bytes(), &NONE, known, &mut out).unwrap();
    out.into_iter().map(|(r, _)| data[r].to_owned()).collect()
}

#[test]
fn reports_strings_outside_structure_and_known_texts() {
    let data = r#"{"id":"x","choices":[{"delta":{"content":"hi","mystery":"forbidden"},"finish_reason":"stop"}],"extra":["a",{"type":"t"},"b\"c"]}"#;
    let content = data.find(r#""hi""#).unwrap();
    assert_eq!(
        residual(data, &[content..content + 4]),
        [r#""forbidden""#, r#""a""#, r#""b\"c""#]
    );
    // A structural key inside an array does not exempt the array's later strings.
    assert_eq!(residual(r#"{"x":[{"type":"t"},"z"]}"#, &[]), [r#""z""#]);
    // A structural key exempts a string value only; nested exemptions exempt the whole
    // value and need their parent.
    assert_eq!(residual(r#"{"type":{"a":["b"]}}"#, &[]), [r#""b""#]);
    assert_eq!(residual(r#"{"finish_reason":["s"]}"#, &[]), [r#""s""#]);
    assert!(residual(r#"{"response":{"instructions":{"a":["b"]}}}"#, &[]).is_empty());
    assert!(residual(r#"{"response":{"instructions":"i"}}"#, &[]).is_empty());
    assert_eq!(residual(r#"{"instructions":"i"}"#, &[]), [r#""i""#]);
    // Nested exemptions match their whole path from the top, array positions included.
    for elsewhere in [
        r#"{"a":{"response":{"instructions":"i"}}}"#,
        r#"{"response":[{"instructions":"i"}]}"#,
        r#"{"x":{"data":"i"}}"#,
        r#"{"x":[{"y":{"data":"i"}}]}"#,
    ] {
        assert_eq!(residual(elsewhere, &[]), [r#""i""#], "{elsewhere}");
    }
    assert!(residual(r#"{"x":[{"data":"i"},{"data":"j"}]}"#, &[]).is_empty());
    // An escaped key could spell anything: it is read.
    assert_eq!(
        residual(r#"{"\u0078":[{"data":"i"}]}"#, &[]),
        [r#""\u0078""#, r#""i""#]
    );
    // Keys in the shape of field names are names; every other key is read (text here; the
    // identifier-shaped ones go to the secret and PII patterns).
    assert_eq!(
        residual(r#"{"m":[{" a":1,"b\u0020c":{"d":"e"}}],"n":{" f":2}}"#, &[]),
        [r#"" a""#, r#""b\u0020c""#, r#""e""#, r#"" f""#]
    );
    assert_eq!(
        residual(
            r#"{"finishReason":1,"snake_key":2,"forbidden fruit":3,"AKIAABCDEFGHIJKLMNOP":4}"#,
            &[]
        ),
        [r#""forbidden fruit""#]
    );
    for name in ["finish_reason", "finishReason", "usageMetadata", "a"] {
        assert!(super::name_shaped(name.as_bytes()), "{name}");
    }
    for not in ["AKIA", "xAKIA", "key1", "a-b", "sk_live_X", "aB", "", "a b"] {
        assert!(!super::name_shaped(not.as_bytes()), "{not}");
    }
    // Escaped keys are never structural (and are read themselves).
    assert_eq!(
        residual(r#"{"\u0074ype":"v"}"#, &[]),
        [r#""\u0074ype""#, r#""v""#]
    );
    // Inside a known raw value (Gemini's args object) nothing is left over.
    let raw = r#"{"args":{"q":"text"},"other":"o"}"#;
    assert_eq!(residual(raw, &[8..20]), [r#""o""#]);
}

#[test]
fn strings_of_one_path_share_an_id_across_frames() {
    let path = |data: &str| {
        let mut out = Vec::new();
        residual_strings(data.as_bytes(), &NONE, &[], &mut out).unwrap();
        out.iter().map(|(_, p)| *p).collect::<Vec<_>>()
    };
    let a = path(r#"{"type":"x.delta","delta":"forbidden "}"#);
    let b = path(r#"{"delta":"fruit","type":"x.delta","n":1}"#);
    assert_eq!(a, b);
    let c = path(r#"{"item":{"delta":"x"},"list":["y",{"delta":"z"}]}"#);
    assert_eq!(c.len(), 3);
    assert!(c[0] != a[0] && c[0] != c[1] && c[1] != c[2] && c[0] != c[2]);
}

#[test]
fn a_request_message_name_is_still_read_by_the_input_checks() {
    // The chat decoder keeps `name` (RAG context selection) but not as text: it is a
    // string the model reads, so it stays a residual, unescaped.
    use crate::protocol::Protocol;
    let body = br#"{"model":"m","messages":[{"role":"user","name":"evil-bot","content":"hi"}]}"#;
    let mut parsed = crate::protocol::openai_chat::OpenAiChat
        .parse_request(body, "/v1/chat/completions")
        .unwrap();
    assert_eq!(
        parsed.conversation.messages[0].name.as_deref(),
        Some("evil-bot")
    );
    add_request_residuals(body, &REQUEST_STRUCTURAL, &mut parsed.conversation).unwrap();
    let texts: Vec<&String> = parsed
        .conversation
        .messages
        .iter()
        .flat_map(|m| &m.text)
        .collect();
    assert!(texts.iter().any(|t| *t == "evil-bot"), "{texts:?}");
}

/// Every text the input checks read for `body` of `protocol` (decoder and fallback).
fn request_texts(protocol: &dyn crate::protocol::Protocol, path: &str, body: &str) -> Vec<String> {
    let mut parsed = protocol.parse_request(body.as_bytes(), path).unwrap();
    add_request_residuals(
        body.as_bytes(),
        &REQUEST_STRUCTURAL,
        &mut parsed.conversation,
    )
    .unwrap();
    add_json_views(&mut parsed.conversation);
    // Identifier-shaped values are read by the secret and PII patterns only, not as text.
    parsed
        .conversation
        .messages
        .iter()
        .filter(|m| m.role != crate::delta::Role::Identifiers)
        .flat_map(crate::delta::Message::read_strings)
        .cloned()
        .collect()
}

fn reads(texts: &[String], phrase: &str) -> bool {
    texts.iter().any(|t| t.lines().any(|l| l == phrase))
}

#[test]
fn structural_keys_do_not_exempt_free_form_json() {
    use crate::protocol::{anthropic, gemini, openai_chat, openai_responses};
    let gemini_path = "/v1beta/models/g:generateContent";
    // Gemini: a function's response and a call's args, either spelling; escapes decoded.
    for (part, key) in [
        ("functionResponse", "response"),
        ("function_response", "response"),
        ("functionCall", "args"),
        ("function_call", "args"),
    ] {
        let body = format!(
            r#"{{"contents":[{{"role":"user","parts":[{{"{part}":{{"name":"f","{key}":{{"status":"\u0066orbidden fruit","id":{{"type":"forbidden fruit"}}}}}}}}]}}]}}"#
        );
        let texts = request_texts(&gemini::Gemini, gemini_path, &body);
        assert_eq!(
            texts.iter().filter(|t| *t == "forbidden fruit").count(),
            2,
            "{part}: {texts:?}"
        );
    }
    // Tool parameter schemas: keys are text, `type`/`status` read inside them.
    let schema = r#"{"type":"object","properties":{"forbidden fruit":{"type":"string"},"status":{"type":"string","enum":["forbidden fruit"]}}}"#;
    let chat = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{schema}}}}}]}}"#
    );
    let responses = format!(
        r#"{{"model":"m","input":"hi","tools":[{{"type":"function","name":"f","parameters":{schema}}}]}}"#
    );
    let anthropic_body = format!(
        r#"{{"model":"m","max_tokens":1,"messages":[{{"role":"user","content":"hi"}}],"tools":[{{"name":"f","input_schema":{schema}}}]}}"#
    );
    let gemini_body = format!(
        r#"{{"contents":[{{"parts":[{{"text":"hi"}}]}}],"tools":[{{"function_declarations":[{{"name":"f","parameters":{schema}}}]}}]}}"#
    );
    for (protocol, path, body) in [
        (
            &openai_chat::OpenAiChat as &dyn crate::protocol::Protocol,
            "/v1/chat/completions",
            chat,
        ),
        (
            &openai_responses::OpenAiResponses,
            "/v1/responses",
            responses,
        ),
        (
            &anthropic::AnthropicMessages,
            "/v1/messages",
            anthropic_body,
        ),
        (&gemini::Gemini, gemini_path, gemini_body),
    ] {
        let texts = request_texts(protocol, path, &body);
        assert_eq!(
            texts.iter().filter(|t| *t == "forbidden fruit").count(),
            2,
            "{}: {texts:?}",
            protocol.name()
        );
        // The protocol's own structure stays exempt.
        assert!(!reads(&texts, "function"), "{}: {texts:?}", protocol.name());
    }
    // Anthropic tool_use input and Responses function_call_output values.
    let body = r#"{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"status":"\u0066orbidden fruit"}}]}]}"#;
    assert!(reads(
        &request_texts(&anthropic::AnthropicMessages, "/v1/messages", body),
        "forbidden fruit"
    ));
    let body = r#"{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x","status":"\u0066orbidden fruit"}]}]}"#;
    assert!(reads(
        &request_texts(&openai_responses::OpenAiResponses, "/v1/responses", body),
        "forbidden fruit"
    ));
}

#[test]
fn json_held_in_strings_is_read_decoded() {
    use crate::protocol::openai_chat::OpenAiChat;
    // A tool result whose text is JSON with an escape, and one more level inside it.
    let body = r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"1","content":"{\"status\":\"\\u0066orbidden fruit\"}"},{"role":"tool","tool_call_id":"2","content":"[\"{\\\"id\\\":\\\"\\\\u0066orbidden apple\\\"}\"]"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"q\":\"{\\\"type\\\":\\\"\\\\u0066orbidden pear\\\"}\"}"}}]}]}"#;
    let texts = request_texts(&OpenAiChat, "/v1/chat/completions", body);
    for phrase in [
        "forbidden fruit",
        "forbidden apple",
        "forbidden pear",
        "status",
    ] {
        assert!(reads(&texts, phrase), "{phrase}: {texts:?}");
    }
    // Duplicated keys: both values are read.
    let mut view = String::new();
    json_view(r#"{"a":"\u0078","a":"\u0079"}"#, 0, &mut view);
    assert_eq!(view, "a\nx\na\ny");
    // No escape: nothing more to read.
    let mut view = String::new();
    json_view(r#"{"a":"forbidden"}"#, 0, &mut view);
    assert!(view.is_empty(), "{view}");
    // Escapes in what is not one JSON text (review 19, P19-03): read decoded wherever they
    // stand, level after level, as answers are.
    for text in [
        r#"Result: {"a":"the forbidden\u0020fruit"}"#,
        r#"{"a":"the forbidden\u0020fruit"} (2 rows)"#,
        r#"{"a":"the forbidden\u0020fruit", "b":"#,
        "{\"x\":1}\n{\"a\":\"the forbidden\\u0020fruit\"}",
        r"not json: forbidden\u0020fruit",
        r#"log: {"body":"{\"k\":\"forbidden\\u0020fruit\"}"} end"#,
    ] {
        let mut view = String::new();
        json_view(text, 0, &mut view);
        assert!(view.contains("forbidden fruit"), "{text}: {view:?}");
    }
}

#[test]
fn unbalanced_or_too_deep_input_is_refused() {
    let mut out = Vec::new();
    for bad in [r#"{"a":"#, r#"{"a":"x}"#, "]", &"[".repeat(200)] {
        assert_eq!(
            residual_strings(bad.as_bytes(), &NONE, &[], &mut out),
            Err(Unwalkable),
            "{bad}"
        );
    }
}

/// Request identifiers: every value left out under a structural key in the shape of an
/// identifier, in one message of their own (for the secret and PII patterns); a value of the
/// same key that is not identifier-shaped stays text.
fn identifiers_of(protocol: &dyn crate::protocol::Protocol, path: &str, body: &str) -> Vec<String> {
    let mut parsed = protocol.parse_request(body.as_bytes(), path).unwrap();
    add_request_residuals(
        body.as_bytes(),
        &REQUEST_STRUCTURAL,
        &mut parsed.conversation,
    )
    .unwrap();
    parsed
        .conversation
        .messages
        .iter()
        .filter(|m| m.role == crate::delta::Role::Identifiers)
        .flat_map(|m| m.text.clone())
        .collect()
}

#[test]
fn request_identifiers_reach_the_pattern_checks() {
    use crate::protocol::openai_chat::OpenAiChat;
    let body = r#"{"model":"sk-live-0123456789abcdef","messages":[{"role":"assistant","tool_calls":[{"id":"call_AKIAIOSFODNN7EXAMPLE","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"forbidden fruit","content":"ok"}]}"#;
    let ids = identifiers_of(&OpenAiChat, "/v1/chat/completions", body);
    assert!(
        ids.contains(&"sk-live-0123456789abcdef".to_owned()),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"call_AKIAIOSFODNN7EXAMPLE".to_owned()),
        "{ids:?}"
    );
    assert!(!ids.contains(&"forbidden fruit".to_owned()), "{ids:?}");
    let texts = request_texts(&OpenAiChat, "/v1/chat/completions", body);
    assert!(reads(&texts, "forbidden fruit"), "{texts:?}");
}

#[test]
fn read_texts_take_each_occurrence_once() {
    let mut read = super::ReadTexts::new(["a", "b", "a", "c", "a"]);
    assert!(read.take("a") && read.take("a") && read.take("a"));
    assert!(!read.take("a"));
    assert!(!read.take_if("b", || false));
    assert!(read.take("b") && !read.take("b"));
    assert!(!read.take("d"));
    // Any number of one text: each taken once (linear in the count, whatever repeats).
    let many = vec!["x"; 100_000];
    let mut read = super::ReadTexts::new(many.iter().copied());
    assert_eq!((0..100_001).filter(|_| read.take("x")).count(), 100_000);
}
