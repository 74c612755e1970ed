//! One recorded exchange through the checks the proxy runs, in the proxy's order and with its
//! functions: the request parsed by its protocol and completed as the proxy completes it
//! ([`crate::proxy::complete_input`]), BeforeCall ([`crate::proxy::before_call`]); the answer
//! decoded whole or per SSE frame by the protocol's decoders and run through the frame checker
//! with its fallback ([`check_payload`]); the token estimate; AfterCall. No model is called:
//! judged checks are not run (the outcome says so), nor are latency budgets or the hold-back
//! limit (they depend on time and on the client).

use super::record::{self, Answer, Exchange};
use crate::delta::Delta;
use crate::policy::{ExchangeGuard, Finding, Policy};
use crate::protocol::{self, Protocol};
use crate::proxy::check::{check_payload, Fallback, Needs, Stop};
use crate::proxy::estimate;
use crate::proxy::{Route, Runtime};
use crate::sse::SseFramer;
use bytes::Bytes;
use std::sync::Arc;

/// Where in an exchange a verdict came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// The request's checks, before the call.
    BeforeCall,
    /// The answer's deltas, as they stream (or in one pass over a whole answer).
    OnChunk,
    /// The whole answer, once it ended.
    AfterCall,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::BeforeCall, Stage::OnChunk, Stage::AfterCall];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::BeforeCall => "before_call",
            Stage::OnChunk => "on_chunk",
            Stage::AfterCall => "after_call",
        }
    }
}

/// What the proxy would have done with an exchange.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Released (possibly with redactions).
    Passed,
    /// Blocked by an enforcing validator.
    Blocked {
        stage: Stage,
        validator: u32,
        message: String,
        /// The text that matched, when the config keeps it (`audit.include_match`; a cases
        /// run always does, for its HTML report).
        matched: Option<String>,
    },
    /// Refused without a validator: what it could not check (fail closed), or a limit.
    Refused { stage: Stage, reason: String },
}

/// One exchange's outcome.
pub struct Outcome {
    /// The line it came from (from 1).
    pub line: u64,
    pub id: String,
    pub route: &'static str,
    pub policy: Arc<Policy>,
    pub verdict: Verdict,
    /// Monitor-mode findings: (validator, stage).
    pub monitored: Vec<(u32, Stage)>,
    /// Validators that redacted something.
    pub redacted: Vec<u32>,
    /// An answer was recorded (else only BeforeCall ran).
    pub answered: bool,
    /// The policy has judged checks, which a replay does not run.
    pub judged_skipped: bool,
}

/// The route an exchange is checked under: `forced` (`--route`), else the line's, else the
/// first route of the line's protocol (OpenAI chat when it names none).
/// The protocol an exchange speaks on `route`: the route's own, or the one `asked` names if
/// the route's family serves it.
pub(super) fn protocol_on(
    route: &Route,
    asked: Option<&dyn Protocol>,
) -> Result<&'static dyn Protocol, String> {
    let Some(p) = asked else {
        return Ok(route.protocol);
    };
    protocol::family(route.protocol)
        .iter()
        .find(|f| f.name() == p.name())
        .copied()
        .ok_or_else(|| {
            format!(
                "route {} ({}) does not serve protocol {}",
                route.name,
                route.protocol.name(),
                p.name()
            )
        })
}

pub(super) fn route<'r>(
    rt: &'r Runtime,
    forced: Option<&str>,
    ex: &Exchange<'_>,
) -> Result<&'r Route, String> {
    if let Some(name) = forced.or(ex.route.as_deref()) {
        return rt
            .routes
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| format!("route {name:?} is not in the config"));
    }
    let p = ex
        .protocol
        .or_else(|| protocol::by_name("openai_chat"))
        .ok_or("no openai_chat protocol")?;
    rt.routes
        .iter()
        .find(|r| r.protocol.name() == p.name())
        .ok_or_else(|| format!("no route serves protocol {}", p.name()))
}

