#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::guard::insert_redaction;
use super::tools::ToolHistory;
use super::*;
use crate::config::Price;
use crate::delta::{Channel, Conversation, Delta, Message, Role};
use std::borrow::Cow;
use std::sync::Arc;

fn policy(yaml: &str) -> Result<Arc<Policy>, String> {
    policy_with(yaml, &Default::default())
}

fn policy_with(yaml: &str, refs: &judged::CheckRefs) -> Result<Arc<Policy>, String> {
    let doc: serde_json::Value = serde_norway::from_str(yaml).unwrap();
    let defs = pack::parse_pack("test.yaml", &doc, refs).map_err(|e| e.to_string())?;
    Policy::compile_packs(vec![defs])
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

/// BeforeCall over `conv`, through a guard as the proxy runs it.
fn before_call(p: &Arc<Policy>, conv: &Conversation) -> Result<(), Finding> {
    p.exchange_guard(p.tool_history(conv), None)
        .before_call(conv)
}

fn stream(p: &Arc<Policy>, pieces: &[&str]) -> Result<(), Finding> {
    let mut g = p.exchange_guard(Default::default(), None);
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
    let e = policy("validators:\n  - type: image_format\n    params: {}\n").unwrap_err();
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
    let mut g = p.exchange_guard(Default::default(), None);
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
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&text(0, "foo foo ")).unwrap();
    g.on_chunk(&text(0, "foo")).unwrap();
    g.after_call().unwrap();
    let mut monitored = 0;
    g.take_findings(|m, r| monitored = m.len() + r.len());
    assert_eq!(monitored, 1);
}

#[test]
fn input_checks_see_every_message_and_tool_arguments() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [secret], direction: input }\n",
    )
    .unwrap();
    let msg = |role, t: &str| Message {
        is_error: false,
        name: None,
        role,
        text: vec![t.to_owned()],
        tool_calls: vec![],
        tool_call_id: None,
    };
    let mut conv = Conversation::default();
    conv.messages.push(msg(Role::System, "be nice"));
    conv.messages.push(msg(Role::User, "hello"));
    assert!(before_call(&p, &conv).is_ok());
    conv.messages.push(msg(Role::User, "tell me the SECRET"));
    assert_eq!(before_call(&p, &conv).unwrap_err().phase, Phase::Input);
    assert!(
        stream(&p, &["a secret"]).is_ok(),
        "input-only validators skip output"
    );
}

#[test]
fn a_messages_text_parts_are_scanned_as_the_one_text_the_model_reads() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"], direction: input }\n",
    )
    .unwrap();
    let parts = |texts: &[&str]| Conversation {
        messages: vec![Message::text(
            Role::User,
            texts.iter().map(|t| (*t).to_owned()).collect(),
        )],
        ..Conversation::default()
    };
    let split = parts(&["the forbidden", " fruit"]);
    assert!(before_call(&p, &split).is_err());
    let apart = parts(&["the forbidden", " apple", "fruit"]);
    assert!(before_call(&p, &apart).is_ok());
    // Parts are read one per line: two parts' words never run together.
    let x = policy(
        "validators:\n  - type: banned_words\n    params: { words: [xbomb], direction: input }\n",
    )
    .unwrap();
    assert!(before_call(&x, &parts(&["the letter x", "bomb"])).is_ok());
    assert!(before_call(&x, &parts(&["the letter", "xbomb"])).is_err());
    assert_eq!(
        crate::delta::join_parts(&[
            "a".into(),
            "b".into(),
            " c".into(),
            "".into(),
            "d\n".into(),
            "e".into()
        ]),
        "a\nb c\nd\ne"
    );
    // Two messages are two texts.
    let mut two = parts(&["the forbidden"]);
    two.messages.extend(parts(&[" fruit"]).messages);
    assert!(before_call(&p, &two).is_ok());
}

#[test]
fn reasoning_validators_see_only_reasoning() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [x] }\n  - type: banned_words\n    params: { words: ['launch codes'], direction: reasoning }\n",
    )
    .unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    let think = Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("thinking hard"),
    };
    g.on_chunk(&think).unwrap();
    g.on_chunk(&text(0, "the launch codes are safe")).unwrap();
    g.after_call().unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    let think = Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("the launch codes"),
    };
    // At the end of the text seen so far, the word-boundary match waits for what follows.
    g.on_chunk(&think).unwrap();
    assert_eq!(g.after_call().unwrap_err().validator, 1);
}

fn reasoning(t: &str) -> Delta<'_> {
    Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed(t),
    }
}

/// The verdict on a response whose reasoning is `think` and whose answer is `answer`.
fn thought(p: &Arc<Policy>, think: &str, answer: &str) -> Result<(), Finding> {
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&reasoning(think))?;
    g.on_chunk(&text(0, answer))?;
    g.after_call()
}

#[test]
fn output_text_checks_read_reasoning_by_default_and_skip_it_on_request() {
    let checks = [
        "type: banned_words\n    params: { words: ['launch codes'] DIR }",
        "type: content_excludes\n    params: { patterns: ['launch codes'] DIR }",
        "type: regex\n    params: { pattern: 'launch\\s+codes', expect_match: false DIR }",
        "type: pii\n    params: { types: [email] DIR }",
    ];
    let bad = |check: &str| {
        if check.contains("pii") {
            "mail me at a@example.com"
        } else {
            "the launch codes are 42"
        }
    };
    for check in checks {
        for dir in [
            "",
            ", direction: output",
            ", direction: both",
            ", reasoning: check",
        ] {
            let p = policy(&format!("validators:\n  - {}\n", check.replace("DIR", dir))).unwrap();
            assert!(p.validators()[0].reasoning, "{check} {dir}");
            assert!(thought(&p, bad(check), "fine").is_err(), "{check} {dir}");
            assert!(thought(&p, "fine", "fine").is_ok(), "{check} {dir}");
        }
        for dir in [", reasoning: skip", ", direction: both, reasoning: skip"] {
            let p = policy(&format!("validators:\n  - {}\n", check.replace("DIR", dir))).unwrap();
            assert!(!p.validators()[0].reasoning, "{check} {dir}");
            assert!(thought(&p, bad(check), "fine").is_ok(), "{check} {dir}");
            assert!(thought(&p, "fine", bad(check)).is_err(), "{check} {dir}");
        }
        let p = policy(&format!(
            "validators:\n  - {}\n",
            check.replace("DIR", ", direction: input")
        ))
        .unwrap();
        assert!(!p.validators()[0].reasoning, "{check}");
        assert!(thought(&p, bad(check), bad(check)).is_ok(), "{check}");
    }
    // A split match in reasoning is found, and reasoning is its own text: a phrase that
    // spans the reasoning and the answer is not one.
    let p =
        policy("validators:\n  - type: banned_words\n    params: { words: ['launch codes'] }\n")
            .unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&reasoning("the laun")).unwrap();
    assert!(g.on_chunk(&reasoning("ch codes are")).is_err());
    assert!(thought(&p, "the launch", "codes").is_ok());
}

