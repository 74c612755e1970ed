//! Shared budgets counted in one atomic: request slots (`limits.max_concurrent_requests`, a
//! key's `max_concurrent_requests`), request-body bytes held at once
//! (`limits.max_buffered_request_bytes`), bytes of turns waiting for the evals
//! (`evals.max_queue_bytes`).
//!
//! Taking from a budget is one `fetch_add` (undone when it overshoots), giving back one
//! `fetch_sub` when the [`Held`] share is dropped: no lock on the request path. The limit is
//! passed at each take, so a reload that changes it applies to the next take while shares
//! already held stay counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
}
