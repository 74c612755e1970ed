//! Requests in flight per client address (`limits.max_concurrent_requests_per_client_address`,
//! nginx's `limit_conn $binary_remote_addr`): one address cannot take every permit of
//! `limits.max_concurrent_requests`, whichever keys it presents.
//!
//! The address is the TCP peer's: no forwarded header is trusted (guardwire has no setting
//! that names trusted proxies). An IPv6 client is counted by its /64, the block one host or
//! one customer line is usually given, inside which it can pick a new address at will; an
//! IPv4-mapped IPv6 peer (a dual-stack listener) is counted as its IPv4 address.
//!
//! Only addresses with requests in flight have an entry: an address is removed when its last
//! share is given back, so the map is bounded by the requests in flight.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// What one address (or IPv6 /64) has in flight.
#[derive(Debug, Default)]
pub struct ClientAddresses(Mutex<HashMap<IpAddr, usize>>);

/// The key a peer is counted under: its IPv4 address, or its IPv6 /64.
pub fn counted_as(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    }
}

impl ClientAddresses {
    pub fn new() -> Arc<ClientAddresses> {
        Arc::default()
    }

    /// One request for `peer`, if its address has fewer than `max` in flight; given back when
    /// the share is dropped.
    pub fn take(self: &Arc<Self>, peer: IpAddr, max: usize) -> Option<AddressShare> {
        let address = counted_as(peer);
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Refused before an entry is made: a refusal leaves the map as it was.
        if counts.get(&address).copied().unwrap_or(0) >= max {
            return None;
        }
        *counts.entry(address).or_insert(0) += 1;
        Some(AddressShare {
            counts: Arc::clone(self),
            address,
        })
    }

    /// Requests in flight for `peer`'s address.
    #[cfg(test)]
    fn in_flight(&self, peer: IpAddr) -> usize {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&counted_as(peer)).copied().unwrap_or(0)
    }

    /// Addresses with requests in flight.
    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// One request counted against its client address, given back on drop.
#[derive(Debug)]
pub struct AddressShare {
    counts: Arc<ClientAddresses>,
    address: IpAddr,
}

impl Drop for AddressShare {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_takes_up_to_its_cap_and_others_are_apart() {
        let a = ClientAddresses::new();
        let first = a.take(ip("127.0.0.1"), 2).unwrap();
        let second = a.take(ip("127.0.0.1"), 2).unwrap();
        assert!(a.take(ip("127.0.0.1"), 2).is_none());
        assert_eq!(a.in_flight(ip("127.0.0.1")), 2, "a refusal takes nothing");
        let other = a.take(ip("127.0.0.2"), 2);
        assert!(other.is_some(), "another address has its own count");
        drop(first);
        assert!(a.take(ip("127.0.0.1"), 2).is_some(), "a share came back");
        drop((second, other));
        assert_eq!(a.addresses(), 0, "no entry without requests in flight");
        assert!(a.take(ip("10.0.0.1"), 0).is_none());
        assert_eq!(a.addresses(), 0, "a refused first take leaves no entry");
    }

    #[test]
    fn ipv6_is_counted_by_its_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(
            counted_as(ip("2001:db8:1:2:aaaa::1")),
            counted_as(ip("2001:db8:1:2:ffff:1:2:3")),
        );
        assert_eq!(counted_as(ip("2001:db8:1:2::1")), ip("2001:db8:1:2::"));
        assert_ne!(
            counted_as(ip("2001:db8:1:2::1")),
            counted_as(ip("2001:db8:1:3::1"))
        );
        assert_eq!(counted_as(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        let a = ClientAddresses::new();
        let _held = a.take(ip("::ffff:192.0.2.7"), 1).unwrap();
        assert!(a.take(ip("192.0.2.7"), 1).is_none(), "the same client");
    }
}
