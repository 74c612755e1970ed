//! The serde-free reading of Responses events (`skim_event.rs`) against serde_json and the
//! fallback: on any event, what the decoder delivers and what the fallback would find are what
//! serde_json's decode and a full fallback walk give; on events as OpenAI sends them, the fast
//! path is taken and promises the fallback nothing is left.
#![allow(clippy::unwrap_used)]

use super::super::{decode_event, ResponsesStream, EVENT_STRUCTURAL as STRUCTURAL};
use super::read;
use crate::delta::Delta;
use crate::protocol::frame_template_tests::{extras, finding, object, plain, value};
use crate::protocol::openai_chat::skim_tests::{Gen, Rng};
use crate::protocol::{FrameKind, StreamDecoder};

type Outcome = Result<
    (
        FrameKind,
        Vec<String>,
        Vec<(usize, usize)>,
        Vec<std::ops::Range<usize>>,
    ),
    (),
>;

/// The decoder as it runs (a fresh stream: no template yet).
fn decoder(data: &[u8]) -> Outcome {
    let mut d = ResponsesStream::default();
    let mut out = Vec::new();
    let kind = d.decode(None, data, &mut out).map_err(|_| ())?;
    let (k, deltas, found) = outcome(kind, &out, data, d.fully_read());
    // What the secret and PII patterns read: the identifiers the decoder listed when it
    // promised the fallback nothing, else the fallback's own.
    let ids = match d.fully_read() {
        true => d.identifiers().to_vec(),
        false => fallback_identifiers(data),
    };
    Ok((k, deltas, found, ids))
}

/// serde_json, and the fallback walking the whole event.
fn reference(data: &[u8]) -> Outcome {
    let mut out = Vec::new();
    let kind = decode_event(data, &mut out, &mut None).map_err(|_| ())?;
    let (k, deltas, found) = outcome(kind, &out, data, false);
    Ok((k, deltas, found, fallback_identifiers(data)))
}

/// The identifier-shaped values the fallback hands to the secret and PII patterns.
fn fallback_identifiers(data: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ids = Vec::new();
    let walked = crate::protocol::residual::residual_and_identifiers(
        data,
        &STRUCTURAL,
        &[],
        &mut Vec::new(),
        &mut ids,
    );
    if walked.is_err() {
        // Unwalkable: a marker no listing gives.
        ids.clear();
        ids.push(usize::MAX..usize::MAX);
    }
    ids
}

