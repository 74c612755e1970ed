//! The opt-in body capture (`capture:`, docs/capture.md): one JSON line per exchange, in the
//! shape `guardwire eval --replay` reads — the client's request body, the upstream's answer as
//! guardwire read it (whole, or the SSE text: a replay runs it through the stream path again),
//! and what guardwire did (status, outcome, verdicts) under `metadata`. Never a header, so
//! never a key; the path without its query (Gemini's `?key=`).
//!
//! Bodies are written as JSON strings (base64 when they are not UTF-8), never as the raw JSON
//! they may hold: JSON allows raw line breaks between its tokens, so a body copied as it was
//! could end its record's line and write a whole record of its own, which a replay would trust.
//! A string escapes every control character, so each record is exactly one line whatever the
//! client and the upstream sent (the property tested below).
//!
//! Off the request path and bounded: an exchange gathers its record in memory (at most
//! `max_record_bytes`, then it stops gathering), hands it to a bounded queue when its last
//! holder drops — the request's trace, the stream's, the upstream body's tap — without ever
//! waiting (a full queue drops the record, counted), and one writer thread makes the lines
//! (escaping a body of 100 kB into a JSON string takes a few hundred microseconds, which no
//! request's task pays) and appends them, rotating the file at `max_file_bytes`.

use crate::config::CaptureConfig;
use crate::metrics::Metrics;
use crate::upstream::Tap;
use bytes::Bytes;
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// One record for the writer, and where to count what became of it.
struct Line {
    record: Finished,
    metrics: Arc<Metrics>,
}

/// The capture of a runtime: which exchanges are captured, and the writer's queue.
pub struct Capture {
    pub settings: CaptureConfig,
    tx: SyncSender<Line>,
    /// Exchanges offered so far, for `sample`.
    offered: AtomicU64,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("path", &self.settings.path)
            .finish()
    }
}

