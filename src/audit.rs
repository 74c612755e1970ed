//! The audit log: one JSON line per block, redaction and monitor-mode hit, and per eval
//! result — except where a request's messages are checked one by one (an MCP batch, an MCP
//! SSE stream): there one line per request ([`Audit::per_request`]) names the first verdict,
//! how often it fired (`count`) and the others (`others`), so one request cannot write a line
//! per message.
//!
//! Lines carry who and what (time, request id, route, validator, phase, mode, the rule that
//! fired) and never the matched text or a body. The file is opened in append mode when the
//! config is loaded, so a reload reopens it (log rotation: move the file, then reload).

use crate::config::AuditConfig;
use serde::Serialize;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where audit lines go; `Audit::default()` writes nothing.
#[derive(Default)]
pub struct Audit {
    sink: Option<Sink>,
}

enum Sink {
    Write(Mutex<Box<dyn Write + Send>>),
    /// One request's verdicts, written to the log as one line when the request ends (or, a
    /// long stream, every [`SUMMARY_EVERY`]).
    Summary(Mutex<Summary>, Arc<Audit>),
}

/// A long-lived request (an MCP GET stream) writes its summary line at most this often.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("enabled", &self.sink.is_some())
            .finish()
    }
}

/// The verdicts of one request so far: one group per validator, phase, mode and rule, the
/// first verdict's line kept whole.
struct Summary {
    groups: Vec<Group>,
    since: Instant,
}

/// Verdicts of one validator, phase, mode and rule in one request.
struct Group {
    first: Owned,
    count: u64,
}

/// An [`AuditEvent`] that outlives its borrows.
struct Owned {
    ts: String,
    request_id: String,
    route: String,
    protocol: String,
    key_id: Option<String>,
    validator: String,
    check: String,
    phase: String,
    mode: String,
    rule: Option<String>,
    matched: Option<String>,
}

impl Owned {
    fn of(e: &AuditEvent<'_>) -> Owned {
        Owned {
            ts: e.ts.clone(),
            request_id: e.request_id.to_owned(),
            route: e.route.to_owned(),
            protocol: e.protocol.to_owned(),
            key_id: e.key_id.map(str::to_owned),
            validator: e.validator.to_owned(),
            check: e.check.to_owned(),
            phase: e.phase.to_owned(),
            mode: e.mode.to_owned(),
            rule: e.rule.map(str::to_owned),
            matched: e.matched.map(str::to_owned),
        }
    }

    fn same_kind(&self, e: &AuditEvent<'_>) -> bool {
        self.validator == e.validator
            && self.check == e.check
            && self.phase == e.phase
            && self.mode == e.mode
            && self.rule.as_deref() == e.rule
    }

    fn event(&self) -> AuditEvent<'_> {
        AuditEvent {
            ts: self.ts.clone(),
            request_id: &self.request_id,
            route: &self.route,
            protocol: &self.protocol,
            key_id: self.key_id.as_deref(),
            validator: &self.validator,
            check: &self.check,
            phase: &self.phase,
            mode: &self.mode,
            rule: self.rule.as_deref(),
            matched: self.matched.as_deref(),
            score: None,
            result: None,
        }
    }
}

/// A request's one line: its first verdict, as a line of its own would be, how many times that
/// validator fired with that phase, mode and rule, and the other kinds that fired.
#[derive(Serialize)]
struct SummaryLine<'a> {
    #[serde(flatten)]
    first: AuditEvent<'a>,
    #[serde(skip_serializing_if = "is_one")]
    count: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    others: Vec<Other<'a>>,
}

#[derive(Serialize)]
struct Other<'a> {
    validator: &'a str,
    #[serde(rename = "type")]
    check: &'a str,
    phase: &'a str,
    mode: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
    count: u64,
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

impl Summary {
    fn add(&mut self, e: &AuditEvent<'_>) {
        match self.groups.iter_mut().find(|g| g.first.same_kind(e)) {
            Some(g) => g.count += 1,
            None => self.groups.push(Group {
                first: Owned::of(e),
                count: 1,
            }),
        }
    }

    /// Writes the line (if anything fired since the last) and starts anew.
    fn flush(&mut self, to: &Audit) {
        self.since = Instant::now();
        let groups = std::mem::take(&mut self.groups);
        let Some((first, rest)) = groups.split_first() else {
            return;
        };
        let others = rest
            .iter()
            .map(|g| Other {
                validator: &g.first.validator,
                check: &g.first.check,
                phase: &g.first.phase,
                mode: &g.first.mode,
                rule: g.first.rule.as_deref(),
                count: g.count,
            })
            .collect();
        to.write(&SummaryLine {
            first: first.first.event(),
            count: first.count,
            others,
        });
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        if let Some(Sink::Summary(summary, parent)) = &self.sink {
            if let Ok(mut s) = summary.lock() {
                s.flush(parent);
            }
        }
    }
}

