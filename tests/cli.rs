//! The real `guardwire` binary: `check`, `serve`, environment overrides, shutdown on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::{serve, spawn_serve};
use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::proxy::{post_chat, STREAM_REQUEST};
use std::io::{BufRead, BufReader};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_guardwire");

fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn check_accepts_the_shipped_config_and_lists_what_it_loaded() {
    let (ok, out) = run(&["check", "--config", "config/guardwire.yaml"], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("pack config/packs/default.yaml"), "{out}");
    assert!(out.contains("validators[0] content_excludes"), "{out}");
    assert!(
        out.contains("route openai_chat (openai_chat) -> https://api.openai.com"),
        "{out}"
    );
}

/// The README's offline tryout: its config loads, with the example pack, in front of the echo
/// upstream (examples/echo_upstream.rs).
#[test]
fn check_accepts_the_tryout_config() {
    let (ok, out) = run(&["check", "--config", "examples/tryout.yaml"], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("pack config/packs/default.yaml"), "{out}");
    assert!(
        out.contains("route openai_chat (openai_chat) -> http://127.0.0.1:8081"),
        "{out}"
    );
}

#[test]
fn check_lists_the_policy_of_every_route_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let pack = |name: &str, word: &str| {
        let path = dir.path().join(name);
        let yaml =
            format!("validators:\n  - type: banned_words\n    params: {{ words: [{word}] }}\n");
        std::fs::write(&path, yaml).unwrap();
        path.display().to_string()
    };
    let (route_pack, key_pack) = (pack("route.yaml", "alpha"), pack("key.yaml", "beta"));
    let config = dir.path().join("g.yaml");
    let yaml = format!(
        "packs: [config/packs/default.yaml]\n\
         routes:\n  - name: local\n    path_prefix: /local\n    protocol: openai_chat\n    \
         upstream: http://127.0.0.1:9\n    packs: [\"{route_pack}\"]\n\
         keys:\n  - id: team-a\n    key_env: GW_TEST_KEY_A\n    packs: [\"{key_pack}\"]\n  \
         - id: team-b\n    key_env: GW_TEST_KEY_B\n"
    );
    std::fs::write(&config, yaml).unwrap();
    let env = [
        ("GW_TEST_KEY_A", "secret-key-of-team-a"),
        ("GW_TEST_KEY_B", "secret-key-of-team-b"),
    ];
    let (ok, out) = run(&["check", "--config", config.to_str().unwrap()], &env);
    assert!(ok, "{out}");
    for expected in [
        "route local (openai_chat) -> http://127.0.0.1:9, policy 1".to_owned(),
        "route openai_chat (openai_chat) -> (not configured: answers 404), policy 2".to_owned(),
        "key team-a: policy 3\nkey team-b: the route's policy".to_owned(),
        format!("policy 1:\n  pack {route_pack}\n"),
        "policy 2:\n  pack config/packs/default.yaml\n".to_owned(),
        format!("policy 3:\n  pack {key_pack}\n"),
    ] {
        assert!(out.contains(&expected), "{expected} missing: {out}");
    }
}

#[test]
fn config_errors_say_which_key_named_a_missing_pack_and_where_an_unknown_key_is() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("g.yaml");
    let write = |yaml: &str| std::fs::write(&config, yaml).unwrap();
    let check = || run(&["check", "--config", config.to_str().unwrap()], &[]);
    write("keys:\n  - id: team-a\n    key_env: PATH\n    packs: [packs/gone.yaml]\n");
    let (ok, out) = check();
    assert!(!ok);
    let cwd = env!("CARGO_MANIFEST_DIR");
    assert!(
        out.contains(&format!(
            "keys[0] (team-a).packs in {}: packs/gone.yaml: cannot read: ",
            config.display()
        )) && out.contains(&format!("(relative to the working directory {cwd})")),
        "{out}"
    );
    for (yaml, expected) in [
        (
            "listen: 127.0.0.1:9\nlogg:\n  level: debug\n",
            "logg: unknown key `logg` at line 2, column 1; did you mean `log`?",
        ),
        (
            "routes:\n  - name: a\n    prefix: /a\n    protocol: openai_chat\n    upstream: http://127.0.0.1:9\n",
            "routes.0.prefix: unknown key `prefix` at line 3, column 5; did you mean `path_prefix`?",
        ),
    ] {
        write(yaml);
        let (ok, out) = check();
        assert!(!ok && out.contains(expected), "{expected} missing: {out}");
    }
}