impl Capture {
    /// Opens `settings.path` (appended to, created with mode 0600: it holds bodies) and starts
    /// the writer; `None` when capture is off.
    pub fn open(settings: &CaptureConfig) -> Result<Option<Arc<Capture>>, String> {
        let Some(path) = settings.path.clone() else {
            return Ok(None);
        };
        let file =
            open_file(&path).map_err(|e| format!("capture.path: cannot open {path}: {e}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let (tx, rx) = sync_channel(settings.queue);
        let writer = Writer {
            path,
            file: Some(file),
            size,
            max_file_bytes: settings.max_file_bytes,
            max_files: settings.max_files,
        };
        std::thread::Builder::new()
            .name("guardwire-capture".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| format!("capture: cannot start the writer: {e}"))?;
        Ok(Some(Arc::new(Capture {
            settings: settings.clone(),
            tx,
            offered: AtomicU64::new(0),
        })))
    }

    /// The record of an exchange on `route`, when the route is captured and the sample takes
    /// it (every n-th exchange, n = 1 / `sample`).
    pub fn start(
        &self,
        route: &'static str,
        protocol: &'static str,
        path: &str,
        request_id: &str,
        key_id: Option<&'static str>,
        metrics: &Arc<Metrics>,
    ) -> Option<Arc<Exchange>> {
        let s = &self.settings;
        if !s.routes.is_empty() && !s.routes.iter().any(|r| r == route) {
            return None;
        }
        let n = self.offered.fetch_add(1, Ordering::Relaxed);
        if ((n + 1) as f64 * s.sample).floor() <= (n as f64 * s.sample).floor() {
            return None;
        }
        Some(Arc::new(Exchange {
            tx: self.tx.clone(),
            metrics: Arc::clone(metrics),
            max: s.max_record_bytes,
            // The record's own id: a request id is the client's to choose (and two tenants
            // may choose the same), so it is metadata, with the key's id.
            id: uuid::Uuid::new_v4().simple().to_string(),
            request_id: request_id.to_owned(),
            key_id,
            route,
            protocol,
            path: path.to_owned(),
            started: crate::audit::now_rfc3339(),
            state: Mutex::default(),
        }))
    }
}

fn open_file(path: &str) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// One exchange's record, gathered as the exchange goes; written when its last holder drops.
pub struct Exchange {
    tx: SyncSender<Line>,
    metrics: Arc<Metrics>,
    max: usize,
    id: String,
    request_id: String,
    key_id: Option<&'static str>,
    route: &'static str,
    protocol: &'static str,
    path: String,
    started: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    request: Option<Bytes>,
    /// The upstream's body as read; `Some` once a success head arrived (`sse`: streamed).
    response: Option<(bool, Vec<u8>)>,
    upstream_status: Option<u16>,
    /// Over `max_record_bytes`: nothing more is gathered, and nothing is written.
    too_large: bool,
    verdicts: Vec<Verdict>,
    finished: Option<(u16, &'static str)>,
}

#[derive(Serialize)]
struct Verdict {
    validator: String,
    phase: &'static str,
    mode: &'static str,
}

impl Exchange {
    fn with(&self, f: impl FnOnce(&mut State)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    fn grow(&self, s: &mut State, more: usize) -> bool {
        let held = s.request.as_ref().map_or(0, Bytes::len)
            + s.response.as_ref().map_or(0, |(_, b)| b.len());
        if s.too_large || held + more > self.max {
            s.too_large = true;
            s.request = None;
            s.response = None;
            return false;
        }
        true
    }

    /// The request body, as the client sent it.
    pub fn request(&self, body: &Bytes) {
        self.with(|s| {
            if self.grow(s, body.len()) {
                s.request = Some(body.clone());
            }
        });
    }

    /// The upstream's response head: its status, and whether its body (read through
    /// [`Tap::data`]) is an SSE stream. An error status's body is recorded as it was checked
    /// ([`Exchange::error_body`]).
    pub fn response_head(&self, status: u16, sse: bool) {
        self.with(|s| {
            s.upstream_status = Some(status);
            if (200..300).contains(&status) && !s.too_large {
                s.response = Some((sse, Vec::new()));
            }
        });
    }

    /// An error status's body as the checks read it (decoded from its charset), so a replay
    /// checks what the proxy checked.
    pub fn error_body(&self, body: &[u8]) {
        self.with(|s| {
            if !s.too_large && self.grow(s, body.len()) {
                s.response = Some((false, body.to_vec()));
            }
        });
    }

    pub fn verdict(&self, validator: &str, phase: &'static str, mode: &'static str) {
        self.with(|s| {
            s.verdicts.push(Verdict {
                validator: validator.to_owned(),
                phase,
                mode,
            })
        });
    }

    /// What the client was answered: the status and `ok`, `blocked` or `error` (a stream's
    /// end overrides its head's).
    pub fn finish(&self, status: u16, outcome: &'static str) {
        self.with(|s| s.finished = Some((status, outcome)));
    }
}

/// An exchange's record once the exchange is over, for the writer to make its line.
struct Finished {
    id: String,
    request_id: String,
    key_id: Option<&'static str>,
    route: &'static str,
    protocol: &'static str,
    path: String,
    started: String,
    ended: String,
    max: usize,
    state: State,
}

impl Finished {
    /// The record's line, or why there is none.
    fn line(&self) -> Result<Vec<u8>, &'static str> {
        let s = &self.state;
        if s.too_large {
            return Err("too_large");
        }
        let request = Body::of(s.request.as_deref().ok_or("unreadable")?);
        let (mut response_body, mut response_sse) = (Body::NONE, Body::NONE);
        match &s.response {
            None => {}
            Some((true, body)) => response_sse = Body::of(body),
            Some((false, body)) => response_body = Body::of(body),
        }
        let (status, outcome) = s.finished.unwrap_or((0, "unfinished"));
        let record = Record {
            id: &self.id,
            route: self.route,
            protocol: self.protocol,
            path: &self.path,
            request_body: request.text,
            request_body_base64: request.base64,
            response_body: response_body.text,
            response_body_base64: response_body.base64,
            response_sse: response_sse.text,
            response_sse_base64: response_sse.base64,
            metadata: Metadata {
                captured_by: "guardwire",
                request_id: &self.request_id,
                key_id: self.key_id,
                started: &self.started,
                ended: &self.ended,
                status,
                outcome,
                upstream_status: s.upstream_status,
                verdicts: &s.verdicts,
            },
        };
        let mut line = serde_json::to_vec(&record).map_err(|_| "unreadable")?;
        // Strings escape every control character, so this never finds one; it stays as the
        // last word on what reaches the file, should a field ever be written another way.
        if memchr::memchr2(b'\n', b'\r', &line).is_some() {
            return Err("unreadable");
        }
        line.push(b'\n');
        if line.len() > self.max {
            return Err("too_large");
        }
        Ok(line)
    }
}

/// A body as a record holds it: its text when it is UTF-8 (a JSON string, escaped), else its
/// bytes in base64 — one of the two, or neither when there is no body.
struct Body<'a> {
    text: Option<&'a str>,
    base64: Option<String>,
}

impl<'a> Body<'a> {
    const NONE: Body<'static> = Body {
        text: None,
        base64: None,
    };

    fn of(bytes: &'a [u8]) -> Body<'a> {
        use base64::Engine;
        match std::str::from_utf8(bytes) {
            Ok(text) => Body {
                text: Some(text),
                base64: None,
            },
            Err(_) => Body {
                text: None,
                base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            },
        }
    }
}

impl Tap for Exchange {
    /// Bytes of the upstream's body, as guardwire read them.
    fn data(&self, bytes: &[u8]) {
        self.with(|s| {
            if s.response.is_some() && self.grow(s, bytes.len()) {
                if let Some((_, body)) = &mut s.response {
                    body.extend_from_slice(bytes);
                }
            }
        });
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let Ok(state) = self.state.get_mut().map(std::mem::take) else {
            return self.metrics.capture.count("unreadable");
        };
        if state.too_large {
            return self.metrics.capture.count("too_large");
        }
        let record = Finished {
            id: std::mem::take(&mut self.id),
            request_id: std::mem::take(&mut self.request_id),
            key_id: self.key_id,
            route: self.route,
            protocol: self.protocol,
            path: std::mem::take(&mut self.path),
            started: std::mem::take(&mut self.started),
            ended: crate::audit::now_rfc3339(),
            max: self.max,
            state,
        };
        let line = Line {
            record,
            metrics: Arc::clone(&self.metrics),
        };
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.metrics.capture.count("queue_full"),
            Err(TrySendError::Disconnected(_)) => self.metrics.capture.count("write_error"),
        }
    }
}

/// A record: the replay file's recorded-exchange shape (docs/evaluation.md), bodies as
/// strings (see [`Body`]), `metadata` being what a replay ignores but for `captured_by`.
#[derive(Serialize)]
struct Record<'a> {
    id: &'a str,
    route: &'static str,
    protocol: &'static str,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_body_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_body_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_sse: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_sse_base64: Option<String>,
    metadata: Metadata<'a>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    captured_by: &'static str,
    /// The exchange's `x-request-id` (the client's, when it sent one).
    request_id: &'a str,
    /// The id of the client's key (`keys[].id`), when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    key_id: Option<&'static str>,
    started: &'a str,
    ended: &'a str,
    /// The status the client was answered with (a stream: 200, its end said by `outcome`).
    status: u16,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_status: Option<u16>,
    verdicts: &'a [Verdict],
}

