//! Load-time validation: environment, judged checks, evals, agents and workflows, normalize.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn judged_checks_are_validated_at_load() {
    let refs = judged::CheckRefs {
        judges: vec!["safety".into(), "topic".into()],
        exec: vec!["my_eval".into()],
        embedders: vec![("topic".into(), None)],
        env: vec!["EVAL_TOKEN".into()],
        wordnet_dir: None,
    };
    let one = judged::CheckRefs {
        judges: vec!["safety".into()],
        exec: vec![],
        embedders: vec![("safety".into(), Some("emb-1".into()))],
        env: vec![],
        wordnet_dir: None,
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
            wordnet_dir: None,
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
    // Accents read as not there (marks over letters: docs/packs.md), in patterns and text.
    assert!(stream(&re, &["un cafe creme"]).is_err());
    assert!(stream(&re, &["un cafe crime"]).is_ok());
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
    use super::types::Target;
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

/// PromptKit's judged safety types: an LLM judge with each type's criteria, shown what
/// PromptKit shows it (the answer; the context for `hallucination`; the system messages as the
/// role for `role_violation`). The types a proxy cannot run are refused with the reason.
#[test]
fn judged_safety_types_load_and_the_unrunnable_are_refused_with_why() {
    let refs = judged::CheckRefs {
        judges: vec!["safety".into()],
        ..Default::default()
    };
    for (ty, judged_is, says) in [
        ("toxicity", "Text", "no toxic content"),
        ("bias", "Text", "no bias"),
        ("hallucination", "Rag", "hallucinated"),
        ("role_violation", "Rag", "keeps the role"),
    ] {
        let p = policy_with(&format!("validators:\n  - type: {ty}\n"), &refs)
            .unwrap_or_else(|e| panic!("{ty}: {e}"));
        let (_, check) = &p.judged_output()[0];
        let judged::JudgedKind::Llm(llm) = &check.kind else {
            panic!("{ty}: {:?}", check.kind)
        };
        assert!(
            format!("{:?}", llm.judged).starts_with(judged_is),
            "{ty}: {:?}",
            llm.judged
        );
        assert!(llm.criteria.contains(says), "{ty}: {}", llm.criteria);
        // The pack's own criteria replace the default.
        let own = policy_with(
            &format!("validators:\n  - type: {ty}\n    params: {{criteria: mine}}\n"),
            &refs,
        )
        .unwrap();
        let judged::JudgedKind::Llm(llm) = &own.judged_output()[0].1.kind else {
            panic!()
        };
        assert_eq!(llm.criteria, "mine");
    }
    let role = format!("{:?}", {
        let p = policy_with("validators:\n  - type: role_violation\n", &refs).unwrap();
        let judged::JudgedKind::Llm(llm) = &p.judged_output()[0].1.kind else {
            panic!()
        };
        llm.judged.clone()
    });
    assert!(role.contains("\"system\""), "{role}");
    let e = policy_with(
        "validators:\n  - type: role_violation\n    params: {agent_role: pirate}\n",
        &refs,
    )
    .unwrap_err();
    assert!(e.contains("agent_role"), "{e}");
    for (ty, why) in [
        ("tool_exec", "executes a tool"),
        ("composition_output", "composition"),
        ("text_toxicity", "classifier"),
        ("text_sentiment", "classifier"),
        ("image_format", "images, audio or video"),
    ] {
        let e = policy_with(&format!("validators:\n  - type: {ty}\n"), &refs).unwrap_err();
        assert!(
            e.contains("guardwire refuses it") && e.contains(why),
            "{ty}: {e}"
        );
    }
}