#[test]
fn an_empty_admin_token_from_the_environment_is_refused() {
    let (ok, out) = run(
        &["check", "--config", "config/guardwire.yaml"],
        &[("GUARDWIRE_ADMIN__TOKEN", "")],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("admin.token: must not be empty"), "{out}");
}

#[test]
fn check_names_file_validator_and_param_of_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("bad.yaml");
    std::fs::write(
        &pack,
        "validators:\n  - type: banned_words\n    params: { words: [a] }\n  - type: max_length\n    params: { max_characters: lots }\n",
    )
    .unwrap();
    let config = dir.path().join("g.yaml");
    // The judged checks name a judge and an `exec:` handler.
    let judged = "judges:\n  - {name: safety, protocol: openai_chat, base_url: 'http://127.0.0.1:9000', model: judge-small, embedding_model: emb-small}\nexec:\n  example_eval: {command: python3, args: [eval.py]}\npack_env: [CLASSIFIER_TOKEN, A2A_JUDGE_TOKEN]\n";
    std::fs::write(
        &config,
        format!("packs: [\"{}\"]\n{judged}", pack.display()),
    )
    .unwrap();
    let (ok, out) = run(&["check", "--config", config.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "{}: validators[1] (type: max_length): param 'max_characters'",
            pack.display()
        )),
        "{out}"
    );
    let (ok, out) = run(&["check", "--config", "/nonexistent.yaml"], &[]);
    assert!(!ok && out.contains("/nonexistent.yaml"), "{out}");
}

#[test]
fn check_rejects_an_upstream_ca_file_without_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let check_with_ca = |ca: &std::path::Path| {
        let config = dir.path().join("g.yaml");
        let yaml = format!("upstream_tls:\n  ca_path: \"{}\"\n", ca.display());
        std::fs::write(&config, yaml).unwrap();
        run(&["check", "--config", config.to_str().unwrap()], &[])
    };
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "not a certificate\n").unwrap();
    let (ok, out) = check_with_ca(&ca);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "upstream_tls.ca_path: {} holds no certificate",
            ca.display()
        )),
        "{out}"
    );
    let (ok, out) = check_with_ca(&dir.path().join("missing.pem"));
    assert!(
        !ok && out.contains("upstream_tls.ca_path: cannot read"),
        "{out}"
    );
}

