//! The checks of MCP messages, each read whole before a byte of it leaves: what the client
//! sends (data leaving: a `tools/call` is checked as the model's tool call — tool checks and
//! output text checks — and every other message's texts by the output checks) and what the
//! server sends (what the model or user will read: the input checks, BeforeCall). The same
//! compiled policy and check code as the model protocols: `ExchangeGuard::before_call` for
//! input, `check_payload` + `after_call` for output.

use super::super::check::{check_payload, Fallback, Needs, Stop};
use super::super::Reporter;
use super::evals::ToolEvals;
use crate::audit::Audit;
use crate::config::{PoisonedTools, UnknownContent};
use crate::delta::{Channel, Conversation, Delta, Message as ConvMessage, Role};
use crate::metrics::Metrics;
use crate::policy::{Finding, Policy};
use crate::protocol::mcp::content::{canonical, json_text, Texts};
use crate::protocol::mcp::jsonrpc::{error_json, IdKey, Kind, Message};
use crate::protocol::mcp::{codes, STRUCTURAL, VERSIONS};
use crate::protocol::residual;
use crate::state::sessions::SessionView;
use crate::telemetry::RequestTrace;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// Why a message does not pass: the JSON-RPC error that answers it.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl Refusal {
    pub fn new(code: i64, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The error response for `id`.
    pub fn json(&self, id: &Value) -> String {
        error_json(id, self.code, &self.message, self.data.clone())
    }
}

/// What becomes of a server message.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Released as the server sent it.
    Pass,
    /// Released as this message instead (a JSON-RPC error for its id, or a filtered list).
    Replace(String),
    /// Not released: a notification, or a request of the server (whose error goes to the
    /// server, [`Checker::server_replies`]), that failed its checks.
    Drop,
}

/// What checking one exchange's messages needs; owned, so a stream can keep it.
pub struct Checker {
    pub policy: Arc<Policy>,
    pub metrics: Arc<Metrics>,
    /// The request's audit: one line for all its messages' verdicts (`Audit::per_request`).
    pub audit: Arc<Audit>,
    pub route: &'static str,
    pub key_id: Option<&'static str>,
    pub trace: RequestTrace,
    pub unknown: UnknownContent,
    pub poisoned_tools: PoisonedTools,
    pub keep_matches: bool,
    /// The client's requests this answer may carry responses for: their methods by id.
    pub pending: HashMap<IdKey, String>,
    /// The JSON-RPC errors that answer the server's own requests guardwire did not relay to
    /// the client (the server waits for them; sent on the session by the caller).
    pub server_replies: Vec<String>,
    /// The MCP session's calls and removed tools (`session.rs`).
    pub session: SessionView,
    /// The packs' evals, when they have any: each `tools/call` a turn (`evals.rs`).
    pub evals: Option<ToolEvals>,
}

