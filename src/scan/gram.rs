//! A q-gram start filter: a cheap, stateless test of whether a literal could begin at a text
//! position.
//!
//! Stepping an automaton is one *dependent* table lookup per byte, so it cannot go faster than
//! the memory latency of its table. Most text positions cannot begin any pattern, though, and
//! that can be decided from the next few bytes alone, independently at every position: hash the
//! (case-folded) 1–4 bytes starting there and look the hash up in a small bitset of the
//! patterns' first bytes. The lookups of neighbouring positions do not wait on each other, so the
//! CPU overlaps them; the automata then run only from positions the filter lets through. On
//! CPUs with AVX-512, [`super::simd::gram_starts`] judges 16 positions per gather.
//!
//! The filter has false positives (hash collisions, folded punctuation) but never false
//! negatives: every position where a pattern starts passes it.

/// Folds four bytes (little-endian in a `u32`) into a filter key: ASCII bytes get bit 5 set, so
/// letters lose their case (a few punctuation pairs like `@`/`` ` `` collide too, which only
/// costs a false positive); every non-ASCII byte becomes `0x80`, because Unicode case folding
/// keeps a character's UTF-8 length but may change any of its bytes.
#[inline(always)]
pub(super) fn fold4(w: u32) -> u32 {
    let high = w & 0x8080_8080;
    let non_ascii = (high >> 7) * 0xFF;
    ((w | 0x2020_2020) & !non_ascii) | high
}

/// [`fold4`] over eight bytes.
#[inline(always)]
fn fold8(w: u64) -> u64 {
    let high = w & 0x8080_8080_8080_8080;
    let non_ascii = (high >> 7) * 0xFF;
    ((w | 0x2020_2020_2020_2020) & !non_ascii) | high
}

/// The bytes `bytes[i..i + 4]` as a little-endian word, zero-padded past the end.
#[inline(always)]
pub(super) fn load4(bytes: &[u8], i: usize) -> u32 {
    match bytes.get(i..i + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => {
            let mut w = [0u8; 4];
            for (k, &b) in bytes[i..].iter().take(4).enumerate() {
                w[k] = b;
            }
            u32::from_le_bytes(w)
        }
    }
}

/// Bits per table: 8 KiB, so a table stays in L1; 1,000 patterns set 1.5 % of the bits, 10,000
/// about 14 %.
const TABLE_LOG2: u32 = 16;

/// One bitset over keys of `q` bytes.
#[derive(Debug, Clone)]
pub(super) struct Table {
    /// Selects the key's first `q` bytes.
    pub(super) mask: u32,
    /// Fixed size, so that indexing it needs no bounds check (and the vector kernel's gather
    /// stays inside it).
    pub(super) bits: Box<[u64; 1 << (TABLE_LOG2 - 6)]>,
}

impl Table {
    #[inline(always)]
    fn slot(&self, key: u32) -> usize {
        ((key & self.mask).wrapping_mul(super::simd::GRAM_MUL) >> (32 - TABLE_LOG2)) as usize
    }

    #[inline(always)]
    fn contains(&self, key: u32) -> bool {
        let h = self.slot(key);
        (self.bits[h >> 6] >> (h & 63)) & 1 != 0
    }
}

/// Which positions of a text could begin one of a set of literals (see the module docs).
#[derive(Debug, Clone)]
pub struct StartFilter {
    /// One table per key length in use: 4 bytes (3-byte starts enter it with every fourth byte),
    /// plus 1- or 2-byte tables for starts that short, which let much more through.
    tables: Vec<Table>,
    /// The longest key: a position can be judged only when this many bytes follow it.
    reach: usize,
    /// Whether the vector kernel ([`super::simd::gram_starts`]) judges runs of positions.
    simd: bool,
}

