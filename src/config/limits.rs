//! `limits:` — what one peer, one request and the whole proxy may hold, and their checks at load.

use super::ConfigError;
use serde::Deserialize;

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
    /// Request-body bytes held at once, over every request: taken as a body's bytes arrive
    /// (never from its announced `content-length`) and given back when its exchange ends.
    /// Over it: 503 + `retry-after`. At least `max_request_bytes`.
    pub max_buffered_request_bytes: usize,
    /// The share of `max_buffered_request_bytes` one client key may hold at once; over it:
    /// 429 + `retry-after`, other keys unaffected. 0: no share. Unset: a quarter of
    /// `max_buffered_request_bytes`, at least `max_request_bytes`
    /// ([`Limits::buffered_request_bytes_per_key`]).
    pub max_buffered_request_bytes_per_key: Option<usize>,
    /// The share of `max_buffered_request_bytes` one client address (an IPv6 client by its
    /// /64) may hold at once; over it: 429 + `retry-after`. 0: no share (behind a load
    /// balancer every client has its address, so the default).
    pub max_buffered_request_bytes_per_client_address: usize,
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
    /// Most messages in one JSON-RPC batch (an MCP POST's array, or a server's JSON answer):
    /// a batch over it is answered with one JSON-RPC error at once, nothing of it checked or
    /// forwarded, so the work one request can ask for is bounded.
    pub max_batch_messages: usize,
}

/// The largest `limits.max_batch_messages`: checks and ids of a batch are kept per message.
pub const MAX_BATCH_MESSAGES: usize = 100_000;

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
            // A quarter of the total (`buffered_request_bytes_per_key`).
            max_buffered_request_bytes_per_key: None,
            // Off, as `max_concurrent_requests_per_client_address`.
            max_buffered_request_bytes_per_client_address: 0,
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
            // The SDKs send one message per POST (2025-06-18 dropped batches); 128 leaves room
            // for a 2025-03-26 client's batch while one batch's checks stay within milliseconds.
            max_batch_messages: 128,
        }
    }
}

impl Limits {
    /// A key's share of the request-body bytes (`max_buffered_request_bytes_per_key`); unset,
    /// a quarter of the total (at the defaults 64 MiB: 8 bodies of the largest size, while the
    /// other keys always have three quarters between them), but never less than one body of
    /// the largest size.
    pub fn buffered_request_bytes_per_key(&self) -> usize {
        self.max_buffered_request_bytes_per_key
            .unwrap_or_else(|| (self.max_buffered_request_bytes / 4).max(self.max_request_bytes))
    }

    /// Refuses values out of range, naming the key.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_header_bytes < 8192 {
            return Err(ConfigError::Invalid(
                "limits.max_header_bytes: must be at least 8192".into(),
            ));
        }
        for (key, value) in [
            ("limits.max_connections", self.max_connections),
            ("limits.max_h2_streams", self.max_h2_streams as usize),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{key}: must be at least 1")));
            }
        }
        for (key, value) in [
            (
                "limits.client_send_buffer_bytes",
                self.client_send_buffer_bytes,
            ),
            (
                "limits.upstream_receive_buffer_bytes",
                self.upstream_receive_buffer_bytes,
            ),
        ] {
            if value != 0 && !(4096..=1 << 30).contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "{key}: must be 0 (the kernel's autotuning) or between 4096 and 1073741824"
                )));
            }
        }
        // hyper's HTTP/1 client refuses (panics) below 8 KiB.
        if !(8192..=1 << 30).contains(&self.upstream_read_buffer_bytes) {
            return Err(ConfigError::Invalid(
                "limits.upstream_read_buffer_bytes: must be between 8192 and 1073741824".into(),
            ));
        }
        if self.client_notsent_lowat_bytes != 0 {
            if !cfg!(target_os = "linux") {
                return Err(ConfigError::Invalid(
                    "limits.client_notsent_lowat_bytes: TCP_NOTSENT_LOWAT is set only on Linux here; use 0 (off)".into(),
                ));
            }
            if !(4096..=1 << 30).contains(&self.client_notsent_lowat_bytes) {
                return Err(ConfigError::Invalid(
                    "limits.client_notsent_lowat_bytes: must be 0 (off) or between 4096 and 1073741824".into(),
                ));
            }
        }
        if !UPSTREAM_H2_STREAM_WINDOW.contains(&self.upstream_h2_stream_window_bytes) {
            return Err(ConfigError::Invalid(format!(
                "limits.upstream_h2_stream_window_bytes: must be between {} and {}",
                UPSTREAM_H2_STREAM_WINDOW.start(),
                UPSTREAM_H2_STREAM_WINDOW.end()
            )));
        }
        if !(1..=MAX_UPSTREAM_H2_STREAMS_PER_CONNECTION)
            .contains(&self.upstream_h2_streams_per_connection)
        {
            return Err(ConfigError::Invalid(format!(
                "limits.upstream_h2_streams_per_connection: must be between 1 and {}",
                MAX_UPSTREAM_H2_STREAMS_PER_CONNECTION
            )));
        }
        if !(1..=MAX_BATCH_MESSAGES).contains(&self.max_batch_messages) {
            return Err(ConfigError::Invalid(format!(
                "limits.max_batch_messages: must be between 1 and {MAX_BATCH_MESSAGES}"
            )));
        }
        if self.max_buffered_request_bytes < self.max_request_bytes {
            return Err(ConfigError::Invalid(format!(
                "limits.max_buffered_request_bytes: must be at least limits.max_request_bytes ({}), or a body of the largest size could never be read",
                self.max_request_bytes
            )));
        }
        for (key, value) in [
            (
                "limits.max_buffered_request_bytes_per_key",
                self.buffered_request_bytes_per_key(),
            ),
            (
                "limits.max_buffered_request_bytes_per_client_address",
                self.max_buffered_request_bytes_per_client_address,
            ),
        ] {
            if value != 0
                && !(self.max_request_bytes..=self.max_buffered_request_bytes).contains(&value)
            {
                return Err(ConfigError::Invalid(format!(
                    "{key}: must be 0 (no share) or between limits.max_request_bytes ({}) and limits.max_buffered_request_bytes ({}): a body of the largest size must fit in a share",
                    self.max_request_bytes, self.max_buffered_request_bytes
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use crate::config::Config;

    #[test]
    fn the_batch_cap_has_a_default_and_a_range() {
        let c = Config::from_yaml("{}\n").expect("the defaults load");
        assert_eq!(c.limits.max_batch_messages, 128);
        let c = Config::from_yaml("limits: { max_batch_messages: 1 }\n").expect("1 loads");
        assert_eq!(c.limits.max_batch_messages, 1);
        for bad in ["0", "100001"] {
            let yaml = format!("limits: {{ max_batch_messages: {bad} }}\n");
            let e = Config::from_yaml(&yaml).expect_err(bad).to_string();
            assert!(e.contains("limits.max_batch_messages"), "{e}");
        }
    }
}
