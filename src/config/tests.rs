//! Config loading: keys, conversions, load-time checks and their messages.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn issue_keys_parse() {
    let c = Config::from_yaml(
        r#"
listen: "127.0.0.1:8080"
upstreams:
  openai: "https://api.openai.com"
  anthropic: "https://api.anthropic.com"
  gemini: "https://generativelanguage.googleapis.com"
packs: ["config/packs/default.yaml"]
"#,
    )
    .unwrap();
    assert_eq!(
        c.upstreams.openai.as_ref().map(ToString::to_string),
        Some("https://api.openai.com".to_owned())
    );
    assert_eq!(c.packs.len(), 1);
}

#[test]
fn names_and_base_urls_convert_once() {
    for id in ProtocolId::ALL {
        assert_eq!(ProtocolId::from_name(id.as_str()), Some(id));
    }
    for h in AuthHeader::ALL {
        assert_eq!(AuthHeader::from_name(h.as_str()), Some(h));
    }
    let c = Config::from_yaml(
        "upstreams: { openai: \"http://vllm:80/v1/\" }\nroutes: [{name: az, protocol: openai_chat, path_prefix: /az/, upstream: \"https://h:443\", upstream_auth: api-key}]\n",
    )
    .unwrap();
    let openai = c.upstreams.get(Provider::OpenAi).unwrap();
    assert_eq!(
        (
            openai.tls,
            openai.authority.as_str(),
            openai.prefix.as_str()
        ),
        (false, "vllm", "/v1")
    );
    assert_eq!(openai.to_string(), "http://vllm/v1");
    let route = c.routes[0].checked.as_ref().unwrap();
    assert_eq!(route.protocol, ProtocolId::OpenAiChat);
    assert_eq!(route.upstream.to_string(), "https://h");
    assert_eq!(route.upstream_auth, Some(AuthHeader::ApiKey));
    let e = Config::from_yaml("routes: [{name: a, protocol: gemini, path_prefix: /a/, upstream: \"http://h\", upstream_auth: cookie}]\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("routes[0] (a): upstream_auth: `cookie` is not one of authorization, api-key, x-api-key, x-goog-api-key"), "{e}");
}

#[test]
fn an_empty_admin_token_is_refused() {
    let e = Config::from_yaml("admin: { token: \"\" }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("admin.token"), "{e}");
    assert!(Config::from_yaml("admin: { token: s3cret }\n").is_ok());
    assert!(Config::from_yaml("admin: {}\n").is_ok());
}

#[test]
fn durations_that_could_overflow_a_deadline_or_are_zero_are_refused() {
    for key in [
        "connect_ms",
        "response_headers_ms",
        "idle_ms",
        "client_header_ms",
        "client_body_ms",
        "client_idle_ms",
        "client_ping_ms",
        "client_send_ms",
        "total_ms",
    ] {
        for ms in [u64::MAX, MAX_DURATION_MS + 1] {
            let e = Config::from_yaml(&format!("timeouts: {{ {key}: {ms} }}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("timeouts.{key}")), "{e}");
            assert!(e.contains("one year"), "{e}");
        }
        let at_most = format!("timeouts: {{ {key}: {MAX_DURATION_MS} }}\n");
        assert!(Config::from_yaml(&at_most).is_ok(), "{key}");
        let zero = Config::from_yaml(&format!("timeouts: {{ {key}: 0 }}\n"));
        assert_eq!(zero.is_ok(), key == "client_ping_ms", "{key}: 0");
    }
    let e = Config::from_yaml(&format!("reload: {{ poll_ms: {} }}\n", u64::MAX))
        .unwrap_err()
        .to_string();
    assert!(e.contains("reload.poll_ms"), "{e}");
}

#[test]
fn unknown_keys_and_bad_urls_are_named() {
    let e = Config::from_yaml("limits: { max_body: 3 }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("limits") && e.contains("max_body"), "{e}");
    let e = Config::from_yaml("upstreams: { openai: 'ftp://x' }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("upstreams.openai"), "{e}");
}

#[test]
fn a_judges_api_key_is_never_printed() {
    std::env::set_var("GW_CONFIG_TEST_JUDGE_KEY", "sk-very-secret");
    let c = Config::from_yaml(
        "judges:\n  - {name: j, protocol: openai_chat, base_url: 'http://127.0.0.1:9', model: m, api_key_env: GW_CONFIG_TEST_JUDGE_KEY}\n",
    )
    .unwrap();
    let checked = c.judges[0].checked.as_ref().unwrap();
    assert_eq!(checked.api_key.as_deref(), Some("sk-very-secret"));
    let printed = format!("{c:?}");
    assert!(!printed.contains("sk-very-secret"), "{printed}");
    assert!(printed.contains("<redacted>"));
}

#[test]
fn stored_context_is_refuse_by_default_and_set_per_route() {
    let c = Config::from_yaml(
        "routes: [{name: a, protocol: openai_responses, path_prefix: /a/, upstream: \"http://h\", stored_context: pass}]\n",
    )
    .unwrap();
    assert_eq!(c.stored_context, StoredContext::Refuse);
    assert_eq!(c.routes[0].stored_context, Some(StoredContext::Pass));
    let c = Config::from_yaml("stored_context: pass\n").unwrap();
    assert_eq!(c.stored_context, StoredContext::Pass);
    for bad in [
        "stored_context: maybe\n",
        "routes: [{name: a, protocol: gemini, path_prefix: /a/, upstream: \"http://h\", stored_context: scan}]\n",
    ] {
        let e = Config::from_yaml(bad).unwrap_err().to_string();
        assert!(e.contains("stored_context"), "{e}");
    }
}
