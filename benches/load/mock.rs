//! The mock upstream: each protocol's stream, served on its own thread and runtime.

use crate::clock::{now_ns, FLOOD_MARK, HOLD_MARK, STAMP, STAMP_DIGITS};
use crate::opts::Protocol;
use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

/// One SSE event, with the offset of its stamp digits if it carries one.
#[derive(Clone)]
pub(super) struct Event {
    bytes: Bytes,
    stamp: Option<usize>,
}

fn event(text: String) -> Event {
    let stamp = text.find(STAMP).map(|i| i + 2);
    Event {
        bytes: Bytes::from(text),
        stamp,
    }
}

fn data(v: &serde_json::Value) -> Event {
    event(format!("data: {v}\n\n"))
}

fn named(kind: &str, v: &serde_json::Value) -> Event {
    event(format!("event: {kind}\ndata: {v}\n\n"))
}

/// One protocol's answer: its events, and which of them are the content deltas.
pub(super) struct Answer {
    events: Vec<Event>,
    deltas: Range<usize>,
}

/// The stream the mock sends for `p`: framing as the provider sends it, stamped text deltas.
///
/// `usage`: the request asked for usage (`stream_options.include_usage`, which guardwire adds
/// to every streamed Chat request): as OpenAI does, every Chat chunk then carries
/// `"usage":null` and a usage-only chunk comes before `[DONE]`.
pub(super) fn stream_events(p: Protocol, deltas: &[String], usage: bool) -> Answer {
    let events = answer_events(p, deltas, usage);
    let first = match p {
        Protocol::Chat => 1,
        Protocol::Responses => 4,
        Protocol::Anthropic => 3,
        Protocol::Gemini => 0,
    };
    Answer {
        events,
        deltas: first..first + deltas.len(),
    }
}

fn answer_events(p: Protocol, deltas: &[String], usage: bool) -> Vec<Event> {
    use serde_json::json;
    let full: String = deltas.concat();
    match p {
        Protocol::Chat => {
            let with_usage = |mut v: serde_json::Value, u: serde_json::Value| {
                if usage {
                    v["usage"] = u;
                }
                data(&v)
            };
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                with_usage(
                    json!({
                        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
                        "created": 1_735_689_600, "model": "gpt-4o-mini-2024-07-18",
                        "system_fingerprint": format!("fp_{STAMP}"),
                        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
                    }),
                    json!(null),
                )
            };
            let mut ev = vec![chunk(
                json!({"role": "assistant", "content": "", "refusal": null}),
                json!(null),
            )];
            ev.extend(
                deltas
                    .iter()
                    .map(|t| chunk(json!({"content": t}), json!(null))),
            );
            ev.push(chunk(json!({}), json!("stop")));
            if usage {
                ev.push(with_usage(
                    json!({
                        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
                        "created": 1_735_689_600, "model": "gpt-4o-mini-2024-07-18",
                        "system_fingerprint": format!("fp_{STAMP}"), "choices": []
                    }),
                    json!({"prompt_tokens": 36, "completion_tokens": 200, "total_tokens": 236}),
                ));
            }
            ev.push(event("data: [DONE]\n\n".into()));
            ev
        }
        Protocol::Responses => {
            let mut seq = 0u64;
            let mut e = |kind: &str, mut v: serde_json::Value| {
                v["type"] = json!(kind);
                v["sequence_number"] = json!(seq);
                seq += 1;
                named(kind, &v)
            };
            let resp = |status: &str| {
                json!({"id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1_741_476_542,
                       "status": status, "model": "gpt-4o-mini-2024-07-18", "output": [],
                       "error": null, "incomplete_details": null, "tools": [], "metadata": {}})
            };
            let item = json!({"id": "msg_67ccd2bf17f0", "type": "message", "status": "in_progress",
                              "role": "assistant", "content": []});
            let mut ev = vec![
                e("response.created", json!({"response": resp("in_progress")})),
                e(
                    "response.in_progress",
                    json!({"response": resp("in_progress")}),
                ),
                e(
                    "response.output_item.added",
                    json!({"output_index": 0, "item": item}),
                ),
                e(
                    "response.content_part.added",
                    json!({"item_id": "msg_67ccd2bf17f0", "output_index": 0,
                    "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                ),
            ];
            for t in deltas {
                ev.push(e(
                    "response.output_text.delta",
                    json!({"item_id": "msg_67ccd2bf17f0",
                    "output_index": 0, "content_index": 0, "delta": t, "logprobs": [],
                    "obfuscation": STAMP}),
                ));
            }
            let part = json!({"type": "output_text", "text": full, "annotations": []});
            ev.push(e(
                "response.output_text.done",
                json!({"item_id": "msg_67ccd2bf17f0",
                "output_index": 0, "content_index": 0, "text": full, "logprobs": []}),
            ));
            ev.push(e(
                "response.content_part.done",
                json!({"item_id": "msg_67ccd2bf17f0",
                "output_index": 0, "content_index": 0, "part": part}),
            ));
            let done_item = json!({"id": "msg_67ccd2bf17f0", "type": "message", "status": "completed",
                "role": "assistant", "content": [part]});
            ev.push(e(
                "response.output_item.done",
                json!({"output_index": 0, "item": done_item}),
            ));
            let mut r = resp("completed");
            r["output"] = json!([done_item]);
            r["usage"] = json!({"input_tokens": 36, "output_tokens": 200, "total_tokens": 236});
            ev.push(e("response.completed", json!({"response": r})));
            ev
        }
        Protocol::Anthropic => {
            let mut ev = vec![
                named(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
                    "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": 36, "output_tokens": 1}}}),
                ),
                named(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ),
                named("ping", &json!({"type": "ping"})),
            ];
            for t in deltas {
                // Anthropic deltas have no free-form string field: the stamp rides in an
                // extra one, which clients ignore, under a key guardwire knows as structure
                // (`id`). Under an unknown key guardwire checks it as text (fail closed): the
                // stamps of one stream then read as one unbroken token-like text, which the
                // `pii` check holds back up to 256 bytes behind (docs/load-bench.md).
                ev.push(named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta",
                    "index": 0, "delta": {"type": "text_delta", "text": t}, "id": STAMP}),
                ));
            }
            ev.push(named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ));
            ev.push(named(
                "message_delta",
                &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 200}}),
            ));
            ev.push(named("message_stop", &json!({"type": "message_stop"})));
            ev
        }
        Protocol::Gemini => {
            let mut ev: Vec<Event> = deltas
                .iter()
                .map(|t| {
                    data(&json!({"candidates": [{"content": {"parts": [{"text": t}], "role": "model"},
                        "index": 0}], "modelVersion": "gemini-2.5-flash", "responseId": STAMP}))
                })
                .collect();
            ev.push(data(
                &json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 36, "candidatesTokenCount": 200,
                "totalTokenCount": 236}, "modelVersion": "gemini-2.5-flash", "responseId": STAMP}),
            ));
            ev
        }
    }
}

