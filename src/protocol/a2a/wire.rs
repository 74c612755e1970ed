//! The agent's answers: a JSON-RPC response (whole, or one SSE event of a stream) whose
//! `result` is, in 1.0, `{"task"}`, `{"message"}`, `{"statusUpdate"}`, `{"artifactUpdate"}`,
//! a bare task (`GetTask`, `CancelTask`) or `{"tasks": […]}` (`ListTasks`); in 0.3 a task,
//! message, `status-update` or `artifact-update` object tagged with `kind`. One lenient shape
//! reads them all ([`Event`]), in every spelling the SDKs read: each field by its camelCase or
//! its snake_case name (protobuf's JSON names and proto names; pydantic's aliases and field
//! names), `null` for a list. A result object it cannot read in that shape fails the answer
//! under every `unknown_content` setting; what it does not name goes to the fallback.
//!
//! Texts: a message's text parts on choice 0, one message after another with a line break
//! between; each part's text read twice, run together with the part before it (a word cut
//! between two parts is one word to a client that concatenates them) and, on
//! [`READ_APART`], after a line break (as the a2a-sdk's `get_message_text` and
//! `get_artifact_text` join parts, so a phrase split between two parts is found too); an artifact's text parts on choice `1 + n` (the `n`th artifact id seen), its
//! appended chunks (`append: true`) continuing its text, a replacing chunk (no `append`) after a
//! line break, and a line break once its last chunk (`lastChunk: true`, or a task's complete
//! artifact) is in, so nothing after it waits on it. Inline files of a text media type are read
//! as text; media files (images, audio) are exempt, as in requests; other files cannot be
//! checked and fail the answer.
//!
//! The artifacts joined: the a2a-sdk's client keeps the task's artifacts in a list (a task
//! event replaces it — an id twice is two entries —, a new artifact is appended, a chunk
//! changes its id's first entry: replaced in place, or parts appended at its end) and its
//! `get_stream_response_text` joins them, artifact after artifact. That text is read too, on
//! choice [`JOINED`], the same two ways: as it grows while chunks arrive in its order, and —
//! when a chunk lands elsewhere than at its end (artifacts streamed interleaved, a replaced
//! artifact) — read again whole from the kept parts, so every join the client makes is
//! checked before the chunk that makes it is released. What is kept and read again is bounded
//! ([`MAX_KEPT_BYTES`], [`MAX_REREAD_BYTES`]); past either, such a chunk fails the answer.

use crate::delta::{Channel, Delta, READ_APART};
use crate::protocol::documents::{self, Documents};
use crate::protocol::mcp::jsonrpc::read_unique;
use crate::protocol::{lenient_opt_str, DecodeError, FrameKind, StreamDecoder};
use serde::Deserialize;
use std::borrow::Cow;

/// Artifacts one answer may carry (each has a channel); beyond, the answer fails closed.
const MAX_ARTIFACTS: usize = 256;

/// An answer past [`MAX_ARTIFACTS`] fails.
fn too_many_artifacts() -> DecodeError {
    DecodeError(format!(
        "the agent's answer has more than {MAX_ARTIFACTS} artifacts"
    ))
}

/// The choice the artifacts' joined text is read on (after every artifact's own).
pub(super) const JOINED: u32 = 1 + MAX_ARTIFACTS as u32;

/// Artifact text kept to read the joined text again (a chunk out of its order); past it,
/// such a chunk fails the answer.
const MAX_KEPT_BYTES: usize = 1 << 20;

/// What a kept part costs besides its text (an empty part is not free to keep or read
/// again).
const PART_COST: usize = 32;

/// Text read again in all, over an answer: an agent alternating artifacts chunk by chunk
/// cannot make the reading quadratic.
const MAX_REREAD_BYTES: usize = 8 << 20;

/// An artifact of the client's task: its id, whether it has text, its kept text parts.
struct TaskArtifact {
    id: String,
    has_text: bool,
    parts: Vec<String>,
}