impl Checker {
    fn report(&self) -> Reporter<'_> {
        Reporter {
            metrics: &self.metrics,
            audit: &self.audit,
            policy: &self.policy,
            route: self.route,
            key_id: self.key_id,
            request_id: self.trace.request_id(),
            trace: &self.trace,
        }
    }

    /// Counts and logs a block; the error names the validator.
    fn blocked(&self, finding: Finding, what: &str) -> Refusal {
        let label = self.policy.validator(finding.validator).label.clone();
        let phase = finding.phase.as_str();
        let err = self.report().block(finding);
        Refusal {
            code: codes::BLOCKED,
            message: format!("guardwire blocked {what} (validator '{label}'): {err}"),
            data: Some(json!({"validator": label, "phase": phase})),
        }
    }

    /// What cannot be read as text, or is not modelled under `unknown_content: block`.
    fn readable(&self, texts: &Texts) -> Result<(), Refusal> {
        if self.unknown == UnknownContent::Pass {
            return Ok(());
        }
        if let Some(path) = &texts.unreadable {
            return Err(Refusal::new(
                codes::UNCHECKABLE,
                format!("{path}: binary content guardwire cannot check as text (the route's unknown_content: pass relays it unchecked)"),
            ));
        }
        if self.unknown == UnknownContent::Block && !texts.residual.is_empty() {
            return Err(Refusal::new(
                codes::UNCHECKABLE,
                "the message carries fields guardwire does not model (unknown_content: block)",
            ));
        }
        Ok(())
    }

    /// The strings the checks read, each on its own (the joined texts aside).
    fn strings(&self, texts: Texts) -> Vec<String> {
        let mut all = texts.modelled;
        if self.unknown == UnknownContent::Scan {
            all.extend(texts.residual);
        }
        all
    }

    /// Input checks (BeforeCall) over what the model or user will read: each string a message
    /// of its own, and each joined text of siblings; JSON in them read decoded too. Then the
    /// identifiers, by the secret and PII patterns.
    pub fn input(&self, mut texts: Texts, what: &str) -> Result<(), Refusal> {
        self.readable(&texts)?;
        let identifiers = std::mem::take(&mut texts.identifiers);
        let joined = std::mem::take(&mut texts.joined);
        let mut strings = self.strings(texts);
        strings.extend(joined);
        // A `data:` URL (a resource link's `uri`, an icon, a URL-mode elicitation's `url`): the
        // host that opens it reads its content.
        let contents: Vec<String> = strings
            .iter()
            .filter_map(|s| crate::protocol::documents::Documents::data_url_payload(s).flatten())
            .collect();
        strings.extend(contents);
        if strings.is_empty() && identifiers.is_empty() {
            return Ok(());
        }
        let mut conversation = Conversation {
            messages: strings
                .into_iter()
                .map(|s| ConvMessage::text(Role::Tool, vec![s]))
                .collect(),
            tools: Vec::new(),
        };
        residual::add_json_views(&mut conversation);
        let mut guard = self
            .policy
            .exchange_guard(self.policy.tool_history(&conversation), None);
        if self.keep_matches {
            guard.keep_matches();
        }
        let verdict = guard
            .before_call(&conversation)
            .and_then(|()| guard.check_identifiers(true, &identifiers));
        guard.take_findings(|monitored, _| self.report().monitor(monitored));
        verdict.map_err(|f| self.blocked(f, what))
    }

    /// Output checks over data leaving: a tool call (`tool`: name, arguments as JSON text) as
    /// the model's, and the other strings (each joined text of siblings too) as answer text;
    /// the identifiers by the secret and PII patterns; then AfterCall (tool checks of the
    /// turn, whole-text checks).
    pub fn output(
        &self,
        tool: Option<(&str, String)>,
        mut texts: Texts,
        what: &str,
    ) -> Result<(), Refusal> {
        self.readable(&texts)?;
        let identifiers = std::mem::take(&mut texts.identifiers);
        let joined = std::mem::take(&mut texts.joined);
        let mut strings = self.strings(texts);
        strings.extend(joined);
        let mut guard = self.policy.exchange_guard(self.session.history(), None);
        if self.keep_matches {
            guard.keep_matches();
        }
        guard.answer(false);
        let mut deltas = Vec::new();
        let called = tool.is_some();
        if let Some((name, arguments)) = tool {
            deltas.push(Delta::ToolCallStart {
                choice: 0,
                index: 0,
                id: None,
                name: Cow::Borrowed(name),
            });
            deltas.push(Delta::Text {
                choice: 0,
                channel: Channel::ToolArgs(0),
                text: Cow::Owned(arguments),
            });
        }
        for (i, s) in strings.into_iter().enumerate() {
            deltas.push(Delta::Text {
                choice: 0,
                channel: Channel::Other(i as u32),
                text: Cow::Owned(s),
            });
        }
        deltas.push(Delta::Finish {
            choice: 0,
            reason: Cow::Borrowed(if called { "tool_calls" } else { "stop" }),
        });
        // Every string is a delta already: nothing is left for the fallback to walk.
        let fallback = Fallback {
            structural: &STRUCTURAL,
            unknown: UnknownContent::Pass,
            fully_read: true,
        };
        let verdict = match check_payload(
            &mut guard,
            &deltas,
            b"",
            fallback,
            &mut Needs::new(),
            &mut Vec::new(),
        ) {
            // A tool call is the model's turn: AfterCall whole. Any other message is no
            // answer: its texts' scans end, without the answer's whole-text and turn checks.
            Ok(()) => guard
                .check_identifiers(false, &identifiers)
                .and_then(|()| match called {
                    true => guard.after_call(),
                    false => guard.end_texts(),
                }),
            Err(Stop::Violation(f)) => Err(f),
            Err(Stop::Unchecked(why)) => return Err(Refusal::new(codes::UNCHECKABLE, why)),
        };
        let redacts = !guard.redactions().is_empty();
        guard.take_findings(|monitored, redacted| {
            self.report().monitor(monitored);
            self.report().redactions(redacted);
        });
        verdict.map_err(|f| self.blocked(f, what))?;
        if redacts {
            // A message is forwarded as the client sent it or not at all.
            return Err(Refusal::new(
                codes::BLOCKED,
                format!("guardwire blocked {what}: a redact-mode validator matched, and MCP messages are not rewritten"),
            ));
        }
        Ok(())
    }

    /// Checks one message of the client's POST (`params`: the values of its `Mcp-Param-*`
    /// headers, sent beside it). `Err`: it is not forwarded.
    pub fn client_message(&mut self, msg: &Message, params: &[String]) -> Result<(), Refusal> {
        check_version(msg)?;
        let what = match msg.method() {
            Some(m) => format!("the client's {m}"),
            None => "the client's response".into(),
        };
        if let Kind::Request(m) = &msg.kind {
            if m == "tools/call" {
                let p = msg.params().and_then(Value::as_object);
                let Some(name) = p.and_then(|p| p.get("name")).and_then(Value::as_str) else {
                    return Err(Refusal::new(
                        codes::INVALID_REQUEST,
                        "tools/call needs params.name, a string",
                    ));
                };
                let arguments = p
                    .and_then(|p| p.get("arguments"))
                    .map_or_else(|| "{}".into(), json_text);
                // The rest of the message (its id, envelope and other params, unknown fields
                // included) is read as every other message is; name and arguments are the
                // tool call's.
                let mut rest = msg.body.clone();
                if let Some(Value::Object(params)) = rest.get_mut("params") {
                    params.remove("name");
                    params.remove("arguments");
                }
                let mut texts = Texts::of_message(&rest);
                texts.modelled.extend(params.iter().cloned());
                self.trace.note_tool(name);
                let what = format!("the call of tool '{name}'");
                let checked = match self.session.removed_by(name) {
                    Some(validator) => Err(removed_tool(name, validator)),
                    None => self.output(Some((name, arguments.clone())), texts, &what),
                };
                if let Some(evals) = &mut self.evals {
                    let refused = checked.is_err().then(|| self.trace.fired());
                    let history = self.session.history();
                    evals.call(&msg.id, name, &arguments, &history, refused);
                }
                checked?;
                self.session.called(name, &arguments);
                return Ok(());
            }
        }
        let mut texts = Texts::of_message(&msg.body);
        texts.modelled.extend(params.iter().cloned());
        self.output(None, texts, &what)
    }

    /// Checks one message of the server (a response to one of `pending`, or a request or
    /// notification of its own).
    pub fn server_message(&mut self, msg: &Message) -> Verdict {
        self.server_event(msg, None)
    }

    /// [`Checker::server_message`] for an SSE event's message: the event's `id` (text the
    /// client keeps and may show or log) is read with it.
    pub fn server_event(&mut self, msg: &Message, event_id: Option<&str>) -> Verdict {
        let extra: Vec<String> = event_id.map(str::to_owned).into_iter().collect();
        let method = match msg.kind {
            Kind::Response | Kind::Error => {
                IdKey::of(&msg.id).and_then(|id| self.pending.remove(&id))
            }
            _ => None,
        };
        if let (Kind::Response, Some("tools/list")) = (&msg.kind, method.as_deref()) {
            return self.tools_list(msg, extra);
        }
        let what = match (&msg.kind, &method) {
            (Kind::Request(m) | Kind::Notification(m), _) => format!("the server's {m}"),
            (_, Some(m)) => format!("the result of {m}"),
            _ => "the server's response".into(),
        };
        let mut texts = Texts::of_message(&msg.body);
        texts.modelled.extend(extra);
        let result = match &self.evals {
            Some(e) if method.as_deref() == Some("tools/call") && e.waits_for(&msg.id) => {
                Some(self.strings(texts.clone()))
            }
            _ => None,
        };
        let verdict = match self.input(texts, &what) {
            Ok(()) => Verdict::Pass,
            Err(_) if matches!(msg.kind, Kind::Notification(_)) => Verdict::Drop,
            // The server's id is the server's: ids are per direction, so an error with it
            // sent to the client could settle one of the client's own requests. The request
            // is dropped and its error goes back to the server.
            Err(r) if matches!(msg.kind, Kind::Request(_)) => {
                self.server_replies.push(r.json(&msg.id));
                Verdict::Drop
            }
            Err(r) => Verdict::Replace(r.json(&msg.id)),
        };
        if let (Some(texts), Some(evals)) = (result, &mut self.evals) {
            let is_error = msg.kind == Kind::Error
                || msg.result().and_then(Value::as_object).is_some_and(|r| {
                    r.iter()
                        .any(|(k, v)| canonical(k) == Some("isError") && *v == Value::Bool(true))
                });
            let blocked = verdict != Verdict::Pass;
            evals.result(&msg.id, texts, is_error, blocked, self.trace.fired());
        }
        verdict
    }

    /// A `tools/list` result: each tool checked on its own (name, description, schemas,
    /// annotations); a violating tool is removed, or the list refused (`poisoned_tools`).
    fn tools_list(&mut self, msg: &Message, extra: Vec<String>) -> Verdict {
        let mut body = msg.body.clone();
        let Some(Value::Object(result)) = body.get_mut("result") else {
            return self.whole(msg, extra, "the tools/list result");
        };
        let tools = match result.remove("tools") {
            Some(Value::Array(tools)) => tools,
            other => {
                if let Some(t) = other {
                    result.insert("tools".into(), t);
                }
                return self.whole(msg, extra, "the tools/list result");
            }
        };
        let mut rest = Texts::of_value(&Value::Object(result.clone()), &["result"]);
        rest.modelled.extend(extra);
        if let Err(r) = self.input(rest, "the tools/list result") {
            return Verdict::Replace(r.json(&msg.id));
        }
        let mut kept = Vec::with_capacity(tools.len());
        let mut removed = false;
        for tool in tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
            let what = format!("tool '{name}' of tools/list");
            match self.input(Texts::of_value(&tool, &["result", "tools"]), &what) {
                Ok(()) => kept.push(tool),
                Err(r) if self.poisoned_tools == PoisonedTools::Refuse => {
                    return Verdict::Replace(r.json(&msg.id))
                }
                Err(r) => {
                    let validator = r.data.as_ref().and_then(|d| d["validator"].as_str());
                    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
                    self.session.tool_removed(name, validator.unwrap_or("?"));
                    removed = true;
                }
            }
        }
        if !removed {
            return Verdict::Pass;
        }
        result.insert("tools".into(), Value::Array(kept));
        Verdict::Replace(serde_json::to_string(&body).unwrap_or_default())
    }

    fn whole(&self, msg: &Message, extra: Vec<String>, what: &str) -> Verdict {
        let mut texts = Texts::of_message(&msg.body);
        texts.modelled.extend(extra);
        match self.input(texts, what) {
            Ok(()) => Verdict::Pass,
            Err(r) => Verdict::Replace(r.json(&msg.id)),
        }
    }
}