/// Checks one exchange as the proxy would. `Err`: the line cannot be replayed (an unknown
/// route, a protocol its route does not serve).
pub fn check(
    rt: &Runtime,
    forced_route: Option<&str>,
    ex: &Exchange<'_>,
    line: u64,
) -> Result<Outcome, String> {
    let route = route(rt, forced_route, ex)?;
    let protocol = protocol_on(route, ex.protocol)?;
    let policy = policy_of(rt, route, ex)?;
    let mut out = Outcome {
        line,
        id: ex.id.clone(),
        route: route.name,
        policy: Arc::clone(policy),
        verdict: Verdict::Passed,
        monitored: Vec::new(),
        redacted: Vec::new(),
        answered: !matches!(ex.answer, Answer::None),
        judged_skipped: !(policy.judged_input().is_empty() && policy.judged_output().is_empty()),
    };
    out.verdict = run(rt, route, protocol, policy, ex, &mut out);
    Ok(out)
}

/// The packs an exchange is decided by: those of the key its record names, when that key has
/// its own (as the proxy decided it), else the route's. A key the config does not have: the
/// line cannot be replayed (under the route's packs it would be judged as another tenant's).
fn policy_of<'r>(
    rt: &'r Runtime,
    route: &'r Route,
    ex: &Exchange<'_>,
) -> Result<&'r Arc<Policy>, String> {
    let Some(id) = &ex.key_id else {
        return Ok(&route.policy);
    };
    let key = rt
        .keys
        .iter()
        .find(|k| k.id == id.as_str())
        .ok_or_else(|| format!("metadata.key_id {id:?} is not one of the config's keys"))?;
    Ok(key.policy.as_ref().unwrap_or(&route.policy))
}

fn refused(stage: Stage, reason: impl Into<String>) -> Verdict {
    Verdict::Refused {
        stage,
        reason: reason.into(),
    }
}

fn blocked(policy: &Policy, stage: Stage, finding: &Finding) -> Verdict {
    Verdict::Blocked {
        stage,
        validator: finding.validator,
        message: policy.message(finding),
        matched: finding.matched.clone(),
    }
}

/// The monitor-mode findings and redactions since the last call, noted under `stage`.
fn note(guard: &mut ExchangeGuard, stage: Stage, out: &mut Outcome) {
    guard.take_findings(|monitored, redacted| {
        out.monitored
            .extend(monitored.iter().map(|f| (f.validator, stage)));
        out.redacted.extend(redacted.iter().map(|f| f.validator));
    });
}