impl StartFilter {
    /// A filter for literals beginning with any of `starts` (compared ASCII-case-insensitively;
    /// non-ASCII characters match anything of the same UTF-8 length). `None` when `starts` is
    /// empty or holds an empty string, which would let every position through.
    pub fn new<'a>(starts: impl IntoIterator<Item = &'a [u8]>) -> Option<Self> {
        let mut keys: [Vec<u32>; 5] = Default::default();
        for s in starts {
            match s.len() {
                0 => return None,
                // Three bytes: every possible fourth byte, so the four-byte table covers it.
                3 => keys[4].extend((0..=255u8).map(|b| fold4(load4(&[s[0], s[1], s[2], b], 0)))),
                len => {
                    let q = len.min(4);
                    keys[q].push(fold4(load4(&s[..q], 0)));
                }
            }
        }
        let mut tables = Vec::new();
        let mut reach = 0;
        for (q, keys) in keys.iter().enumerate() {
            if keys.is_empty() {
                continue;
            }
            let mut table = Table {
                mask: if q == 4 {
                    u32::MAX
                } else {
                    (1u32 << (8 * q)) - 1
                },
                bits: Box::new([0; 1 << (TABLE_LOG2 - 6)]),
            };
            for &k in keys {
                let h = table.slot(k);
                table.bits[h >> 6] |= 1 << (h & 63);
            }
            tables.push(table);
            reach = reach.max(q);
        }
        if tables.is_empty() {
            return None;
        }
        // The 4-byte table rejects the most positions: test it first.
        tables.reverse();
        Some(StartFilter {
            tables,
            reach,
            simd: super::simd::enabled(),
        })
    }

    /// Whether a literal could begin at `bytes[i]`; needs `i + reach() <= bytes.len()`.
    #[inline(always)]
    pub fn may_start(&self, bytes: &[u8], i: usize) -> bool {
        let key = fold4(load4(bytes, i));
        self.tables.iter().any(|t| t.contains(key))
    }

    /// The first position in `from..limit` where a literal could begin, or `max(from, limit)`
    /// if none (`limit + reach() - 1 <= bytes.len()`).
    #[inline]
    pub fn next_start(&self, bytes: &[u8], from: usize, limit: usize) -> usize {
        if from >= limit {
            return from;
        }
        if self.simd && limit - from >= super::simd::MIN_RUN {
            let mut first = limit;
            super::simd::gram_starts(&self.tables, bytes, from, limit, |i| {
                first = i;
                false
            });
            return first;
        }
        if let [table] = self.tables.as_slice() {
            // One table (the usual case): four positions per 8-byte load, judged without
            // branches, so the lookups overlap and only a hit costs a branch.
            let mut i = from;
            while i + 4 <= limit && i + 8 <= bytes.len() {
                let w = fold8(u64::from_le_bytes(
                    bytes[i..i + 8].try_into().unwrap_or([0; 8]),
                ));
                let hits = u32::from(table.contains(w as u32))
                    | u32::from(table.contains((w >> 8) as u32)) << 1
                    | u32::from(table.contains((w >> 16) as u32)) << 2
                    | u32::from(table.contains((w >> 24) as u32)) << 3;
                if hits != 0 {
                    return i + hits.trailing_zeros() as usize;
                }
                i += 4;
            }
            (i..limit)
                .find(|&i| self.may_start(bytes, i))
                .unwrap_or(limit)
        } else {
            (from..limit)
                .find(|&i| self.may_start(bytes, i))
                .unwrap_or(limit)
        }
    }

    /// A filter that lets through what either `self` or `other` lets through.
    pub fn union(&self, other: &StartFilter) -> StartFilter {
        let mut tables = self.tables.clone();
        for t in &other.tables {
            match tables.iter_mut().find(|u| u.mask == t.mask) {
                Some(u) => u
                    .bits
                    .iter_mut()
                    .zip(t.bits.iter())
                    .for_each(|(a, b)| *a |= b),
                None => tables.push(t.clone()),
            }
        }
        tables.sort_by_key(|t| std::cmp::Reverse(t.mask));
        StartFilter {
            tables,
            reach: self.reach.max(other.reach),
            simd: self.simd,
        }
    }

    /// Every position before `limit` that the filter lets through, appended to `out`.
    pub fn collect_starts(&self, bytes: &[u8], limit: usize, out: &mut Vec<usize>) {
        if self.simd && limit >= super::simd::MIN_RUN {
            super::simd::gram_starts(&self.tables, bytes, 0, limit, |i| {
                out.push(i);
                true
            });
            return;
        }
        let mut i = 0;
        loop {
            i = self.next_start(bytes, i, limit);
            if i >= limit {
                return;
            }
            out.push(i);
            i += 1;
        }
    }

    /// First position from which the filter cannot judge `bytes` (too close to the end).
    pub fn judged(&self, bytes: &[u8]) -> usize {
        (bytes.len() + 1).saturating_sub(self.reach)
    }

    /// The same filter on the scalar path, for tests comparing the two.
    #[cfg(test)]
    pub(super) fn scalar(mut self) -> Self {
        self.simd = false;
        self
    }

    /// Heap bytes of the tables.
    pub fn memory_usage(&self) -> usize {
        self.tables.iter().map(|t| t.bits.len() * 8).sum()
    }
}