#[derive(Default)]
pub struct A2aStream {
    /// Artifact ids in the order first seen (their choice is `1 +` the index), and whether
    /// their channel has text.
    artifacts: Vec<(String, bool)>,
    /// The client's task's artifacts, as its SDK keeps them: a task event replaces the list
    /// (an id twice is two entries), a new artifact is appended, a chunk changes the first
    /// entry of its id. Their text parts are kept while their cost stays within
    /// [`MAX_KEPT_BYTES`]; past it, `kept_lost` and no more are kept.
    task: Vec<TaskArtifact>,
    kept_bytes: usize,
    kept_lost: bool,
    reread_bytes: usize,
    /// The joined text has text (a new reading of it starts after a line break).
    joined_has_text: bool,
    /// The task reached a state that ends a stream (or a message answered): the stream may end
    /// here without being cut short.
    done: bool,
}

/// A part: text, inline bytes (1.0 `raw`, 0.3 `file.bytes`) with a media type.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Part<'a> {
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    raw: Option<Cow<'a, str>>,
    #[serde(
        borrow,
        rename = "mediaType",
        alias = "media_type",
        deserialize_with = "lenient_opt_str"
    )]
    media_type: Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    filename: Option<Cow<'a, str>>,
    #[serde(borrow)]
    file: Option<File<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct File<'a> {
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    bytes: Option<Cow<'a, str>>,
    #[serde(
        borrow,
        rename = "mimeType",
        alias = "mime_type",
        deserialize_with = "lenient_opt_str"
    )]
    mime_type: Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Status<'a> {
    #[serde(borrow, deserialize_with = "task_state")]
    state: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Box<Event<'a>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Artifact<'a> {
    #[serde(
        borrow,
        rename = "artifactId",
        alias = "artifact_id",
        deserialize_with = "lenient_opt_str"
    )]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "null_is_empty")]
    parts: Vec<Part<'a>>,
}

/// Any result object: the 1.0 wrappers, and the fields of a task, a message, a status update
/// and an artifact update (1.0 inside their wrapper, 0.3 at the top).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Event<'a> {
    #[serde(borrow)]
    task: Option<Box<Event<'a>>>,
    #[serde(borrow)]
    message: Option<Box<Event<'a>>>,
    #[serde(borrow, rename = "statusUpdate", alias = "status_update")]
    status_update: Option<Box<Event<'a>>>,
    #[serde(borrow, rename = "artifactUpdate", alias = "artifact_update")]
    artifact_update: Option<Box<Event<'a>>>,
    #[serde(borrow, deserialize_with = "null_is_empty")]
    tasks: Vec<Event<'a>>,
    #[serde(borrow, deserialize_with = "lenient_opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Option<Status<'a>>,
    /// Present (even `null`, a list the SDKs read as empty) on a task.
    #[serde(borrow, deserialize_with = "null_is_some_empty")]
    artifacts: Option<Vec<Artifact<'a>>>,
    #[serde(rename = "taskId", alias = "task_id")]
    task_id: Option<serde::de::IgnoredAny>,
    #[serde(borrow, deserialize_with = "null_is_empty")]
    history: Vec<Event<'a>>,
    #[serde(borrow, deserialize_with = "null_is_empty")]
    parts: Vec<Part<'a>>,
    #[serde(borrow)]
    artifact: Option<Artifact<'a>>,
    append: Option<bool>,
    #[serde(rename = "lastChunk", alias = "last_chunk")]
    last_chunk: Option<bool>,
    #[serde(rename = "final")]
    is_final: Option<bool>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// A task's state as the SDKs read it: its name, or (protobuf's JSON reader accepts both) its
/// number in a2a.proto's `TaskState`, read as that name. A number the enum does not have, or
/// anything else, is no known state: the stream is not taken to have ended (a stream that stops
/// there is a cut one, and fails closed).
fn task_state<'de: 'a, 'a, D>(d: D) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    const BY_NUMBER: [&str; 9] = [
        "TASK_STATE_UNSPECIFIED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    ];
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum State<'a> {
        Number(u64),
        #[serde(borrow)]
        Name(Cow<'a, str>),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Option::<State<'a>>::deserialize(d)? {
        Some(State::Name(n)) => Some(n),
        Some(State::Number(n)) => usize::try_from(n)
            .ok()
            .and_then(|n| BY_NUMBER.get(n))
            .map(|s| Cow::Borrowed(*s)),
        Some(State::Other(_)) | None => None,
    })
}

/// States after which an agent's stream ends: terminal, or waiting on the client.
fn ends_stream(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
            | "completed"
            | "failed"
            | "canceled"
            | "rejected"
            | "input-required"
            | "auth-required"
    )
}

