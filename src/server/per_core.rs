//! `server.runtime: per_core`: one OS thread per worker, each running a single-thread tokio
//! runtime with a client listener of its own, bound with `SO_REUSEPORT` to the same address
//! (the kernel hands each new connection to one of them by a hash of its addresses). A
//! connection, the tasks it spawns, its upstream connections (`upstream::enter_worker`) and its
//! timers stay on the worker that accepted it, so nothing of a stream is woken from another
//! thread. Every worker serves the same [`Gateway`]: the limits, the metrics, the judges' queues
//! and the running config (swapped whole on reload) are shared.

use super::{bind_clients, serve, wait_true, ClientSockets};
use crate::proxy::Gateway;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

/// Binds `count` listeners to `addr` with `SO_REUSEPORT`; with port 0, the port the first got
/// is the port of them all.
pub(super) fn bind(
    addr: SocketAddr,
    count: usize,
    sockets: ClientSockets,
) -> std::io::Result<Vec<TcpListener>> {
    let first = bind_clients(addr, sockets, true)?;
    let bound = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..count {
        all.push(bind_clients(bound, sockets, true)?);
    }
    Ok(all)
}

/// Starts a worker thread per listener, each serving until `shutdown` turns true and its
/// connections have drained (as [`serve`] does). The future returned ends when every worker
/// has.
pub(super) fn start(
    listeners: Vec<TcpListener>,
    gateway: &Arc<Gateway>,
    shutdown: &watch::Receiver<bool>,
) -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut done = Vec::with_capacity(listeners.len());
    for (index, listener) in listeners.into_iter().enumerate() {
        // Moved to the worker's event loop: deregistered from this one first.
        let listener = listener.into_std()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (gateway, shutdown) = (Arc::clone(gateway), shutdown.clone());
        let (finished, finished_rx) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("guardwire-w{index}"))
            .spawn(move || {
                crate::upstream::enter_worker(index);
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, index, gateway, wait_true(shutdown)).await,
                        Err(e) => {
                            tracing::error!(worker = index, error = %e, "worker cannot listen")
                        }
                    }
                });
                let _ = finished.send(());
                // Tasks still there (idle-connection sweeps, background body drains) are
                // dropped; a blocking task under way (a reload) is not waited for.
                runtime.shutdown_background();
            })?;
        done.push(finished_rx);
    }
    Ok(async move {
        for worker in done {
            let _ = worker.await;
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[tokio::test]
    async fn every_worker_listens_on_the_port_the_first_was_given() {
        let all = super::bind(
            "127.0.0.1:0".parse().unwrap(),
            3,
            super::ClientSockets::default(),
        )
        .unwrap();
        let first = all[0].local_addr().unwrap();
        assert_ne!(first.port(), 0);
        for l in &all {
            assert_eq!(l.local_addr().unwrap(), first);
        }
        // Without SO_REUSEPORT the port is not to be had.
        let plain = super::bind_clients(first, super::ClientSockets::default(), false);
        assert!(plain.is_err());
    }
}