fn run(
    rt: &Runtime,
    route: &Route,
    protocol: &'static dyn Protocol,
    policy: &Arc<Policy>,
    ex: &Exchange<'_>,
    out: &mut Outcome,
) -> Verdict {
    let limits = &rt.config.limits;
    let policy = Arc::clone(policy);
    if ex.request.len() > limits.max_request_bytes {
        return refused(
            Stage::BeforeCall,
            "the request is larger than limits.max_request_bytes",
        );
    }
    let streamed = matches!(ex.answer, Answer::Sse(_));
    let path = ex
        .path
        .clone()
        .unwrap_or_else(|| record::default_path(protocol, streamed, &ex.request));
    let mut parsed = match protocol.parse_request(&ex.request, &path) {
        Ok(p) => p,
        Err(e) => return refused(Stage::BeforeCall, e.to_string()),
    };
    if let Err(e) = crate::proxy::stored_refusal(route, &parsed.documents).and_then(|()| {
        crate::proxy::complete_input(route.unknown_content, protocol, &ex.request, &mut parsed)
    }) {
        return refused(Stage::BeforeCall, e.to_string());
    }
    let (mut guard, verdict) = crate::proxy::before_call(rt, &policy, &parsed);
    note(&mut guard, Stage::BeforeCall, out);
    if let Err(finding) = verdict {
        return blocked(&policy, Stage::BeforeCall, &finding);
    }
    drop(parsed);
    let fallback = Fallback {
        structural: protocol.structural(),
        unknown: route.unknown_content,
        fully_read: false,
    };
    let request = || {
        estimate::RequestCopy {
            protocol,
            body: Bytes::copy_from_slice(&ex.request),
            path: path.clone(),
        }
        .tokens()
    };
    let verdict = match &ex.answer {
        Answer::None => return Verdict::Passed,
        Answer::Whole(body) => {
            if body.len() > limits.max_response_bytes {
                return refused(
                    Stage::OnChunk,
                    "the answer is larger than limits.max_response_bytes",
                );
            }
            whole(&mut guard, protocol, body, fallback, request)
        }
        // A provider's error answer is relayed checked as the proxy checks it
        // (`proxy/error_body.rs`); one it could not read was never relayed.
        Answer::Error(None) => Err(refused(
            Stage::OnChunk,
            "the upstream's error answer could not be checked (none was relayed)",
        )),
        Answer::Error(Some(body)) => {
            let verdict = error_answer(&mut guard, body);
            let before = out.redacted.len();
            note(&mut guard, Stage::OnChunk, out);
            // A masked error is not relayed (the proxy answers 502).
            if verdict.is_ok() && out.redacted.len() > before {
                return refused(
                    Stage::OnChunk,
                    "the upstream's error carried text a guardrail masks",
                );
            }
            verdict
        }
        Answer::Sse(body) => streamed_answer(
            &mut guard,
            protocol,
            body,
            Fallback {
                structural: protocol.stream_structural(),
                ..fallback
            },
            limits.max_frame_bytes,
            request,
        ),
    };
    let stage = match &verdict {
        Err(Verdict::Blocked { stage, .. } | Verdict::Refused { stage, .. }) => *stage,
        _ => Stage::AfterCall,
    };
    note(&mut guard, stage, out);
    verdict.err().unwrap_or(Verdict::Passed)
}

/// A whole answer: decoded, the frame checker over it, the estimate, AfterCall (as
/// `check_whole` in the proxy).
fn whole(
    guard: &mut ExchangeGuard,
    protocol: &'static dyn Protocol,
    body: &[u8],
    fallback: Fallback,
    request: impl FnOnce() -> Option<u64>,
) -> Result<(), Verdict> {
    guard.answer(false);
    let mut deltas = Vec::new();
    if protocol.decode_response(body, &mut deltas).is_err() {
        return Err(refused(
            Stage::OnChunk,
            "the upstream sent a malformed response",
        ));
    }
    let mut spans = Vec::new();
    on_chunk(guard, &deltas, body, fallback, &mut spans)?;
    estimate::fill(guard, request, || {
        let (texts, total) = estimate::answer_texts(&deltas);
        estimate::count(texts.into_iter(), total)
    });
    after_call(guard)
}

/// A provider's error answer: every text of it through the answer's checks.
fn error_answer(guard: &mut ExchangeGuard, body: &[u8]) -> Result<(), Verdict> {
    let text = String::from_utf8_lossy(body);
    if !crate::proxy::readable(&text) {
        return Err(refused(
            Stage::OnChunk,
            "the upstream's error is not JSON and holds escapes or control characters",
        ));
    }
    guard.answer(false);
    crate::proxy::check_error_text(guard, &text)
        .map_err(|f| blocked(guard.policy(), Stage::OnChunk, &f))
}

