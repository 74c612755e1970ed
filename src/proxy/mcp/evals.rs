//! MCP `tools/call`s as turns for the packs' `evals:`. A call is the model's tool call (its
//! arguments are checked as the answer) and its result what the model reads next (checked as
//! input), so the turn is: the session's earlier calls (one assistant message each, which
//! numbers the turn), then the result (a tool message), and the call itself as the answer. A
//! call refused before it reached the server is a blocked turn without a result; a call whose
//! result was replaced by guardwire's error is a blocked turn with it. A call whose answer
//! never came (the stream cut off, the batch not forwarded) is no turn, as for the model
//! protocols.

use crate::delta::{Conversation, Message, Role, ToolCall};
use crate::evals::{may_select, turn_index_of, EvalSeed, Fired, SessionContext};
use crate::judge::Answer;
use crate::policy::tools::ToolHistory;
use crate::protocol::mcp::jsonrpc::IdKey;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The evals of one MCP request's tool calls.
pub struct ToolEvals {
    /// What every turn of the request shares (its conversation and session are the call's).
    template: EvalSeed,
    /// The evals' session header, else the `Mcp-Session-Id`, else none (each call a session
    /// of its own: the stateless envelope has no session).
    session: Option<String>,
    /// Calls forwarded, waiting for their result, by request id: (seed, name, arguments).
    waiting: HashMap<IdKey, (EvalSeed, String, String)>,
}

impl ToolEvals {
    pub fn new(template: EvalSeed, session: Option<String>) -> ToolEvals {
        ToolEvals {
            template,
            session,
            waiting: HashMap::new(),
        }
    }

    /// A `tools/call` was checked (`history`: the session's calls before it). Refused
    /// (`fired`: what fired so far), it is a blocked turn at once; else it waits for its result.
    pub fn call(
        &mut self,
        id: &Value,
        name: &str,
        arguments: &str,
        history: &ToolHistory,
        refused: Option<Vec<Fired>>,
    ) {
        let conversation = Conversation {
            messages: history
                .calls
                .iter()
                .map(|c| Message {
                    tool_calls: vec![ToolCall {
                        id: None,
                        name: c.name.clone(),
                        arguments: c.args.clone(),
                    }],
                    ..Message::text(Role::Assistant, Vec::new())
                })
                .collect(),
            tools: Vec::new(),
        };
        let (session, alone) = match &self.session {
            Some(s) => (s.clone(), false),
            // Without a session, the call alone: the HTTP request's id and the call's.
            None => (format!("{}/{id}", self.template.request_id), true),
        };
        let turn = turn_index_of(&conversation);
        if !may_select(&self.template.policy, &session, turn) {
            return;
        }
        let mut seed = self.template.clone();
        seed.session = session;
        // A call without a session is a session that ends with it.
        seed.ends_session = alone;
        seed.conversation = Arc::new(conversation);
        match refused {
            Some(fired) => seed.submit(
                Some(answer(name, arguments)),
                true,
                fired,
                (None, None),
                Default::default(),
                None,
            ),
            None => {
                if let Some(id) = IdKey::of(id) {
                    self.waiting
                        .insert(id, (seed, name.to_owned(), arguments.to_owned()));
                }
            }
        }
    }

    /// The server answered the call `id` (`texts`: the answer's strings as the checks read
    /// them; `is_error`: a JSON-RPC error or a result with `isError`); `blocked`: guardwire
    /// replaced it with its error.
    pub fn result(
        &mut self,
        id: &Value,
        texts: Vec<String>,
        is_error: bool,
        blocked: bool,
        fired: Vec<Fired>,
    ) {
        let Some((mut seed, name, arguments)) =
            IdKey::of(id).and_then(|id| self.waiting.remove(&id))
        else {
            return;
        };
        let mut conversation = Conversation::clone(&seed.conversation);
        conversation.messages.push(Message {
            is_error,
            name: Some(name.clone()),
            ..Message::text(Role::Tool, texts)
        });
        seed.conversation = Arc::new(conversation);
        seed.submit(
            Some(answer(&name, &arguments)),
            blocked,
            fired,
            (None, None),
            Default::default(),
            None,
        );
    }

    /// The client ended its session (`DELETE`): the session evals run now.
    pub fn end_session(&self) {
        let Some(session) = &self.session else {
            return;
        };
        let context = SessionContext::of_seed(&self.template, session.clone());
        self.template.queue.end_session(context);
    }

    /// Whether a call `id` waits for its result (its answer's texts are then kept).
    pub fn waits_for(&self, id: &Value) -> bool {
        IdKey::of(id).is_some_and(|id| self.waiting.contains_key(&id))
    }
}

/// The call as the model's answer: no text, one tool call.
fn answer(name: &str, arguments: &str) -> Answer {
    Answer {
        text: String::new(),
        tool_calls: vec![(name.to_owned(), arguments.to_owned())],
    }
}