#[test]
fn whole_text_length_and_judged_checks_of_the_answer_never_read_reasoning() {
    let p = policy(
        r#"
validators:
  - type: contains
    params: { patterns: [ticket] }
  - type: max_length
    params: { max: 10 }
  - type: sentence_count
    params: { max: 1 }
  - type: regex
    params: { pattern: "^ok", expect_match: true }
"#,
    )
    .unwrap();
    assert!(p.validators().iter().all(|v| !v.reasoning));
    let long = "No ticket here. Two sentences, and far more than ten characters.";
    assert!(thought(&p, long, "ok ticket").is_ok());
    assert!(thought(&p, "ok ticket", "no").is_err());
    // `direction: output` keeps loading on whole-text and judged checks (answer only).
    let judge = judged::CheckRefs {
        judges: vec!["safety".into()],
        ..Default::default()
    };
    let p = policy_with(
        "validators:\n  - type: llm_judge\n    params: {criteria: c, judge: safety, direction: output}\n  - type: json_valid\n    params: {direction: output}\n",
        &judge,
    )
    .unwrap();
    assert!(p.validators().iter().all(|v| !v.reasoning));
}

#[test]
fn the_reasoning_param_is_refused_where_it_means_nothing() {
    let cases = [
        (
            "type: banned_words\n    params: { words: [a], reasoning: maybe }",
            "param 'reasoning': must be one of check, skip",
        ),
        (
            "type: banned_words\n    params: { words: [a], reasoning: true }",
            "param 'reasoning': must be one of check, skip",
        ),
        (
            "type: banned_words\n    params: { words: [a], direction: input, reasoning: skip }",
            "param 'reasoning': direction input checks the request",
        ),
        (
            "type: banned_words\n    params: { words: [a], direction: input, reasoning: check }",
            "param 'reasoning': direction input checks the request",
        ),
        (
            "type: banned_words\n    params: { words: [a], direction: reasoning, reasoning: skip }",
            "param 'reasoning': `skip` contradicts direction reasoning",
        ),
        (
            "type: pii\n    params: { direction: all, reasoning: skip }",
            "param 'reasoning': `skip` contradicts direction all",
        ),
        (
            "type: max_length\n    params: { max: 3, reasoning: check }",
            "param 'reasoning': applies to the streamed text checks",
        ),
        (
            "type: contains\n    params: { patterns: [a], reasoning: skip }",
            "param 'reasoning': applies to the streamed text checks",
        ),
        (
            "type: regex\n    params: { pattern: a, expect_match: true, reasoning: check }",
            "param 'reasoning': applies to the streamed text checks",
        ),
        (
            "type: tools_called\n    params: { tool_names: [a], reasoning: skip }",
            "param 'reasoning': applies to the streamed text checks",
        ),
        (
            "type: max_length\n    params: { max: 3, direction: reasoning }",
            "param 'direction': this check reads the answer, not its reasoning",
        ),
        (
            "type: sentence_count\n    params: { max: 3, direction: reasoning }",
            "param 'direction': this check reads the answer, not its reasoning",
        ),
        (
            "type: min_length\n    params: { min: 3, direction: reasoning }",
            "param 'direction': whole-text checks of reasoning are not supported yet",
        ),
    ];
    for (check, expected) in cases {
        let e = policy(&format!("validators:\n  - {{ id: first, type: banned_words, params: {{ words: [z] }} }}\n  - {check}\n")).unwrap_err();
        assert!(
            e.starts_with("test.yaml: validators[1] (type: "),
            "{check}: {e}"
        );
        assert!(e.contains(expected), "{check}: {e}");
    }
    // Redundant but consistent: `check` with a direction that names reasoning loads.
    for dir in ["reasoning", "all"] {
        let p = policy(&format!(
            "validators:\n  - type: banned_words\n    params: {{ words: [a], direction: {dir}, reasoning: check }}\n"
        ))
        .unwrap();
        assert!(p.validators()[0].reasoning);
    }
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
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    let f = g.on_chunk(&tool_start(0, "delete_user")).unwrap_err();
    assert_eq!((f.validator, f.phase), (0, Phase::Stream));
    let mut g = p.exchange_guard(Default::default(), None);
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
    // A response that calls tools leaves the turn open: nothing is judged yet.
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&tool_start(0, "lookup")).unwrap();
    assert!(g.after_call().is_ok());
    // The turn ends with an answer: the calls of the turn's history count.
    let two = history(&[("lookup", "{}", Some("r")), ("lookup", "{}", Some("r"))]);
    let mut g = p.exchange_guard(two, None);
    g.on_chunk(&text(0, "done")).unwrap();
    assert!(g.after_call().is_ok());
    let one = history(&[("lookup", "{}", Some("r"))]);
    let mut g = p.exchange_guard(one, None);
    g.on_chunk(&text(0, "done")).unwrap();
    assert_eq!(g.after_call().unwrap_err().validator, 0);
    let mut g = p.exchange_guard(Default::default(), None);
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

/// A conversation whose current turn made these calls: (name, arguments, result). A result
/// starting with `ERR` is marked as failed.
fn conversation(calls: &[(&str, &str, Option<&str>)]) -> Conversation {
    let mut messages = vec![
        Message::text(Role::User, vec!["earlier".into()]),
        Message {
            tool_calls: vec![crate::delta::ToolCall {
                id: Some("old".into()),
                name: "old_tool".into(),
                arguments: "{\"to\":\"eve\"}".into(),
            }],
            ..Message::text(Role::Assistant, vec![])
        },
        Message::text(Role::User, vec!["now".into()]),
    ];
    for (i, (name, args, result)) in calls.iter().enumerate() {
        messages.push(Message {
            tool_calls: vec![crate::delta::ToolCall {
                id: Some(format!("c{i}")),
                name: (*name).into(),
                arguments: (*args).into(),
            }],
            ..Message::text(Role::Assistant, vec![])
        });
        if let Some(r) = result {
            messages.push(Message {
                tool_call_id: Some(format!("c{i}")),
                is_error: r.starts_with("ERR"),
                ..Message::text(Role::Tool, vec![(*r).into()])
            });
        }
    }
    Conversation {
        messages,
        tools: vec![],
    }
}

fn history(calls: &[(&str, &str, Option<&str>)]) -> ToolHistory {
    ToolHistory::of(&conversation(calls))
}

fn call(choice: u32, index: u32, name: &str) -> Delta<'_> {
    Delta::ToolCallStart {
        choice,
        index,
        id: None,
        name: Cow::Borrowed(name),
    }
}

fn args(choice: u32, index: u32, t: &str) -> Delta<'_> {
    Delta::Text {
        choice,
        channel: Channel::ToolArgs(index),
        text: Cow::Borrowed(t),
    }
}

