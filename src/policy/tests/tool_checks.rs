//! Tool-call checks: per call, per turn and per session.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

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
        cache: None,
        input_tokens: Some(i),
        output_tokens: Some(o),
    };
    let price = Some(Price {
        input_per_mtok: 2.0,
        output_per_mtok: 10.0,
        ..Default::default()
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
        ..Default::default()
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
        e.contains("param 'max_cost_usd', 'max_total_tokens'"),
        "{e}"
    );
    // PromptKit's input and output maxima: any count over its maximum fails.
    let split = policy("validators:\n  - type: cost_budget\n    params: { max_input_tokens: 100, max_output_tokens: 50 }\n").unwrap();
    let run_split = |u| {
        let mut g = split.exchange_guard(ToolHistory::default(), None);
        g.on_chunk(&u).unwrap();
        g.after_call().err().map(|f| f.validator)
    };
    assert_eq!(run_split(usage(100, 50)), None);
    assert_eq!(run_split(usage(101, 10)), Some(0));
    assert_eq!(run_split(usage(10, 51)), Some(0));
}

/// `cost_budget` reads the session's totals: what the session spent before the exchange
/// (read by the proxy) plus the exchange's usage at the end; a session already over a
/// maximum is refused BeforeCall; an unknown total is an error (`on_error`).
#[test]
fn cost_budget_reads_the_sessions_totals() {
    use crate::evals::Spend;
    let p = policy("validators:\n  - type: cost_budget\n    params: { max_total_tokens: 100, max_cost_usd: 1 }\n").unwrap();
    let price = Some(Price {
        input_per_mtok: 1000.0,
        output_per_mtok: 1000.0,
        ..Default::default()
    });
    let spent = |tokens: u64, usd: Option<f64>| Spend {
        input_tokens: Some(tokens),
        output_tokens: Some(0),
        cost_usd: usd,
    };
    let conversation = crate::delta::Conversation::default();
    // (before, this exchange's tokens) → BeforeCall's and the end's verdicts.
    let run = |before: Spend, exchange: u64| {
        let mut g = p.exchange_guard(ToolHistory::default(), price);
        g.set_session_before(before);
        if g.before_call(&conversation).is_err() {
            return (false, None);
        }
        g.on_chunk(&Delta::Usage {
            input_tokens: Some(exchange),
            output_tokens: Some(0),
            cache: None,
        })
        .unwrap();
        (true, Some(g.after_call().is_ok()))
    };
    assert_eq!(run(spent(60, Some(0.06)), 40), (true, Some(true)));
    assert_eq!(
        run(spent(60, Some(0.06)), 41),
        (true, Some(false)),
        "101 tokens"
    );
    assert_eq!(
        run(spent(100, Some(0.1)), 0),
        (true, Some(true)),
        "at the maximum"
    );
    assert_eq!(
        run(spent(101, Some(0.1)), 0),
        (false, None),
        "over already: not called"
    );
    assert_eq!(
        run(spent(0, Some(1.01)), 0),
        (false, None),
        "over the price already"
    );
    assert_eq!(
        run(spent(0, Some(0.99)), 20),
        (true, Some(false)),
        "$0.99 + $0.02"
    );
    // The store did not answer, or an earlier turn's usage is unknown: an error, failing
    // closed by default.
    assert_eq!(run(Spend::default(), 1), (false, None));
    assert_eq!(
        run(spent(1, None), 1),
        (false, None),
        "the session's USD is unknown"
    );
}

/// PromptKit's `tools_called_session`, `tools_not_called_session` and `tool_args_session` are
/// the turn types with `scope: session`, by name: the session here called `old_tool` with
/// `{"to":"eve"}` before the current turn.
#[test]
fn promptkit_session_types_read_the_whole_session() {
    let p = |yaml: &str| policy(&format!("validators:\n  - {yaml}\n")).unwrap();
    let answer = [text(0, "done")];
    let not_called = p("type: tools_not_called_session\n    params: { tools: [old_tool] }");
    assert_eq!(verdict(&not_called, &[], &answer), Some(0));
    let turn = p("type: tools_not_called\n    params: { tools: [old_tool] }");
    assert_eq!(verdict(&turn, &[], &answer), None);
    let called = p("type: tools_called_session\n    params: { tool_names: [old_tool] }");
    assert_eq!(verdict(&called, &[], &answer), None);
    let turn = p("type: tools_called\n    params: { tool_names: [old_tool] }");
    assert_eq!(verdict(&turn, &[], &answer), Some(0));
    let twice = p("type: tools_called_session\n    params: { tools: [old_tool], min_calls: 2 }");
    assert_eq!(verdict(&twice, &[], &answer), Some(0));
    assert_eq!(
        verdict(&twice, &[("old_tool", "{}", Some("ok"))], &answer),
        None
    );
    let args = p(
        "type: tool_args_session\n    params: { tool_name: old_tool, expected_args: { to: eve } }",
    );
    assert_eq!(verdict(&args, &[], &answer), None);
    let other = p(
        "type: tool_args_session\n    params: { tool_name: old_tool, expected_args: { to: bob } }",
    );
    assert_eq!(verdict(&other, &[], &answer), Some(0));
    let turn =
        p("type: tool_args\n    params: { tool_name: old_tool, expected_args: { to: eve } }");
    assert_eq!(
        verdict(&turn, &[], &answer),
        Some(0),
        "not called in this turn"
    );
    // The scope is the type's: a `scope` param is refused, not silently obeyed.
    let e = policy("validators:\n  - type: tools_called_session\n    params: { tool_names: [a], scope: turn }\n").unwrap_err();
    assert!(e.contains("scope"), "{e}");
}
