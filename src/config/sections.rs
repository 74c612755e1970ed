//! The config's operational sections: reload, the admin endpoints, metrics labels, upstream
//! base URLs, limits, timeouts and the log.

use super::{BaseUrl, Provider};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;

/// Live reload: the config file and every pack it names are re-read and swapped in atomically
/// when they change, on SIGHUP, or on `POST /admin/reload`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reload {
    /// How often to look for changed files (modification time and size); 0 turns watching off.
    pub poll_ms: u64,
}

impl Default for Reload {
    fn default() -> Self {
        Reload { poll_ms: 2000 }
    }
}

/// How `serve` runs its connections (docs/architecture.md, "Runtime shapes"). Read at start.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub runtime: RuntimeShape,
    /// Threads serving clients; 0: one per available core.
    pub workers: usize,
}

/// The most `server.workers` accepted.
pub const MAX_WORKERS: usize = 1024;

impl Server {
    /// The threads that serve clients: `workers`, or one per available core.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }
}

/// `server.runtime`: the shape of the threads that serve clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeShape {
    /// One multi-thread tokio runtime: a connection's tasks may run on any worker, idle
    /// workers steal queued tasks from busy ones.
    #[default]
    WorkStealing,
    /// One single-thread runtime per worker, each with its own `SO_REUSEPORT` listener on the
    /// same address (the kernel spreads connections by a hash of their addresses); a
    /// connection and everything it spawns stays on the worker that accepted it.
    PerCore,
}

/// The operators' endpoints. `POST /admin/reload` answers only when a token is set, and only to
/// `Authorization: Bearer <token>`. `/metrics` is served on `listen`; on the clients' listener
/// it (and `/admin/*`) needs the token, and without one is not served there at all.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    pub token: Option<String>,
    /// A listener of its own for the operators' endpoints (`/metrics`, `/admin/reload`,
    /// `/healthz`, `/readyz`; plain HTTP/1.1), where `/metrics` needs no token: keep it on
    /// loopback or a network only operators reach. Read at start.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
}

/// What `/metrics` labels traffic with.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Model names the `model` label may take, besides those in `prices`; a model is labelled
    /// with the longest of them it starts with, else `other` (so the label stays bounded).
    #[serde(default)]
    pub models: Vec<String>,
}

/// Base URLs of the providers, by their key under `upstreams:`. The keys are the registered
/// protocols' providers' ([`Provider::upstream_keys`]: `openai`, `anthropic`, `gemini`), so a
/// protocol of a new provider brings its key; any other key is refused, naming it and the known
/// ones, as `deny_unknown_fields` would. An omitted provider's paths answer 404.
#[derive(Clone, Default)]
pub struct Upstreams(Vec<(&'static str, BaseUrl)>);

impl Upstreams {
    /// The configured base URL of `provider`.
    pub fn get(&self, provider: Provider) -> Option<&BaseUrl> {
        self.by_key(provider.upstream_key()?)
    }

    /// The configured base URL under `upstreams.<key>`.
    pub fn by_key(&self, key: &str) -> Option<&BaseUrl> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, url)| url)
    }
}

/// As a struct with one optional field per key would print (the config hash reads it).
impl fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Upstreams");
        for key in Provider::upstream_keys() {
            s.field(key, &self.by_key(key));
        }
        s.finish()
    }
}

