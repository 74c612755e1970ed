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
        c.upstreams.by_key("openai").map(ToString::to_string),
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
    let openai = c
        .upstreams
        .get(crate::protocol::by_id(ProtocolId::OpenAiChat).provider())
        .unwrap();
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
fn upstreams_keys_are_the_registered_providers() {
    // Any other key is refused, named with the known ones (and a likely one).
    let e = Config::from_yaml("upstreams: { openia: 'http://x' }\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams: unknown key `openia`")
            && e.contains("did you mean `openai`?")
            && e.contains("(known here: openai, anthropic, gemini)"),
        "{e}"
    );
    let e = Config::from_yaml("upstreams: { mistral: 'http://x' }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown key `mistral`"), "{e}");
    let e = Config::from_yaml("upstreams: { gemini: 3 }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("upstreams.gemini"), "{e}");
    let e = Config::from_yaml("upstreams: 'http://x'\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("upstreams"), "{e}");
    // A null value is an omitted provider, as an `Option` field's.
    let c = Config::from_yaml("upstreams: { anthropic: ~, gemini: 'http://g:1' }\n").unwrap();
    assert!(c.upstreams.by_key("anthropic").is_none());
    assert_eq!(
        c.upstreams.by_key("gemini").unwrap().to_string(),
        "http://g:1"
    );
    // Each key reaches its providers' protocols; A2A and MCP have none.
    for id in ProtocolId::ALL {
        let provider = crate::protocol::by_id(id).provider();
        let got = c.upstreams.get(provider).map(ToString::to_string);
        let want = (id == ProtocolId::Gemini).then(|| "http://g:1".to_owned());
        assert_eq!(got, want, "{}", id.as_str());
    }
}

#[test]
fn upstreams_print_as_the_struct_they_were() {
    // The config hash reads the config's Debug: it stays what a struct with one optional field
    // per provider printed.
    #[derive(Debug)]
    #[allow(dead_code)]
    struct Upstreams {
        openai: Option<BaseUrl>,
        anthropic: Option<BaseUrl>,
        gemini: Option<BaseUrl>,
    }
    let c =
        Config::from_yaml("upstreams: { gemini: 'https://g', openai: 'http://o:8/v1' }\n").unwrap();
    let was = Upstreams {
        openai: c.upstreams.by_key("openai").cloned(),
        anthropic: None,
        gemini: c.upstreams.by_key("gemini").cloned(),
    };
    assert_eq!(format!("{:?}", c.upstreams), format!("{was:?}"));
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

#[test]
fn limits_in_total_are_validated_naming_the_key() {
    let c = Config::from_yaml("keys: [{id: a, key: k, max_concurrent_requests: 3}]\n").unwrap();
    assert_eq!(c.keys[0].max_concurrent_requests, Some(3));
    assert_eq!(c.limits.max_connections, 20_000);
    assert_eq!(c.limits.max_h2_streams, 100);
    assert_eq!(c.limits.client_send_buffer_bytes, 0);
    assert_eq!(
        c.limits.client_notsent_lowat_bytes,
        if cfg!(target_os = "linux") { 16384 } else { 0 }
    );
    assert_eq!(c.limits.max_buffered_request_bytes, 256 << 20);
    assert_eq!(c.limits.buffered_request_bytes_per_key(), 64 << 20);
    assert_eq!(c.limits.max_buffered_request_bytes_per_client_address, 0);
    let c = Config::from_yaml(
        "limits: { max_request_bytes: 1000, max_buffered_request_bytes: 2000 }\n",
    )
    .unwrap();
    assert_eq!(
        c.limits.buffered_request_bytes_per_key(),
        1000,
        "never below one body"
    );
    assert_eq!(c.limits.upstream_h2_stream_window_bytes, 256 << 10);
    assert_eq!(c.limits.upstream_h2_streams_per_connection, 100);
    assert_eq!(c.evals.max_queue_bytes, 64 << 20);
    let c = Config::from_yaml(
        "limits: { upstream_h2_stream_window_bytes: 2097152, upstream_h2_streams_per_connection: 1000 }\n",
    )
    .unwrap();
    assert_eq!(c.limits.upstream_h2_stream_window_bytes, 2 << 20);
    assert_eq!(c.limits.upstream_read_buffer_bytes, 64 << 10);
    assert_eq!(c.limits.upstream_receive_buffer_bytes, 0);
    let c = Config::from_yaml(
        "limits: { upstream_read_buffer_bytes: 8192, upstream_receive_buffer_bytes: 4096 }\n",
    )
    .unwrap();
    assert_eq!(c.limits.upstream_read_buffer_bytes, 8192);
    assert_eq!(c.limits.upstream_receive_buffer_bytes, 4096);
    for (yaml, key) in [
        ("limits: { max_connections: 0 }", "limits.max_connections"),
        ("limits: { max_h2_streams: 0 }", "limits.max_h2_streams"),
        (
            "limits: { max_request_bytes: 2000, max_buffered_request_bytes: 1000 }",
            "limits.max_buffered_request_bytes",
        ),
        (
            "limits: { max_request_bytes: 2000, max_buffered_request_bytes_per_key: 1000 }",
            "limits.max_buffered_request_bytes_per_key",
        ),
        (
            "limits: { max_request_bytes: 1000, max_buffered_request_bytes: 4000, max_buffered_request_bytes_per_client_address: 5000 }",
            "limits.max_buffered_request_bytes_per_client_address",
        ),
        ("limits: { max_h2_streams: -1 }", "max_h2_streams"),
        (
            "limits: { client_send_buffer_bytes: 100 }",
            "limits.client_send_buffer_bytes",
        ),
        (
            "limits: { client_send_buffer_bytes: 2147483648 }",
            "limits.client_send_buffer_bytes",
        ),
        (
            "limits: { client_notsent_lowat_bytes: 100 }",
            "limits.client_notsent_lowat_bytes",
        ),
        (
            "limits: { client_notsent_lowat_bytes: 2147483648 }",
            "limits.client_notsent_lowat_bytes",
        ),
        (
            "limits: { client_notsent_lowat_bytes: -1 }",
            "client_notsent_lowat_bytes",
        ),
        (
            "limits: { upstream_h2_stream_window_bytes: 65534 }",
            "limits.upstream_h2_stream_window_bytes",
        ),
        (
            "limits: { upstream_h2_stream_window_bytes: 2097153 }",
            "limits.upstream_h2_stream_window_bytes",
        ),
        (
            "limits: { upstream_h2_stream_window_bytes: 4294967296 }",
            "upstream_h2_stream_window_bytes",
        ),
        (
            "limits: { upstream_h2_streams_per_connection: 0 }",
            "limits.upstream_h2_streams_per_connection",
        ),
        (
            "limits: { upstream_h2_streams_per_connection: 1001 }",
            "limits.upstream_h2_streams_per_connection",
        ),
        (
            "limits: { upstream_read_buffer_bytes: 8191 }",
            "limits.upstream_read_buffer_bytes",
        ),
        (
            "limits: { upstream_read_buffer_bytes: 2147483648 }",
            "limits.upstream_read_buffer_bytes",
        ),
        (
            "limits: { upstream_receive_buffer_bytes: 100 }",
            "limits.upstream_receive_buffer_bytes",
        ),
        (
            "limits: { upstream_receive_buffer_bytes: 2147483648 }",
            "limits.upstream_receive_buffer_bytes",
        ),
        (
            "limits: { upstream_receive_buffer_bytes: -1 }",
            "upstream_receive_buffer_bytes",
        ),
        ("evals: { max_queue_bytes: 0 }", "max_queue_bytes"),
        (
            "keys: [{id: a, key: k, max_concurrent_requests: 0}]",
            "keys[0] (a): max_concurrent_requests",
        ),
    ] {
        let e = Config::from_yaml(&format!("{yaml}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{yaml}: {e}");
    }
}

#[test]
fn forward_headers_are_header_names_never_hop_by_hop() {
    let c = Config::from_yaml(
        "forward_headers: [X-Tenant, x-forwarded-for]\nroutes: [{name: a, protocol: gemini, path_prefix: /a/, upstream: \"http://h\", forward_headers: [OpenAI-Organization]}]\n",
    )
    .unwrap();
    let names: Vec<&str> = c.forward_headers.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(names, ["x-tenant", "x-forwarded-for"]);
    let route = c.routes[0].forward_headers.as_ref().unwrap();
    assert_eq!(route[0].0.as_str(), "openai-organization");
    for (yaml, key) in [
        ("forward_headers: [Connection]", "forward_headers"),
        ("forward_headers: [x-a, host]", "forward_headers"),
        ("forward_headers: [\"bad name\"]", "forward_headers"),
        (
            "routes: [{name: a, protocol: gemini, path_prefix: /a/, upstream: \"http://h\", forward_headers: [transfer-encoding]}]",
            "routes.0.forward_headers",
        ),
    ] {
        let e = Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.starts_with(key), "{yaml}: {e}");
    }
    // From a file: the file is named too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.yaml");
    std::fs::write(&path, "forward_headers: [keep-alive]\n").unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("g.yaml") && e.contains("`keep-alive` cannot be forwarded"),
        "{e}"
    );
    // Checks past parsing name the file too.
    std::fs::write(&path, "limits: { client_notsent_lowat_bytes: 100 }\n").unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.starts_with("limits.client_notsent_lowat_bytes: ") && e.contains("g.yaml"),
        "{e}"
    );
}

