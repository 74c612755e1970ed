//! The fail-closed invariant of the frame checker, as a property: a marker word planted in any
//! string of a frame — known fields, unknown fields, unknown events, JSON inside strings, with
//! escapes — is found, unless it sits under one of the protocol's structural keys.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::policy::Policy;
use crate::protocol::{self, Protocol};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

const MARKER: &str = "zqxjv";

fn policy() -> Arc<Policy> {
    let doc: Value = serde_norway::from_str(
        "validators:\n  - type: banned_words\n    params: { words: [zqxjv] }\n",
    )
    .unwrap();
    let defs = crate::policy::pack::parse_pack("t.yaml", &doc, &Default::default()).unwrap();
    Arc::new(Policy::compile_packs(vec![defs]).unwrap())
}

/// A stream of each protocol that its decoder accepts: (event name, data) per frame.
fn base_frames(name: &str) -> Vec<(Option<&'static str>, Value)> {
    match name {
        "openai_chat" => vec![
            (
                None,
                json!({"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hello"},"finish_reason":null}]}),
            ),
            (
                None,
                json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":"{\"q\":\"x\"}"}}]}}]}),
            ),
        ],
        "openai_responses" => vec![
            (
                Some("response.created"),
                json!({"type":"response.created","response":{"id":"r","status":"in_progress","instructions":"be nice","output":[]}}),
            ),
            (
                Some("response.output_text.delta"),
                json!({"type":"response.output_text.delta","output_index":0,"item_id":"i","delta":"hello"}),
            ),
            (
                Some("response.output_item.added"),
                json!({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"i2","call_id":"c","name":"f","arguments":""}}),
            ),
            (
                Some("response.function_call_arguments.delta"),
                json!({"type":"response.function_call_arguments.delta","output_index":1,"item_id":"i2","delta":"{\"q\":\"x\"}"}),
            ),
        ],
        "anthropic_messages" => vec![
            (
                Some("message_start"),
                json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}),
            ),
            (
                Some("content_block_start"),
                json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":\"x\"}"}}),
            ),
        ],
        "a2a" => vec![
            (
                None,
                json!({"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"hello"}]}}}}}),
            ),
            (
                None,
                json!({"jsonrpc":"2.0","id":"1","result":{"artifactUpdate":{"taskId":"t","append":true,"artifact":{"artifactId":"a","name":"n","parts":[{"text":"hello"},{"data":{"k":"v"}}]}}}}),
            ),
            (
                Some("message"),
                json!({"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","lastChunk":true,"artifact":{"artifactId":"b","parts":[{"kind":"text","text":"hi"},{"kind":"file","file":{"name":"f.txt","mimeType":"text/plain","bytes":"aGk="}}]}}}),
            ),
        ],
        _ => vec![(
            None,
            json!({"candidates":[{"content":{"role":"model","parts":[{"text":"hello"},{"functionCall":{"name":"f","args":{"q":"x"}}}]},"index":0}],"modelVersion":"g"}),
        )],
    }
}

