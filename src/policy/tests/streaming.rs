//! Budgets, structured checks, streamed limits, redaction and repeats.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

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
fn max_chars_counts_streamed_characters_ascii_or_not() {
    let p = policy("validators:\n  - type: max_length\n    params: { max_chars: 10 }\n").unwrap();
    // Ten characters in twenty bytes pass; the eleventh, ASCII or not, is over.
    assert!(stream(&p, &["ééééé", "ééééé"]).is_ok());
    assert!(stream(&p, &["ééééé", "abcd", "é"]).is_ok());
    assert_eq!(
        stream(&p, &["ééééé", "ééééé", "a"]).unwrap_err().validator,
        0
    );
    assert_eq!(
        stream(&p, &["abcde", "fghij", "é"]).unwrap_err().validator,
        0
    );
}

/// JSON held in an answer's text or in a tool call's arguments is read as the reader that
/// parses it reads it (its escapes resolved, one level and the next), at every split, and
/// none of the violating text is released before the violation is found.
#[test]
fn json_held_in_text_is_read_decoded_and_held_back() {
    let p = policy(
        "validators:\n  - type: banned_words\n    params: { words: [\"forbidden fruit\"] }\n  - type: regex\n    params: { pattern: \"sk-[A-Za-z0-9]{20,}\", expect_match: false }\n",
    )
    .unwrap();
    // (text, a tool call's arguments, blocked)
    let cases = [
        (r#"{"note":"the forbidden\u0020fruit"}"#, false, true),
        (r#"{"a":"{\"b\":\"forbid\\u0064en fruit\"}"}"#, false, true),
        (r#"{"k":"sk-\u00411b2C3d4E5f6G7h8I9j0K1l2"}"#, false, true),
        (
            r#"{"body":"{\"k\":\"forbidden\\u0020fruit\"}"}"#,
            true,
            true,
        ),
        (
            r#"{"body":"{\"k\":\"sk-\\u00411b2C3d4E5f6G7h8I9j0K1l2\"}"}"#,
            true,
            true,
        ),
        // (Review 19, P19-01: a backslash the first parse keeps makes `\f` an escape to a
        // second parse; the first reads `C:\forbidden fruit`.)
        (r#"{"p":"C:\\forbidden\u0020fruit"}"#, false, true),
        (r#"{"p":"x\\\\nforbidden\u0020fruit"}"#, false, true),
        (
            r#"a regex \d+ and "\n" then forbidden-ish fruit"#,
            false,
            false,
        ),
    ];
    let delta = |is_args: bool, t: &'static str| if is_args { args(0, 0, t) } else { text(0, t) };
    for (whole, is_args, blocks) in cases {
        // Where the violation starts.
        let bad = whole.find("forbid").or(whole.find("sk-")).unwrap() as u64;
        for cut in 0..=whole.len() {
            for cut2 in [cut, (cut + 3).min(whole.len()), (cut + 9).min(whole.len())] {
                let pieces = [&whole[..cut], &whole[cut..cut2], &whole[cut2..]];
                let mut g = p.exchange_guard(ToolHistory::default(), None);
                if is_args {
                    g.on_chunk(&call(0, 0, "post")).unwrap();
                }
                let mut stopped = false;
                for piece in pieces.iter().filter(|p| !p.is_empty()) {
                    let piece: &'static str = Box::leak(piece.to_string().into_boxed_str());
                    match g.on_chunk(&delta(is_args, piece)) {
                        Ok(Some((ch, _))) if blocks => {
                            assert!(
                                g.safe_pos(ch) <= bad,
                                "{whole:?} at {cut}/{cut2}: released past {bad}"
                            );
                        }
                        Ok(_) => {}
                        Err(_) => {
                            stopped = true;
                            break;
                        }
                    }
                }
                let verdict = stopped || g.after_call().is_err();
                assert_eq!(verdict, blocks, "{whole:?} at {cut}/{cut2}");
            }
        }
    }
}