/// The chunk a flood answer repeats: 64 Chat chunks of 1,000 characters each (~75 KiB).
pub(super) fn flood_chunk() -> Bytes {
    let text = "x".repeat(1000);
    let frame = serde_json::json!({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]
    });
    Bytes::from(format!("data: {frame}\n\n").repeat(64))
}

/// Behaviour the bench switches between phases (read at the start of each upstream response).
pub(super) struct MockState {
    /// Pause before every event but the first.
    pub(super) gap_ns: AtomicU64,
    /// Held streams (request names [`HOLD_MARK`]) stop after their first content delta until
    /// this moves past the value it had when they started; meanwhile they repeat a content
    /// delta every `hold_gap_ns` (0: silent).
    pub(super) release: watch::Sender<u64>,
    pub(super) hold_gap_ns: AtomicU64,
    pub(super) events: Vec<(Protocol, Arc<Answer>)>,
    /// Chat's answer to a request that asked for usage.
    pub(super) chat_with_usage: Arc<Answer>,
    pub(super) held: AtomicUsize,
    /// Connections the mock accepted (from clients or from guardwire's pool).
    pub(super) accepted: AtomicUsize,
    /// Flood answers (request names [`FLOOD_MARK`]): `flood_chunks` × [`flood_chunk`] of a
    /// Chat stream that never ends cleanly. Started, and still open (not yet cancelled by the
    /// proxy nor sent whole).
    pub(super) flood: Bytes,
    pub(super) flood_chunks: usize,
    pub(super) flood_started: AtomicUsize,
    pub(super) flood_open: AtomicUsize,
}

/// Counts a flood answer open until its body is dropped (sent whole, or cancelled).
struct FloodOpen(Arc<MockState>);

impl Drop for FloodOpen {
    fn drop(&mut self) {
        self.0.flood_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl MockState {
    /// Every protocol's answer around `deltas`, back to back, nothing held or flooded yet.
    pub(super) fn new(deltas: &[String]) -> Arc<MockState> {
        Arc::new(MockState {
            gap_ns: AtomicU64::new(0),
            release: watch::channel(0).0,
            events: Protocol::ALL
                .iter()
                .map(|&p| (p, Arc::new(stream_events(p, deltas, false))))
                .collect(),
            chat_with_usage: Arc::new(stream_events(Protocol::Chat, deltas, true)),
            hold_gap_ns: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            // 256 × ~75 KiB: megabytes no kernel buffer holds.
            flood: flood_chunk(),
            flood_chunks: 256,
            flood_started: AtomicUsize::new(0),
            flood_open: AtomicUsize::new(0),
        })
    }

    /// The answer to a request for `path` with `body`.
    fn events(&self, path: &str, body: &[u8]) -> Option<Arc<Answer>> {
        let p = if path.starts_with("/v1/chat/completions") {
            if memchr_find(body, br#""include_usage":true"#) {
                return Some(Arc::clone(&self.chat_with_usage));
            }
            Protocol::Chat
        } else if path.starts_with("/v1/responses") {
            Protocol::Responses
        } else if path.starts_with("/v1/messages") {
            Protocol::Anthropic
        } else if path.starts_with("/v1beta/models/") {
            Protocol::Gemini
        } else {
            return None;
        };
        self.events
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, e)| Arc::clone(e))
    }
}

