//! Accepting connections: HTTP/1.1 and HTTP/2 from clients, with limits on request heads,
//! slow clients, open connections (`limits.max_connections`) and HTTP/2 streams per connection
//! (`limits.max_h2_streams`), and a graceful drain on shutdown. `connection.rs` watches each
//! connection (first request in time, idle close, graceful stop); `send_watch.rs` ends
//! responses whose client stopped reading; `client_socket.rs` resets the sockets of
//! connections dropped for not reading.

use crate::config::{Config, RuntimeShape};
use crate::metrics::{DropReason, RejectReason, WorkerLabels};
use crate::proxy::{Gateway, Runtime};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod client_socket;
mod connection;
mod h2_refusals;
mod per_core;
mod send_watch;

use client_socket::ClientSocket;
use connection::TrackedBody;
use h2_refusals::H2Refusals;
use send_watch::{SendSlot, StreamExecutor};

pub use crate::error::StartError;

/// A running guardwire: its address, its gateway (metrics, runtime swap) and a shutdown switch.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// The operators' listener (`admin.listen`), when configured.
    pub admin_addr: Option<SocketAddr>,
    pub gateway: Arc<Gateway>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// Readiness goes false, the listener closes, open connections may finish for up to
    /// `drain`; then streams still open end with their protocol's error frame (never a silent
    /// truncation), and shutdown completes once those frames are sent (or 2 s more passed).
    pub async fn shutdown(self, drain: Duration) {
        self.gateway.begin_drain();
        let _ = self.shutdown.send(true);
        let mut task = self.task;
        if tokio::time::timeout(drain, &mut task).await.is_err() {
            self.gateway.stop_streams();
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
    }
}

/// Compiles `config`, binds its listen address and serves in the background.
pub async fn start(config: Config) -> Result<RunningServer, StartError> {
    start_from(config, None).await
}

/// Like [`start`], for a config read from `config_path`: reloads then re-read that file, and
/// (unless `reload.poll_ms` is 0) a watcher reloads whenever it or a pack it names changes.
pub async fn start_from(
    config: Config,
    config_path: Option<PathBuf>,
) -> Result<RunningServer, StartError> {
    let runtime = Runtime::build(config)?;
    start_runtime(runtime, config_path).await
}

/// Like [`start_from`], on a runtime already built (`guardwire eval`'s live runs put an audit
/// sink of their own in it).
pub async fn start_runtime(
    runtime: Runtime,
    config_path: Option<PathBuf>,
) -> Result<RunningServer, StartError> {
    let poll = Duration::from_millis(runtime.config.reload.poll_ms);
    let listen = runtime.config.listen;
    let gateway = Arc::new(Gateway::new(runtime, config_path).map_err(StartError::Upstream)?);
    let limits = &gateway.runtime().config.limits;
    let sockets = ClientSockets {
        send_buffer: limits.client_send_buffer_bytes,
        notsent_lowat: limits.client_notsent_lowat_bytes,
    };
    let shape = gateway.runtime().config.server;
    let bind_error = |source| StartError::Bind {
        addr: listen,
        source,
    };
    let listeners = match shape.runtime {
        RuntimeShape::WorkStealing => bind_clients(listen, sockets, false).map(|l| vec![l]),
        RuntimeShape::PerCore => per_core::bind(listen, shape.worker_count(), sockets),
    }
    .map_err(bind_error)?;
    let addr = listeners[0].local_addr().map_err(bind_error)?;
    let (tx, rx) = watch::channel(false);
    let admin_addr = match gateway.runtime().config.admin.listen {
        None => None,
        Some(at) => {
            let bind = |source| StartError::Bind { addr: at, source };
            let listener = TcpListener::bind(at).await.map_err(bind)?;
            let bound = listener.local_addr().map_err(bind)?;
            tokio::spawn(serve_operators(
                listener,
                Arc::clone(&gateway),
                wait_true(rx.clone()),
            ));
            Some(bound)
        }
    };
    // Sessions that idle end here (the session-level evals), on every shape of server.
    tokio::spawn(Arc::clone(&gateway).sweep_eval_sessions(wait_true(rx.clone())));
    if gateway.config_path().is_some() && !poll.is_zero() {
        // The baseline is what was just loaded, not what the files say once the task runs.
        let loaded = fingerprint(&gateway);
        tokio::spawn(watch_files(
            Arc::clone(&gateway),
            loaded,
            poll,
            wait_true(rx.clone()),
        ));
    }
    let task = match shape.runtime {
        RuntimeShape::WorkStealing => {
            let listener = listeners
                .into_iter()
                .next()
                .ok_or_else(|| bind_error(std::io::Error::other("no listener bound")))?;
            tokio::spawn(serve(listener, 0, Arc::clone(&gateway), wait_true(rx)))
        }
        RuntimeShape::PerCore => {
            // The evals' workers stay here, off the workers' event loops.
            gateway.start_evals_on(&tokio::runtime::Handle::current());
            tokio::spawn(per_core::start(listeners, &gateway, &rx).map_err(bind_error)?)
        }
    };
    Ok(RunningServer {
        addr,
        admin_addr,
        gateway,
        shutdown: tx,
        task,
    })
}