/// Every string leaf of `v` (not keys), by path; and every object, by path.
fn leaves(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>, objects: &mut Vec<Vec<Step>>) {
    match v {
        Value::String(_) => out.push(path.clone()),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Step::Index(i));
                leaves(x, path, out, objects);
                path.pop();
            }
        }
        Value::Object(o) => {
            objects.push(path.clone());
            for (k, x) in o {
                path.push(Step::Key(k.clone()));
                leaves(x, path, out, objects);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    path.iter().fold(v, |v, s| match s {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// The walker's rule: the string's own key is structural, or a prefix of its path is a nested
/// exemption's object path followed by its key.
fn exempt(p: &dyn Protocol, path: &[Step]) -> bool {
    let s = p.stream_structural();
    if let Some(schema) = s.schema {
        return schema_exempt(schema, path);
    }
    let own = matches!(path.last(), Some(Step::Key(k)) if s.is_structural_key(k.as_bytes()));
    own || (0..path.len()).any(|i| {
        let Step::Key(k) = &path[i] else { return false };
        s.nested.iter().any(|(parent, key)| {
            key == k
                && parent.len() == i
                && parent
                    .iter()
                    .zip(&path[..i])
                    .all(|(want, step)| match step {
                        Step::Key(k) => want == k,
                        Step::Index(_) => *want == "[]",
                    })
        })
    })
}

/// The rule of a protocol with a schema: the slot the path leads to is an exempt one (a member
/// the schema does not name, or anything under free-form data, is read).
fn schema_exempt(schema: &crate::protocol::residual::Schema, path: &[Step]) -> bool {
    use crate::protocol::residual::Slot;
    let slot = path
        .iter()
        .fold(Slot::Node(schema.top), |slot, step| match (slot, step) {
            (Slot::Node(n), Step::Key(k)) => schema.nodes[usize::from(n)]
                .iter()
                .find(|(name, _)| name == k)
                .map_or(Slot::Read, |&(_, s)| s),
            (Slot::Exempt | Slot::Read, Step::Key(_)) => Slot::Read,
            (s, Step::Index(_)) => s,
        });
    slot == Slot::Exempt
}

/// Runs the frames through the protocol's decoder and the frame checker, as a stream does:
/// `true` when the stream stops (violation or unchecked), `false` when all would be released.
fn stopped(p: &dyn Protocol, frames: &[(Option<&str>, String)]) -> bool {
    let mut guard = policy().exchange_guard(Default::default(), None);
    let mut decoder = p.stream_decoder();
    if decoder.repeats_text() {
        guard.keep_full_text(1 << 20);
    }
    for (event, data) in frames {
        let mut deltas = Vec::new();
        if decoder
            .decode(event.map(str::as_bytes), data.as_bytes(), &mut deltas)
            .is_err()
        {
            return true; // a malformed frame ends the stream
        }
        let fallback = Fallback {
            structural: p.stream_structural(),
            unknown: UnknownContent::Scan,
            fully_read: decoder.fully_read(),
        };
        let r = check_payload(
            &mut guard,
            &deltas,
            data.as_bytes(),
            fallback,
            &mut Needs::new(),
            &mut Vec::new(),
        );
        if r.is_err() {
            return true;
        }
    }
    guard.after_call().is_err()
}

/// Random JSON to graft into a frame: keys from a pool of known and unknown names.
fn graft() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "content",
        "text",
        "delta",
        "arguments",
        "type",
        "message",
        "extra",
        "note",
        "parts",
        "logprobs",
        "token",
        "input",
        "code",
        "output",
        "name",
        "id",
        "data",
        "instructions",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<u32>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 3, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 1..3).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn a_marker_in_any_string_is_found_unless_structural(
        proto in prop::sample::select(vec![
            "openai_chat", "openai_responses", "anthropic_messages", "gemini", "a2a",
        ]),
        frame in 0usize..8,
        graft_at in 0usize..64,
        extra in graft(),
        leaf in 0usize..256,
        escape in any::<bool>(),
        as_json_string in any::<bool>(),
    ) {
        let p = protocol::by_name(proto).unwrap();
        let mut frames = base_frames(p.name());
        let f = frame % frames.len();
        // Graft random JSON into a random object of the frame, then plant the marker in a
        // random string leaf (a JSON text inside a string when `as_json_string`).
        let mut leaf_paths = Vec::new();
        let mut objects = Vec::new();
        leaves(&frames[f].1, &mut Vec::new(), &mut leaf_paths, &mut objects);
        let target = objects[graft_at % objects.len()].clone();
        if let Value::Object(o) = at(&mut frames[f].1, &target) {
            o.insert("zz_grafted".into(), extra);
        }
        let mut leaf_paths = Vec::new();
        leaves(&frames[f].1, &mut Vec::new(), &mut leaf_paths, &mut Vec::new());
        let path = leaf_paths[leaf % leaf_paths.len()].clone();
        let planted = if as_json_string {
            json!({"k": format!("a {MARKER} b")}).to_string()
        } else {
            format!("a {MARKER} b")
        };
        *at(&mut frames[f].1, &path) = Value::String(planted);
        let frames: Vec<(Option<&str>, String)> = frames
            .iter()
            .map(|(e, v)| {
                let s = v.to_string();
                (*e, if escape { s.replace(MARKER, "\\u007aqxjv") } else { s })
            })
            .collect();
        if !exempt(p, &path) {
            prop_assert!(stopped(p, &frames), "{}: {path:?} not found in {frames:?}", p.name());
        }
    }
}

/// An unknown field continued, in a later frame, by a copy of that frame's decoded (escaped,
/// so compared by value) text is checked as one text: the copy is not taken for the decoded
/// text once the field has text of its own.
#[test]
fn a_copy_of_a_decoded_text_continues_its_unknown_field() {
    let p = protocol::by_name("anthropic_messages").unwrap();
    // The copy first, so that it is the first string of that value.
    let delta = |text: &str, x: &str| {
        format!(
            r#"{{"x":{},"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{}}}}}"#,
            json!(x),
            json!(text)
        )
    };
    let frames = |x1: &str| {
        let mut f: Vec<(Option<&str>, String)> = base_frames("anthropic_messages")[..2]
            .iter()
            .map(|(e, v)| (*e, v.to_string()))
            .collect();
        f.push((Some("content_block_delta"), delta("hi ", x1)));
        f.push((Some("content_block_delta"), delta("xjv\n", "xjv\n")));
        f
    };
    assert!(frames("zq")[3].1.contains(r"xjv\n"));
    assert!(stopped(p, &frames("zq")));
    assert!(!stopped(p, &frames("ab")));
}
