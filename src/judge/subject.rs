//! What a judged check judges: the request's conversation and, on the answer's side, the
//! answer. Rendered here into the texts judges, endpoints and handlers are shown.

use crate::delta::{Conversation, Message, Role};
use crate::policy::judged::{ContextSource, Judged};
use serde_json::{json, Value};
use std::sync::Arc;

/// The exchange under judgment.
#[derive(Debug, Clone)]
pub struct Subject {
    pub conversation: Arc<Conversation>,
    /// `None` when the request is judged (before the call).
    pub answer: Option<Answer>,
}

/// An answer as judged: its text (every choice's, in order) and its tool calls.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    pub text: String,
    /// (name, arguments as JSON text).
    pub tool_calls: Vec<(String, String)>,
}

fn role_name(role: &Role) -> &str {
    match role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
        Role::Other(o) => o,
        Role::Identifiers => "Identifiers",
    }
}

fn message_text(m: &Message) -> String {
    m.text.join("\n")
}

fn call_line(name: &str, args: &str) -> String {
    format!("- {name}({args})")
}

impl Subject {
    /// The text a judge is shown for `judged`; `None` for `ToolCalls` with none to judge
    /// (no call, or none of the named tools): nothing to ask, the check passes.
    pub fn render(&self, judged: &Judged) -> Option<String> {
        match judged {
            Judged::Text => Some(match &self.answer {
                // On the request: everything the model will read, message by message.
                None => self.transcript(false),
                Some(a) => {
                    let mut text = a.text.clone();
                    if !a.tool_calls.is_empty() {
                        if !text.is_empty() {
                            text.push_str("\n\n");
                        }
                        text.push_str("Tool calls:\n");
                        let lines: Vec<String> = a
                            .tool_calls
                            .iter()
                            .map(|(n, args)| call_line(n, args))
                            .collect();
                        text.push_str(&lines.join("\n"));
                    }
                    text
                }
            }),
            Judged::Session => Some(self.transcript(true)),
            Judged::ToolCalls { tools } => {
                let lines: Vec<String> = self
                    .tool_calls()
                    .into_iter()
                    .filter(|(name, _)| tools.is_empty() || tools.iter().any(|t| t == name))
                    .map(|(name, args)| call_line(name, args))
                    .collect();
                (!lines.is_empty()).then(|| format!("Tool calls:\n{}", lines.join("\n")))
            }
            Judged::Rag { context } => {
                let answer = self.answer.as_ref()?;
                let question = self.last_user_text();
                let mut text = format!("Question:\n{question}\n\n");
                if let Some(source) = context {
                    let chunks = self.context(source);
                    if chunks.is_empty() {
                        return None;
                    }
                    text.push_str("Retrieved context:\n");
                    for (i, c) in chunks.iter().enumerate() {
                        text.push_str(&format!("[{}] {c}\n", i + 1));
                    }
                    text.push('\n');
                }
                text.push_str("Answer:\n");
                text.push_str(&answer.text);
                Some(text)
            }
        }
    }

    /// The retrieved context `source` selects from the request, message by message in order.
    pub fn context(&self, source: &ContextSource) -> Vec<String> {
        let messages = &self.conversation.messages;
        // A tool result's tool: the call it answers (by id; Gemini answers by name).
        let tool_of = |m: &Message| -> Option<String> {
            let id = m.tool_call_id.as_deref()?;
            let called = messages
                .iter()
                .flat_map(|c| c.tool_calls.iter())
                .find(|c| c.id.as_deref() == Some(id))
                .map(|c| c.name.clone());
            Some(called.unwrap_or_else(|| id.to_owned()))
        };
        messages
            .iter()
            .filter(|m| {
                let by_tool = m.role == Role::Tool
                    && source.tools.as_ref().is_some_and(|tools| {
                        tools.is_empty() || tool_of(m).is_some_and(|t| tools.contains(&t))
                    });
                let by_role = source
                    .roles
                    .iter()
                    .any(|r| role_name(&m.role).eq_ignore_ascii_case(r));
                let by_name = m.name.as_ref().is_some_and(|n| source.names.contains(n));
                by_tool || by_role || by_name
            })
            .map(message_text)
            .filter(|t| !t.trim().is_empty())
            .collect()
    }

    /// The conversation as `Role: text` lines (PromptKit's session rendering), the answer
    /// last; with `session`, system and tool messages are left out as PromptKit does, and the
    /// tool calls are listed after.
    fn transcript(&self, session: bool) -> String {
        let mut lines = Vec::new();
        for m in self.conversation.read_messages() {
            if session && matches!(m.role, Role::System | Role::Tool) {
                continue;
            }
            let text = message_text(m);
            if !text.is_empty() {
                lines.push(format!("{}: {text}", role_name(&m.role)));
            }
            if !session {
                for c in &m.tool_calls {
                    lines.push(format!(
                        "{} called {}({})",
                        role_name(&m.role),
                        c.name,
                        c.arguments
                    ));
                }
            }
        }
        if let Some(a) = &self.answer {
            if !a.text.is_empty() {
                lines.push(format!("Assistant: {}", a.text));
            }
        }
        let mut out = lines.join("\n");
        if session {
            let calls = self.tool_calls();
            if !calls.is_empty() {
                out.push_str("\n\nTool calls:\n");
                let lines: Vec<String> = calls.iter().map(|(n, a)| call_line(n, a)).collect();
                out.push_str(&lines.join("\n"));
            }
        }
        out
    }