/// The writer thread: appends each line, rotating at `max_file_bytes`.
struct Writer {
    path: String,
    /// `None` after a failed rotation: lines are dropped (counted) until the next one works.
    file: Option<File>,
    size: u64,
    max_file_bytes: u64,
    max_files: u32,
}

impl Writer {
    fn run(mut self, rx: Receiver<Line>) {
        while let Ok(line) = rx.recv() {
            let result = match line.record.line() {
                Ok(bytes) => {
                    let result = self.write(&bytes);
                    if result == "written" {
                        line.metrics.capture.bytes.inc_by(bytes.len() as u64);
                    }
                    result
                }
                Err(why) => why,
            };
            line.metrics.capture.count(result);
        }
    }

    fn write(&mut self, bytes: &[u8]) -> &'static str {
        let len = bytes.len() as u64;
        if self.file.is_none() || self.size + len > self.max_file_bytes {
            if self.max_files == 0 {
                return "files_full";
            }
            if let Err(e) = self.rotate() {
                tracing::warn!(error = %e, path = %self.path, "cannot rotate the capture file");
                self.file = None;
                return "write_error";
            }
        }
        let Some(file) = &mut self.file else {
            return "write_error";
        };
        match file.write_all(bytes) {
            Ok(()) => {
                self.size += len;
                "written"
            }
            Err(e) => {
                tracing::warn!(error = %e, path = %self.path, "cannot write the capture file");
                "write_error"
            }
        }
    }

    /// `path.N-1` → `path.N`, …, `path` → `path.1`, and a new `path`.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        for k in (1..self.max_files).rev() {
            let from = format!("{}.{k}", self.path);
            match std::fs::rename(&from, format!("{}.{}", self.path, k + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match std::fs::rename(&self.path, format!("{}.1", self.path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.file = Some(open_file(&self.path)?);
        self.size = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
