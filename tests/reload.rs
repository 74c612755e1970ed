//! Live reload: swaps are atomic, streams in flight keep the policy they started with, invalid
//! packs leave the running policy in force, and every trigger (admin endpoint, file change,
//! SIGHUP) works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::mock_upstream::{openai_chat_stream, Chunk, MockUpstream, Reply};
use common::proxy::*;
use guardwire::config::Config;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn pack(word: &str) -> String {
    format!("validators:\n  - id: ban-{word}\n    type: banned_words\n    params: {{ words: [{word}] }}\n")
}

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    pack: PathBuf,
}

fn setup(upstream: &str, extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let pack_path = dir.path().join("pack.yaml");
    std::fs::write(&pack_path, pack("alpha")).unwrap();
    let config = dir.path().join("guardwire.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: \"127.0.0.1:0\"\nupstreams: {{ openai: \"{upstream}\" }}\npacks: [\"{}\"]\n{extra}\n",
            pack_path.display()
        ),
    )
    .unwrap();
    Setup {
        dir,
        config,
        pack: pack_path,
    }
}

async fn start(config: &Path) -> guardwire::server::RunningServer {
    let c = Config::load(config).unwrap();
    guardwire::server::start_from(c, Some(config.to_path_buf()))
        .await
        .unwrap()
}

async fn admin_reload(addr: std::net::SocketAddr, token: &str) -> Answer {
    send(
        addr,
        "POST",
        "/admin/reload",
        "",
        &[("authorization", token)],
    )
    .await
}

/// The mock answers "alpha beta" slowly when the prompt says "slow", at once otherwise.
async fn mock() -> MockUpstream {
    MockUpstream::start(|req| {
        let body = openai_chat_stream(&["say ", "alpha ", "and beta."]);
        if req.body_str().contains("slow") {
            let mid = body.len() / 2;
            Reply::chunks(
                200,
                vec![
                    Chunk::now(body[..mid].to_vec()),
                    Chunk::new(body[mid..].to_vec(), Duration::from_millis(400)),
                ],
            )
            .with_header("content-type", "text/event-stream")
        } else {
            Reply::sse(&body)
        }
    })
    .await
}

fn blocked(a: &Answer, word: &str) -> bool {
    a.text()
        .contains(&format!("blocked by guardrail 'ban-{word}'"))
}

