//! Shared budgets counted in one atomic: request slots (`limits.max_concurrent_requests`, a
//! key's `max_concurrent_requests`), request-body bytes held at once
//! (`limits.max_buffered_request_bytes`), bytes of turns waiting for the evals
//! (`evals.max_queue_bytes`); and budgets shared out per tenant ([`Shares`]: request-body
//! bytes per key and per client address, [`RequestBytes`]).
//!
//! Taking from a budget is one `fetch_add` (undone when it overshoots), giving back one
//! `fetch_sub` when the [`Held`] share is dropped: no lock on the request path. The limit is
//! passed at each take, so a reload that changes it applies to the next take while shares
//! already held stay counted.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What is in use of one budget.
#[derive(Debug, Default)]
pub struct Budget(AtomicUsize);

impl Budget {
    pub fn new() -> Arc<Budget> {
        Arc::new(Budget::default())
    }

    /// In use right now.
    pub fn used(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Takes `n` if that keeps the total within `max`; `None` (nothing taken) otherwise.
    pub fn take(self: &Arc<Self>, n: usize, max: usize) -> Option<Held> {
        let mut held = Held {
            budget: Arc::clone(self),
            n: 0,
        };
        held.grow(n, max).then_some(held)
    }

    fn add(&self, n: usize, max: usize) -> bool {
        if n > max {
            return false;
        }
        let before = self.0.fetch_add(n, Ordering::AcqRel);
        if before.checked_add(n).is_none_or(|total| total > max) {
            self.0.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }
}

/// A share of a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<Budget>,
    n: usize,
}

impl Held {
    /// Takes `more` on top of this share, if that keeps the budget's total within `max`; on
    /// `false` the share is unchanged.
    pub fn grow(&mut self, more: usize, max: usize) -> bool {
        if more == 0 {
            return true;
        }
        let ok = self.budget.add(more, max);
        if ok {
            self.n += more;
        }
        ok
    }

    /// The size of this share.
    pub fn size(&self) -> usize {
        self.n
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.n > 0 {
            self.budget.0.fetch_sub(self.n, Ordering::AcqRel);
        }
    }
}

/// One budget per tenant (a key, a client address): what each holds. A tenant has an entry
/// only while it holds something, so the map is bounded by the shares held.
#[derive(Debug)]
pub struct Shares<K>(Mutex<HashMap<K, usize>>);

impl<K> Default for Shares<K> {
    fn default() -> Self {
        Shares(Mutex::new(HashMap::new()))
    }
}

impl<K: Hash + Eq + Clone> Shares<K> {
    pub fn new() -> Arc<Shares<K>> {
        Arc::default()
    }

    /// What `tenant` holds right now.
    pub fn used(&self, tenant: &K) -> usize {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(tenant).copied().unwrap_or(0)
    }

    /// An empty share of `tenant`'s budget, grown with [`Share::grow`].
    pub fn share(self: &Arc<Self>, tenant: K) -> Share<K> {
        Share {
            shares: Arc::clone(self),
            tenant,
            n: 0,
        }
    }
}

/// A part of one tenant's budget in [`Shares`], given back when dropped.
#[derive(Debug)]
pub struct Share<K: Hash + Eq + Clone> {
    shares: Arc<Shares<K>>,
    tenant: K,
    n: usize,
}

impl<K: Hash + Eq + Clone> Share<K> {
    /// Takes `more` if that keeps the tenant's total within `max`; on `false` nothing changes
    /// (a refused first take leaves no entry).
    pub fn grow(&mut self, more: usize, max: usize) -> bool {
        if more == 0 {
            return true;
        }
        let mut map = self.shares.0.lock().unwrap_or_else(PoisonError::into_inner);
        let held = map.get(&self.tenant).copied().unwrap_or(0);
        match held.checked_add(more) {
            Some(total) if total <= max => {
                map.insert(self.tenant.clone(), total);
                self.n += more;
                true
            }
            _ => false,
        }
    }

    fn shrink(&mut self, less: usize) {
        let less = less.min(self.n);
        if less == 0 {
            return;
        }
        self.n -= less;
        let mut map = self.shares.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = map.get_mut(&self.tenant) {
            *held = held.saturating_sub(less);
            if *held == 0 {
                map.remove(&self.tenant);
            }
        }
    }
}

impl<K: Hash + Eq + Clone> Drop for Share<K> {
    fn drop(&mut self) {
        self.shrink(self.n);
    }
}

/// Request-body bytes held at once: over every request (`limits.max_buffered_request_bytes`),
/// per client key (`limits.max_buffered_request_bytes_per_key`) and per client address
/// (`limits.max_buffered_request_bytes_per_client_address`). Bytes are taken as they arrive,
/// never from an announced length, so announcing costs a client nothing and a tenant holds
/// only what it has sent; a tenant's share keeps it from taking the whole budget.
#[derive(Debug, Default)]
pub struct RequestBytes {
    total: Arc<Budget>,
    per_key: Arc<Shares<&'static str>>,
    per_address: Arc<Shares<IpAddr>>,
}

/// The limits a body's bytes are taken within (0 for a tenant's share: none).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub total: usize,
    pub per_key: usize,
    pub per_address: usize,
}

/// Which limit refused more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRefusal {
    /// The key's share.
    Key,
    /// The client address's share.
    Address,
    /// The budget over every request.
    Total,
}

impl RequestBytes {
    /// Held over every request right now.
    pub fn used(&self) -> usize {
        self.total.used()
    }

    /// Held by client key `key` right now.
    pub fn used_by_key(&self, key: &'static str) -> usize {
        self.per_key.used(&key)
    }