#[test]
fn environment_overrides_the_file() {
    let (ok, out) = run(
        &["check", "--config", "config/guardwire.yaml"],
        &[
            ("GUARDWIRE_LISTEN", "127.0.0.1:9999"),
            ("GUARDWIRE_UPSTREAMS__OPENAI", "http://127.0.0.1:1234"),
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("listen 127.0.0.1:9999"), "{out}");
    assert!(out.contains("-> http://127.0.0.1:1234"), "{out}");
    let (ok, out) = run(
        &["check", "--config", "config/guardwire.yaml"],
        &[("GUARDWIRE_LIMITS__MAX_REQUEST_BYTES", "many")],
    );
    assert!(!ok && out.contains("limits.max_request_bytes"), "{out}");
    let (ok, out) = run(
        &["check", "--config", "config/guardwire.yaml"],
        &[("GUARDWIRE_LIMITS__MAX_BODY", "1")],
    );
    assert!(
        !ok && out.contains("max_body"),
        "a typo below a known key is an error: {out}"
    );
    let (ok, out) = run(
        &["check", "--config", "config/guardwire.yaml"],
        &[("GUARDWIRE_SOMETHING_ELSE", "x")],
    );
    assert!(ok, "unrelated GUARDWIRE_ variables are ignored: {out}");
}

#[test]
fn help_describes_both_commands() {
    let (ok, out) = run(&["--help"], &[]);
    assert!(
        ok && out.contains("serve") && out.contains("check"),
        "{out}"
    );
    let (ok, out) = run(&["serve", "--help"], &[]);
    assert!(ok && out.contains("--config"), "{out}");
}

#[tokio::test]
async fn serve_proxies_and_stops_on_sigterm() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["hello"]))).await;
    let (gw, _dir) = serve(&format!(
        "listen: \"127.0.0.1:0\"\nupstreams: {{ openai: \"{}\" }}\npacks: [\"config/packs/default.yaml\"]\nlog: {{ format: json }}\n",
        mock.base_url()
    ))
    .await;
    let a = post_chat(gw.addr, STREAM_REQUEST).await;
    assert_eq!(a.body, openai_chat_stream(&["hello"]));
    gw.stop().await; // exits 0 on SIGTERM
}

#[test]
fn text_logs_have_no_colour_codes_when_not_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("g.yaml");
    std::fs::write(&config, "listen: \"127.0.0.1:0\"\nlog: { format: text }\n").unwrap();
    let mut child = spawn_serve(&config);
    let stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("guardwire listening") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(seen.contains("guardwire listening"), "{seen}");
    assert!(!seen.contains('\u{1b}'), "escape codes in a pipe: {seen:?}");
}

#[test]
fn check_loads_the_catalog_pack_with_every_type_and_alias() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("g.yaml");
    let pack = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/packs/catalog.yaml");
    // The judged checks name a judge and an `exec:` handler.
    let judged = "judges:\n  - {name: safety, protocol: openai_chat, base_url: 'http://127.0.0.1:9000', model: judge-small, embedding_model: emb-small}\nexec:\n  example_eval: {command: python3, args: [eval.py]}\npack_env: [CLASSIFIER_TOKEN, A2A_JUDGE_TOKEN]\n";
    std::fs::write(
        &config,
        format!("packs: [\"{}\"]\n{judged}", pack.display()),
    )
    .unwrap();
    let (ok, out) = run(&["check", "--config", config.to_str().unwrap()], &[]);
    assert!(ok, "{out}");
    // Every implemented canonical type appears, and every alias was accepted.
    for canonical in [
        "content_excludes",
        "regex",
        "pii",
        "max_length",
        "sentence_count",
        "contains",
        "contains_any",
        "min_length",
        "field_presence",
        "json_valid",
        "json_schema",
        "json_path",
        "tools_called",
        "tools_not_called",
        "tool_args",
        "tool_calls_with_args",
        "tool_call_count",
        "tool_call_sequence",
        "tool_call_chain",
        "tool_anti_pattern",
        "tool_no_repeat",
        "tool_efficiency",
        "no_tool_errors",
        "tool_result_includes",
        "tool_result_matches",
        "tool_args_excluded_session",
        "tools_called_session",
        "tools_not_called_session",
        "tool_args_session",
        "latency_budget",
        "cost_budget",
        "llm_judge",
        "llm_judge_session",
        "llm_judge_tool_calls",
        "rest_eval",
        "rest_eval_session",
        "a2a_eval",
        "a2a_eval_session",
        "cosine_similarity",
        "exec",
        "agent_invoked",
        "agent_not_invoked",
        "agent_response_contains",
        "skill_activated",
        "skill_not_activated",
        "skill_activation_order",
        "workflow_complete",
        "workflow_state_is",
        "workflow_transitioned_to",
        "workflow_transition_order",
        "workflow_tool_access",
        "invariant_fields_preserved",
        "guardrail_triggered",
        "faithfulness",
        "answer_relevancy",
        "toxicity",
        "bias",
        "hallucination",
        "role_violation",
    ] {
        assert!(
            out.contains(&format!("({canonical})")),
            "{canonical} missing:\n{out}"
        );
    }
    for alias in [
        "banned_words",
        "content_not_includes",
        "content_matches",
        "pii_leakage",
        "length",
        "max_sentences",
        "content_includes",
        "content_includes_any",
        "required_fields",
        "is_valid_json",
        "valid_json",
        "tool_called",
        "tools_not_called_with_args",
        "llm_judge_conversation",
        "state_is",
        "transitioned_to",
        "example_eval",
    ] {
        assert!(
            out.contains(&format!("] {alias} (")),
            "{alias} missing:\n{out}"
        );
    }
}

