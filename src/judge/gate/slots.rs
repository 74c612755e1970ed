//! A gate's concurrency limit and queue, shared fairly between keys: a call runs when the limit
//! and its key's share allow, else waits in its key's queue; freed slots go round the keys with
//! waiters in turn, and a key under its share may push out the newest waiter of a key over it.

use super::{Gate, Tenant};
use crate::judge::{ErrorKind, JudgeError};
use crate::metrics::Metrics;
use std::collections::{HashMap, VecDeque};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A gate's concurrency limit and queue, and each key's part of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub max_concurrency: usize,
    pub max_queue: usize,
    /// A key's most calls in flight; `None`: a fair share, `max_concurrency` divided by the
    /// keys with calls in flight or waiting, rounded up.
    pub concurrency_per_key: Option<usize>,
    /// A key's most calls waiting; `None`: a fair share of `max_queue`, as above.
    pub queue_per_key: Option<usize>,
}

impl Capacity {
    /// Fair shares of `max_concurrency` and `max_queue`.
    pub fn fair(max_concurrency: usize, max_queue: usize) -> Capacity {
        Capacity {
            max_concurrency,
            max_queue,
            concurrency_per_key: None,
            queue_per_key: None,
        }
    }

    fn concurrency_share(&self, active: usize) -> usize {
        share(self.max_concurrency, self.concurrency_per_key, active)
    }

    fn queue_share(&self, active: usize) -> usize {
        share(self.max_queue, self.queue_per_key, active)
    }
}

fn share(limit: usize, fixed: Option<usize>, active: usize) -> usize {
    fixed
        .unwrap_or_else(|| limit.div_ceil(active.max(1)))
        .max(1)
}

/// The concurrency limit and its queue: a call runs when the limit and its key's share allow,
/// else waits in its key's queue; freed slots go round the keys with waiters in turn.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) in_flight: usize,
    pub(super) waiting: usize,
    /// Keys with calls in flight or waiting (and only those: the shares divide by their number).
    pub(super) tenants: HashMap<Tenant, TenantSlots>,
    /// Keys with waiters, in the order they are next served.
    pub(super) turn: VecDeque<Tenant>,
    pub(super) next_id: u64,
}

#[derive(Default)]
pub(super) struct TenantSlots {
    pub(super) in_flight: usize,
    pub(super) queue: VecDeque<(u64, oneshot::Sender<Grant>)>,
}

/// What a waiting call is told.
#[derive(Debug)]
pub(super) enum Grant {
    /// A slot, already counted as in flight.
    Run,
    /// The queue was full and a key under its share needed the place.
    PushedOut,
}

pub(super) fn overloaded() -> JudgeError {
    JudgeError::new(
        ErrorKind::Overloaded,
        "the concurrency limit and its queue (or this key's share of them) are full",
    )
}

impl Gate {
    pub(super) fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for `tenant` at once, or a place in its queue until `deadline`. Refused when the
    /// tenant's queue holds its share, or the whole queue is full and no key over its share
    /// can give up a place.
    pub(super) async fn acquire(
        &self,
        metrics: &Metrics,
        tenant: Tenant,
        deadline: Instant,
    ) -> Result<Permit<'_>, JudgeError> {
        let (id, rx) = {
            let mut s = self.slots();
            let s = &mut *s;
            s.tenants.entry(tenant).or_default();
            let active = s.tenants.len();
            let (own_in_flight, own_waiting) = s
                .tenants
                .get(&tenant)
                .map_or((0, 0), |t| (t.in_flight, t.queue.len()));
            if s.in_flight < self.capacity.max_concurrency
                && own_in_flight < self.capacity.concurrency_share(active)
                && own_waiting == 0
            {
                s.start(tenant);
                return Ok(Permit { gate: self, tenant });
            }
            let queue_share = self.capacity.queue_share(active);
            if own_waiting >= queue_share
                || (s.waiting >= self.capacity.max_queue && !s.push_out(queue_share))
            {
                s.forget_if_idle(tenant);
                return Err(overloaded());
            }
            let (tx, rx) = oneshot::channel();
            let id = s.next_id;
            s.next_id = s.next_id.wrapping_add(1);
            if let Some(t) = s.tenants.get_mut(&tenant) {
                if t.queue.is_empty() {
                    s.turn.push_back(tenant);
                }
                t.queue.push_back((id, tx));
            }
            s.waiting += 1;
            (id, rx)
        };
        // Leaves the queue however the wait ends, a cancelled call included.
        let mut slot = QueueSlot::enter(self, metrics, tenant, id, rx);
        let Some(rx) = slot.rx.as_mut() else {
            return Err(overloaded());
        };
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Grant::Run)) => {
                slot.rx = None;
                Ok(Permit { gate: self, tenant })
            }
            Ok(Ok(Grant::PushedOut)) => Err(overloaded()),
            Ok(Err(_)) => Err(JudgeError::new(ErrorKind::Overloaded, "the gate is closed")),
            Err(_) => Err(JudgeError::new(
                ErrorKind::Timeout,
                "no verdict before the deadline (waiting for the concurrency limit)",
            )),
        }
    }

    /// Gives back `tenant`'s slot and hands free slots to waiters.
    pub(super) fn release(&self, tenant: Tenant) {
        let mut s = self.slots();
        s.finish(tenant);
        s.settle(tenant, &self.capacity);
    }
}