    /// An empty hold for one body from `key` (`None`: no keys configured) at `address`
    /// (`None`: unknown), grown with [`BodyHeld::grow`] as its bytes arrive.
    pub fn hold(&self, key: Option<&'static str>, address: Option<IpAddr>) -> BodyHeld {
        BodyHeld {
            total: Held {
                budget: Arc::clone(&self.total),
                n: 0,
            },
            key: key.map(|k| self.per_key.share(k)),
            address: address.map(|a| self.per_address.share(a)),
        }
    }
}

/// One body's bytes, counted in every budget that applies to it; given back when dropped (the
/// body is kept until its exchange ends).
#[derive(Debug)]
pub struct BodyHeld {
    total: Held,
    key: Option<Share<&'static str>>,
    address: Option<Share<IpAddr>>,
}

impl BodyHeld {
    /// Bytes held.
    pub fn size(&self) -> usize {
        self.total.size()
    }

    /// Takes `more` bytes in each budget that applies: the tenant's shares first (so a tenant
    /// over its share is told so, whatever the total holds), then the total. On a refusal
    /// nothing is taken.
    pub fn grow(&mut self, more: usize, limits: BodyLimits) -> Result<(), BodyRefusal> {
        if more == 0 {
            return Ok(());
        }
        let key = match (&mut self.key, limits.per_key) {
            (Some(share), max) if max > 0 => {
                if !share.grow(more, max) {
                    return Err(BodyRefusal::Key);
                }
                true
            }
            _ => false,
        };
        let address = match (&mut self.address, limits.per_address) {
            (Some(share), max) if max > 0 => {
                if !share.grow(more, max) {
                    self.undo(key, false, more);
                    return Err(BodyRefusal::Address);
                }
                true
            }
            _ => false,
        };
        if !self.total.grow(more, limits.total) {
            self.undo(key, address, more);
            return Err(BodyRefusal::Total);
        }
        // A share not counted (its limit off) stays at 0, so turning the limit on by a reload
        // counts this body's later bytes only.
        Ok(())
    }

    fn undo(&mut self, key: bool, address: bool, n: usize) {
        if let (true, Some(share)) = (key, &mut self.key) {
            share.shrink(n);
        }
        if let (true, Some(share)) = (address, &mut self.address) {
            share.shrink(n);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn takes_within_the_limit_and_gives_back_on_drop() {
        let b = Budget::new();
        let first = b.take(600, 1000);
        assert!(first.is_some());
        assert!(b.take(600, 1000).is_none(), "600 + 600 > 1000");
        assert_eq!(b.used(), 600, "a refused take leaves nothing behind");
        let second = b.take(400, 1000);
        assert!(second.is_some(), "600 + 400 = 1000 fits");
        drop(first);
        assert_eq!(b.used(), 400);
        assert!(b.take(600, 1000).is_some());
        drop(second);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_share_grows_until_the_limit() {
        let b = Budget::new();
        let mut h = b.take(0, 100).unwrap();
        assert!(h.grow(60, 100));
        assert!(!h.grow(50, 100));
        assert_eq!(h.size(), 60, "a refused growth leaves the share as it was");
        assert!(h.grow(40, 100));
        assert_eq!(b.used(), 100);
        drop(h);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_lower_limit_refuses_new_takes_but_keeps_held_shares() {
        let b = Budget::new();
        let held = b.take(5, 10);
        assert!(held.is_some());
        assert!(b.take(1, 4).is_none());
        assert_eq!(b.used(), 5);
        assert!(b.take(usize::MAX, usize::MAX).is_none(), "no overflow");
        assert!(b.take(usize::MAX - 2, usize::MAX).is_none(), "no overflow");
        assert_eq!(b.used(), 5);
    }

    #[test]
    fn tenants_share_out_request_bytes_as_they_arrive() {
        let b = RequestBytes::default();
        let limits = BodyLimits {
            total: 100,
            per_key: 40,
            per_address: 60,
        };
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other_ip: IpAddr = "192.0.2.2".parse().unwrap();
        let mut a1 = b.hold(Some("a"), Some(ip));
        assert_eq!(b.used(), 0, "a hold takes nothing until bytes arrive");
        assert!(a1.grow(30, limits).is_ok());
        let mut a2 = b.hold(Some("a"), Some(other_ip));
        assert_eq!(a2.grow(20, limits), Err(BodyRefusal::Key), "30 + 20 > 40");
        assert_eq!(
            (b.used(), b.used_by_key("a")),
            (30, 30),
            "a refusal takes nothing"
        );
        let mut c = b.hold(Some("c"), Some(ip));
        assert_eq!(
            c.grow(40, limits),
            Err(BodyRefusal::Address),
            "30 + 40 > 60"
        );
        assert_eq!(b.used_by_key("c"), 0, "the key's part was undone");
        assert!(c.grow(30, limits).is_ok());
        let mut d = b.hold(Some("d"), None);
        assert!(d.grow(40, limits).is_ok());
        let mut e = b.hold(None, None);
        assert_eq!(e.grow(1, limits), Err(BodyRefusal::Total), "100 held");
        drop((a1, a2));
        assert_eq!(b.used_by_key("a"), 0);
        assert!(
            b.per_key.0.lock().unwrap().get("a").is_none(),
            "no entry left"
        );
        assert!(e.grow(30, limits).is_ok());
        let off = BodyLimits {
            total: 1000,
            per_key: 0,
            per_address: 0,
        };
        assert!(d.grow(500, off).is_ok(), "0: no share");
        drop((c, d, e));
        assert_eq!(b.used(), 0);
        assert!(b.per_address.0.lock().unwrap().is_empty());
    }
}