/// Modification time and size of the config file and every pack it names.
fn fingerprint(gateway: &Gateway) -> Vec<(PathBuf, Option<SystemTime>, u64)> {
    let runtime = gateway.runtime();
    gateway
        .config_path()
        .into_iter()
        .map(Path::to_path_buf)
        .chain(runtime.config.packs.iter().cloned())
        .chain(
            runtime
                .config
                .tls
                .iter()
                .flat_map(|t| [t.cert_path.clone(), t.key_path.clone()]),
        )
        .map(|p| {
            let meta = std::fs::metadata(&p).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            let len = meta.map_or(0, |m| m.len());
            (p, modified, len)
        })
        .collect()
}

/// The socket options of client connections (`limits.client_send_buffer_bytes`,
/// `limits.client_notsent_lowat_bytes`; 0: not set).
#[derive(Clone, Copy, Default)]
struct ClientSockets {
    send_buffer: usize,
    notsent_lowat: usize,
}

/// Binds the client listener as `TcpListener::bind` does (address reuse, a backlog of 1024),
/// with the client sockets' options set on the listening socket: Linux gives every accepted
/// socket the listener's buffer sizes and `TCP_NOTSENT_LOWAT` (the tests below read both back
/// from an accepted socket), so no call per connection is needed. With `reuse_port`,
/// `SO_REUSEPORT` too (a `per_core` worker's listener).
fn bind_clients(
    addr: SocketAddr,
    options: ClientSockets,
    reuse_port: bool,
) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        #[cfg(unix)]
        socket.set_reuseport(true)?;
        #[cfg(not(unix))]
        return Err(std::io::Error::other(
            "server.runtime: per_core needs SO_REUSEPORT (Unix)",
        ));
    }
    // Both checked at load to be at most 1 GiB.
    if options.send_buffer > 0 {
        socket.set_send_buffer_size(u32::try_from(options.send_buffer).unwrap_or(u32::MAX))?;
    }
    if options.notsent_lowat > 0 {
        set_notsent_lowat(&socket, options.notsent_lowat)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

#[cfg(target_os = "linux")]
fn set_notsent_lowat(socket: &TcpSocket, bytes: usize) -> std::io::Result<()> {
    socket2::SockRef::from(socket).set_tcp_notsent_lowat(u32::try_from(bytes).unwrap_or(u32::MAX))
}

/// Refused at load off Linux (see `Config::validate`); never reached there.
#[cfg(not(target_os = "linux"))]
fn set_notsent_lowat(_: &TcpSocket, _: usize) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "TCP_NOTSENT_LOWAT is set only on Linux",
    ))
}

/// Polls the files behind the running config and reloads when any of them changes. Polling
/// (rather than inotify) also sees Kubernetes ConfigMap updates, which swap a symlink.
async fn watch_files(
    gateway: Arc<Gateway>,
    mut seen: Vec<(PathBuf, Option<SystemTime>, u64)>,
    every: Duration,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = &mut stop => return,
        }
        let now = fingerprint(&gateway);
        if now != seen {
            // A failed reload is logged and counted; it is retried when the files change again.
            let _ = gateway.reload().await;
            seen = fingerprint(&gateway);
        }
    }
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// The operators' listener: `/metrics`, `/admin/reload`, `/healthz`, `/readyz` over plain
/// HTTP/1.1, each request head within `timeouts.client_header_ms`. It stops accepting when
/// shutdown begins (a probe then fails, as `/readyz` would).
async fn serve_operators(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()>,
) {
    let config = gateway.runtime().config.clone();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.timeouts.client_header_ms))
        .max_buf_size(config.limits.max_header_bytes);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let gw = Arc::clone(&gateway);
                let service = service_fn(move |req| {
                    let gw = Arc::clone(&gw);
                    async move { Ok::<_, Infallible>(gw.handle_operator(req).await) }
                });
                let conn = http.serve_connection(TokioIo::new(stream), service);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "operators' connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => return,
        }
    }
}