/// A call of a tool guardwire removed from the session's `tools/list`: the client was never
/// told of it, so only a client that read the server some other way calls it.
fn removed_tool(name: &str, validator: &str) -> Refusal {
    Refusal {
        code: codes::BLOCKED,
        message: format!(
            "guardwire blocked the call of tool '{name}': it was removed from this session's tools/list (validator '{validator}')"
        ),
        data: Some(json!({"validator": validator, "phase": "input", "removed_tool": name})),
    }
}

/// The revision a message names (an `initialize` request's offer, the 2026-07-28 envelope's
/// `_meta`) must be one guardwire reads.
fn check_version(msg: &Message) -> Result<(), Refusal> {
    let params = msg.params();
    let offered = params.and_then(|p| {
        let meta = p
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
        match msg.method() {
            Some("initialize") => p.get("protocolVersion").or(meta),
            _ => meta,
        }
    });
    match offered {
        None => Ok(()),
        Some(Value::String(v)) if VERSIONS.contains(&v.as_str()) => Ok(()),
        Some(v) => Err(unsupported_version(v.as_str().unwrap_or("?"))),
    }
}

/// The refusal of a revision guardwire does not read.
pub fn unsupported_version(v: &str) -> Refusal {
    let legacy = if v == "2024-11-05" {
        " (the 2024-11-05 HTTP+SSE transport is not proxied: use Streamable HTTP)"
    } else {
        ""
    };
    Refusal {
        code: codes::UNSUPPORTED_VERSION,
        message: format!(
            "MCP protocol version '{v}' is not one guardwire checks{legacy}; supported: {}",
            VERSIONS.join(", ")
        ),
        data: Some(json!({"supported": VERSIONS})),
    }
}