#[test]
fn tool_checks_an_mcp_session_cannot_judge_are_refused_on_mcp_routes() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let per_call = write(
        "per_call.yaml",
        "validators:\n  - type: tools_not_called\n    params: { tool_names: [shell] }\n  - type: tool_call_count\n    params: { max: 3 }\n",
    );
    let turn_end = write(
        "turn_end.yaml",
        "validators:\n  - id: must-search\n    type: tools_called\n    params: { tool_names: [search] }\n",
    );
    let results = write("results.yaml", "validators:\n  - type: no_tool_errors\n");
    let config = |packs: &str, key_packs: Option<&str>| {
        let keys = key_packs.map_or(String::new(), |k| {
            format!("keys:\n  - id: team\n    key_env: GW_TEST_KEY_MCP\n    packs: [\"{k}\"]\n")
        });
        write(
            "g.yaml",
            &format!(
                "routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"http://127.0.0.1:9/mcp\"\n    packs: [\"{packs}\"]\n{keys}"
            ),
        )
    };
    let check = |path: String| {
        run(
            &["check", "--config", &path],
            &[("GW_TEST_KEY_MCP", "secret-key-of-the-mcp-team")],
        )
    };
    // Checks judged call by call run on MCP.
    let (ok, out) = check(config(&per_call, None));
    assert!(ok, "{out}");
    // A check judged at the end of a turn is refused, naming route, validator and why.
    let (ok, out) = check(config(&turn_end, None));
    assert!(!ok);
    assert!(
        out.contains("the packs of MCP route tools")
            && out.contains("validator or eval 'must-search' cannot run on an MCP route")
            && out.contains("end of a turn"),
        "{out}"
    );
    // So is one reading tool results as outcomes; in a key's packs too.
    let (ok, out) = check(config(&per_call, Some(&results)));
    assert!(!ok);
    assert!(
        out.contains("keys (team).packs") && out.contains("tool results"),
        "{out}"
    );
    // A workflow check reads its state from results; an eval is held to the same rule, and a
    // `cost_budget` validator or eval has no model usage to read on MCP.
    for (pack, why) in [
        (
            "validators:\n  - type: workflow_state_is\n    params: { state: done }\n",
            "workflow's state",
        ),
        (
            "evals:\n  - { id: searched, type: tools_called, trigger: every_turn, params: { tool_names: [search] } }\n",
            "end of a turn",
        ),
        (
            "evals:\n  - { id: spend, type: cost_budget, trigger: on_session_complete, params: { max_total_tokens: 9 } }\n",
            "no model usage",
        ),
        (
            "validators:\n  - type: cost_budget\n    params: { max_total_tokens: 9 }\n",
            "no model usage",
        ),
    ] {
        let (ok, out) = check(config(&write("p.yaml", pack), None));
        assert!(!ok, "{pack}");
        assert!(out.contains(why), "{pack}: {out}");
    }
}