/// The connection builders: `auto` reads the client's first bytes to choose HTTP/1 or HTTP/2,
/// `h1` and `h2` serve one version from the first byte.
struct Builders {
    auto: auto::Builder<StreamExecutor>,
    h1: auto::Builder<StreamExecutor>,
    h2: auto::Builder<StreamExecutor>,
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Builders {
    /// Whether a plain connection speaks HTTP/2 (its first bytes are the preface), found by
    /// peeking at them (nothing is consumed). `auto` would read them itself and hand them to
    /// hyper alone (at most the preface's 24 bytes), so hyper's 8 KiB HTTP/1 read buffer
    /// already held them when it asked for 8 KiB more, and doubled to 16 KiB for the
    /// connection's life; peeked, hyper's first read takes the whole request head.
    /// `Some(None)`: not known yet (bytes that match only part of the preface so far, an
    /// error, the end), which leaves the choice to `auto` as before. `None`: the client sent
    /// nothing before the first request's deadline (counted as `auto` would have: a dropped
    /// head), or the server is stopping.
    async fn sniff(
        stream: &tokio::net::TcpStream,
        deadline: tokio::time::Instant,
        stop: &watch::Receiver<bool>,
        metrics: &crate::metrics::Metrics,
    ) -> Option<Option<bool>> {
        let mut first = [0u8; 24];
        let mut stop = stop.clone();
        let peeked = tokio::select! {
            peeked = tokio::time::timeout_at(deadline, stream.peek(&mut first)) => peeked,
            _ = stop.wait_for(|stop| *stop) => return None,
        };
        let n = match peeked {
            Ok(Ok(n)) => n,
            // An error or the end: `auto` meets it on its first read, as before.
            Ok(Err(_)) => return Some(None),
            Err(_) => {
                tracing::debug!("client sent no request in time: connection dropped");
                metrics.dropped(DropReason::Header);
                return None;
            }
        };
        Some(if n == 0 {
            None
        } else if first[..n] != H2_PREFACE[..n] {
            Some(false)
        } else if n == H2_PREFACE.len() {
            Some(true)
        } else {
            None
        })
    }

    /// The builder for a connection whose version is known (`Some(true)`: HTTP/2), told to
    /// its refusal counter too; `None`: `auto`'s choice.
    fn pick<IO>(
        &self,
        io: H2Refusals<IO>,
        http2: Option<bool>,
    ) -> (H2Refusals<IO>, &auto::Builder<StreamExecutor>) {
        match http2 {
            Some(true) => (io.known(true), &self.h2),
            Some(false) => (io.known(false), &self.h1),
            None => (io, &self.auto),
        }
    }
}

/// The accept loop (of `per_core` worker `worker`; 0 for `work_stealing`'s one). Returns once
/// `shutdown` resolves and open connections have drained.
pub async fn serve(
    listener: TcpListener,
    worker: usize,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()>,
) {
    let accepted_here = gateway
        .metrics
        .worker_connections
        .get_or_create(&WorkerLabels { worker })
        .clone();
    let config = gateway.runtime().config.clone();
    let timeouts = &config.timeouts;
    let first_request = Duration::from_millis(timeouts.client_header_ms);
    let limits = connection::Limits {
        first: first_request,
        idle: Duration::from_millis(timeouts.client_idle_ms),
        send: Duration::from_millis(timeouts.client_send_ms),
    };
    let mut builder = auto::Builder::new(StreamExecutor);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(first_request)
        .max_buf_size(config.limits.max_header_bytes);
    let ping =
        (timeouts.client_ping_ms > 0).then(|| Duration::from_millis(timeouts.client_ping_ms));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(config.limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(config.limits.max_h2_streams)
        // A peer that does not answer a ping within an interval is taken for dead.
        .keep_alive_interval(ping)
        .keep_alive_timeout(ping.unwrap_or(Duration::from_secs(20)));
    let builders = Arc::new(Builders {
        h1: builder.clone().http1_only(),
        h2: builder.clone().http2_only(),
        auto: builder,
    });
    // Connections watch `stop`; once all have ended, every receiver is gone.
    let (stop, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                accepted_here.inc();
                // Over `limits.max_connections` a connection is closed as it is accepted (not
                // left in the backlog): the client learns at once, and the refusal is counted.
                let Some(open) = gateway.connections.take(1, config.limits.max_connections) else {
                    gateway.metrics.reject(RejectReason::Connections);
                    drop(stream);
                    continue;
                };
                let opened = tokio::time::Instant::now();
                let _ = stream.set_nodelay(true);
                let activity = connection::Activity::new(opened);
                let gw = Arc::clone(&gateway);
                let requests = Arc::clone(&activity);
                let slot = SendSlot::new();
                let connection_slot = Arc::clone(&slot);
                // Boxed: hyper keeps the space for a request's future as long as the connection
                // lives, and this one is ≈ 5.6 KiB; boxed, it is freed once the response head is
                // out, so an open stream does not carry it.
                let service = service_fn(move |req| {
                    let gw = Arc::clone(&gw);
                    let request = requests.begin();
                    let connection_slot = Arc::clone(&connection_slot);
                    Box::pin(async move {
                        let metrics = Arc::clone(&gw.metrics);
                        let total_at = tokio::time::Instant::now()
                            + Duration::from_millis(gw.runtime().config.timeouts.total_ms);
                        let (resp, route) = gw.handle(req, peer.ip()).await;
                        let slot = send_watch::current(&connection_slot);
                        Ok::<_, Infallible>(resp.map(|b| {
                            TrackedBody::new(b, request, slot, limits.send, total_at, route, metrics)
                        }))
                    })
                });
                let (builders, stop) = (Arc::clone(&builders), stop_rx.clone());
                let shutdown = connection::Shutdown { stop, streams_stopped: gateway.streams_stopped() };
                let metrics = Arc::clone(&gateway.metrics);
                // Plain and TLS connections are separate tasks: a task's allocation is the size
                // of its future, and one future for both would give every plain connection the
                // room of a TLS one's state (the rustls connection, inline).
                let Some(tls) = gateway.runtime().tls.clone() else {
                    tokio::spawn(async move {
                        let _open = open;
                        let deadline = opened + first_request;
                        let Some(http2) = Builders::sniff(&stream, deadline, &shutdown.stop, &metrics).await else {
                            return;
                        };
                        let stream = ClientSocket::new(stream, Arc::clone(&activity));
                        let (io, builder) = builders.pick(H2Refusals::new(stream, metrics.clone()), http2);
                        let conn = builder.serve_connection(TokioIo::new(io), service);
                        connection::drive(conn, |c| c.graceful_shutdown(), activity, limits, slot, shutdown, metrics).await;
                    });
                    continue;
                };
                tokio::spawn(async move {
                    let _open = open;
                    // The handshake counts against the time allowed for the first request.
                    let stream = ClientSocket::new(stream, Arc::clone(&activity));
                    let accept = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
                    let stream = match tokio::time::timeout_at(opened + first_request, accept).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            metrics.dropped(DropReason::Header);
                            return;
                        }
                    };
                    // The protocol ALPN agreed on is the connection's (RFC 7301): served from
                    // the first byte, as a peeked plain connection is. Without ALPN, `auto`.
                    let http2 = match stream.get_ref().1.alpn_protocol() {
                        Some(b"h2") => Some(true),
                        Some(b"http/1.1") => Some(false),
                        _ => None,
                    };
                    let (io, builder) = builders.pick(H2Refusals::new(stream, metrics.clone()), http2);
                    let conn = builder.serve_connection(TokioIo::new(io), service);
                    connection::drive(conn, |c| c.graceful_shutdown(), activity, limits, slot, shutdown, metrics).await;
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop.send(true);
    stop.closed().await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{bind_clients, ClientSockets};

    /// A connection accepted by a listener bound with `options`, as a std socket.
    async fn accepted(options: ClientSockets) -> std::net::TcpStream {
        let listener = bind_clients("127.0.0.1:0".parse().unwrap(), options, false).unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (accepted, _client) = tokio::join!(listener.accept(), client);
        accepted.unwrap().0.into_std().unwrap()
    }

    /// The send buffer an accepted connection gets from a listener bound with `size`.
    async fn accepted_send_buffer(size: usize) -> usize {
        let stream = accepted(ClientSockets {
            send_buffer: size,
            notsent_lowat: 0,
        })
        .await;
        socket2::SockRef::from(&stream).send_buffer_size().unwrap()
    }

    #[tokio::test]
    async fn accepted_connections_get_the_configured_send_buffer() {
        // Linux doubles the value asked for (bookkeeping overhead) and autotunes from
        // `tcp_wmem`'s default (16 KiB) when nothing is asked.
        let small = accepted_send_buffer(4096).await;
        let large = accepted_send_buffer(1 << 20).await;
        assert!((4096..=8192 + 1024).contains(&small), "{small}");
        assert!(large >= 1 << 20, "{large}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn accepted_connections_get_the_configured_notsent_lowat() {
        for mark in [4096, 16 << 10, 1 << 20] {
            let stream = accepted(ClientSockets {
                send_buffer: 0,
                notsent_lowat: mark,
            })
            .await;
            let got = socket2::SockRef::from(&stream).tcp_notsent_lowat().unwrap();
            assert_eq!(got as usize, mark);
        }
        // 0 sets nothing: the socket's own mark stays unset (read back as 0), and the kernel
        // applies `net.ipv4.tcp_notsent_lowat` (no mark unless the host set one).
        let stream = accepted(ClientSockets {
            send_buffer: 0,
            notsent_lowat: 0,
        })
        .await;
        assert_eq!(
            socket2::SockRef::from(&stream).tcp_notsent_lowat().unwrap(),
            0
        );
    }
}