impl<'de> Deserialize<'de> for Upstreams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Upstreams;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("struct Upstreams")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Upstreams, A::Error> {
                let known = Provider::upstream_keys();
                let mut urls: Vec<(&'static str, Option<BaseUrl>)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Some(&key) = known.iter().find(|k| **k == key) else {
                        return Err(de::Error::unknown_field(&key, known));
                    };
                    if urls.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::duplicate_field(key));
                    }
                    urls.push((key, map.next_value()?));
                }
                let urls = urls.into_iter().filter_map(|(k, url)| Some((k, url?)));
                Ok(Upstreams(urls.collect()))
            }
        }
        d.deserialize_struct("Upstreams", Provider::upstream_keys(), Keys)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted (413 above).
    pub max_request_bytes: usize,
    /// Largest non-streamed response body guardwire will buffer to check (502 above).
    pub max_response_bytes: usize,
    /// Largest request head (request line and headers).
    pub max_header_bytes: usize,
    /// Largest single SSE event from the upstream.
    pub max_frame_bytes: usize,
    /// Most bytes of a stream held back while a match may still be forming (only unbounded
    /// patterns such as `a.*b` can need much). Past it the stream ends with an error frame.
    pub max_holdback_bytes: usize,
    /// Requests proxied at once (streams count until they end); over it: 503 + `retry-after`.
    pub max_concurrent_requests: usize,
    /// Requests proxied at once from one client address (the TCP peer's; an IPv6 client by
    /// its /64), counted from before the body is read until the answer ends; over it: 429 +
    /// `retry-after`. 0: no cap (behind a load balancer every client has its address, so
    /// the default).
    pub max_concurrent_requests_per_client_address: usize,
    /// Client connections open at once; a connection over it is accepted and closed at once
    /// (as Envoy's `max_downstream_connections`): the client learns right away instead of
    /// waiting in the kernel's backlog, and the refusal is counted. Read at start.
    pub max_connections: usize,
    /// Streams an HTTP/2 client may open at once on one connection (the SETTINGS value
    /// guardwire announces; hyper's own default is 200). Read at start.
    pub max_h2_streams: u32,
    /// Request-body bytes held at once, over every request: taken as a body is read (its
    /// `content-length` up front when sent, else as bytes arrive) and given back when its
    /// exchange ends. Over it: 503 + `retry-after`. At least `max_request_bytes`.
    pub max_buffered_request_bytes: usize,
    /// The kernel send buffer of each client connection (`SO_SNDBUF`, as nginx's `sndbuf`); 0
    /// leaves it to the kernel's autotuning (up to megabytes). A smaller buffer bounds what
    /// guardwire reads, checks and writes for a client that stops reading before its write
    /// blocks and `timeouts.client_send_ms` runs. Read at start.
    pub client_send_buffer_bytes: usize,
    /// `TCP_NOTSENT_LOWAT` of each client connection (Linux): the socket takes more bytes, and
    /// reports itself writable, only while its unsent bytes are under this mark. A client that
    /// stops reading then blocks guardwire's write after about the mark plus its own receive
    /// window, which bounds what guardwire reads upstream, checks and encodes for it; unlike
    /// `client_send_buffer_bytes` it does not cap a reading client's throughput (bytes in
    /// flight are not counted). 0: off (the kernel's default, no mark). Read at start.
    pub client_notsent_lowat_bytes: usize,
    /// The receive window of each stream guardwire opens to an HTTP/2 upstream: the most of an
    /// answer the upstream sends ahead of what guardwire has read, and so what a stream whose
    /// client stopped reading holds. Read at start.
    pub upstream_h2_stream_window_bytes: u32,
    /// Most streams guardwire opens at once on one HTTP/2 upstream connection (fewer when the
    /// upstream announces fewer); past them it opens another connection. The connection's
    /// receive window is this times the stream window, so streams that are not read can never
    /// use it up. Read at start.
    pub upstream_h2_streams_per_connection: u32,
    /// The most an upstream HTTP/1 connection buffers of what it reads (hyper's `max_buf_size`;
    /// the buffer grows towards it while a fast upstream fills each read). Relayed body chunks
    /// are slices of it, so a stream whose client stopped reading keeps about this much (and
    /// earlier buffers, while slices of them wait) alive. Also the largest response head an
    /// upstream may send. Read at start.
    pub upstream_read_buffer_bytes: usize,
    /// The kernel receive buffer of each upstream connection (`SO_RCVBUF`, set before
    /// connecting); 0 leaves it to the kernel's autotuning. A fixed size bounds what the kernel
    /// holds for a stream whose client stopped reading, but also caps one upstream connection's
    /// throughput at about one buffer per round trip. Read at start.
    pub upstream_receive_buffer_bytes: usize,
}

/// The range of `limits.upstream_h2_stream_window_bytes`: from HTTP/2's own default window
/// (RFC 9113 §6.9.2) to hyper's default (2 MiB). With at most
/// [`MAX_UPSTREAM_H2_STREAMS_PER_CONNECTION`] streams the connection's window (their product)
/// stays under HTTP/2's 2^31 - 1.
pub const UPSTREAM_H2_STREAM_WINDOW: std::ops::RangeInclusive<u32> = 65_535..=2 << 20;
/// The largest `limits.upstream_h2_streams_per_connection`.
pub const MAX_UPSTREAM_H2_STREAMS_PER_CONNECTION: u32 = 1000;