/// One matcher's view of where literals could begin in one piece of text: found by its own
/// filter as the scan goes, or picked from the list a shared filter made once for several
/// matchers (see [`super::ScanSet`]).
pub(super) struct Starts<'a> {
    filter: &'a StartFilter,
    bytes: &'a [u8],
    /// Positions from here on are too close to the end to judge: all count as starts.
    judged: usize,
    /// The shared list and how far into it the scan has come.
    shared: Option<(&'a [usize], usize)>,
}

impl<'a> Starts<'a> {
    pub(super) fn own(filter: &'a StartFilter, bytes: &'a [u8]) -> Self {
        Starts {
            filter,
            bytes,
            judged: filter.judged(bytes),
            shared: None,
        }
    }

    /// `list` holds every position before `judged` that a filter letting through at least what
    /// `filter` does let through.
    pub(super) fn shared(
        filter: &'a StartFilter,
        bytes: &'a [u8],
        list: &'a [usize],
        judged: usize,
    ) -> Self {
        Starts {
            filter,
            bytes,
            judged,
            shared: Some((list, 0)),
        }
    }

    /// The first position at or after `i` where a literal could begin (at least `i`).
    #[inline]
    pub(super) fn next(&mut self, i: usize) -> usize {
        match &mut self.shared {
            None => self.filter.next_start(self.bytes, i, self.judged),
            Some((list, k)) => {
                while let Some(&c) = list.get(*k) {
                    if c >= i && self.filter.may_start(self.bytes, c) {
                        return c;
                    }
                    *k += 1;
                }
                i.max(self.judged)
            }
        }
    }

    /// Whether a literal could begin at `i`.
    #[inline]
    pub(super) fn at(&self, i: usize) -> bool {
        i >= self.judged || self.filter.may_start(self.bytes, i)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_start_of_a_pattern_passes_in_any_case() {
        let f = StartFilter::new([&b"secret"[..], b"ab", "straße".as_bytes()]).unwrap();
        assert_eq!(f.judged(b"abcdef"), 3);
        let text = "xx SECRET Ab STRAẞE straSSe".as_bytes();
        let padded = [text, b"    "].concat();
        for (i, want) in [(3, true), (10, true), (13, true)] {
            assert_eq!(f.may_start(&padded, i), want, "position {i}");
        }
        assert_eq!(f.next_start(&padded, 0, text.len()), 3);
        assert_eq!(f.next_start(&padded, 4, text.len()), 10);
    }

    #[test]
    fn most_positions_of_unrelated_text_are_rejected() {
        let words: Vec<String> = (0..1000).map(|i| format!("zq{i:04}x")).collect();
        let f = StartFilter::new(words.iter().map(|w| w.as_bytes())).unwrap();
        let text = "the quick brown fox jumps over the lazy dog, again and again. ".repeat(50);
        let b = text.as_bytes();
        let passed = (0..b.len() - 3).filter(|&i| f.may_start(b, i)).count();
        assert!(
            passed * 20 < b.len(),
            "{passed} of {} positions passed",
            b.len()
        );
    }

    #[test]
    fn an_empty_start_disables_the_filter() {
        assert!(StartFilter::new([&b"ok"[..], b""]).is_none());
        assert!(StartFilter::new(std::iter::empty()).is_none());
    }
}