    /// Every tool call of the conversation, then the answer's.
    fn tool_calls(&self) -> Vec<(&str, &str)> {
        let mut calls: Vec<(&str, &str)> = self
            .conversation
            .messages
            .iter()
            .flat_map(|m| {
                m.tool_calls
                    .iter()
                    .map(|c| (c.name.as_str(), c.arguments.as_str()))
            })
            .collect();
        if let Some(a) = &self.answer {
            calls.extend(
                a.tool_calls
                    .iter()
                    .map(|(n, args)| (n.as_str(), args.as_str())),
            );
        }
        calls
    }

    /// `current_output` of a `rest_eval` body (PromptKit): the answer's text; on the request,
    /// the last user message; for `_session`, every assistant text joined by newlines.
    pub fn current_output(&self, session: bool) -> String {
        if session {
            let mut texts: Vec<String> = self
                .conversation
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .map(message_text)
                .collect();
            if let Some(a) = &self.answer {
                texts.push(a.text.clone());
            }
            return texts.join("\n");
        }
        match &self.answer {
            Some(a) => a.text.clone(),
            None => self.last_user_text(),
        }
    }

    /// The text of the conversation's last user message (empty without one).
    fn last_user_text(&self) -> String {
        self.conversation
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(message_text)
            .unwrap_or_default()
    }

    /// The messages as `{role, content}` objects, the answer last.
    pub fn messages_json(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .conversation
            .read_messages()
            .map(|m| {
                json!({
                    "role": role_name(&m.role).to_ascii_lowercase(),
                    "content": message_text(m),
                })
            })
            .collect();
        if let Some(a) = &self.answer {
            out.push(json!({"role": "assistant", "content": a.text}));
        }
        out
    }

    /// The tool calls as PromptKit's `rest_eval` sends them: `Name`, `Args` (an object when
    /// the arguments are JSON), `Result`, `Error`, `Index` (the message's position).
    pub fn tool_calls_json(&self) -> Vec<Value> {
        let messages = &self.conversation.messages;
        let mut out = Vec::new();
        for (index, m) in messages.iter().enumerate() {
            for c in &m.tool_calls {
                let result = messages.iter().find(|r| {
                    r.role == Role::Tool && r.tool_call_id.is_some() && r.tool_call_id == c.id
                });
                out.push(json!({
                    "Name": c.name,
                    "Args": serde_json::from_str::<Value>(&c.arguments).unwrap_or(Value::String(c.arguments.clone())),
                    "Result": result.map(message_text),
                    "Error": result.filter(|r| r.is_error).map(message_text),
                    "Index": index,
                }));
            }
        }
        if let Some(a) = &self.answer {
            for (name, args) in &a.tool_calls {
                out.push(json!({
                    "Name": name,
                    "Args": serde_json::from_str::<Value>(args).unwrap_or(Value::String(args.clone())),
                    "Result": null,
                    "Error": null,
                    "Index": messages.len(),
                }));
            }
        }
        out
    }

    /// How many user turns the conversation has had (`turn_index` for `exec` handlers).
    pub fn turn_index(&self) -> usize {
        self.conversation
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::delta::ToolCall;

    #[test]
    fn rag_context_is_selected_by_tool_role_and_name() {
        let call = |id: &str, name: &str| ToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: "{}".into(),
        };
        let result = |id: &str, text: &str| Message {
            tool_call_id: Some(id.into()),
            ..Message::text(Role::Tool, vec![text.into()])
        };
        let conversation = Conversation {
            messages: vec![
                Message::text(Role::System, vec!["Docs: the sky is blue".into()]),
                Message {
                    name: Some("retriever".into()),
                    ..Message::text(Role::User, vec!["Doc: grass is green".into()])
                },
                Message::text(Role::User, vec!["What colour is the sky?".into()]),
                Message {
                    tool_calls: vec![call("a", "search"), call("b", "weather")],
                    ..Message::text(Role::Assistant, vec![])
                },
                result("a", "The sky is blue."),
                result("b", "Sunny"),
                // Gemini answers by the function's name.
                result("search", "Skies scatter blue light."),
            ],
            ..Default::default()
        };
        let subject = Subject {
            conversation: Arc::new(conversation),
            answer: Some(Answer {
                text: "Blue.".into(),
                tool_calls: vec![],
            }),
        };
        let pick = |tools: Option<Vec<&str>>, roles: Vec<&str>, names: Vec<&str>| {
            subject.context(&ContextSource {
                tools: tools.map(|t| t.into_iter().map(String::from).collect()),
                roles: roles.into_iter().map(String::from).collect(),
                names: names.into_iter().map(String::from).collect(),
            })
        };
        assert_eq!(
            pick(Some(vec![]), vec![], vec![]),
            ["The sky is blue.", "Sunny", "Skies scatter blue light."]
        );
        assert_eq!(
            pick(Some(vec!["search"]), vec![], vec![]),
            ["The sky is blue.", "Skies scatter blue light."]
        );
        assert_eq!(
            pick(None, vec!["system"], vec!["retriever"]),
            ["Docs: the sky is blue", "Doc: grass is green"]
        );
        let rendered = subject
            .render(&Judged::Rag {
                context: Some(ContextSource {
                    tools: Some(vec!["weather".into()]),
                    ..Default::default()
                }),
            })
            .unwrap();
        assert_eq!(
            rendered,
            "Question:\nWhat colour is the sky?\n\nRetrieved context:\n[1] Sunny\n\nAnswer:\nBlue."
        );
        // No context retrieved: nothing to judge against.
        let nothing = ContextSource {
            tools: Some(vec!["none".into()]),
            ..Default::default()
        };
        assert_eq!(
            subject.render(&Judged::Rag {
                context: Some(nothing)
            }),
            None
        );
        assert_eq!(
            subject.render(&Judged::Rag { context: None }).unwrap(),
            "Question:\nWhat colour is the sky?\n\nAnswer:\nBlue."
        );
    }
}
