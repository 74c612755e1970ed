//! `capture:`: the opt-in body capture `guardwire eval --replay` reads (docs/capture.md). Off
//! unless `capture.path` is set.

use super::{ConfigError, ProtocolId, RouteConfig};
use serde::Deserialize;

/// Which exchanges are written, where, and the bounds on it all.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// The JSON Lines file records are appended to; unset: no capture.
    pub path: Option<String>,
    /// The routes captured (configured names or built-in ones); empty: every route but MCP's.
    pub routes: Vec<String>,
    /// The share of exchanges captured, 0–1 (every n-th, not random).
    pub sample: f64,
    /// The largest record (request and response bodies); a larger exchange is not captured.
    pub max_record_bytes: usize,
    /// The size the file rotates at.
    pub max_file_bytes: u64,
    /// Rotated files kept (`path.1` … `path.N`); 0: writing stops when the file is full.
    pub max_files: u32,
    /// Records waiting for the writer; a record finding the queue full is dropped.
    pub queue: usize,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            path: None,
            routes: Vec::new(),
            sample: 1.0,
            max_record_bytes: 1 << 20,
            max_file_bytes: 256 << 20,
            max_files: 4,
            queue: 1024,
        }
    }
}

impl CaptureConfig {
    /// The settings checked against the config's routes: each of `routes` must exist and not
    /// be an MCP route (its messages are not exchanges a replay reads).
    pub(super) fn validate(&self, routes: &[RouteConfig]) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(format!("capture.{m}")));
        if self.path.as_deref() == Some("") {
            return bad(
                "path: must not be empty (leave capture.path out to capture nothing)".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.sample) {
            return bad(format!("sample: {} is not between 0 and 1", self.sample));
        }
        if self.max_record_bytes < 1024 {
            return bad("max_record_bytes: must be at least 1024".into());
        }
        if self.max_file_bytes < self.max_record_bytes as u64 {
            return bad("max_file_bytes: must be at least max_record_bytes".into());
        }
        if self.queue == 0 {
            return bad("queue: must be at least 1".into());
        }
        for (i, name) in self.routes.iter().enumerate() {
            let protocol = match routes.iter().find(|r| &r.name == name) {
                Some(r) => ProtocolId::from_name(&r.protocol),
                None => ProtocolId::from_name(name),
            };
            match protocol {
                None => {
                    return bad(format!(
                        "routes[{i}]: `{name}` is neither a configured route nor a built-in one"
                    ))
                }
                Some(ProtocolId::Mcp) => {
                    return bad(format!(
                        "routes[{i}]: `{name}` is an MCP route; its messages are not captured (a replay reads model exchanges)"
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}