/// One audit line.
#[derive(Debug, Serialize)]
pub struct AuditEvent<'a> {
    pub ts: String,
    pub request_id: &'a str,
    pub route: &'a str,
    /// The route's protocol (`openai_chat`, `mcp`, `a2a`…).
    pub protocol: &'a str,
    /// The client key's id, when the route authenticates clients.
    pub key_id: Option<&'a str>,
    pub validator: &'a str,
    #[serde(rename = "type")]
    pub check: &'a str,
    pub phase: &'a str,
    /// `enforce` (blocked), `monitor` or `redact`.
    pub mode: &'a str,
    /// The rule of the validator that fired, where it has several kinds (a `pii` kind).
    pub rule: Option<&'a str>,
    /// The matched text, only with `audit.include_match: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<&'a str>,
    /// An eval's score (mode `eval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// An eval's result: `pass`, `fail` or `error` (mode `eval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a str>,
}

impl Audit {
    /// Opens the configured sink: a file (appended to, created if missing, readable by its
    /// owner only: it may hold matched secrets) or `-` for stdout.
    pub fn open(config: &AuditConfig) -> Result<Audit, String> {
        let sink: Box<dyn Write + Send> = match config.path.as_deref() {
            None => return Ok(Audit::default()),
            Some("-") => Box::new(std::io::stdout()),
            Some(path) => {
                let mut options = std::fs::OpenOptions::new();
                options.create(true).append(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                Box::new(
                    options
                        .open(path)
                        .map_err(|e| format!("audit.path: cannot open {path}: {e}"))?,
                )
            }
        };
        Ok(Audit {
            sink: Some(Sink::Write(Mutex::new(sink))),
        })
    }

    /// Lines go to `sink` (`guardwire eval`'s live runs read each exchange's verdicts back).
    pub fn to_writer(sink: Box<dyn Write + Send>) -> Audit {
        Audit {
            sink: Some(Sink::Write(Mutex::new(sink))),
        }
    }

    /// The audit of one request whose verdicts are summarised in one line to `log`, written
    /// when this is dropped (a long stream's every [`SUMMARY_EVERY`] too). Eval results are
    /// written as they come.
    pub fn per_request(log: &Arc<Audit>) -> Audit {
        match log.enabled() {
            true => Audit {
                sink: Some(Sink::Summary(
                    Mutex::new(Summary {
                        groups: Vec::new(),
                        since: Instant::now(),
                    }),
                    Arc::clone(log),
                )),
            },
            false => Audit::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Writes one line (or, per request, adds it to the request's line). A failing sink is
    /// reported in the log, never to the client.
    pub fn record(&self, event: &AuditEvent<'_>) {
        match &self.sink {
            None => {}
            Some(Sink::Write(_)) => self.write(event),
            Some(Sink::Summary(_, parent)) if event.score.is_some() || event.result.is_some() => {
                parent.record(event)
            }
            Some(Sink::Summary(summary, parent)) => {
                let Ok(mut s) = summary.lock() else {
                    return;
                };
                s.add(event);
                if s.since.elapsed() >= SUMMARY_EVERY {
                    s.flush(parent);
                }
            }
        }
    }

    fn write<T: Serialize>(&self, line: &T) {
        let Some(Sink::Write(sink)) = &self.sink else {
            return;
        };
        let Ok(mut line) = serde_json::to_vec(line) else {
            return;
        };
        line.push(b'\n');
        // One write per line, so concurrent lines never interleave.
        let written = match sink.lock() {
            Ok(mut w) => w.write_all(&line).and_then(|()| w.flush()),
            Err(_) => return,
        };
        if let Err(e) = written {
            crate::telemetry::throttle::AUDIT_WRITE.allow("audit", |suppressed| {
                tracing::warn!(error = %e, suppressed, "cannot write the audit log");
            });
        }
    }
}

/// The current time as RFC 3339 UTC with milliseconds (`2026-11-22T17:43:47.123Z`).
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn event<'a>(validator: &'a str, phase: &'a str) -> AuditEvent<'a> {
        AuditEvent {
            ts: now_rfc3339(),
            request_id: "r1",
            route: "tools",
            protocol: "mcp",
            key_id: None,
            validator,
            check: "banned_words",
            phase,
            mode: "enforce",
            rule: None,
            matched: None,
            score: None,
            result: None,
        }
    }

    #[test]
    fn a_request_writes_one_line_however_many_verdicts() {
        let lines = Lines::default();
        let log = Arc::new(Audit::to_writer(Box::new(lines.clone())));
        let request = Audit::per_request(&log);
        for _ in 0..1000 {
            request.record(&event("banned", "response"));
        }
        request.record(&event("secrets", "input"));
        request.record(&event("banned", "input"));
        assert!(
            lines.0.lock().unwrap().is_empty(),
            "written when the request ends"
        );
        drop(request);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["validator"], "banned");
        assert_eq!(line["phase"], "response");
        assert_eq!(line["count"], 1000);
        assert_eq!(line["others"][0]["validator"], "secrets");
        assert_eq!(line["others"][1]["phase"], "input");
        assert_eq!(line["others"][1]["count"], 1);
        // One verdict: the line a verdict always had.
        let request = Audit::per_request(&log);
        request.record(&event("banned", "input"));
        drop(request);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert!(
            last.get("count").is_none() && last.get("others").is_none(),
            "{last}"
        );
        // Nothing fired: no line.
        drop(Audit::per_request(&log));
        assert_eq!(
            String::from_utf8(lines.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .count(),
            2
        );
        assert!(!Audit::per_request(&Arc::new(Audit::default())).enabled());
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_722), (2023, 12, 31));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let now = now_rfc3339();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.ends_with('Z'));
    }
}
