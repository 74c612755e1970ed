//! `guardwire_worker_connections_total`: client connections by the accept loop that took them
//! (`server.runtime: per_core`: one per worker, so an operator sees how evenly the kernel's
//! `SO_REUSEPORT` hash spreads connections; `work_stealing`: one loop, worker 0).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabels {
    pub worker: usize,
}

/// Client connections accepted, by worker.
pub type WorkerConnections = Family<WorkerLabels, Counter>;

pub(super) fn register(registry: &mut Registry) -> WorkerConnections {
    let family = WorkerConnections::default();
    registry.register(
        "worker_connections",
        "Client connections accepted, by the accept loop that took them (server.runtime per_core: its worker; work_stealing: 0), counted before limits.max_connections",
        family.clone(),
    );
    family
}