/// A counter's value in a `/metrics` text (0 when absent).
fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// `server.runtime: per_core` with two workers, from the binary: connections spread over both
/// workers (each with its own listener on the one port), every answer whole, the counts in one
/// registry; a reload reaches both workers; SIGTERM drains a stream in flight and exits 0.
#[tokio::test]
async fn per_core_workers_share_one_gateway_reload_together_and_drain() {
    use common::mock_upstream::Chunk;
    use common::proxy::{send, ADMIN_TOKEN};
    const CONNECTIONS: usize = 24;
    let slow_answer = openai_chat_stream(&["slow ", "but ", "whole."]);
    let slow = slow_answer.clone();
    let mock = MockUpstream::start(move |req| {
        if req.body_str().contains("slow") {
            let mid = slow.len() / 2;
            Reply::chunks(
                200,
                vec![
                    Chunk::now(slow[..mid].to_vec()),
                    Chunk::new(slow[mid..].to_vec(), std::time::Duration::from_millis(300)),
                ],
            )
            .with_header("content-type", "text/event-stream")
        } else {
            Reply::sse(&openai_chat_stream(&["say ", "alpha ", "and beta."]))
        }
    })
    .await;
    let packs = tempfile::tempdir().unwrap();
    let pack = packs.path().join("pack.yaml");
    let ban = |word: &str| {
        format!(
            "validators:\n  - id: ban\n    type: banned_words\n    params: {{ words: [{word}] }}\n"
        )
    };
    std::fs::write(&pack, ban("gamma")).unwrap();
    let (gw, _dir) = serve(&format!(
        "listen: \"127.0.0.1:0\"\nupstreams: {{ openai: \"{}\" }}\npacks: [\"{}\"]\n\
         server: {{ runtime: per_core, workers: 2 }}\nadmin: {{ token: {ADMIN_TOKEN} }}\n\
         reload: {{ poll_ms: 0 }}\nlog: {{ format: json }}\n",
        mock.base_url(),
        pack.display()
    ))
    .await;
    // Each request on a connection of its own (`send` opens one), all at once.
    let round = || async {
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..CONNECTIONS {
            all.spawn(post_chat(gw.addr, STREAM_REQUEST));
        }
        all.join_all().await
    };
    let worker = |m: &str, w: usize| {
        counter(
            m,
            &format!("guardwire_worker_connections_total{{worker=\"{w}\"}}"),
        )
    };
    for a in round().await {
        assert_eq!(a.body, openai_chat_stream(&["say ", "alpha ", "and beta."]));
    }
    let m = common::proxy::metrics(gw.addr).await;
    let (w0, w1) = (worker(&m, 0), worker(&m, 1));
    // Every connection counted once (this scrape's too); the kernel gave each worker some:
    // all 25 to one worker has a chance of 2^-24.
    assert_eq!(w0 + w1, CONNECTIONS as u64 + 1, "{m}");
    assert!(w0 > 0 && w1 > 0, "{w0} / {w1}");
    assert_eq!(
        counter(
            &m,
            r#"guardwire_requests_total{route="openai_chat",model="other",status="200"}"#
        ),
        CONNECTIONS as u64,
        "{m}"
    );

    // The reload, asked of one worker, is what every worker serves next.
    std::fs::write(&pack, ban("alpha")).unwrap();
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let r = send(
        gw.addr,
        "POST",
        "/admin/reload",
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for a in round().await {
        let text = a.text();
        assert!(
            text.contains("content_blocked") && !text.contains("alpha"),
            "{text}"
        );
    }
    let m = common::proxy::metrics(gw.addr).await;
    assert!(worker(&m, 0) > w0 && worker(&m, 1) > w1, "{m}");

    // SIGTERM while a stream is in flight: it ends whole, then the process exits 0.
    let before = mock.request_count();
    let addr = gw.addr;
    let in_flight = tokio::spawn(async move {
        post_chat(
            addr,
            r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"slow"}]}"#,
        )
        .await
    });
    while mock.request_count() == before {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    gw.stop().await;
    assert_eq!(in_flight.await.unwrap().body, slow_answer);
}
