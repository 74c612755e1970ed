//! Text checks: loading basics, what input and output checks read (parts, reasoning).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

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
    let e = policy("validators:\n  - type: directional\n    params: {}\n").unwrap_err();
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