fn stamped(ev: &Event) -> Bytes {
    match ev.stamp {
        None => ev.bytes.clone(),
        Some(at) => {
            let mut b = BytesMut::from(&ev.bytes[..]);
            let mut t = now_ns();
            for i in (0..STAMP_DIGITS).rev() {
                b[at + i] = b'0' + (t % 10) as u8;
                t /= 10;
            }
            b.freeze()
        }
    }
}

type MockBody = StreamBody<
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>,
>;

async fn mock_handle(state: Arc<MockState>, req: Request<Incoming>) -> Response<MockBody> {
    use futures_util::StreamExt;
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let hold = path.contains(HOLD_MARK) || memchr_find(&body, HOLD_MARK.as_bytes());
    let Some(answer) = state.events(&path, &body) else {
        let empty: MockBody = StreamBody::new(Box::pin(futures_util::stream::empty()));
        let mut r = Response::new(empty);
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    };
    let stream = if memchr_find(&body, FLOOD_MARK.as_bytes()) {
        state.flood_started.fetch_add(1, Ordering::Relaxed);
        state.flood_open.fetch_add(1, Ordering::Relaxed);
        let open = FloodOpen(Arc::clone(&state));
        let chunk = state.flood.clone();
        futures_util::stream::iter(std::iter::repeat_n(chunk, state.flood_chunks))
            .map(move |c| {
                let _ = &open;
                Ok(Frame::data(c))
            })
            .boxed()
    } else {
        held_or_paced(&state, answer, hold)
    };
    let mut r = Response::new(StreamBody::new(stream));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    r
}

/// An answer's events, one every `gap_ns` (none: back to back); a held one stops after its
/// first content delta until released, repeating a delta every `hold_gap_ns` meanwhile.
fn held_or_paced(
    state: &Arc<MockState>,
    answer: Arc<Answer>,
    hold: bool,
) -> std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>> {
    use futures_util::StreamExt;
    let gap = Duration::from_nanos(state.gap_ns.load(Ordering::Relaxed));
    let hold_gap = Duration::from_nanos(state.hold_gap_ns.load(Ordering::Relaxed));
    let mut release = state.release.subscribe();
    let start_gen = *release.borrow_and_update();
    let st = Arc::clone(state);
    let hold_at = answer.deltas.start + 1;
    // State: next event, deltas repeated while held, released.
    futures_util::stream::unfold((0usize, 0usize, false), move |(i, k, released)| {
        let answer = Arc::clone(&answer);
        let mut release = release.clone();
        let st = Arc::clone(&st);
        async move {
            let events = &answer.events;
            if i >= events.len() {
                return None;
            }
            if hold && !released && i == hold_at {
                if k == 0 {
                    st.held.fetch_add(1, Ordering::Relaxed);
                }
                let done = if hold_gap.is_zero() {
                    let _ = release.wait_for(|g| *g > start_gen).await;
                    true
                } else {
                    tokio::select! {
                        _ = release.wait_for(|g| *g > start_gen) => true,
                        () = tokio::time::sleep(hold_gap) => false,
                    }
                };
                if !done {
                    let d = answer.deltas.start + k % answer.deltas.len();
                    return Some((Ok(Frame::data(stamped(&events[d]))), (i, k + 1, false)));
                }
                st.held.fetch_sub(1, Ordering::Relaxed);
                return Some((Ok(Frame::data(stamped(&events[i]))), (i + 1, k, true)));
            }
            if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok(Frame::data(stamped(&events[i]))), (i + 1, k, released)))
        }
    })
    .boxed()
}

pub(super) fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Starts a mock on its own thread and single-worker runtime, named `name`; returns its
/// address. The soak starts a second one for its flood (same state), so the flood's writes
/// and the normal traffic's answers do not queue on one thread; it gives that one a small
/// `send_buffer` (SO_SNDBUF of its connections), so that what a blocked flood answer holds
/// ahead of guardwire in the mock's own socket (the bench's kernel memory and copying, a
/// provider's in production) does not swell the figures of the machine both share.
pub(super) fn start_mock(
    state: Arc<MockState>,
    name: &'static str,
    send_buffer: Option<u32>,
) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(name)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let sock = TcpSocket::new_v4().unwrap();
                sock.set_reuseaddr(true).unwrap();
                if let Some(bytes) = send_buffer {
                    // Inherited by the connections it accepts.
                    sock.set_send_buffer_size(bytes).unwrap();
                }
                sock.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
                let listener: TcpListener = sock.listen(8192).unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    state.accepted.fetch_add(1, Ordering::Relaxed);
                    let st = Arc::clone(&state);
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let st = Arc::clone(&st);
                            async move { Ok::<_, Infallible>(mock_handle(st, req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        })
        .unwrap();
    rx.recv().unwrap()
}