/// Runs one response made of `deltas` after `calls` in the turn; the failing validator.
fn verdict(
    p: &Arc<Policy>,
    calls: &[(&str, &str, Option<&str>)],
    deltas: &[Delta<'_>],
) -> Option<u32> {
    let conv = conversation(calls);
    let h = p.tool_history(&conv);
    let mut g = p.exchange_guard(h, None);
    if let Err(e) = g.before_call(&conv) {
        return Some(e.validator);
    }
    for d in deltas {
        if let Err(e) = g.on_chunk(d) {
            return Some(e.validator);
        }
    }
    g.after_call().err().map(|e| e.validator)
}

#[test]
fn history_splits_session_and_turn_and_pairs_results() {
    let h = history(&[
        ("a", "{}", Some("ok")),
        ("b", "{}", Some("ERR boom")),
        ("c", "{}", None),
    ]);
    assert_eq!(h.calls.len(), 4);
    let turn: Vec<_> = h.turn().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(turn, ["a", "b", "c"]);
    assert_eq!(h.turn()[0].result.as_deref(), Some("ok"));
    assert!(h.turn()[1].result_is_error);
    assert_eq!(h.turn()[2].result, None);
    assert!(crate::delta::result_reports_error(
        r#"{"error": "no such user"}"#
    ));
    assert!(!crate::delta::result_reports_error(
        r#"{"error": null, "data": 1}"#
    ));
    assert!(!crate::delta::result_reports_error(
        "error: plain text is not flagged"
    ));
}

#[test]
fn turn_end_checks_sequences_chains_and_args() {
    let p = policy(
        r#"
validators:
  - type: tool_call_sequence
    params: { sequence: [lookup, create_ticket] }
  - type: tool_call_chain
    params: { chain: [lookup, create_ticket] }
  - type: tool_args
    params: { tool_name: lookup, expected_args: { id: 7 } }
  - type: tool_calls_with_args
    params: { tool_name: create_ticket, expected_args: { prio: high }, result_includes: [CREATED] }
"#,
    )
    .unwrap();
    let answer = [text(0, "done")];
    let good = [
        ("lookup", r#"{"id": 7.0}"#, Some("found")),
        (
            "create_ticket",
            r#"{"prio":"high","x":1}"#,
            Some("ticket created"),
        ),
    ];
    assert_eq!(verdict(&p, &good, &answer), None);
    // Other calls in between: the sequence holds, the chain does not.
    let gap = [good[0], ("log", "{}", Some("ok")), good[1]];
    assert_eq!(verdict(&p, &gap, &answer), Some(1));
    let reversed = [good[1], good[0]];
    assert_eq!(verdict(&p, &reversed, &answer), Some(0));
    let wrong_arg = [("lookup", r#"{"id": 8}"#, Some("x")), good[1]];
    assert_eq!(verdict(&p, &wrong_arg, &answer), Some(2));
    let not_created = [
        good[0],
        ("create_ticket", r#"{"prio":"high"}"#, Some("failed")),
    ];
    assert_eq!(verdict(&p, &not_created, &answer), Some(3));
    // Mid-turn (the response calls a tool) none of these is judged yet.
    assert_eq!(
        verdict(&p, &[], &[call(0, 0, "lookup"), args(0, 0, r#"{"id":7}"#)]),
        None
    );
    // Every call of the tool must have the expected arguments, judged at the response's end.
    assert_eq!(
        verdict(&p, &[], &[call(0, 0, "lookup"), args(0, 0, r#"{"id":1}"#)]),
        Some(2)
    );
}

#[test]
fn call_start_checks_fire_before_arguments() {
    let p = policy(
        r#"
validators:
  - type: tool_anti_pattern
    params:
      patterns:
        - { sequence: [delete, delete], message: "two deletes in a row" }
        - { sequence: [search, buy] }
  - type: tool_no_repeat
    params: { tools: [search], max_repeats: 2 }
  - type: tool_efficiency
    params: { max_calls: 4 }
"#,
    )
    .unwrap();
    let h = &[("delete", "{}", Some("ok"))];
    let conv = conversation(h);
    let mut g = p.exchange_guard(p.tool_history(&conv), None);
    let e = g.on_chunk(&call(0, 0, "delete")).unwrap_err();
    assert_eq!(e.validator, 0);
    assert_eq!(p.message(&e), "two deletes in a row");
    assert_eq!(
        verdict(&p, &[("search", "{}", Some("r"))], &[call(0, 0, "buy")]),
        Some(0)
    );
    let s = ("search", "{}", Some("r"));
    assert_eq!(verdict(&p, &[s], &[call(0, 0, "search")]), None);
    assert_eq!(verdict(&p, &[s, s], &[call(0, 0, "search")]), Some(1));
    let o = ("other", "{}", Some("r"));
    assert_eq!(verdict(&p, &[s, o, s], &[call(0, 0, "x")]), None);
    assert_eq!(verdict(&p, &[o, o, o, o], &[call(0, 0, "x")]), Some(2));
    // The session before the turn does not count for turn checks.
    assert_eq!(verdict(&p, &[o, o, o], &[call(0, 0, "x")]), None);
}

#[test]
fn result_checks_judge_the_turn_before_the_call() {
    let p = policy(
        r#"
validators:
  - type: no_tool_errors
  - type: tool_result_includes
    params: { tool_name: weather, patterns: [celsius] }
  - type: tool_result_matches
    params: { pattern: "^\\{" }
  - type: tool_efficiency
    params: { max_error_rate: 0.5 }
"#,
    )
    .unwrap();
    let ok = ("weather", "{}", Some("{\"t\": \"20 Celsius\"}"));
    assert_eq!(verdict(&p, &[ok], &[text(0, "hi")]), None);
    assert_eq!(
        verdict(&p, &[ok, ("x", "{}", Some("ERR down"))], &[]),
        Some(0)
    );
    assert_eq!(
        verdict(&p, &[("weather", "{}", Some("{\"t\": 20}"))], &[]),
        Some(1)
    );
    assert_eq!(verdict(&p, &[("y", "{}", Some("plain"))], &[]), Some(2));
    let monitor = policy("validators:\n  - type: tool_efficiency\n    params: { max_errors: 0 }\n    mode: monitor\n").unwrap();
    assert_eq!(verdict(&monitor, &[("x", "{}", Some("ERR"))], &[]), None);
}

#[test]
fn session_scope_sees_the_whole_conversation() {
    let p = policy(
        r#"
validators:
  - type: tools_not_called
    params: { tool_names: [old_tool], scope: session }
"#,
    )
    .unwrap();
    // `old_tool` was called before the last user message: a session violation, found BeforeCall.
    assert_eq!(verdict(&p, &[], &[]), Some(0));
    let turn =
        policy("validators:\n  - type: tools_not_called\n    params: { tool_names: [old_tool] }\n")
            .unwrap();
    assert_eq!(verdict(&turn, &[], &[]), None);
    assert_eq!(verdict(&turn, &[], &[call(0, 0, "old_tool")]), Some(0));
    let called = policy("validators:\n  - type: tools_called\n    params: { tool_names: [old_tool], scope: session }\n").unwrap();
    assert_eq!(verdict(&called, &[], &[text(0, "answer")]), None);
    let e = policy(
        "validators:\n  - type: tools_called\n    params: { tool_names: [a], scope: week }\n",
    )
    .unwrap_err();
    assert!(e.contains("param 'scope'"), "{e}");
}

#[test]
fn excluded_args_stream_field_by_field_and_hold_the_value_back() {
    let p = policy(
        r#"
validators:
  - type: tools_not_called_with_args
    params: { tool_name: transfer, excluded_args: { to: [mallory, trudy], amount: 1000000 } }
"#,
    )
    .unwrap();
    // The history already holds a forbidden call: the session is violated.
    assert_eq!(
        verdict(&p, &[("transfer", r#"{"to":"trudy"}"#, Some("ok"))], &[]),
        Some(0)
    );
    let bad = r#"{"memo": "to mallory", "to": "mallory", "amount": 5}"#;
    let good = r#"{"memo": "to mallory", "to": "bob", "amount": 1e6}"#;
    let value_at = bad.find("\"mallory\",").unwrap() as u64;
    for cut in 0..=bad.len() {
        let mut g = p.exchange_guard(ToolHistory::default(), None);
        g.on_chunk(&call(0, 0, "transfer")).unwrap();
        let first = g.on_chunk(&args(0, 0, &bad[..cut]));
        let value_end = value_at + "\"mallory\"".len() as u64;
        let (ch, _) = match first {
            Ok(Some(x)) => x,
            // The closing quote completes the value: judged right there.
            Err(e) if cut as u64 >= value_end => {
                assert_eq!(e.validator, 0);
                continue;
            }
            other => panic!("cut {cut}: {other:?}"),
        };
        assert!(
            g.safe_pos(ch) <= value_at,
            "cut {cut}: value released early"
        );
        assert_eq!(
            g.on_chunk(&args(0, 0, &bad[cut..])).unwrap_err().validator,
            0,
            "cut {cut}"
        );
        // The number 1e6 equals 1000000.
        let mut g = p.exchange_guard(ToolHistory::default(), None);
        g.on_chunk(&call(0, 0, "transfer")).unwrap();
        g.on_chunk(&args(0, 0, &good[..cut.min(good.len())]))
            .unwrap();
        let rest = g.on_chunk(&args(0, 0, &good[cut.min(good.len())..]));
        assert!(rest.is_err() || g.after_call().is_err(), "cut {cut}");
    }
    // Another tool with the same argument is not concerned; arguments that are not JSON fail
    // closed unless the validator fails open.
    assert_eq!(
        verdict(&p, &[], &[call(0, 0, "pay"), args(0, 0, bad)]),
        None
    );
    assert_eq!(
        verdict(&p, &[], &[call(0, 0, "transfer"), args(0, 0, "not json")]),
        Some(0)
    );
    let open = policy("validators:\n  - type: tool_args_excluded_session\n    on_error: fail_open\n    params: { tool_name: transfer, excluded_args: { to: x } }\n").unwrap();
    assert_eq!(
        verdict(
            &open,
            &[],
            &[call(0, 0, "transfer"), args(0, 0, "not json")]
        ),
        None
    );
}

#[test]
fn budgets_latency_and_cost() {
    let p = policy(
        r#"
validators:
  - type: latency_budget
    params: { max_ms: 100 }
  - type: cost_budget
    params: { max_total_tokens: 1000, max_cost_usd: 0.01 }
"#,
    )
    .unwrap();
    let usage = |i, o| Delta::Usage {
        input_tokens: Some(i),
        output_tokens: Some(o),
    };
    let price = Some(Price {
        input_per_mtok: 2.0,
        output_per_mtok: 10.0,
    });
    assert_eq!(p.latency_budget(), Some((0, 100)));
    // A budget so long that a deadline computed from it could overflow is refused at load.
    let e = policy(&format!(
        "validators:\n  - type: latency_budget\n    params: {{ max_ms: {} }}\n",
        u64::MAX
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("max_ms") && e.contains("one year"), "{e}");
    let mut g = p.exchange_guard(ToolHistory::default(), price);
    assert!(g.check_latency(100).is_ok());
    assert_eq!(g.check_latency(101).unwrap_err().validator, 0);
    let run = |deltas: &[Delta<'_>], price| {
        let mut g = p.exchange_guard(ToolHistory::default(), price);
        for d in deltas {
            g.on_chunk(d).unwrap();
        }
        g.after_call().err().map(|e| e.validator)
    };
    assert_eq!(run(&[usage(300, 400)], price), None); // 0.0006 + 0.004 USD
    assert_eq!(run(&[usage(300, 800)], price), Some(1)); // 1100 tokens
    assert_eq!(run(&[usage(100, 900)], price), None);
    let dear = Some(Price {
        input_per_mtok: 20.0,
        output_per_mtok: 20.0,
    });
    assert_eq!(run(&[usage(300, 400)], dear), Some(1)); // 0.014 USD
                                                        // No usage, or no price for the model: the check cannot decide and fails closed.
    assert_eq!(run(&[text(0, "x")], price), Some(1));
    assert_eq!(run(&[usage(1, 1)], None), Some(1));
    let open = policy("validators:\n  - type: cost_budget\n    on_error: fail_open\n    params: { max_total_tokens: 10 }\n").unwrap();
    let mut g = open.exchange_guard(ToolHistory::default(), None);
    g.on_chunk(&text(0, "x")).unwrap();
    assert!(g.after_call().is_ok());
    let e = policy("validators:\n  - type: cost_budget\n    params: {}\n").unwrap_err();
    assert!(
        e.contains("param 'max_total_tokens' or 'max_cost_usd'"),
        "{e}"
    );
}

#[test]
fn structured_checks_and_buffer() {
    let p = policy(
        r#"
validators:
  - type: required_fields
    params: { required_fields: [order.id] }
  - type: json_schema
    params: { schema: { type: object, required: [order] }, allow_wrapped: true }
  - type: json_path
    params: { expression: order.status, expected: shipped }
"#,
    )
    .unwrap();
    let run = |pieces: &[&str]| stream(&p, pieces).err().map(|e| e.validator);
    assert_eq!(
        run(&["{\"order\": {\"id\": 1, ", "\"status\": \"shipped\"}}"]),
        None
    );
    assert_eq!(run(&["{\"order\": {\"status\": \"shipped\"}}"]), Some(0));
    assert_eq!(run(&["{\"id\": 1, \"order\": 2}"]), Some(0));
    assert_eq!(
        run(&["{\"order\": {\"id\": 1, \"status\": \"lost\"}}"]),
        Some(2)
    );
    let e = policy("validators:\n  - type: json_schema\n    params: { schema: { type: 7 } }\n")
        .unwrap_err();
    assert!(e.contains("param 'schema': invalid JSON Schema"), "{e}");
    let e = policy("validators:\n  - type: json_path\n    params: { expression: \"a[\" }\n")
        .unwrap_err();
    assert!(e.contains("param 'expression'"), "{e}");
    // `buffer: true` holds everything until the end.
    let b = policy(
        "validators:\n  - type: contains\n    buffer: true\n    params: { patterns: [ok] }\n",
    )
    .unwrap();
    let mut g = b.exchange_guard(ToolHistory::default(), None);
    let (ch, pos) = g.on_chunk(&text(0, "all fine")).unwrap().unwrap();
    assert_eq!((g.safe_pos(ch), pos), (0, 8));
    let mut g = p.exchange_guard(ToolHistory::default(), None);
    let (ch, pos) = g.on_chunk(&text(0, "all fine")).unwrap().unwrap();
    assert_eq!(g.safe_pos(ch), pos);
}

#[test]
fn max_tokens_and_sentence_count_stream_and_agree_with_whole_text() {
    let p = policy(
        r#"
validators:
  - type: length
    params: { max_tokens: 12 }
  - type: max_sentences
    params: { max_sentences: 2 }
"#,
    )
    .unwrap();
    let counter = counters::TokenCounter::o200k().unwrap();
    let samples = [
        "Dr. Smith paid 3.14 dollars. That was all.",
        "One. Two. Three.",
        "The quick brown fox jumps over the lazy dog again and again and again.",
        "Short.",
    ];
    for s in samples {
        let whole = stream(&p, &[s]).err().map(|e| e.validator);
        let expected = if counter.count_whole(s) > 12 {
            Some(0)
        } else if counters::count_sentences(s) > 2 {
            Some(1)
        } else {
            None
        };
        assert_eq!(whole, expected, "{s}");
        for cut in (0..=s.len()).filter(|&c| s.is_char_boundary(c)) {
            let split = stream(&p, &[&s[..cut], &s[cut..]])
                .err()
                .map(|e| e.validator);
            assert_eq!(split.is_some(), whole.is_some(), "{s} cut {cut}");
        }
    }
    // Input: each message on its own.
    let input =
        policy("validators:\n  - type: sentence_count\n    params: { max: 1, direction: input }\n")
            .unwrap();
    let conv = Conversation {
        messages: vec![Message::text(Role::User, vec!["Hi. There.".into()])],
        tools: vec![],
    };
    assert!(before_call(&input, &conv).is_err());
    let e = policy("validators:\n  - type: max_length\n    params: {}\n").unwrap_err();
    assert!(e.contains("param 'max' or 'max_tokens'"), "{e}");
}

#[test]
fn redacting_regexes_cover_whole_matches_at_every_split() {
    let p = policy(
        r#"
validators:
  - id: keys
    type: regex
    mode: redact
    params: { pattern: "sk-[A-Za-z0-9]{20,}", expect_match: false }
  - id: ssn
    type: regex
    mode: redact
    mask: "***"
    params: { pattern: "\\b\\d{3}-\\d{2}-\\d{4}\\b", expect_match: false }
"#,
    )
    .unwrap();
    let text = "key sk-abcdefghijklmnopqrstuvwxyz0123 and 123-45-6789, not 1234-56-7890.";
    let key = text.find("sk-").unwrap() as u64;
    let key_end = text.find(" and").unwrap() as u64;
    let ssn = text.find("123-45").unwrap() as u64;
    let expected = vec![
        (key, key_end, "[REDACTED:keys]".to_owned()),
        (ssn, ssn + 11, "***".to_owned()),
    ];
    for cut in 0..=text.len() {
        let mut g = p.exchange_guard(ToolHistory::default(), None);
        for piece in [&text[..cut], &text[cut..]] {
            g.on_chunk(&self::text(0, piece)).unwrap();
        }
        g.after_call().unwrap();
        let got: Vec<_> = g
            .redactions()
            .iter()
            .map(|r| (r.start, r.end, r.mask.clone()))
            .collect();
        assert_eq!(got, expected, "cut {cut}");
    }
}

#[test]
fn redactions_stay_sorted_and_disjoint_whatever_order_hits_arrive_in() {
    let r = |channel, start, end, mask: &str| Redaction {
        channel,
        start,
        end,
        mask: mask.into(),
    };
    let mut list = Vec::new();
    insert_redaction(&mut list, r(0, 42, 53, "b"));
    insert_redaction(&mut list, r(1, 0, 5, "x"));
    insert_redaction(&mut list, r(0, 4, 37, "a"));
    assert_eq!(
        list,
        vec![r(0, 4, 37, "a"), r(0, 42, 53, "b"), r(1, 0, 5, "x")]
    );
    insert_redaction(&mut list, r(0, 30, 45, "c"));
    assert_eq!(list, vec![r(0, 4, 53, "a"), r(1, 0, 5, "x")]);
    insert_redaction(&mut list, r(0, 53, 60, "d"));
    assert_eq!(
        list,
        vec![r(0, 4, 60, "a"), r(1, 0, 5, "x")],
        "touching spans merge"
    );
}

#[test]
fn repeats_are_verified_against_the_kept_text_up_to_its_limit() {
    let p = policy("validators:\n  - type: banned_words\n    params: { words: [x] }\n").unwrap();
    let repeat = |t: &str, start: u64| Delta::Repeat {
        choice: 0,
        channel: Channel::Content,
        text: Cow::Owned(t.to_owned()),
        start: Some(start),
    };
    // Not kept: nothing can be verified.
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&text(0, "Hello")).unwrap();
    assert!(!g.repeat_is_verified(&repeat("Hello", 0)));

    let mut g = p.exchange_guard(Default::default(), None);
    g.keep_full_text(12);
    g.on_chunk(&text(0, "Hello")).unwrap();
    g.on_chunk(&text(0, " world")).unwrap();
    assert!(g.repeat_is_verified(&repeat("Hello world", 0)));
    assert!(g.repeat_is_verified(&repeat("world", 6)));
    assert!(!g.repeat_is_verified(&repeat("Hello there", 0)));
    assert!(!g.full_text_dropped());
    // Past the limit (over all channels) the kept text is dropped: no repeat is verified.
    g.on_chunk(&Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("ab"),
    })
    .unwrap();
    assert!(g.full_text_dropped());
    assert!(!g.repeat_is_verified(&repeat("Hello", 0)));
    g.on_chunk(&text(0, "!")).unwrap();
    assert!(!g.repeat_is_verified(&repeat("Hello world!", 0)));
}

#[test]
fn a_listed_environment_variable_may_be_read() {
    let refs = judged::CheckRefs {
        env: vec!["EVAL_TOKEN".into()],
        ..Default::default()
    };
    policy_with(
        "validators:\n  - type: rest_eval\n    params: {url: 'http://127.0.0.1:9/e', headers: {Authorization: 'Bearer ${EVAL_TOKEN}', X-Team: core}}\n",
        &refs,
    )
    .unwrap();
}

#[test]
fn judged_checks_are_validated_at_load() {
    let refs = judged::CheckRefs {
        judges: vec!["safety".into(), "topic".into()],
        exec: vec!["my_eval".into()],
        embedders: vec![("topic".into(), None)],
        env: vec!["EVAL_TOKEN".into()],
    };
    let one = judged::CheckRefs {
        judges: vec!["safety".into()],
        exec: vec![],
        embedders: vec![("safety".into(), Some("emb-1".into()))],
        env: vec![],
    };
    for (yaml, refs, expected) in [
        (
            "type: llm_judge\n    params: {criteria: c}",
            &judged::CheckRefs::default(),
            "no judge is configured",
        ),
        (
            "type: rest_eval\n    params: {url: 'http://127.0.0.1:9/e', headers: {Authorization: 'Bearer ${OPENAI_API_KEY}'}}",
            &refs,
            "`${OPENAI_API_KEY}` reads an environment variable the config does not let packs read; list it in `pack_env`",
        ),
        (
            "type: a2a_eval\n    params: {agent_url: 'http://127.0.0.1:9', auth_token: '${EVAL_TOKEN}${HOME}'}",
            &refs,
            "`${HOME}`",
        ),
        (
            "type: rest_eval\n    params: {url: 'http://127.0.0.1:9/e', headers: {Host: evil.example}}",
            &refs,
            "`Host` frames the HTTP message",
        ),
        (
            "type: rest_eval\n    params: {url: 'http://127.0.0.1:9/e', headers: {Content-Length: '5'}}",
            &refs,
            "frames the HTTP message",
        ),
        (
            "type: faithfulness\n    params: {judge: safety, direction: input}",
            &refs,
            "RAG checks judge the answer",
        ),
        (
            "type: faithfulness\n    params: {judge: safety, context_roles: [robot]}",
            &refs,
            "param 'context_roles': `robot`",
        ),
        (
            "type: llm_judge\n    params: {criteria: c}",
            &refs,
            "param 'judge': required when more than one",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, judge: nope}",
            &refs,
            "no judge `nope` is configured (judges: safety, topic)",
        ),
        (
            "type: llm_judge\n    params: {judge: safety}",
            &refs,
            "param 'criteria': required",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, min_score: 1.5}",
            &one,
            "param 'min_score'",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, scale: 1-10}",
            &one,
            "param 'scale'",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, window: sentences}",
            &one,
            "param 'window'",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, window: 0}",
            &one,
            "param 'window'",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, window: 200, direction: input}",
            &one,
            "param 'window': applies to answers",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, parallel: true}",
            &one,
            "param 'parallel'",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, direction: reasoning}",
            &one,
            "param 'direction'",
        ),
        (
            "type: llm_judge\n    mode: redact\n    params: {criteria: c}",
            &one,
            "mode `redact`",
        ),
        (
            "type: llm_judge\n    params: {criteria: c, colour: red}",
            &one,
            "param 'colour': unknown",
        ),
        (
            "type: cosine_similarity\n    params: {judge: safety, reference: r}",
            &refs,
            "without an embeddings endpoint",
        ),
        (
            "type: cosine_similarity\n    params: {judge: topic, reference: r}",
            &refs,
            "param 'model': required",
        ),
        (
            "type: cosine_similarity\n    params: {reference: [1, x]}",
            &one,
            "param 'reference'",
        ),
        (
            "type: cosine_similarity\n    params: {min_similarity: 2, reference: r}",
            &one,
            "param 'min_similarity'",
        ),
        (
            "type: cosine_similarity\n    params: {}",
            &one,
            "param 'reference': required",
        ),
        (
            "type: a2a_eval\n    params: {url: 'http://127.0.0.1:1'}",
            &one,
            "param 'agent_url': required",
        ),
        (
            "type: a2a_eval\n    params: {agent_url: 'http://127.0.0.1:1', method: PUT}",
            &one,
            "param 'method': unknown",
        ),
        (
            "type: rest_eval\n    params: {}",
            &one,
            "param 'url': required",
        ),
        (
            "type: rest_eval\n    params: {url: 'ftp://x/y'}",
            &one,
            "param 'url'",
        ),
        (
            "type: rest_eval\n    params: {url: 'http://127.0.0.1/x', timeout: soon}",
            &one,
            "param 'timeout'",
        ),
        (
            "type: rest_eval\n    params: {url: 'http://127.0.0.1/x', headers: {a: 1}}",
            &one,
            "param 'headers'",
        ),
        (
            "type: not_a_handler\n    params: {}",
            &refs,
            "neither in the catalog nor an `exec:` handler",
        ),
        (
            "type: my_eval\n    params: {timeout_ms: 0}",
            &refs,
            "param 'timeout_ms'",
        ),
    ] {
        let e = policy_with(&format!("validators:\n  - {yaml}\n"), refs).unwrap_err();
        assert!(e.contains("test.yaml: validators[0]"), "{yaml}: {e}");
        assert!(e.contains(expected), "{yaml}: {e}");
    }
    let p = policy_with(
        "validators:\n  - type: llm_judge\n    params: {criteria: c}\n  - type: rest_eval_session\n    params: {url: 'http://127.0.0.1:9/eval?x=1', timeout: 1.5s, direction: both, parallel: true}\n  - type: my_eval\n    params: {anything: [1, 2], direction: input}\n",
        &judged::CheckRefs {
            judges: vec!["safety".into()],
            exec: vec!["my_eval".into()],
            embedders: vec![],
            env: vec![],
        },
    )
    .unwrap();
    // A judge passes at 0.5 by default.
    assert_eq!(p.validators()[0].threshold.min_score, Some(0.5));
    assert_eq!(p.judged_output().len(), 2);
    assert_eq!(p.judged_input().len(), 2);
    let (_, rest) = &p.judged_input()[0];
    assert_eq!(rest.timeout_ms, Some(1500));
    assert!(rest.parallel);
    let judged::JudgedKind::Rest(r) = &rest.kind else {
        panic!("{rest:?}")
    };
    assert_eq!(r.path_and_query, "/eval?x=1");
    assert!(r.session && r.include_messages && !r.include_tool_calls);
    let judged::JudgedKind::Exec(e) = &p.judged_input()[1].1.kind else {
        panic!()
    };
    // Windows: all the same, or refused.
    let mixed = policy_with(
        "validators:\n  - type: llm_judge\n    params: {criteria: c, window: sentence}\n  - type: llm_judge\n    params: {criteria: d, window: 200}\n",
        &one,
    )
    .unwrap_err();
    assert!(
        mixed.contains("validators[1]") && mixed.contains("same window"),
        "{mixed}"
    );
    assert_eq!(e.handler, "my_eval");
    assert_eq!(e.params.get("anything"), Some(&serde_json::json!([1, 2])));
}

#[test]
fn evals_load_with_their_own_fields_and_every_mistake_is_named() {
    let refs = judged::CheckRefs {
        judges: vec!["quality".into()],
        ..Default::default()
    };
    let p = policy_with(
        "evals:\n  - id: tone\n    type: llm_judge\n    trigger: sample_turns\n    sample_percentage: 20\n    params: {criteria: polite}\n    threshold: {min_score: 0.8, passed: true}\n    metric: {name: guardwire_eval_tone, type: histogram, labels: {team: core, tier: 1}}\n    when: {tool_called_pattern: '^search_', min_tool_calls: 2}\n  - {id: fired, type: guardrail_triggered, trigger: on_session_complete, params: {validator: banned_words, should_trigger: false, direction: input}}\n  - {id: short, type: max_length, trigger: every_turn, params: {max: 5}, enabled: false}\n",
        &refs,
    )
    .unwrap();
    let evals = p.evals();
    assert_eq!(evals.len(), 2, "a disabled eval is dropped");
    let tone = &evals[0];
    assert_eq!(tone.trigger, evals::Trigger::SampleTurns(20.0));
    assert_eq!(tone.threshold.min_score, Some(0.8));
    assert!(tone.passes(0.8) && !tone.passes(0.79));
    let metric = tone.metric.as_ref().unwrap();
    assert_eq!(metric.name, "tone", "the exported prefix is not doubled");
    assert_eq!(metric.kind, evals::MetricKind::Histogram);
    assert_eq!(
        metric.labels,
        vec![("team".into(), "core".into()), ("tier".into(), "1".into())]
    );
    assert!(!tone.when.holds(["search_web"].into_iter()));
    assert!(tone.when.holds(["search_web", "x"].into_iter()));
    assert!(!tone.when.holds(["web", "x"].into_iter()));
    assert!(matches!(
        &evals[1].check,
        evals::EvalCheck::GuardrailTriggered { guardrail, should_trigger: false, on_input: Some(true) } if guardrail == "banned_words"
    ));
    assert!(p.keeps_exchange(), "the answer is kept for the evals");
    // Every validator-level rule still holds, and an eval's own fields are checked.
    for (yaml, expected) in [
        ("evals:\n  - {type: contains, trigger: every_turn, params: {patterns: [a]}}\n", "missing `id`"),
        ("evals:\n  - {id: a, type: contains, params: {patterns: [a]}}\n", "missing `trigger`"),
        ("evals:\n  - {id: a, type: contains, trigger: hourly, params: {patterns: [a]}}\n", "unknown trigger `hourly`"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, sample_percentage: 101, params: {patterns: [a]}}\n", "from 0 to 100"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}}\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [b]}}\n", "ids label metrics"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {}}\n", "evals[0] (type: contains): param 'patterns'"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: score}}\n", "guardwire's own"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: 'bad-name'}}\n", "not a Prometheus metric name"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: hits_total, type: counter}}\n", "ends in `_total`"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: score_x}}\n", "guardwire's own"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: m, labels: {route: x}}}\n", "cannot be a label name"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: m}}\n  - {id: b, type: contains, trigger: every_turn, params: {patterns: [a]}, metric: {name: m, type: counter}}\n", "another type or label names"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, when: {tool_called_pattern: '('}}\n", "tool_called_pattern"),
        ("evals:\n  - {id: a, type: contains, trigger: every_turn, params: {patterns: [a]}, schedule: daily}\n", "unknown key `schedule`"),
        ("evals:\n  - {id: a, type: llm_judge, trigger: every_turn, params: {criteria: x, window: sentence}}\n", "an eval runs off it"),
        ("evals:\n  - {id: a, type: guardrail_triggered, trigger: every_turn, params: {}}\n", "param 'guardrail': required"),
        ("validators:\n  - {type: guardrail_triggered, params: {guardrail: x}}\n", "applies to `evals:`"),
        ("evals:\n  - {id: a, type: banned_words, trigger: every_turn, params: {words: [a], reasoning: skip}}\n", "evals[0] (type: banned_words): param 'reasoning': evals score the recorded answer"),
        ("evals:\n  - {id: a, type: guardrail_triggered, trigger: every_turn, params: {guardrail: x, reasoning: check}}\n", "param 'reasoning': unknown param"),
    ] {
        let e = policy_with(yaml, &refs).unwrap_err();
        assert!(e.contains(expected), "{yaml}: {e}");
    }
}

#[test]
fn agents_skills_workflows_and_invariant_fields_read_the_tool_calls() {
    let p = policy(
        r#"
validators:
  - {type: agent_invoked, params: {agent_names: [billing-agent]}}
  - {type: agent_not_invoked, params: {agents: [rogue-agent]}}
  - {type: agent_response_contains, params: {agent: billing-agent, contains: "REFUND OK"}}
  - {type: skill_activated, params: {skill_names: [refunds]}}
  - {type: skill_not_activated, params: {skill_names: [admin]}}
  - {type: skill_activation_order, params: {sequence: [triage, refunds]}}
  - {type: state_is, params: {state: resolution}}
  - {type: workflow_transition_order, params: {sequence: [investigation, resolution]}}
  - {type: workflow_tool_access, params: {rules: [{state: investigation, allowed: [billing-agent, skill__activate, workflow__transition]}]}}
  - {type: invariant_fields_preserved, params: {tool: billing-agent, fields: [account]}}
  - {type: workflow_complete, params: {terminal_states: [resolution]}}
"#,
    )
    .unwrap();
    let moved = |to: &str| {
        format!(r#"{{"status":"transition_scheduled","event":"e","target_state":"{to}"}}"#)
    };
    let (to_investigation, to_resolution) = (moved("investigation"), moved("resolution"));
    let good: Vec<(&str, &str, Option<&str>)> = vec![
        ("skill__activate", r#"{"name":"triage"}"#, Some("ok")),
        (
            "workflow__transition",
            r#"{"event":"e"}"#,
            Some(&to_investigation),
        ),
        ("skill__activate", r#"{"name":"refunds"}"#, Some("ok")),
        (
            "billing-agent",
            r#"{"account":"a1"}"#,
            Some("REFUND OK for a1"),
        ),
        (
            "workflow__transition",
            r#"{"event":"f"}"#,
            Some(&to_resolution),
        ),
    ];
    let done = [text(0, "Your refund is on its way.")];
    assert_eq!(verdict(&p, &good, &done), None);
    let without = |i: usize| {
        let mut calls = good.clone();
        calls.remove(i);
        calls
    };
    // The agent never called (so never answered), or answered otherwise.
    assert_eq!(verdict(&p, &without(3), &done), Some(0));
    let mut other_answer = good.clone();
    other_answer[3].2 = Some("DENIED");
    assert_eq!(verdict(&p, &other_answer, &done), Some(2));
    // A skill that failed is not activated; the order still sees it.
    let mut failed = good.clone();
    failed[2].2 = Some("ERR no such skill");
    assert_eq!(verdict(&p, &failed, &done), Some(3));
    // The last transition is not answered yet: the workflow is still investigating.
    let mut pending = good.clone();
    pending[4].2 = None;
    assert_eq!(verdict(&p, &pending, &done), Some(6));
    // A forbidden agent or skill, in the history (BeforeCall) or in the answer.
    let mut rogue = good.clone();
    rogue.insert(0, ("rogue-agent", "{}", Some("hi")));
    assert_eq!(verdict(&p, &rogue, &done), Some(1));
    let admin = [
        call(0, 0, "skill__activate"),
        args(0, 0, r#"{"name":"admin"}"#),
    ];
    assert_eq!(verdict(&p, &good, &admin), Some(4));
    // In `investigation` only the listed tools: a call of another is stopped as it starts.
    let in_investigation = &good[..2];
    assert_eq!(
        verdict(&p, in_investigation, &[call(0, 0, "delete_account")]),
        Some(8)
    );
    // A field sent once is in every later call of the tool.
    let dropped = [call(0, 0, "billing-agent"), args(0, 0, r#"{"amount":5}"#)];
    assert_eq!(verdict(&p, &good, &dropped), Some(9));
}

#[test]
fn workflow_complete_needs_its_terminal_states() {
    let e = policy("validators:\n  - {type: workflow_complete}\n").unwrap_err();
    assert!(e.contains("param 'terminal_states': required"), "{e}");
    let e =
        policy("validators:\n  - {type: workflow_tool_access, params: {rules: [{state: a}]}}\n")
            .unwrap_err();
    assert!(e.contains("entry 0 must be {state"), "{e}");
}

#[test]
fn normalize_param_is_checked_and_named_in_errors() {
    let e = policy(
        "validators:\n  - type: banned_words\n    params: { words: [a], normalize: fuzzy }\n",
    )
    .unwrap_err();
    assert!(
        e.contains("validators[0] (type: banned_words): param 'normalize': must be one of none, nfkc, full"),
        "{e}"
    );
    let e = policy(
        "validators:\n  - type: max_length\n    params: { max_chars: 5, normalize: none }\n",
    )
    .unwrap_err();
    assert!(e.contains("param 'normalize': applies to the word"), "{e}");
    let e = policy("validators:\n  - type: banned_words\n    params: { words: [\"\\u200b\"] }\n")
        .unwrap_err();
    assert!(e.contains("empty once normalised"), "{e}");
    // A regex of Markdown marks only would match everywhere in the view; as written it loads.
    let e = policy(
        "validators:\n  - type: regex\n    params: { pattern: '\\*\\*+', expect_match: false }\n",
    )
    .unwrap_err();
    assert!(e.contains("characters the normalised view drops"), "{e}");
    policy("validators:\n  - type: regex\n    params: { pattern: '\\*\\*+', expect_match: false, normalize: none }\n")
        .unwrap();
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [a], normalize: nfkc }\n",
    )
    .unwrap();
    assert_eq!(p.validators()[0].normalize, crate::scan::Normalize::Nfkc);
}

#[test]
fn each_normalize_setting_reads_its_own_view() {
    let pack = |mode: &str| {
        policy(&format!(
            "validators:\n  - type: banned_words\n    params: {{ words: [\"forbidden fruit\"], normalize: {mode} }}\n"
        ))
        .unwrap()
    };
    let zero_width = ["the forbid\u{200b}", "den fruit"];
    let cyrillic = ["the f\u{43e}rbidden", " fruit"];
    assert!(stream(&pack("none"), &zero_width).is_ok());
    assert!(stream(&pack("nfkc"), &zero_width).is_err());
    assert!(stream(&pack("nfkc"), &cyrillic).is_ok());
    assert!(stream(&pack("full"), &cyrillic).is_err());
    // Regexes read the view too: literals and small classes in their view form.
    let re = policy(
        "validators:\n  - type: regex\n    params: { pattern: \"(?i)caf[é]\\\\s+cr[eè]me\", expect_match: false }\n",
    )
    .unwrap();
    assert!(stream(&re, &["un CAFE\u{301}\u{a0}cre\u{300}me"]).is_err());
    assert!(stream(&re, &["un café crème"]).is_err());
    assert!(stream(&re, &["un cafe creme"]).is_ok());
    // Lanes of several settings in one policy: each hit is found once, mapped to raw text.
    let both = policy(
        "validators:\n  - type: banned_words\n    params: { words: [apple], normalize: none }\n  - type: banned_words\n    params: { words: [pear] }\n",
    )
    .unwrap();
    assert!(stream(&both, &["an ap\u{200b}ple"]).is_ok());
    assert!(stream(&both, &["a pe\u{200b}ar"]).is_err());
}

#[test]
fn the_hold_back_covers_the_raw_bytes_of_a_match_forming_in_the_view() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"] }\n",
    )
    .unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    let (ch, pos) = g.on_chunk(&text(0, "ok forbid\u{200b}")).unwrap().unwrap();
    assert_eq!(pos, "ok forbid\u{200b}".len() as u64);
    assert_eq!(g.safe_pos(ch), 3, "held from the match's first raw byte");
    // A Cyrillic letter opening a word waits until the word shows its script.
    let mut g = p.exchange_guard(Default::default(), None);
    let (ch, _) = g.on_chunk(&text(0, "ok \u{43e}")).unwrap().unwrap();
    assert_eq!(g.safe_pos(ch), 3);
    g.on_chunk(&text(0, "\u{43a} ")).unwrap();
    assert_eq!(g.safe_pos(ch), "ok \u{43e}\u{43a} ".len() as u64);
}

#[test]
fn literals_compare_under_full_case_folding() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [STRASSE, \"λόγος\"] }\n",
    )
    .unwrap();
    assert!(stream(&p, &["die stra", "ße"]).is_err());
    assert!(stream(&p, &["ΛΌΓΟΣ"]).is_err());
    assert!(stream(&p, &["λόγοι"]).is_ok());
}

#[test]
fn reasoning_shares_the_answers_automata_when_it_has_the_same_checks() {
    use super::compile::Target;
    let shared = |yaml: &str| {
        let p = policy(yaml).unwrap();
        Arc::ptr_eq(
            &p.checks(Target::Reasoning).scan,
            &p.checks(Target::Output).scan,
        )
    };
    assert!(shared(
        "validators:\n  - type: banned_words\n    params: { words: [apple] }\n"
    ));
    assert!(!shared(
        "validators:\n  - type: banned_words\n    params: { words: [apple], reasoning: skip }\n"
    ));
    // Skipped reasoning is not checked by the answer's words.
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [apple], reasoning: skip }\n",
    )
    .unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    let thought = Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed("an apple"),
    };
    assert!(g.on_chunk(&thought).is_ok());
    assert!(g.after_call().is_ok());
}
