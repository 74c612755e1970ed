//! The audit log: one JSON line per block, redaction and monitor-mode hit, and per eval
//! result.
//!
//! Lines carry who and what (time, request id, route, validator, phase, mode, the rule that
//! fired) and never the matched text or a body. The file is opened in append mode when the
//! config is loaded, so a reload reopens it (log rotation: move the file, then reload).

use crate::config::AuditConfig;
use serde::Serialize;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where audit lines go; `Audit::default()` writes nothing.
#[derive(Default)]
pub struct Audit {
    sink: Option<Mutex<Box<dyn Write + Send>>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("enabled", &self.sink.is_some())
            .finish()
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
            sink: Some(Mutex::new(sink)),
        })
    }

    /// Lines go to `sink` (`guardwire eval`'s live runs read each exchange's verdicts back).
    pub fn to_writer(sink: Box<dyn Write + Send>) -> Audit {
        Audit {
            sink: Some(Mutex::new(sink)),
        }
    }

    pub fn enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Writes one line. A failing sink is reported in the log, never to the client.
    pub fn record(&self, event: &AuditEvent<'_>) {
        let Some(sink) = &self.sink else {
            return;
        };
        let Ok(mut line) = serde_json::to_vec(event) else {
            return;
        };
        line.push(b'\n');
        // One write per line, so concurrent lines never interleave.
        let written = match sink.lock() {
            Ok(mut w) => w.write_all(&line).and_then(|()| w.flush()),
            Err(_) => return,
        };
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot write the audit log");
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
    use super::*;

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