const BREAK: Cow<'static, str> = Cow::Borrowed("\n");

/// A list that may be `null`, kept as present: `Some` of the list, empty for `null`.
fn null_is_some_empty<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Some(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default()))
}

/// A list that may be `null` (protobuf's JSON reader and pydantic read `null` as no list).
fn null_is_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl A2aStream {
    fn text<'a>(out: &mut Vec<Delta<'a>>, choice: u32, text: Cow<'a, str>) {
        if !text.is_empty() {
            out.push(Delta::Text {
                choice,
                channel: Channel::Content,
                text,
            });
        }
    }

    /// A part's text: run on with what came before, and on [`READ_APART`] after a line break.
    fn part<'a>(out: &mut Vec<Delta<'a>>, choice: u32, text: Cow<'a, str>) {
        if text.is_empty() {
            return;
        }
        for t in [BREAK, text.clone()] {
            out.push(Delta::Text {
                choice,
                channel: Channel::Other(READ_APART),
                text: t,
            });
        }
        Self::text(out, choice, text);
    }

    /// The texts of `parts`: text parts, and inline files of a text media type.
    fn texts_of(parts: Vec<Part<'_>>) -> Result<Vec<Cow<'_, str>>, DecodeError> {
        let mut texts = Vec::new();
        for p in parts {
            if let Some(t) = p.text {
                texts.push(t);
            }
            let (bytes, media, name) = match (p.raw, p.file) {
                (Some(raw), _) => (Some(raw), p.media_type, p.filename),
                (None, Some(f)) => (f.bytes, f.mime_type, f.name),
                (None, None) => (None, None, None),
            };
            let Some(bytes) = bytes else { continue };
            let media = media
                .as_deref()
                .or_else(|| documents::media_type_of_name(name.as_deref()));
            let mut docs = Documents::default();
            match docs.base64(media, &bytes, "file") {
                Ok(Some(text)) => texts.push(Cow::Owned(text)),
                Ok(None) if docs.unreadable.is_empty() => {} // an image or audio
                _ => {
                    return Err(DecodeError(format!(
                        "the agent sent a file guardwire cannot read as text ({})",
                        media.unwrap_or("no media type")
                    )))
                }
            }
        }
        Ok(texts)
    }

    /// `texts` as parts on `choice`; true when there was any.
    fn parts<'a>(out: &mut Vec<Delta<'a>>, choice: u32, texts: &[Cow<'a, str>]) -> bool {
        let before = out.len();
        for t in texts {
            Self::part(out, choice, t.clone());
        }
        out.len() > before
    }

    /// A message: its texts on choice 0, then a line break.
    fn message<'a>(out: &mut Vec<Delta<'a>>, m: Event<'a>) -> Result<(), DecodeError> {
        if Self::parts(out, 0, &Self::texts_of(m.parts)?) {
            Self::text(out, 0, BREAK);
        }
        Ok(())
    }

    /// An artifact's index among those seen (made if new).
    fn slot(&mut self, id: Option<&str>) -> Result<usize, DecodeError> {
        // No id is the empty id, as the SDKs' readers take it (protobuf's default): chunks
        // without one continue each other.
        let id = id.unwrap_or_default();
        if let Some(slot) = self.artifacts.iter().position(|(a, _)| a == id) {
            return Ok(slot);
        }
        if self.artifacts.len() >= MAX_ARTIFACTS {
            return Err(too_many_artifacts());
        }
        self.artifacts.push((id.to_owned(), false));
        Ok(self.artifacts.len() - 1)
    }

    /// An artifact (or a chunk of one) on its own choice: `append` continues its text,
    /// `last` ends it.
    fn artifact<'a>(
        &mut self,
        out: &mut Vec<Delta<'a>>,
        slot: usize,
        texts: &[Cow<'a, str>],
        append: bool,
        last: bool,
    ) {
        let choice = 1 + slot as u32;
        if !append && self.artifacts[slot].1 {
            // A chunk that replaces what came: a text of its own.
            Self::text(out, choice, BREAK);
        }
        if Self::parts(out, choice, texts) {
            self.artifacts[slot].1 = true;
        }
        if last && self.artifacts[slot].1 {
            Self::text(out, choice, BREAK);
        }
    }

    /// The cost of keeping `parts`.
    fn cost<T: AsRef<str>>(parts: &[T]) -> usize {
        parts.iter().map(|t| t.as_ref().len() + PART_COST).sum()
    }

    /// Keeps `texts` as the parts of the task's artifact `at` (`append`: after those it has).
    fn keep(&mut self, at: usize, texts: &[Cow<'_, str>], append: bool) {
        if !texts.iter().all(|t| t.is_empty()) {
            self.task[at].has_text = true;
        } else if !append {
            self.task[at].has_text = false;
        }
        if self.kept_lost {
            return;
        }
        if !append {
            self.kept_bytes -= Self::cost(&self.task[at].parts);
            self.task[at].parts.clear();
        }
        let added = Self::cost(texts);
        if self.kept_bytes + added > MAX_KEPT_BYTES {
            self.kept_lost = true;
            self.task.iter_mut().for_each(|a| a.parts = Vec::new());
            return;
        }
        self.kept_bytes += added;
        self.task[at]
            .parts
            .extend(texts.iter().map(|t| t.to_string()));
    }

    /// Starts a new reading of the joined text.
    fn new_joined_reading(&mut self, out: &mut Vec<Delta<'_>>) {
        if std::mem::take(&mut self.joined_has_text) {
            Self::text(out, JOINED, BREAK);
        }
    }

    /// A task event: the client takes it as its task, so its artifacts (none, when it has
    /// none) are a new joined text, in their order.
    fn task_artifacts<'a>(
        &mut self,
        out: &mut Vec<Delta<'a>>,
        artifacts: Vec<Artifact<'a>>,
    ) -> Result<(), DecodeError> {
        if artifacts.len() > MAX_ARTIFACTS {
            return Err(too_many_artifacts());
        }
        self.new_joined_reading(out);
        self.task.clear();
        self.kept_bytes = 0;
        self.kept_lost = false;
        for a in artifacts {
            let id = a.id.as_deref().unwrap_or_default().to_owned();
            let slot = self.slot(Some(&id))?;
            let texts = Self::texts_of(a.parts)?;
            self.artifact(out, slot, &texts, false, true);
            self.joined_has_text |= Self::parts(out, JOINED, &texts);
            self.task.push(TaskArtifact {
                id,
                has_text: false,
                parts: Vec::new(),
            });
            self.keep(self.task.len() - 1, &texts, true);
        }
        Ok(())
    }

    /// A streamed chunk of an artifact: on its own choice, and in the joined text — read on
    /// as it grows when the chunk lands at its end, else read again whole.
    fn artifact_chunk<'a>(
        &mut self,
        out: &mut Vec<Delta<'a>>,
        a: Artifact<'a>,
        append: bool,
        last: bool,
    ) -> Result<(), DecodeError> {
        let id = a.id.as_deref().unwrap_or_default().to_owned();
        let slot = self.slot(Some(&id))?;
        let texts = Self::texts_of(a.parts)?;
        self.artifact(out, slot, &texts, append, last);
        // Where the client's task has it: its id's first entry, else appended.
        let at = match self.task.iter().position(|t| t.id == id) {
            Some(at) => at,
            None => {
                if self.task.len() >= MAX_ARTIFACTS {
                    return Err(too_many_artifacts());
                }
                self.task.push(TaskArtifact {
                    id,
                    has_text: false,
                    parts: Vec::new(),
                });
                self.task.len() - 1
            }
        };
        let had_text = self.task[at].has_text;
        let later_text = self.task[at + 1..].iter().any(|t| t.has_text);
        self.keep(at, &texts, append);
        if !later_text && (append || !had_text) {
            self.joined_has_text |= Self::parts(out, JOINED, &texts);
            return Ok(());
        }
        self.reread_joined(out)
    }

    /// The joined text read again whole, from the kept parts in the client's order.
    fn reread_joined(&mut self, out: &mut Vec<Delta<'_>>) -> Result<(), DecodeError> {
        let unreadable = || {
            DecodeError(
                "the agent streamed an artifact's text out of the order the client joins artifacts in, past what guardwire keeps to read the joined text again".into(),
            )
        };
        self.reread_bytes = self.reread_bytes.saturating_add(self.kept_bytes);
        if self.kept_lost || self.reread_bytes > MAX_REREAD_BYTES {
            return Err(unreadable());
        }
        self.new_joined_reading(out);
        for artifact in &self.task {
            for t in &artifact.parts {
                Self::part(out, JOINED, Cow::Owned(t.clone()));
                self.joined_has_text = true;
            }
        }
        Ok(())
    }

    /// One result object (`task`: it is a task, by the wrapper it came in).
    fn event<'a>(
        &mut self,
        out: &mut Vec<Delta<'a>>,
        e: Event<'a>,
        task: bool,
    ) -> Result<(), DecodeError> {
        if let Some(t) = e.task {
            self.event(out, *t, true)?;
        }
        for wrapped in [e.status_update, e.artifact_update].into_iter().flatten() {
            self.event(out, *wrapped, false)?;
        }
        // A task: by its wrapper, its 0.3 kind, its artifacts, or (a bare result) a status
        // without the task id an update names. The client replaces its task with it.
        let is_task = task
            || e.kind.as_deref() == Some("task")
            || e.artifacts.is_some()
            || (e.status.is_some() && e.task_id.is_none() && e.kind.is_none());
        if let Some(m) = e.message {
            // A message answers the call: nothing follows it.
            self.done = true;
            Self::message(out, *m)?;
        }
        for t in e.tasks {
            self.event(out, t, true)?;
        }
        if e.is_final == Some(true) {
            self.done = true;
        }
        // A task's history, then its status message (the latest), as they were said.
        for m in e.history {
            Self::message(out, m)?;
        }
        if let Some(status) = e.status {
            if status.state.as_deref().is_some_and(ends_stream) {
                self.done = true;
            }
            if let Some(m) = status.message {
                Self::message(out, *m)?;
            }
        }
        if is_task {
            self.task_artifacts(out, e.artifacts.unwrap_or_default())?;
        }
        if let Some(a) = e.artifact {
            let append = e.append == Some(true);
            self.artifact_chunk(out, a, append, e.last_chunk == Some(true))?;
        }
        if e.kind.as_deref() == Some("message") {
            self.done = true;
        }
        if !e.parts.is_empty() {
            Self::message(
                out,
                Event {
                    parts: e.parts,
                    ..Event::default()
                },
            )?;
        }
        Ok(())
    }
}