impl Slots {
    fn start(&mut self, tenant: Tenant) {
        self.in_flight += 1;
        if let Some(t) = self.tenants.get_mut(&tenant) {
            t.in_flight += 1;
        }
    }

    fn finish(&mut self, tenant: Tenant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(t) = self.tenants.get_mut(&tenant) {
            t.in_flight = t.in_flight.saturating_sub(1);
        }
    }

    /// Hands free slots to waiters: the first key in turn below its share is served and goes
    /// to the back of the turn.
    fn dispatch(&mut self, capacity: &Capacity) {
        while self.in_flight < capacity.max_concurrency {
            let share = capacity.concurrency_share(self.tenants.len());
            let tenants = &self.tenants;
            let Some(pos) = self.turn.iter().position(|t| {
                tenants
                    .get(t)
                    .is_some_and(|t| t.in_flight < share && !t.queue.is_empty())
            }) else {
                return;
            };
            let Some(tenant) = self.turn.remove(pos) else {
                return;
            };
            let Some(t) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            let Some((_, tx)) = t.queue.pop_front() else {
                continue;
            };
            if !t.queue.is_empty() {
                self.turn.push_back(tenant);
            }
            self.waiting = self.waiting.saturating_sub(1);
            // A waiter leaves its queue before it drops its receiver, so this reaches it.
            if tx.send(Grant::Run).is_ok() {
                self.start(tenant);
            }
        }
    }

    /// Frees a place in the full queue for a key under `share`: the key with the longest
    /// queue over its share gives up its newest waiter. False when no key is over it.
    fn push_out(&mut self, share: usize) -> bool {
        let Some((&victim, _)) = self
            .tenants
            .iter()
            .filter(|(_, t)| t.queue.len() > share)
            .max_by_key(|(_, t)| t.queue.len())
        else {
            return false;
        };
        let Some(t) = self.tenants.get_mut(&victim) else {
            return false;
        };
        let Some((_, tx)) = t.queue.pop_back() else {
            return false;
        };
        if t.queue.is_empty() {
            self.turn.retain(|k| *k != victim);
        }
        self.waiting = self.waiting.saturating_sub(1);
        let _ = tx.send(Grant::PushedOut);
        true
    }

    /// Removes a waiter that is still queued (its wait ended otherwise); true if it was.
    fn leave(&mut self, tenant: Tenant, id: u64) -> bool {
        let Some(t) = self.tenants.get_mut(&tenant) else {
            return false;
        };
        let Some(pos) = t.queue.iter().position(|(i, _)| *i == id) else {
            return false;
        };
        t.queue.remove(pos);
        if t.queue.is_empty() {
            self.turn.retain(|k| *k != tenant);
        }
        self.waiting = self.waiting.saturating_sub(1);
        true
    }

    /// After `tenant` gave something back: forgotten if idle (the others' shares grow), and
    /// free slots handed out.
    fn settle(&mut self, tenant: Tenant, capacity: &Capacity) {
        self.forget_if_idle(tenant);
        self.dispatch(capacity);
    }

    /// A key with nothing in flight or waiting no longer counts towards the shares.
    fn forget_if_idle(&mut self, tenant: Tenant) {
        if self
            .tenants
            .get(&tenant)
            .is_some_and(|t| t.in_flight == 0 && t.queue.is_empty())
        {
            self.tenants.remove(&tenant);
        }
    }
}

/// A running call's slot, given back on drop.
pub(super) struct Permit<'a> {
    gate: &'a Gate,
    tenant: Tenant,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.release(self.tenant);
    }
}

/// A place in a gate's queue, left on drop (a cancelled wait included): still queued, it is
/// removed; granted a slot it did not take (cancelled at that moment), the slot is given back.
struct QueueSlot<'a> {
    gate: &'a Gate,
    tenant: Tenant,
    id: u64,
    /// `None` once the slot was taken.
    rx: Option<oneshot::Receiver<Grant>>,
    depth: prometheus_client::metrics::gauge::Gauge,
}

impl<'a> QueueSlot<'a> {
    /// Takes the place already queued.
    fn enter(
        gate: &'a Gate,
        metrics: &Metrics,
        tenant: Tenant,
        id: u64,
        rx: oneshot::Receiver<Grant>,
    ) -> QueueSlot<'a> {
        let depth = metrics
            .judges
            .queue_depth
            .get_or_create(&gate.labels())
            .clone();
        depth.inc();
        QueueSlot {
            gate,
            tenant,
            id,
            rx: Some(rx),
            depth,
        }
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.depth.dec();
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut s = self.gate.slots();
        // Out of the queue already: granted (the grant still in the channel) or pushed out.
        if !s.leave(self.tenant, self.id) && matches!(rx.try_recv(), Ok(Grant::Run)) {
            s.finish(self.tenant);
        }
        s.settle(self.tenant, &self.gate.capacity);
    }
}
