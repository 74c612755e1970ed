//! An upstream's error answer on the LLM routes, which relay the provider's own errors: the
//! SDKs show its message (`e.message`, `e.body`), so it is text a reader reads. It is read
//! whole (bounded), decoded from its declared charset (one guardwire cannot read is refused,
//! as an answer's is), and every string in it — and every key that is not a field name
//! (`protocol::residual::name_shaped`) — goes through the answer's checks; a body that is not
//! JSON is checked as one text. What passes is relayed as the UTF-8 that was checked, labelled
//! so; a violation is answered with guardwire's own block instead, a masked text the same way
//! (the error cannot be relayed without it).

use super::charset;
use super::exchange::{relay_checked, Head};
use super::request::{RequestCtx, Waited};
use crate::delta::{Channel, Delta};
use crate::error::GatewayError;
use crate::metrics::UpstreamErrorKind;
use crate::policy::{ExchangeGuard, Finding};
use crate::upstream::UpstreamBody;
use http_body_util::{BodyExt, Limited};
use std::borrow::Cow;
use std::time::Duration;

/// The largest error body read: providers' errors are a few hundred bytes.
const MAX_ERROR_BODY: usize = 1 << 20;

/// The channel error texts are checked on (apart from any answer text).
const ERROR_CHANNEL: Channel = Channel::Other(u32::MAX - 3);

impl RequestCtx<'_> {
    /// Step 7, an error status the protocol relays: read, decoded and checked (module docs).
    pub(super) async fn checked_error(
        &self,
        mut parts: http::response::Parts,
        body: UpstreamBody,
        guard: &mut ExchangeGuard,
    ) -> Result<Head, GatewayError> {
        let declared = charset::declared(&parts.headers).map_err(|charset::Unreadable(why)| {
            self.count_upstream_error(UpstreamErrorKind::Encoded);
            GatewayError::Upstream(format!("the upstream's error cannot be checked: {why}"))
        })?;
        if super::headers::encoded(&parts.headers) {
            self.count_upstream_error(UpstreamErrorKind::Encoded);
            return Err(GatewayError::Upstream(
                "the upstream sent an encoded error body that cannot be checked".into(),
            ));
        }
        let timeouts = &self.rt.config.timeouts;
        let idle = Duration::from_millis(timeouts.idle_ms);
        // Never past the exchange's total deadline.
        let left = Duration::from_millis(timeouts.total_ms).saturating_sub(self.started.elapsed());
        let limit = MAX_ERROR_BODY.min(self.rt.config.limits.max_response_bytes);
        let read = self
            .wait(idle.min(left), Limited::new(body, limit).collect())
            .await;
        let bytes = match read {
            Err(Waited::Budget) => {
                return Err(self.budget_spent(guard, "the upstream error stalled"))
            }
            Err(Waited::Limit) => {
                self.count_upstream_error(match left <= idle {
                    true => UpstreamErrorKind::Total,
                    false => UpstreamErrorKind::Idle,
                });
                return Err(GatewayError::UpstreamTimeout(
                    "the upstream error body stalled".into(),
                ));
            }
            Ok(Err(_)) => {
                self.count_upstream_error(UpstreamErrorKind::Reset);
                return Err(GatewayError::Upstream(
                    "the upstream error body failed or was too large to check".into(),
                ));
            }
            Ok(Ok(collected)) => declared.transcoder().whole(collected.to_bytes()),
        };
        declared.label(&mut parts.headers);
        // What is relayed is what was checked: UTF-8 (bytes that are not are read, and sent,
        // as U+FFFD, as the SDKs decode them).
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !readable(&text) {
            self.count_upstream_error(UpstreamErrorKind::Malformed);
            return Err(GatewayError::Upstream(
                "the upstream's error cannot be checked: it is not JSON, and holds escapes or control characters".into(),
            ));
        }
        if let Some(c) = self.trace.capture() {
            c.error_body(text.as_bytes());
        }
        guard.answer(false);
        let verdict = check_error_text(guard, &text);
        let mut masked = false;
        guard.take_findings(|monitored, redacted| {
            self.report().monitor(monitored);
            masked = !redacted.is_empty();
        });
        match verdict {
            Err(finding) => Err(self.report().block(finding)),
            Ok(()) if masked => Err(GatewayError::Upstream(
                "the upstream's error carried text a guardrail masks".into(),
            )),
            Ok(()) => Ok(Head::Relay(relay_checked(parts, text.into_bytes().into()))),
        }
    }
}

/// Every text of an error body through the answer's checks: the strings (and the keys that
/// are not field names) of a JSON body, else the body as one text.
pub(crate) fn check_error_text(guard: &mut ExchangeGuard, text: &str) -> Result<(), Finding> {
    let mut texts = Vec::new();
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => strings(&v, &mut texts),
        Err(_) => texts.push(text.to_owned()),
    }
    for t in texts {
        guard.on_chunk(&Delta::Text {
            choice: 0,
            channel: ERROR_CHANNEL,
            text: Cow::Owned(t),
        })?;
        // Each text on its own: no match across two of them.
        guard.on_chunk(&Delta::Text {
            choice: 0,
            channel: ERROR_CHANNEL,
            text: Cow::Borrowed("\n"),
        })?;
    }
    guard.end_texts()
}

/// Whether the body reads as the text it is: JSON (read as a reader's JSON parser reads it),
/// or plain text without a backslash (an escape a reader may decode: a JSON body with one bad
/// `\u` escape is not JSON to guardwire, and the others would spell text unread) and without
/// control characters (UTF-16 without its mark, read as UTF-8, is letters between NULs).
pub(crate) fn readable(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok()
        || !text
            .chars()
            .any(|c| c == '\\' || (c.is_control() && !matches!(c, '\t' | '\n' | '\r')))
}

/// The strings of `v`, and its keys that are not field names, in document order.
fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                if !crate::protocol::residual::name_shaped(k.as_bytes()) {
                    out.push(k.clone());
                }
                strings(v, out);
            }
        }
        _ => {}
    }
}