impl StreamDecoder for A2aStream {
    fn decode<'a>(
        &mut self,
        _event: Option<&[u8]>,
        data: &'a [u8],
        out: &mut Vec<Delta<'a>>,
    ) -> Result<FrameKind, DecodeError> {
        // A key twice at any depth fails the answer: the client's reader may take the copy
        // the checks did not read as the text it is (as on MCP routes).
        if let Err(e) = read_unique(data) {
            return Err(DecodeError(format!(
                "the agent's answer is not JSON guardwire reads: {}",
                e.message
            )));
        }
        let envelope: Envelope<'a> = serde_json::from_slice(data)
            .map_err(|e| DecodeError::json("malformed A2A JSON-RPC response", &e))?;
        if envelope.error.is_some() && envelope.result.is_some() {
            // Readers disagree on it: the a2a-sdk reads the result beside an empty or false
            // `error`, guardwire would read an error answer.
            return Err(DecodeError(
                "an A2A JSON-RPC response with both result and error".into(),
            ));
        }
        if envelope.error.is_some() {
            // The agent's own error: its message is read by the fallback; the stream ends.
            self.done = true;
            return Ok(FrameKind::UpstreamError);
        }
        let Some(result) = envelope.result else {
            return Err(DecodeError(
                "an A2A JSON-RPC response without result or error".into(),
            ));
        };
        // An object is a task, a message or an event, in any spelling the SDKs read: one
        // guardwire cannot read in that shape fails the answer, whatever `unknown_content` says
        // (the client's SDK might read its text). Any other result (of a method guardwire does
        // not know) yields no delta: the fallback reads its strings.
        match serde_json::from_str::<Event<'a>>(result.get()) {
            Ok(event) => {
                let before = out.len();
                if let Err(e) = self.event(out, event, false) {
                    out.truncate(before);
                    return Err(e);
                }
            }
            Err(e) if result.get().starts_with('{') => {
                return Err(DecodeError::json(
                    "an A2A result guardwire cannot read as a task, a message or an event",
                    &e,
                ))
            }
            Err(_) => {}
        }
        Ok(FrameKind::Data)
    }

    fn complete_without_terminal(&self) -> bool {
        self.done
    }
}
