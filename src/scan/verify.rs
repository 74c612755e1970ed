//! A second, closer look at the positions a [`super::gram::StartFilter`] lets through.
//!
//! The filter passes a position when a hash of its next four bytes hits a bitset: cheap, but
//! with 1,000 patterns about one position in thirty passes, half of them by hash collision and
//! most of the rest at ordinary words that merely share a pattern's first four letters. Running
//! the literal automaton from each costs a few dependent lookups in a table of megabytes. Instead,
//! the patterns are grouped by their first four (folded) bytes, and a candidate is kept only if
//! one of the patterns of its group agrees with the text, ignoring ASCII case, as far as the text
//! goes (up to 16 bytes, compared as two folded words; the fold also pairs a few punctuation
//! bytes, which only keeps a candidate). Matching stays the automaton's job; this only rejects
//! positions where no pattern can begin, so it never loses a match.

use super::gram_layout::{fold4, fold8, load4};

/// The first bytes of a pattern, inline so that comparing needs no pointer chase.
#[derive(Debug, Clone, Copy)]
struct Head {
    /// How many bytes to compare; 0 when a candidate cannot be judged by comparing bytes
    /// (non-ASCII patterns: the automaton's input is case-folded for them).
    len: u8,
    /// The first `len` bytes, folded as [`fold8`] folds the text, little-endian.
    folded: [u64; 2],
}

/// Bytes of each pattern compared (a longer pattern is kept when its first `HEAD` bytes agree).
const HEAD: usize = 16;

/// Patterns grouped by their first four folded bytes, in an open-addressing table.
#[derive(Debug)]
pub(super) struct StartVerifier {
    /// Per slot: the folded key (0 = empty; a folded byte is never 0) and its group's range in
    /// `members`.
    slots: Box<[(u32, u32, u32)]>,
    /// `slots.len() - 1` (a power of two minus one).
    mask: usize,
    /// The patterns, grouped by key.
    members: Vec<Head>,
    /// Folded keys (with their masks) of patterns shorter than four bytes: a position starting
    /// with one is always kept.
    short: Vec<(u32, u32)>,
}

impl StartVerifier {
    pub(super) fn new(patterns: &[impl AsRef<[u8]>]) -> Self {
        let mut keyed: Vec<(u32, u32)> = Vec::new();
        let mut short = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            let p = p.as_ref();
            let key = fold4(load4(p, 0));
            if p.len() < 4 {
                let mask = (1u32 << (8 * p.len())) - 1;
                short.push((key & mask, mask));
            } else {
                keyed.push((key, i as u32));
            }
        }
        short.sort_unstable();
        short.dedup();
        keyed.sort_unstable();
        let groups = keyed.chunk_by(|a, b| a.0 == b.0).count();
        let size = (groups * 2).next_power_of_two().max(16);
        let mut slots = vec![(0u32, 0u32, 0u32); size].into_boxed_slice();
        let mut members = Vec::with_capacity(keyed.len());
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            let key = group[0].0;
            let from = members.len() as u32;
            members.extend(group.iter().map(|&(_, i)| {
                let p = patterns[i as usize].as_ref();
                let mut head = Head {
                    len: 0,
                    folded: [0; 2],
                };
                if p.is_ascii() {
                    let n = p.len().min(HEAD);
                    head.len = n as u8;
                    head.folded = load16_folded(&p[..n]);
                }
                head
            }));
            let mut s = slot(key, size - 1);
            while slots[s].0 != 0 {
                s = (s + 1) & (size - 1);
            }
            slots[s] = (key, from, members.len() as u32);
        }
        StartVerifier {
            slots,
            mask: size - 1,
            members,
            short,
        }
    }

    /// Whether a pattern could begin at `bytes[i]`, judging by the bytes up to the end of
    /// `bytes` (a pattern that runs past the end is kept if it agrees so far; a position with
    /// fewer than four bytes after it is always kept).
    #[inline]
    pub(super) fn may_start(&self, bytes: &[u8], i: usize) -> bool {
        if i + 4 > bytes.len() {
            return true;
        }
        let key = fold4(load4(bytes, i));
        if self.short.iter().any(|&(k, m)| key & m == k) {
            return true;
        }
        let mut s = slot(key, self.mask);
        loop {
            let (k, from, to) = self.slots[s];
            if k == 0 {
                return false;
            }
            if k == key {
                let text = bytes.get(i..).unwrap_or_default();
                let folded = load16_folded(text);
                let left = text.len().min(HEAD);
                // Compared without branches: XOR, masked to the bytes both have.
                return self.members[from as usize..to as usize].iter().any(|h| {
                    let n = usize::from(h.len).min(left);
                    let differ = ((folded[0] ^ h.folded[0]) & low_bytes(n))
                        | ((folded[1] ^ h.folded[1]) & low_bytes(n.saturating_sub(8)));
                    h.len == 0 || differ == 0
                });
            }
            s = (s + 1) & self.mask;
        }
    }

    pub(super) fn memory_usage(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
            + self.members.capacity() * std::mem::size_of::<Head>()
            + self.short.capacity() * 8
    }
}