fn on_chunk(
    guard: &mut ExchangeGuard,
    deltas: &[Delta<'_>],
    data: &[u8],
    fallback: Fallback,
    spans: &mut Vec<crate::proxy::redact::TextSpan>,
) -> Result<(), Verdict> {
    match check_payload(guard, deltas, data, fallback, &mut Needs::new(), spans) {
        Ok(()) => Ok(()),
        Err(Stop::Violation(f)) => Err(blocked(guard.policy(), Stage::OnChunk, &f)),
        Err(Stop::Unchecked(why)) => Err(refused(Stage::OnChunk, why)),
    }
}

fn after_call(guard: &mut ExchangeGuard) -> Result<(), Verdict> {
    guard
        .after_call()
        .map_err(|f| blocked(guard.policy(), Stage::AfterCall, &f))
}

/// A streamed answer: framed, each frame decoded and checked, to the terminal event (as
/// `GuardedStream` in the proxy: frames without data must be inert, a stream cut before its
/// terminal event fails unless the protocol takes it for complete).
fn streamed_answer(
    guard: &mut ExchangeGuard,
    protocol: &'static dyn Protocol,
    body: &[u8],
    fallback: Fallback,
    max_frame: usize,
    request: impl FnOnce() -> Option<u64>,
) -> Result<(), Verdict> {
    guard.answer(true);
    let mut decoder = protocol.stream_decoder();
    if decoder.repeats_text() {
        guard.keep_full_text(max_frame);
    }
    let mut framer = SseFramer::new(max_frame);
    let mut frames = Vec::new();
    if let Err(e) = framer.push(&Bytes::copy_from_slice(body), &mut frames) {
        return Err(refused(Stage::OnChunk, e.to_string()));
    }
    let (mut answer_text, mut answer_bytes) = (String::new(), 0usize);
    let mut terminal = false;
    for frame in &frames {
        let fields = frame.fields();
        let Some(data) = fields.data else {
            if frame.is_inert() {
                continue;
            }
            return Err(refused(
                Stage::OnChunk,
                "the upstream sent a frame without data",
            ));
        };
        // (As the proxy decides it: `proxy/body/pipeline.rs`.)
        if fields.line_breaks_for_some_reader {
            return Err(refused(
                Stage::OnChunk,
                "the upstream sent a line holding a line break some clients read (U+2028, NEL, VT, FF, …)",
            ));
        }
        if fields.unknown_field {
            return Err(refused(
                Stage::OnChunk,
                "the upstream sent a line that is no field of the SSE standard (some clients read it)",
            ));
        }
        let mut frame_deltas = Vec::new();
        let kind = decoder
            .decode(fields.event, &data, &mut frame_deltas)
            .map_err(|_| refused(Stage::OnChunk, "the upstream sent a malformed stream frame"))?;
        if guard.wants_usage() {
            for d in &frame_deltas {
                if let Delta::Text { text, .. } = d {
                    answer_bytes += text.len();
                    if answer_text.len() + text.len() <= estimate::MAX_KEPT {
                        answer_text.push_str(text);
                    }
                }
            }
        }
        let fallback = Fallback {
            fully_read: decoder.fully_read(),
            ..fallback
        };
        on_chunk(guard, &frame_deltas, &data, fallback, &mut Vec::new())?;
        let decoded = crate::proxy::check::decoder_values(guard, &*decoder, &data);
        match decoded.and_then(|()| crate::proxy::check::field_values(guard, frame.field_values()))
        {
            Ok(()) => {}
            Err(Stop::Violation(f)) => return Err(blocked(guard.policy(), Stage::OnChunk, &f)),
            Err(Stop::Unchecked(why)) => return Err(refused(Stage::OnChunk, why)),
        }
        if matches!(
            kind,
            protocol::FrameKind::Terminal | protocol::FrameKind::UpstreamError
        ) {
            terminal = true;
            break;
        }
    }
    if !terminal {
        if let Some(last) = framer.finish() {
            if !last.raw.iter().all(|b| matches!(b, b'\r' | b'\n')) {
                return Err(refused(
                    Stage::OnChunk,
                    "the upstream stream ended inside a frame",
                ));
            }
        }
        if !decoder.complete_without_terminal() {
            after_call(guard)?;
            return Err(refused(
                Stage::AfterCall,
                "the upstream stream ended before its terminal event",
            ));
        }
    }
    estimate::fill(guard, request, || {
        estimate::count(std::iter::once(answer_text.as_str()), answer_bytes)
    });
    after_call(guard)
}