fn outcome(
    kind: FrameKind,
    out: &[Delta<'_>],
    data: &[u8],
    fully_read: bool,
) -> (FrameKind, Vec<String>, Vec<(usize, usize)>) {
    (
        kind,
        out.iter().map(|d| format!("{d:?}")).collect(),
        finding(data, out, fully_read, &STRUCTURAL),
    )
}

/// A text: mostly plain, else escaped, empty, `null` or (rough) anything.
fn text(g: &mut Gen, rough: bool) -> String {
    match g.rng.below(if rough { 10 } else { 8 }) {
        0..=4 => plain(g),
        5 => value(g, Gen::string),
        6 => "\"\"".into(),
        7 => "null".into(),
        _ => value(g, |g| g.any(1)),
    }
}

/// One of `kinds`, or (rough) anything.
fn kind_of(g: &mut Gen, kinds: &[&str], rough: bool) -> String {
    if rough && g.rng.chance(10) {
        return value(g, |g| g.any(1));
    }
    format!("\"{}\"", kinds[g.rng.below(kinds.len() as u64) as usize])
}

/// Member `k` with the value `v` renders, seven times in ten.
fn maybe(
    g: &mut Gen,
    members: &mut Vec<(&'static str, String)>,
    k: &'static str,
    v: impl FnOnce(&mut Gen) -> String,
) {
    if g.rng.chance(70) {
        let v = v(g);
        members.push((k, v));
    }
}

fn content(g: &mut Gen, rough: bool) -> String {
    let mut m = vec![];
    let kind = kind_of(g, &["output_text", "refusal", "reasoning_text"], rough);
    maybe(g, &mut m, "type", |_| kind);
    let t = text(g, rough);
    maybe(g, &mut m, "text", |_| t);
    if g.rng.chance(20) {
        let t = text(g, rough);
        m.push(("refusal", t));
    }
    let a = if rough && g.rng.chance(30) {
        value(g, |g| g.any(0))
    } else {
        "[]".into()
    };
    maybe(g, &mut m, "annotations", |_| a);
    if rough {
        extras(g, &mut m);
    }
    object(g, m)
}

fn list(g: &mut Gen, rough: bool, each: fn(&mut Gen, bool) -> String) -> String {
    let n = g.rng.below(3);
    let items: Vec<String> = (0..n).map(|_| each(g, rough)).collect();
    format!("[{}]", items.join(","))
}

fn item(g: &mut Gen, rough: bool) -> String {
    let kinds = [
        "message",
        "function_call",
        "custom_tool_call",
        "mcp_call",
        "code_interpreter_call",
        "reasoning",
        "web_search_call",
    ];
    let mut m = vec![];
    let kind = kind_of(g, &kinds, rough);
    maybe(g, &mut m, "type", |_| kind);
    maybe(g, &mut m, "id", |g| value(g, Gen::string));
    maybe(g, &mut m, "status", |_| "\"completed\"".into());
    maybe(g, &mut m, "role", |_| "\"assistant\"".into());
    let c = list(g, rough, content);
    maybe(g, &mut m, "content", |_| c);
    for k in ["name", "arguments", "input", "code"] {
        if g.rng.chance(25) {
            let t = text(g, rough);
            m.push((k, t));
        }
    }
    if g.rng.chance(25) {
        m.push(("call_id", value(g, Gen::string)));
    }
    if g.rng.chance(25) {
        let s = list(g, rough, content);
        m.push(("summary", s));
    }
    if rough {
        extras(g, &mut m);
    }
    object(g, m)
}

fn usage(g: &mut Gen, rough: bool) -> String {
    let mut m = vec![];
    maybe(g, &mut m, "input_tokens", |g| g.rng.below(100).to_string());
    maybe(g, &mut m, "output_tokens", |g| g.rng.below(100).to_string());
    maybe(g, &mut m, "total_tokens", |_| "200".into());
    maybe(g, &mut m, "output_tokens_details", |_| {
        r#"{"reasoning_tokens":0}"#.into()
    });
    if rough {
        extras(g, &mut m);
    }
    object(g, m)
}

fn response(g: &mut Gen, rough: bool) -> String {
    let mut m = vec![];
    maybe(g, &mut m, "id", |_| "\"resp_1\"".into());
    maybe(g, &mut m, "object", |_| "\"response\"".into());
    let status = kind_of(g, &["completed", "incomplete", "in_progress"], rough);
    maybe(g, &mut m, "status", |_| status);
    maybe(g, &mut m, "model", |_| "\"gpt-4o-mini\"".into());
    let o = list(g, rough, item);
    maybe(g, &mut m, "output", |_| o);
    let u = if g.rng.chance(20) {
        "null".into()
    } else {
        usage(g, rough)
    };
    maybe(g, &mut m, "usage", |_| u);
    // Exempt trees: the request's settings echoed.
    maybe(g, &mut m, "text", |_| {
        r#"{"format":{"type":"text"}}"#.into()
    });
    maybe(g, &mut m, "instructions", |g| value(g, Gen::string));
    maybe(g, &mut m, "tools", |_| "[]".into());
    maybe(g, &mut m, "error", |_| "null".into());
    if rough {
        extras(g, &mut m);
    }
    object(g, m)
}

/// A Responses event of any type, members in random order, unknown members mixed in (rough:
/// values of any type anywhere).
fn event(g: &mut Gen, rough: bool) -> String {
    let kinds = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.completed",
        "response.incomplete",
        "response.created",
        "response.output_text.delta",
        "response.refusal.done",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.done",
        "response.code_interpreter_call_code.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_text.done",
        "error",
        "response.new_kind",
    ];
    let mut m = vec![];
    let kind = kind_of(g, &kinds, rough);
    if !rough || g.rng.chance(95) {
        m.push(("type", kind));
    }
    maybe(g, &mut m, "sequence_number", |g| {
        g.rng.below(100).to_string()
    });
    maybe(g, &mut m, "item_id", |g| value(g, Gen::string));
    let index = if rough && g.rng.chance(10) {
        value(g, Gen::number)
    } else {
        g.rng.below(3).to_string()
    };
    maybe(g, &mut m, "output_index", |_| index);
    for k in ["text", "delta", "refusal", "arguments", "input", "code"] {
        if g.rng.chance(20) {
            let t = text(g, rough);
            m.push((k, t));
        }
    }
    for (k, f) in [
        ("part", content as fn(&mut Gen, bool) -> String),
        ("item", item),
        ("response", response),
    ] {
        if g.rng.chance(25) {
            let v = if g.rng.chance(10) {
                "null".into()
            } else {
                f(g, rough)
            };
            m.push((k, v));
        }
    }
    maybe(g, &mut m, "logprobs", |_| "[]".into());
    if rough {
        extras(g, &mut m);
        // A key spelled with an escape (serde_json unescapes keys).
        if g.rng.chance(5) {
            let t = text(g, rough);
            m.push(("\\u0074ext", t));
        }
        // A known member twice.
        if g.rng.chance(5) && !m.is_empty() {
            let dup = m[g.rng.below(m.len() as u64) as usize].clone();
            m.push(dup);
        }
    }
    object(g, m)
}

fn gen(seed: u64) -> Gen {
    Gen {
        rng: Rng(seed),
        weird: false,
        out: String::new(),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    #[test]
    fn the_fast_path_reads_what_serde_and_the_fallback_read(
        seed in proptest::prelude::any::<u64>(),
        rough in proptest::prelude::any::<bool>(),
        corrupt in 0..5u8,
        at in proptest::prelude::any::<usize>(),
        byte in proptest::prelude::any::<u8>(),
    ) {
        let mut g = gen(seed);
        let mut data = event(&mut g, rough).into_bytes();
        let i = at % data.len().max(1);
        match corrupt {
            0 if !data.is_empty() => data[i] = byte,
            1 => data.insert(i, byte),
            2 => data.truncate(i),
            _ => {}
        }
        let (new, old) = (decoder(&data), reference(&data));
        proptest::prop_assert_eq!(&new, &old, "{}", String::from_utf8_lossy(&data));
    }
}

/// Every well-formed generated event (no corruption, values of the types serde expects) is
/// read by the fast path: the property above tests it, not serde against itself.
#[test]
fn well_formed_events_take_the_fast_path() {
    let mut promised = 0;
    for seed in 0..2000 {
        let data = event(&mut gen(seed), false);
        let mut out = Vec::new();
        let read = read(data.as_bytes(), &mut out, &mut Vec::new(), &mut None);
        assert!(read.is_some(), "not read by the fast path: {data}");
        promised += usize::from(read.is_some_and(|(_, fully_read)| fully_read));
    }
    assert!(
        promised > 100,
        "{promised} of 2000 promised the fallback nothing"
    );
}

/// The four events that close an answer, as OpenAI sends them: read without serde, and the
/// fallback has nothing left to read.
#[test]
fn closing_events_skip_serde_and_the_fallback() {
    let part = r#"{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello world"}"#;
    let item = format!(
        r#"{{"id":"msg_1","type":"message","status":"completed","content":[{part}],"role":"assistant"}}"#
    );
    let events = [
        (
            r#"{"type":"response.output_text.done","sequence_number":44,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello world","logprobs":[]}"#.to_owned(),
            FrameKind::Data,
        ),
        (
            format!(r#"{{"type":"response.content_part.done","sequence_number":45,"item_id":"msg_1","output_index":0,"content_index":0,"part":{part}}}"#),
            FrameKind::Data,
        ),
        (
            format!(r#"{{"type":"response.output_item.done","sequence_number":46,"output_index":0,"item":{item}}}"#),
            FrameKind::Data,
        ),
        (
            format!(
                r#"{{"type":"response.completed","sequence_number":47,"response":{{"id":"resp_1","object":"response","created_at":1741476542,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":"Be brief.","max_output_tokens":null,"model":"gpt-4o-mini-2024-07-18","output":[{item}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{{"effort":null,"summary":null}},"service_tier":"default","store":true,"temperature":1.0,"text":{{"format":{{"type":"text"}},"verbosity":"medium"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{{"input_tokens":36,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":2,"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":38}},"user":null,"metadata":{{}}}}}}"#
            ),
            FrameKind::Terminal,
        ),
    ];
    for (data, kind) in &events {
        let mut out = Vec::new();
        assert_eq!(
            read(data.as_bytes(), &mut out, &mut Vec::new(), &mut None),
            Some((*kind, true)),
            "{data}"
        );
        assert!(
            out.iter()
                .any(|d| matches!(d, Delta::Repeat { text, .. } if text == "Hello world")),
            "{data}: {out:?}"
        );
        assert_eq!(
            decoder(data.as_bytes()),
            reference(data.as_bytes()),
            "{data}"
        );
    }
    // A text with escapes is delivered by value: the fallback reads the event as before.
    let escaped = r#"{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"text":"Hello\nworld"}"#;
    let mut out = Vec::new();
    assert_eq!(
        read(escaped.as_bytes(), &mut out, &mut Vec::new(), &mut None),
        Some((FrameKind::Data, false))
    );
    // An unknown member with a string: the fallback reads it.
    let unknown = r#"{"type":"response.output_text.done","output_index":0,"text":"Hello world","note":"psst"}"#;
    assert_eq!(
        read(
            unknown.as_bytes(),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut None
        ),
        Some((FrameKind::Data, false))
    );
    assert_eq!(decoder(unknown.as_bytes()), reference(unknown.as_bytes()));
    // A text read but not delivered (a part in an event that repeats none): read as before.
    let undelivered = r#"{"type":"response.output_text.done","text":"a","part":{"text":"b"}}"#;
    assert_eq!(
        read(
            undelivered.as_bytes(),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut None
        ),
        Some((FrameKind::Data, false))
    );
}

/// The fast path applies the protocol's exempt trees at the top and under `response` only:
/// it must be told if `STRUCTURAL` ever names a deeper path.
#[test]
fn exempt_trees_are_at_the_top_or_under_response() {
    for (path, key) in STRUCTURAL.nested {
        assert!(
            path.is_empty() || *path == ["response"],
            "{path:?} / {key}: teach skim_event.rs this path"
        );
    }
}
