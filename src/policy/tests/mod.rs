#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::guard::insert_redaction;
use super::tools::ToolHistory;
use super::*;
use crate::config::Price;
use crate::delta::{Channel, Conversation, Delta, Message, Role};
use std::borrow::Cow;
use std::sync::Arc;

mod identifiers;
mod loading;
mod reference_evals;
mod streaming;
mod text_checks;
mod tool_checks;

fn policy(yaml: &str) -> Result<Arc<Policy>, String> {
    policy_with(yaml, &Default::default())
}

fn policy_with(yaml: &str, refs: &judged::CheckRefs) -> Result<Arc<Policy>, String> {
    let doc: serde_json::Value = serde_norway::from_str(yaml).unwrap();
    let defs = pack::parse_pack("test.yaml", &doc, refs).map_err(|e| e.to_string())?;
    Policy::compile_packs(vec![defs])
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn text(choice: u32, t: &str) -> Delta<'_> {
    Delta::Text {
        choice,
        channel: Channel::Content,
        text: Cow::Borrowed(t),
    }
}

/// BeforeCall over `conv`, through a guard as the proxy runs it.
fn before_call(p: &Arc<Policy>, conv: &Conversation) -> Result<(), Finding> {
    p.exchange_guard(p.tool_history(conv), None)
        .before_call(conv)
}

fn stream(p: &Arc<Policy>, pieces: &[&str]) -> Result<(), Finding> {
    let mut g = p.exchange_guard(Default::default(), None);
    for piece in pieces {
        g.on_chunk(&text(0, piece))?;
    }
    g.after_call()
}

fn reasoning(t: &str) -> Delta<'_> {
    Delta::Text {
        choice: 0,
        channel: Channel::Reasoning,
        text: Cow::Borrowed(t),
    }
}

/// The verdict on a response whose reasoning is `think` and whose answer is `answer`.
fn thought(p: &Arc<Policy>, think: &str, answer: &str) -> Result<(), Finding> {
    let mut g = p.exchange_guard(Default::default(), None);
    g.on_chunk(&reasoning(think))?;
    g.on_chunk(&text(0, answer))?;
    g.after_call()
}

fn tool_start(choice: u32, name: &str) -> Delta<'_> {
    Delta::ToolCallStart {
        choice,
        index: 0,
        id: None,
        name: Cow::Borrowed(name),
    }
}

/// A conversation whose current turn made these calls: (name, arguments, result). A result
/// starting with `ERR` is marked as failed.
fn conversation(calls: &[(&str, &str, Option<&str>)]) -> Conversation {
    let mut messages = vec![
        Message::text(Role::User, vec!["earlier".into()]),
        Message {
            tool_calls: vec![crate::delta::ToolCall {
                id: Some("old".into()),
                name: "old_tool".into(),
                arguments: "{\"to\":\"eve\"}".into(),
            }],
            ..Message::text(Role::Assistant, vec![])
        },
        Message::text(Role::User, vec!["now".into()]),
    ];
    for (i, (name, args, result)) in calls.iter().enumerate() {
        messages.push(Message {
            tool_calls: vec![crate::delta::ToolCall {
                id: Some(format!("c{i}")),
                name: (*name).into(),
                arguments: (*args).into(),
            }],
            ..Message::text(Role::Assistant, vec![])
        });
        if let Some(r) = result {
            messages.push(Message {
                tool_call_id: Some(format!("c{i}")),
                is_error: r.starts_with("ERR"),
                ..Message::text(Role::Tool, vec![(*r).into()])
            });
        }
    }
    Conversation {
        messages,
        tools: vec![],
    }
}

fn history(calls: &[(&str, &str, Option<&str>)]) -> ToolHistory {
    ToolHistory::of(&conversation(calls))
}

fn call(choice: u32, index: u32, name: &str) -> Delta<'_> {
    Delta::ToolCallStart {
        choice,
        index,
        id: None,
        name: Cow::Borrowed(name),
    }
}

fn args(choice: u32, index: u32, t: &str) -> Delta<'_> {
    Delta::Text {
        choice,
        channel: Channel::ToolArgs(index),
        text: Cow::Borrowed(t),
    }
}

/// Runs one response made of `deltas` after `calls` in the turn; the failing validator.
fn verdict(
    p: &Arc<Policy>,
    calls: &[(&str, &str, Option<&str>)],
    deltas: &[Delta<'_>],
) -> Option<u32> {
    let conv = conversation(calls);
    let h = p.tool_history(&conv);
    let mut g = p.exchange_guard(h, None);
    if let Err(e) = g.before_call(&conv) {
        return Some(e.validator);
    }
    for d in deltas {
        if let Err(e) = g.on_chunk(d) {
            return Some(e.validator);
        }
    }
    g.after_call().err().map(|e| e.validator)
}
