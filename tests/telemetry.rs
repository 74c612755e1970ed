//! OpenTelemetry traces and the access log, from the real `guardwire` binary: what it exports
//! is received over OTLP/HTTP by a server in the test and decoded with the official
//! `opentelemetry-proto` types; the access log is read off its stdout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::binary::serve;
use common::mock_upstream::{
    openai_chat_stream, openai_chat_stream_with_usage, MockUpstream, RecordedRequest, Reply,
};
use common::proxy::{send, start_proxy, STREAM_REQUEST};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_guardwire");

/// The client's trace: W3C `traceparent` of a sampled span.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An attribute's value as text (strings as they are, numbers in decimal).
fn value(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match v.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        Value::DoubleValue(d) => Some(d.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// Every string anywhere in a span: name, attributes, events and their attributes.
fn texts(span: &Span) -> Vec<String> {
    let mut out = vec![span.name.clone()];
    let mut add = |attrs: &[KeyValue]| {
        for kv in attrs {
            out.push(kv.key.clone());
            out.extend(value(attrs, &kv.key));
        }
    };
    add(&span.attributes);
    for e in &span.events {
        add(&e.attributes);
    }
    out.extend(span.events.iter().map(|e| e.name.clone()));
    out
}

/// The spans of every export the receiver got, with their resource's `service.name`.
fn exported(receiver: &MockUpstream) -> Vec<(Option<String>, Span)> {
    let mut spans = Vec::new();
    for req in receiver.requests() {
        assert_eq!(req.path_and_query, "/otlp/v1/traces");
        assert_eq!(
            req.header("content-type"),
            Some("application/x-protobuf"),
            "OTLP/HTTP protobuf"
        );
        let export = ExportTraceServiceRequest::decode(req.body.as_ref()).unwrap();
        for rs in export.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| value(&r.attributes, "service.name"));
            for ss in rs.scope_spans {
                spans.extend(ss.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
    spans
}

const PACK: &str =
    "validators:\n  - id: fruit-ban\n    type: banned_words\n    params: { words: [forbidden] }\n";

#[tokio::test]
async fn each_request_is_one_trace_with_genai_attributes_phases_and_verdict_events() {
    // The provider: a clean answer, with usage when the request asks for it (the client does
    // not: guardwire does), or (when asked to) one the pack blocks.
    let upstream = MockUpstream::start(|req: &RecordedRequest| {
        if req.body_str().contains("tempt me") {
            Reply::sse(&openai_chat_stream(&["the forbidden ", "fruit"]))
        } else if req
            .body_str()
            .contains(r#""stream_options":{"include_usage":true}"#)
        {
            Reply::sse(&openai_chat_stream_with_usage(&["hello"], 5, 9))
        } else {
            Reply::sse(&openai_chat_stream(&["hello"]))
        }
    })
    .await;
    let receiver = MockUpstream::start(|_: &RecordedRequest| {
        Reply::chunks(200, Vec::new()).with_header("content-type", "application/x-protobuf")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack.yaml");
    std::fs::write(&pack, PACK).unwrap();
    let config = format!(
        "listen: \"127.0.0.1:0\"\nupstreams: {{ openai: \"{}\" }}\npacks: [{:?}]\n\
         log: {{ format: json, access: true }}\n\
         telemetry: {{ otlp_endpoint: \"{}/otlp\", service_name: gw-test }}\n\
         prices: {{ gpt-4o: {{ input_per_mtok: 2.5, output_per_mtok: 10 }} }}\n",
        upstream.base_url(),
        pack.to_str().unwrap(),
        receiver.base_url()
    );
    let (gw, _dir) = serve(&config).await;

    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let clean = send(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST.to_owned(),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-client-secret"),
            ("traceparent", traceparent.as_str()),
        ],
    )
    .await;
    assert_eq!(clean.status, 200);
    assert_eq!(clean.body, openai_chat_stream(&["hello"]), "no usage chunk");
    let tempting = STREAM_REQUEST.replace("\"hi\"", "\"tempt me\"");
    let blocked = send(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        tempting,
        &[("content-type", "application/json")],
    )
    .await;
    assert!(
        blocked.text().contains("content_blocked"),
        "{}",
        blocked.text()
    );
    let clean_id = clean.headers["x-request-id"].to_str().unwrap().to_owned();
    let blocked_id = blocked.headers["x-request-id"].to_str().unwrap().to_owned();
    let lines = gw.stop().await; // the shutdown flushes the batched spans

    let spans = exported(&receiver);
    assert!(spans
        .iter()
        .all(|(service, _)| service.as_deref() == Some("gw-test")));
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    let servers: Vec<&Span> = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Server as i32)
        .collect();
    assert_eq!(servers.len(), 2, "one server span per request: {spans:#?}");
    let by_id = |id: &str| {
        *servers
            .iter()
            .find(|s| value(&s.attributes, "guardwire.request_id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no span for request {id}: {servers:#?}"))
    };
    let (clean_span, blocked_span) = (by_id(&clean_id), by_id(&blocked_id));

    // The client's traceparent is the parent of guardwire's span; without one, a new trace.
    assert_eq!(hex(&clean_span.trace_id), CLIENT_TRACE);
    assert_eq!(hex(&clean_span.parent_span_id), CLIENT_SPAN);
    assert_ne!(hex(&blocked_span.trace_id), CLIENT_TRACE);
    assert!(blocked_span.parent_span_id.is_empty());

    // GenAI semantic conventions on the request span.
    for span in [clean_span, blocked_span] {
        assert_eq!(span.name, "chat gpt-4o");
        let a = &span.attributes;
        assert_eq!(value(a, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(value(a, "gen_ai.provider.name").as_deref(), Some("openai"));
        assert_eq!(value(a, "gen_ai.request.model").as_deref(), Some("gpt-4o"));
        assert_eq!(
            value(a, "http.response.status_code").as_deref(),
            Some("200")
        );
        assert_eq!(value(a, "guardwire.route").as_deref(), Some("openai_chat"));
    }
    let a = &clean_span.attributes;
    assert_eq!(value(a, "gen_ai.usage.input_tokens").as_deref(), Some("5"));
    assert_eq!(value(a, "gen_ai.usage.output_tokens").as_deref(), Some("9"));
    assert_eq!(value(a, "guardwire.outcome").as_deref(), Some("ok"));
    assert!(clean_span.events.is_empty(), "{:?}", clean_span.events);

    // The block is an event of the request span: validator, phase, mode — not the text.
    assert_eq!(
        value(&blocked_span.attributes, "guardwire.outcome").as_deref(),
        Some("blocked")
    );
    let [verdict] = blocked_span.events.as_slice() else {
        panic!("one verdict event: {:?}", blocked_span.events);
    };
    assert_eq!(verdict.name, "guardrail.verdict");
    assert_eq!(
        value(&verdict.attributes, "validator").as_deref(),
        Some("fruit-ban")
    );
    assert_eq!(
        value(&verdict.attributes, "phase").as_deref(),
        Some("stream")
    );
    assert_eq!(
        value(&verdict.attributes, "mode").as_deref(),
        Some("enforce")
    );
    for span in &spans {
        for text in texts(span) {
            assert!(!text.contains("forbidden"), "matched text exported: {text}");
            assert!(!text.contains("sk-client"), "a key exported: {text}");
        }
    }

    // Children of each request span: the upstream call and the guardrail phases (a stream
    // blocked mid-way never reaches AfterCall).
    let all_phases = [
        "POST",
        "guardrail.after_call",
        "guardrail.before_call",
        "guardrail.on_chunk",
    ];
    let cut_short = ["POST", "guardrail.before_call", "guardrail.on_chunk"];
    for (parent, expected) in [
        (clean_span, &all_phases[..]),
        (blocked_span, &cut_short[..]),
    ] {
        let children: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id)
            .collect();
        let mut names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, expected, "{children:#?}");
        assert!(children.iter().all(|c| c.trace_id == parent.trace_id));
        let upstream_span = children.iter().find(|c| c.name == "POST").unwrap();
        assert_eq!(upstream_span.kind, SpanKind::Client as i32);
        assert_eq!(
            value(&upstream_span.attributes, "http.response.status_code").as_deref(),
            Some("200")
        );
        // The upstream got guardwire's traceparent: same trace, the upstream span as parent.
        let sent = upstream
            .requests()
            .into_iter()
            .find(|r| {
                r.header("x-request-id")
                    == value(&parent.attributes, "guardwire.request_id").as_deref()
            })
            .unwrap();
        assert_eq!(
            sent.header("traceparent").unwrap(),
            format!(
                "00-{}-{}-01",
                hex(&parent.trace_id),
                hex(&upstream_span.span_id)
            )
        );
    }

    // The access log: one JSON line per request, with what happened and no bodies or keys.
    let access: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["log"] == "access")
        .collect();
    assert_eq!(access.len(), 2, "{lines:#?}");
    let line = |id: &str| access.iter().find(|v| v["request_id"] == id).unwrap();
    let ok = line(&clean_id);
    assert_eq!(ok["outcome"], "ok");
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["route"], "openai_chat");
    assert_eq!(ok["method"], "POST");
    assert_eq!(ok["path"], "/v1/chat/completions");
    assert_eq!(ok["model"], "gpt-4o");
    assert_eq!(ok["input_tokens"], 5);
    assert_eq!(ok["output_tokens"], 9);
    assert!(ok["duration_ms"].as_f64().unwrap() > 0.0);
    let no = line(&blocked_id);
    assert_eq!(no["outcome"], "blocked");
    assert_eq!(no["validator"], "fruit-ban");
    assert_eq!(no["phase"], "stream");
    // Blocked before its usage came: the tokens are guardwire's estimate of what arrived (the
    // model has a price, so its spend needs them).
    assert!(no["output_tokens"].as_u64().is_some(), "{no}");
    assert_eq!(
        value(&blocked_span.attributes, "guardwire.usage.source").as_deref(),
        Some("estimated")
    );
    assert_eq!(
        value(&clean_span.attributes, "guardwire.usage.source"),
        None
    );
    for l in &lines {
        assert!(!l.contains("sk-client"), "a key in the log: {l}");
        assert!(!l.contains("tempt me"), "a body in the log: {l}");
    }
}

#[tokio::test]
async fn without_telemetry_the_clients_traceparent_goes_upstream_unchanged() {
    let upstream =
        MockUpstream::start(|_: &RecordedRequest| Reply::sse(&openai_chat_stream(&["hi"]))).await;
    let proxy = start_proxy(&upstream.base_url(), "validators: []\n", "").await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let a = send(
        proxy.addr(),
        "POST",
        "/v1/chat/completions",
        STREAM_REQUEST.to_owned(),
        &[
            ("content-type", "application/json"),
            ("traceparent", traceparent.as_str()),
        ],
    )
    .await;
    assert_eq!(a.status, 200);
    let sent = &upstream.requests()[0];
    assert_eq!(sent.header("traceparent"), Some(traceparent.as_str()));
}

#[test]
fn telemetry_settings_are_checked_at_load() {
    let dir = tempfile::tempdir().unwrap();
    for (telemetry, expected) in [
        (
            "{ otlp_endpoint: \"ftp://collector\" }",
            "telemetry.otlp_endpoint: `ftp://collector` must start with http:// or https://",
        ),
        (
            "{ otlp_endpoint: \"http://127.0.0.1:4318\", sample_ratio: 1.5 }",
            "telemetry.sample_ratio: 1.5 is not between 0 and 1",
        ),
        (
            "{ otlp_endpoint: \"http://127.0.0.1:4318\", export_timeout_ms: 0 }",
            "telemetry.export_timeout_ms: must be more than 0",
        ),
        ("{ otlp_endpont: \"x\" }", "otlp_endpont"),
    ] {
        let path = dir.path().join("g.yaml");
        std::fs::write(&path, format!("telemetry: {telemetry}\n")).unwrap();
        let out = Command::new(BIN)
            .args(["check", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{telemetry} was accepted");
        assert!(text.contains(expected), "{telemetry}: {text}");
    }
}

/// An MCP `tools/call` is an `execute_tool` span naming the tool (`gen_ai.tool.name`), its
/// name "execute_tool {tool}"; an A2A message an `invoke_agent` span (provider `a2a`).
#[tokio::test]
async fn an_mcp_tool_call_is_an_execute_tool_span_naming_the_tool() {
    let upstream = MockUpstream::start(|req: &RecordedRequest| {
        if req.path_and_query.starts_with("/mcp") {
            Reply::json(
                200,
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"5"}],"isError":false}}"#,
            )
        } else {
            Reply::json(
                200,
                r#"{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"r","parts":[{"text":"hi"}]}}}"#,
            )
        }
    })
    .await;
    let receiver = MockUpstream::start(|_: &RecordedRequest| {
        Reply::chunks(200, Vec::new()).with_header("content-type", "application/x-protobuf")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack.yaml");
    std::fs::write(&pack, PACK).unwrap();
    let config = format!(
        "listen: \"127.0.0.1:0\"\npacks: [{:?}]\nlog: {{ format: json }}\n\
         telemetry: {{ otlp_endpoint: \"{}/otlp\", service_name: gw-test }}\n\
         routes:\n  - name: tools\n    protocol: mcp\n    path_prefix: /mcp\n    upstream: \"{}/mcp\"\n\
         \x20 - name: agent\n    protocol: a2a\n    path_prefix: /agent\n    strip_prefix: /agent\n    upstream: \"{}\"\n",
        pack.to_str().unwrap(),
        receiver.base_url(),
        upstream.base_url(),
        upstream.base_url(),
    );
    let (gw, _dir) = serve(&config).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}"#;
    let a = send(
        gw.addr,
        "POST",
        "/mcp",
        call.to_owned(),
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.text().contains("\"5\""), "{}", a.text());
    let message = r#"{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;
    let a = send(
        gw.addr,
        "POST",
        "/agent/a2a",
        message.to_owned(),
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let _ = gw.stop().await;
    let spans: Vec<Span> = exported(&receiver).into_iter().map(|(_, s)| s).collect();
    let server = |route: &str| {
        spans
            .iter()
            .find(|s| {
                s.kind == SpanKind::Server as i32
                    && value(&s.attributes, "guardwire.route").as_deref() == Some(route)
            })
            .unwrap_or_else(|| panic!("no server span of route {route}: {spans:#?}"))
    };
    let tool = server("tools");
    let a = &tool.attributes;
    assert_eq!(
        value(a, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(value(a, "gen_ai.tool.name").as_deref(), Some("add"));
    assert_eq!(tool.name, "execute_tool add");
    let agent = server("agent");
    let a = &agent.attributes;
    assert_eq!(
        value(a, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(value(a, "gen_ai.provider.name").as_deref(), Some("a2a"));
}
