#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::delta::{Message, Role};
use std::borrow::Cow;

fn policy(yaml: &str) -> Result<Arc<Policy>, String> {
    let doc: serde_json::Value = serde_norway::from_str(yaml).unwrap();
    let defs = pack::parse_pack("test.yaml", &doc).map_err(|e| e.to_string())?;
    Policy::compile(defs)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn text(choice: u32, t: &str) -> Delta<'_> {
    Delta::Text {
        choice,
        channel: Channel::Content,
        text: Cow::Borrowed(t),
    }
}

fn stream(p: &Arc<Policy>, pieces: &[&str]) -> Result<(), Finding> {
    let mut g = p.stream_guard(true);
    for piece in pieces {
        g.on_chunk(&text(0, piece))?;
    }
    g.after_call()
}

#[test]
fn aliases_and_param_aliases_load() {
    let p = policy(
        r#"
validators:
  - type: banned_words
    params: { words: [guarantee, promise] }
  - type: content_not_includes
    params: { patterns: [secret] }
  - type: length
    params: { max_characters: 10 }
  - type: max_length
    params: { max_chars: 10 }
  - type: content_matches
    params: { pattern: "(?i)\\brouting number\\b", expect_match: false, direction: input }
"#,
    )
    .unwrap();
    assert_eq!(p.validators().len(), 5);
    assert_eq!(p.validators()[0].canonical, "content_excludes");
    assert_eq!(p.validators()[2].canonical, "max_length");
    assert_eq!(p.validators()[4].direction, Direction::Input);
}

#[test]
fn errors_name_file_validator_and_param() {
    let e = policy("validators:\n  - type: regex\n    params: { pattern: '(' }\n").unwrap_err();
    assert!(
        e.starts_with("test.yaml: validators[0] (type: regex): param 'pattern': invalid regex"),
        "{e}"
    );
    let e = policy("validators:\n  - type: nope\n").unwrap_err();
    assert!(
        e.contains("validators[0] (type: nope): unknown check type `nope`"),
        "{e}"
    );
    let e =
        policy("validators:\n  - type: banned_words\n    params: { words: [a], colour: red }\n")
            .unwrap_err();
    assert!(e.contains("param 'colour': unknown param"), "{e}");
    let e = policy("validators:\n  - type: max_length\n    params: { max: -3 }\n").unwrap_err();
    assert!(e.contains("param 'max'"), "{e}");
    let e = policy("validators:\n  - type: json_schema\n    params: {}\n").unwrap_err();
    assert!(e.contains("not supported by guardwire yet"), "{e}");
    let e = policy("validators:\n  - type: content_excludes\n    params: { patterns: [a], match_mode: fuzzy }\n").unwrap_err();
    assert!(e.contains("param 'match_mode'"), "{e}");
    let e = policy(
        "validators:\n  - type: regex\n    params: { pattern: 'x*', expect_match: false }\n",
    )
    .unwrap_err();
    assert!(e.contains("empty string"), "{e}");
    let e = policy(
        "validators:\n  - type: banned_words\n    enabled: false\n    params: { wordz: [a] }\n",
    )
    .unwrap_err();
    assert!(
        e.contains("validators[0]"),
        "disabled validators are still validated: {e}"
    );
    let e =
        policy("validators:\n  - type: banned_words\n    params: { words: [a], min_score: 0 }\n")
            .unwrap_err();
    assert!(e.contains("min_score"), "{e}");
    let e = policy("rules: []\n").unwrap_err();
    assert!(e.contains("unknown key `rules`"), "{e}");
}

#[test]
fn banned_words_default_to_word_boundaries_content_excludes_to_substrings() {
    let bw = policy("validators:\n  - type: banned_words\n    params: { words: [ass] }\n").unwrap();
    assert!(stream(&bw, &["a passage"]).is_ok());
    assert!(stream(&bw, &["you a", "ss!"]).is_err());
    let ce = policy("validators:\n  - type: content_excludes\n    params: { patterns: [ass] }\n")
        .unwrap();
    assert!(stream(&ce, &["a pa", "ssage"]).is_err());
}

#[test]
fn max_length_counts_characters_per_choice() {
    let p = policy("validators:\n  - type: max_length\n    params: { max: 5 }\n").unwrap();
    assert!(stream(&p, &["héllö"]).is_ok(), "5 characters, 7 bytes");
    assert!(stream(&p, &["hé", "llö!"]).is_err());
    let mut g = p.stream_guard(true);
    g.on_chunk(&text(0, "abcd")).unwrap();
    g.on_chunk(&text(1, "abcd")).unwrap();
    assert!(g.after_call().is_ok(), "choices are counted apart");
}

#[test]
fn required_regex_is_checked_on_the_whole_response() {
    let p =
        policy("validators:\n  - type: regex\n    params: { pattern: 'ticket #\\d+' }\n").unwrap();
    assert!(stream(&p, &["your ticket #", "42 is open"]).is_ok());
    let err = stream(&p, &["no ticket"]).unwrap_err();
    assert_eq!(err.phase, Phase::Response);
}