/// The default `limits.client_notsent_lowat_bytes`: 16 KiB where the option exists (Cloudflare's
/// setting for its proxies; a token stream's event is a few hundred bytes), off elsewhere.
pub const DEFAULT_CLIENT_NOTSENT_LOWAT: usize = if cfg!(target_os = "linux") {
    16 << 10
} else {
    0
};

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 8 << 20,
            max_response_bytes: 32 << 20,
            max_header_bytes: 64 << 10,
            max_frame_bytes: 1 << 20,
            max_holdback_bytes: 1 << 20,
            max_concurrent_requests: 10_000,
            // Off: behind a load balancer, an ingress or a NAT the peer address is theirs, and
            // a cap would cap every client at once (per-key limits are the tenants' tool there).
            max_concurrent_requests_per_client_address: 0,
            // Twice the requests in flight: keep-alive connections between requests fit, and
            // 20,000 connections (each a descriptor and hyper's buffers, tens of KiB) stay
            // well inside a pod's memory and a raised descriptor limit.
            max_connections: 20_000,
            // A client rarely needs more at once on one connection; a smaller window bounds
            // what one connection can ask of the proxy before the in-flight limit applies.
            max_h2_streams: 100,
            // 32 bodies of the largest size, or thousands of typical chat bodies (tens of KiB),
            // at once.
            max_buffered_request_bytes: 256 << 20,
            // Autotuning: a fixed size also caps a fast client's throughput (one buffer per
            // round trip).
            client_send_buffer_bytes: 0,
            client_notsent_lowat_bytes: DEFAULT_CLIENT_NOTSENT_LOWAT,
            // A blocked client holds 256 KiB upstream rather than hyper's 2 MiB; a reading
            // client gets up to 256 KiB a round trip (~5 MB/s at 50 ms), far above a token
            // stream.
            upstream_h2_stream_window_bytes: 256 << 10,
            // RFC 9113 §6.5.2 asks servers to allow at least 100; h2 assumes 100 until the
            // upstream's SETTINGS arrive.
            upstream_h2_streams_per_connection: 100,
            // hyper's default grows to ~408 KiB; 64 KiB is still many SSE events per read, and
            // as large a head as a client may send (`max_header_bytes`).
            upstream_read_buffer_bytes: 64 << 10,
            // Autotuning: a token stream reads slowly and so keeps the initial buffer
            // (`tcp_rmem`'s default, 128 KiB), while a large answer from a distant provider gets
            // the window its round trip needs.
            upstream_receive_buffer_bytes: 0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Connecting to the upstream (TCP + TLS).
    pub connect_ms: u64,
    /// From sending the request to the upstream's response headers (504 after).
    pub response_headers_ms: u64,
    /// Longest silence between two chunks of an upstream body.
    pub idle_ms: u64,
    /// Time a client has to send its request head (slow clients are cut off). A new connection
    /// must bring its first request head (TLS handshake and HTTP/2 preface included) within it;
    /// HTTP/1 also has it for each later head, from the end of the previous answer on.
    pub client_header_ms: u64,
    /// Time a client has to send its request body, from the end of its head (408 after). The
    /// in-flight permit is taken only once the body is in, so slow bodies do not hold one
    /// (only their share of `limits.max_buffered_request_bytes`).
    pub client_body_ms: u64,
    /// A client connection with no request in flight for this long is closed (HTTP/2 with a
    /// GOAWAY). For HTTP/1 the wait for the next head is also bounded by `client_header_ms`.
    pub client_idle_ms: u64,
    /// HTTP/2 keep-alive: a ping every this often; a peer that does not answer one within the
    /// same time is taken for dead and its connection closed. 0 turns pings off.
    pub client_ping_ms: u64,
    /// Longest a write to the client may stay blocked: the answer has bytes ready and the
    /// client takes none of them (nginx's `send_timeout`). The response then ends without
    /// more: the upstream request is cancelled, the permit released, the HTTP/1 connection
    /// closed or the HTTP/2 stream reset.
    pub client_send_ms: u64,
    /// Longest a whole exchange may take, streamed answer included (504, or an error frame).
    pub total_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_ms: 10_000,
            response_headers_ms: 300_000,
            idle_ms: 120_000,
            client_header_ms: 30_000,
            client_body_ms: 60_000,
            client_idle_ms: 120_000,
            client_ping_ms: 30_000,
            client_send_ms: 60_000,
            total_ms: 900_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A tracing filter (`info`, `guardwire=debug`, …); `RUST_LOG` wins when set.
    pub level: String,
    /// `text` or `json`.
    pub format: LogFormat,
    /// One JSON line per request on stdout (`"log":"access"`): route, status, duration,
    /// outcome, the validator that blocked, model, key id and tokens — never bodies or keys.
    pub access: bool,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            level: "info".into(),
            format: LogFormat::Text,
            access: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}