#[tokio::test]
async fn a_reload_swaps_the_policy_for_new_requests_only() {
    let mock = mock().await;
    let s = setup(
        &mock.base_url(),
        "reload: { poll_ms: 0 }\nadmin: { token: s3cret }",
    );
    let server = start(&s.config).await;
    let addr = server.addr;
    assert!(blocked(&post_chat(addr, STREAM_REQUEST).await, "alpha"));
    let hash_before = config_hash(&metrics_with_token(addr, "s3cret").await);

    // A stream starts under the old policy (ban alpha, allow beta)...
    let slow =
        tokio::spawn(async move { post_chat(addr, &STREAM_REQUEST.replace("hi", "slow")).await });
    mock.wait_for_requests(2, Duration::from_secs(10)).await;
    // ...while the pack changes to ban beta instead.
    std::fs::write(&s.pack, pack("beta")).unwrap();
    let r = admin_reload(addr, "Bearer s3cret").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let old = slow.await.unwrap();
    assert!(
        blocked(&old, "alpha"),
        "the in-flight stream kept the old policy: {}",
        old.text()
    );
    let new = post_chat(addr, STREAM_REQUEST).await;
    assert!(
        blocked(&new, "beta"),
        "new requests get the new policy: {}",
        new.text()
    );
    let after = metrics_with_token(addr, "s3cret").await;
    assert!(after.contains(r#"guardwire_config_reload_total{result="success"} 1"#));
    assert!(
        after.contains("guardwire_config_last_reload_successful 1\n"),
        "{after}"
    );
    // The pack's text changed: so did the hash replicas are compared by.
    assert_ne!(config_hash(&after), hash_before, "{after}");
}

/// The value of `guardwire_config_hash` in a scrape.
fn config_hash(scrape: &str) -> String {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix("guardwire_config_hash "))
        .unwrap_or_else(|| panic!("no config hash in {scrape}"))
        .to_owned()
}

#[tokio::test]
async fn an_invalid_pack_keeps_the_running_policy() {
    let mock = mock().await;
    let s = setup(
        &mock.base_url(),
        "reload: { poll_ms: 0 }\nadmin: { token: s3cret }",
    );
    let server = start(&s.config).await;
    let hash_before = config_hash(&metrics_with_token(server.addr, "s3cret").await);
    std::fs::write(
        &s.pack,
        "validators:\n  - type: regex\n    params: { pattern: '(' }\n",
    )
    .unwrap();
    let r = admin_reload(server.addr, "Bearer s3cret").await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains(&format!(
            "{}: validators[0] (type: regex): param 'pattern'",
            s.pack.display()
        )),
        "{}",
        r.text()
    );
    assert!(blocked(
        &post_chat(server.addr, STREAM_REQUEST).await,
        "alpha"
    ));
    let after = metrics_with_token(server.addr, "s3cret").await;
    assert!(after.contains(r#"guardwire_config_reload_total{result="failure"} 1"#));
    assert!(
        after.contains("guardwire_config_last_reload_successful 0\n"),
        "{after}"
    );
    assert_eq!(
        config_hash(&after),
        hash_before,
        "the running config is unchanged"
    );
}

#[tokio::test]
async fn admin_reload_needs_the_token_and_is_hidden_without_one() {
    let mock = mock().await;
    let s = setup(
        &mock.base_url(),
        "reload: { poll_ms: 0 }\nadmin: { token: s3cret }",
    );
    let server = start(&s.config).await;
    assert_eq!(admin_reload(server.addr, "Bearer wrong!").await.status, 401);
    assert_eq!(admin_reload(server.addr, "s3cret").await.status, 401);
    let s2 = setup(&mock.base_url(), "reload: { poll_ms: 0 }");
    let no_admin = start(&s2.config).await;
    assert_eq!(
        admin_reload(no_admin.addr, "Bearer s3cret").await.status,
        404
    );
    drop(s.dir);
}

#[tokio::test]
async fn a_changed_pack_file_is_picked_up_by_the_watcher() {
    let mock = mock().await;
    let s = setup(&mock.base_url(), "reload: { poll_ms: 50 }");
    let server = start(&s.config).await;
    std::fs::write(&s.pack, pack("beta")).unwrap();
    let mut swapped = false;
    for _ in 0..200 {
        if blocked(&post_chat(server.addr, STREAM_REQUEST).await, "beta") {
            swapped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(swapped, "the watcher never reloaded the changed pack");
}

#[tokio::test]
async fn sighup_reloads_the_running_binary() {
    let mock = mock().await;
    let s = setup(
        &mock.base_url(),
        "reload: { poll_ms: 0 }\nlog: { format: json }",
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_guardwire"))
        .args(["serve", "--config", s.config.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut addr = None;
    while let Some(v) = rx.recv().await {
        if v["fields"]["message"] == "guardwire listening" {
            addr = Some(v["fields"]["addr"].as_str().unwrap().parse().unwrap());
            break;
        }
    }
    let addr = addr.expect("guardwire never said it was listening");
    assert!(blocked(&post_chat(addr, STREAM_REQUEST).await, "alpha"));
    std::fs::write(&s.pack, pack("beta")).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    while let Some(v) = rx.recv().await {
        if v["fields"]["message"] == "config reloaded" {
            break;
        }
    }
    assert!(blocked(&post_chat(addr, STREAM_REQUEST).await, "beta"));
    let _ = child.kill();
    let _ = child.wait();
}

/// A pack list named by many routes and keys is compiled once, and a reload recompiles only
/// the lists whose files changed: the others keep the very same compiled policy.
#[tokio::test]
async fn each_distinct_pack_list_is_compiled_once_and_reloads_reuse_the_unchanged() {
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["say gamma"]))).await;
    let s = setup(&mock.base_url(), "");
    let other = s.dir.path().join("other.yaml");
    std::fs::write(&other, pack("beta")).unwrap();
    let (main, other_s) = (s.pack.display(), other.display());
    let mut extra = String::from("routes:\n");
    for i in 0..5 {
        extra += &format!("  - {{ name: r{i}, protocol: openai_chat, path_prefix: /r{i}/, upstream: \"{}\", packs: [\"{main}\"] }}\n", mock.base_url());
    }
    extra += "  - { name: both, protocol: openai_chat, path_prefix: /both/, upstream: \"http://127.0.0.1:9\", packs: [";
    extra += &format!("\"{main}\", \"{other_s}\"] }}\nkeys:\n");
    for i in 0..500 {
        // Keys naming the top-level pack, the other one, or both (in a list of their own).
        let packs = match i % 3 {
            0 => format!("[\"{main}\"]"),
            1 => format!("[\"{other_s}\"]"),
            _ => format!("[\"{main}\", \"{other_s}\"]"),
        };
        extra += &format!("  - {{ id: k{i}, key: secret-{i}, packs: {packs} }}\n");
    }
    let text = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(
        &s.config,
        format!("{text}{extra}reload: {{ poll_ms: 0 }}\n"),
    )
    .unwrap();
    let server =
        guardwire::server::start_from(Config::load(&s.config).unwrap(), Some(s.config.clone()))
            .await
            .unwrap();

    let rt = server.gateway.runtime();
    assert_eq!(
        rt.policies.len(),
        3,
        "three distinct pack lists, three compiled policies"
    );
    let top = std::sync::Arc::clone(&rt.routes.last().unwrap().policy);
    let policy_of = |rt: &guardwire::proxy::Runtime, k: usize| {
        std::sync::Arc::clone(rt.keys[k].policy.as_ref().unwrap())
    };
    for r in rt.routes.iter().filter(|r| r.name.starts_with('r')) {
        assert!(std::sync::Arc::ptr_eq(&r.policy, &top), "route {}", r.name);
    }
    for k in (0..500).step_by(3) {
        assert!(std::sync::Arc::ptr_eq(&policy_of(&rt, k), &top), "key {k}");
        assert!(std::sync::Arc::ptr_eq(
            &policy_of(&rt, k + 1),
            &policy_of(&rt, 1)
        ));
        if k + 2 < 500 {
            assert!(std::sync::Arc::ptr_eq(
                &policy_of(&rt, k + 2),
                &policy_of(&rt, 2)
            ));
        }
    }
    assert!(!std::sync::Arc::ptr_eq(&policy_of(&rt, 1), &top));
    assert_eq!(policy_of(&rt, 2).validators().len(), 2);

    // Change the other pack: lists naming it are recompiled, the top-level one is kept as is.
    std::fs::write(&other, pack("gamma")).unwrap();
    server.gateway.reload().await.unwrap();
    let after = server.gateway.runtime();
    assert_eq!(after.policies.len(), 3);
    assert!(std::sync::Arc::ptr_eq(
        &after.routes.last().unwrap().policy,
        &top
    ));
    assert!(std::sync::Arc::ptr_eq(&policy_of(&after, 0), &top));
    assert!(!std::sync::Arc::ptr_eq(
        &policy_of(&after, 1),
        &policy_of(&rt, 1)
    ));
    assert!(!std::sync::Arc::ptr_eq(
        &policy_of(&after, 2),
        &policy_of(&rt, 2)
    ));
    assert!(std::sync::Arc::ptr_eq(
        &policy_of(&after, 1),
        &policy_of(&after, 4)
    ));
    // The recompiled policy enforces the new contents; the reused one does not ban the word.
    for (key, banned) in [("Bearer secret-1", true), ("Bearer secret-0", false)] {
        let a = send(
            server.addr,
            "POST",
            "/r0/v1/chat/completions",
            STREAM_REQUEST,
            &[("authorization", key)],
        )
        .await;
        if banned {
            assert!(
                a.text().contains("\"type\":\"guardrail_violation\""),
                "{}",
                a.text()
            );
            assert!(!a.text().contains("say gamma"), "{}", a.text());
        } else {
            assert_eq!(a.body, openai_chat_stream(&["say gamma"]));
        }
    }
}