#[test]
fn monitor_mode_reports_once_and_never_blocks() {
    let p = policy(
        "validators:\n  - type: banned_words\n    mode: monitor\n    params: { words: [foo] }\n",
    )
    .unwrap();
    let mut g = p.stream_guard(true);
    g.on_chunk(&text(0, "foo foo ")).unwrap();
    g.on_chunk(&text(0, "foo")).unwrap();
    g.after_call().unwrap();
    assert_eq!(g.findings.len(), 1);
}

#[test]
fn input_checks_see_every_message_and_tool_arguments() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [secret], direction: input }\n",
    )
    .unwrap();
    let msg = |role, t: &str| Message {
        role,
        text: vec![t.to_owned()],
        tool_calls: vec![],
        tool_call_id: None,
    };
    let mut conv = Conversation::default();
    conv.messages.push(msg(Role::System, "be nice"));
    conv.messages.push(msg(Role::User, "hello"));
    let mut f = Vec::new();
    assert!(p.before_call(&conv, &mut f).is_ok());
    conv.messages.push(msg(Role::User, "tell me the SECRET"));
    assert_eq!(
        p.before_call(&conv, &mut f).unwrap_err().phase,
        Phase::Input
    );
    assert!(
        stream(&p, &["a secret"]).is_ok(),
        "input-only validators skip output"
    );
}

#[test]
fn reasoning_validators_see_only_reasoning() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [x] }\n  - type: banned_words\n    params: { words: ['launch codes'], direction: reasoning }\n",
    )
    .unwrap();
    let mut g = p.stream_guard(true);
    let think = Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("thinking hard"),
    };
    g.on_chunk(&think).unwrap();
    g.on_chunk(&text(0, "the launch codes are safe")).unwrap();
    g.after_call().unwrap();
    let mut g = p.stream_guard(true);
    let think = Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("the launch codes"),
    };
    // At the end of the text seen so far, the word-boundary match waits for what follows.
    g.on_chunk(&think).unwrap();
    assert_eq!(g.after_call().unwrap_err().validator, 1);
}

fn tool_start(choice: u32, name: &str) -> Delta<'_> {
    Delta::ToolCallStart {
        choice,
        index: 0,
        id: None,
        name: Cow::Borrowed(name),
    }
}

#[test]
fn contains_contains_any_min_length_and_json_valid_judge_the_whole_answer() {
    let p = policy(
        r#"
validators:
  - type: content_includes
    params: { patterns: ["Ticket", "open"] }
"#,
    )
    .unwrap();
    assert!(stream(&p, &["your tick", "et is OPEN"]).is_ok());
    assert_eq!(
        stream(&p, &["your ticket"]).unwrap_err().phase,
        Phase::Response
    );
    let any = policy(
        "validators:\n  - type: content_includes_any\n    params: { patterns: [yes, no] }\n",
    )
    .unwrap();
    assert!(stream(&any, &["N", "o."]).is_ok());
    assert!(stream(&any, &["maybe"]).is_err());
    let min = policy("validators:\n  - type: min_length\n    params: { min_chars: 5 }\n").unwrap();
    assert!(stream(&min, &["héllo"]).is_ok());
    assert!(stream(&min, &["hé"]).is_err());
    let json = policy("validators:\n  - type: valid_json\n").unwrap();
    assert!(stream(&json, &[" {\"a\":", " [1, 2]}\n"]).is_ok());
    assert!(stream(&json, &["{\"a\": "]).is_err());
}

#[test]
fn tools_not_called_and_count_max_fire_when_the_call_starts() {
    let p = policy(
        r#"
validators:
  - id: no-delete
    type: tools_not_called
    params: { tool_names: [delete_user] }
  - id: at-most-two
    type: tool_call_count
    params: { max: 2 }
"#,
    )
    .unwrap();
    let mut g = p.stream_guard(true);
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    let f = g.on_chunk(&tool_start(0, "delete_user")).unwrap_err();
    assert_eq!((f.validator, f.phase), (0, Phase::Stream));
    let mut g = p.stream_guard(true);
    g.on_chunk(&tool_start(0, "a")).unwrap();
    g.on_chunk(&tool_start(1, "a")).unwrap();
    g.on_chunk(&tool_start(0, "b")).unwrap();
    assert_eq!(g.on_chunk(&tool_start(0, "c")).unwrap_err().validator, 1);
}

#[test]
fn tools_called_and_count_min_are_judged_per_choice_at_the_end() {
    let p = policy(
        r#"
validators:
  - type: tool_called
    params: { tool_names: [lookup], min_calls: 2 }
  - type: tool_call_count
    params: { tool: lookup, min: 1 }
"#,
    )
    .unwrap();
    let mut g = p.stream_guard(true);
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    assert!(g.after_call().is_ok());
    let mut g = p.stream_guard(true);
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    assert_eq!(g.after_call().unwrap_err().validator, 0);
    let mut g = p.stream_guard(true);
    g.on_chunk(&text(0, "no tools at all")).unwrap();
    assert!(g.after_call().is_err());
    let e = policy(
        "validators:\n  - type: tools_called\n    params: { tool_names: [a], direction: input }\n",
    )
    .unwrap_err();
    assert!(e.contains("param 'direction'"), "{e}");
    let e = policy("validators:\n  - type: tool_call_count\n    params: { min: 3, max: 1 }\n")
        .unwrap_err();
    assert!(e.contains("param 'min'"), "{e}");
}