/// The first 16 bytes of `bytes` (zero-padded), folded, as two little-endian words.
#[inline(always)]
fn load16_folded(bytes: &[u8]) -> [u64; 2] {
    let mut buf = [0u8; HEAD];
    let block: &[u8; HEAD] = match bytes.first_chunk() {
        Some(block) => block,
        None => {
            buf[..bytes.len()].copy_from_slice(bytes);
            &buf
        }
    };
    let (a, b) = block.split_at(8);
    [
        fold8(u64::from_le_bytes(a.try_into().unwrap_or_default())),
        fold8(u64::from_le_bytes(b.try_into().unwrap_or_default())),
    ]
}

/// A mask of the low `n` bytes of a word (all of it from 8 on).
#[inline(always)]
fn low_bytes(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

#[inline(always)]
fn slot(key: u32, mask: usize) -> usize {
    // The product's top 24 bits: the best-mixed ones, and enough for any table size used.
    (u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_what_agrees_and_rejects_what_does_not() {
        let v = StartVerifier::new(&["therk", "ab", "straße", "thermometers-and-more"]);
        let text = b"there THERK thermometers-and-moXX then";
        assert!(!v.may_start(text, 0), "`there` shares only `ther`");
        assert!(v.may_start(text, 6), "case is ignored");
        // Only the first 16 bytes are compared.
        assert!(v.may_start(text, 12));
        assert!(v.may_start(b"ABxy", 0), "a short pattern keeps its start");
        assert!(
            v.may_start("STRAẞE".as_bytes(), 0),
            "non-ASCII patterns are not judged"
        );
        assert!(v.may_start(b"the", 0), "too close to the end to judge");
        assert!(v.may_start(b"xx therk", 3) && v.may_start(b"xx ther", 3));
        assert!(!v.may_start(b"then", 0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Every position where a pattern begins (ASCII case ignored) is kept.
        #[test]
        fn never_rejects_a_real_start(
            patterns in proptest::collection::vec("[abAB@`é ]{1,7}", 1..20),
            text in "[abAB@`é ]{0,60}",
        ) {
            let folded: Vec<String> = patterns.iter().map(|p| super::super::text::fold_str(p)).collect();
            let v = StartVerifier::new(&folded);
            let bytes = text.as_bytes();
            for i in 0..bytes.len() {
                let starts_here = folded.iter().any(|p| {
                    bytes.get(i..i + p.len()).is_some_and(|t| {
                        super::super::text::fold_str(&String::from_utf8_lossy(t))
                            .as_bytes()
                            .eq_ignore_ascii_case(p.as_bytes())
                    })
                });
                if starts_here {
                    prop_assert!(v.may_start(bytes, i), "{:?} at {} in {:?}", folded, i, text);
                }
            }
        }
    }
}