#[test]
fn the_hashed_config_holds_digests_of_its_secrets_not_the_secrets() {
    let yaml = |token: &str| {
        format!(
            "listen: \"127.0.0.1:8080\"\npacks: [\"config/packs/default.yaml\"]\n\
             admin: {{token: {token}}}\nkeys: [{{id: a, key: gw-inline-key-1}}]\n\
             exec: {{h: {{command: x, env: [\"API_TOKEN=exec-secret-2\", PATH]}}}}\n"
        )
    };
    let c = Config::from_yaml(&yaml("admin-secret-3")).unwrap();
    let plain = format!("{c:?}");
    // The config's own Debug shows them (it is never logged); the hashed form must not.
    assert!(plain.contains("admin-secret-3"), "{plain}");
    let hashed = format!("{:?}", c.with_secrets_digested());
    for secret in ["gw-inline-key-1", "exec-secret-2", "admin-secret-3"] {
        assert!(!hashed.contains(secret), "{secret}: {hashed}");
    }
    assert!(hashed.contains("API_TOKEN=sha256:"), "{hashed}");
    assert!(hashed.contains("\"PATH\""), "{hashed}");
    // A changed secret still changes what is hashed.
    let other = Config::from_yaml(&yaml("admin-secret-4")).unwrap();
    assert_ne!(hashed, format!("{:?}", other.with_secrets_digested()));
    assert_eq!(
        hashed,
        format!("{:?}", c.clone().with_secrets_digested()),
        "the same config hashes the same"
    );
}

#[test]
fn public_url_is_for_a2a_routes_and_must_be_a_url() {
    let route = |protocol: &str, url: &str| {
        format!("routes: [{{name: r, protocol: {protocol}, path_prefix: /r, upstream: \"http://h:1\", public_url: \"{url}\"}}]\n")
    };
    assert!(Config::from_yaml(&route("a2a", "https://gw.example.com/r")).is_ok());
    let e = Config::from_yaml(&route("openai_chat", "https://gw.example.com/r"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("routes[0] (r): public_url"), "{e}");
    for bad in [
        "gw.example.com/r",
        "https://gw.example.com/r?x=1",
        "ftp://gw/r",
    ] {
        let e = Config::from_yaml(&route("a2a", bad))
            .unwrap_err()
            .to_string();
        assert!(e.contains("public_url"), "{bad}: {e}");
    }
}

#[test]
fn server_runtime_and_workers_parse_and_are_checked() {
    let c = Config::from_yaml("").unwrap();
    assert_eq!(c.server.runtime, RuntimeShape::WorkStealing);
    assert!(c.server.worker_count() >= 1);
    let c = Config::from_yaml("server: { runtime: per_core, workers: 3 }").unwrap();
    assert_eq!(c.server.runtime, RuntimeShape::PerCore);
    assert_eq!(c.server.worker_count(), 3);
    let e = Config::from_yaml("server: { runtime: per_thread }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("per_thread") && e.contains("per_core"), "{e}");
    let e = Config::from_yaml("server: { workers: 1025 }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("server.workers"), "{e}");
}
