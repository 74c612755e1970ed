//! The start filter's layout: how text becomes filter keys, and the tables keys are looked up
//! in, as both the scalar filter ([`super::gram`]) and its vector kernels ([`super::simd`]) read
//! them.
//!
//! A key is the case-folded bytes at a position ([`fold8`] of [`load8`]), masked to its length
//! and hashed into a slot of a [`Table`] (16 KiB, one bit per matcher); before the lookup, the
//! kernels test classes of byte pairs ([`PAIR_CLASS`], [`Pairs`]). The hash and the sizes are
//! fixed here, once, because the kernels compute them too: a kernel that hashed differently from
//! the scalar code would miss starts. The start verifier ([`super::verify`]) folds bytes the same
//! way. This module uses no other scan module.

/// Hash multiplier of a key's first half (its bytes 0..4), as the scalar filter and the vector
/// kernel compute it.
pub(super) const GRAM_MUL: u32 = 0x9E37_79B1;
/// The same for a key's second half (its bytes 4..8).
pub(super) const GRAM_MUL_HIGH: u32 = 0x85EB_CA77;

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

/// Folds eight bytes as [`fold4`] folds four.
#[inline(always)]
pub(super) fn fold8(w: u64) -> u64 {
    let high = w & 0x8080_8080_8080_8080;
    let non_ascii = (high >> 7) * 0xFF;
    ((w | 0x2020_2020_2020_2020) & !non_ascii) | high
}

/// The bytes `bytes[i..i + 8]` as a little-endian word, zero-padded past the end.
#[inline(always)]
pub(super) fn load8(bytes: &[u8], i: usize) -> u64 {
    if let Some(b) = bytes.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        return u64::from_le_bytes(*b);
    }
    // Near the end of a piece (the filter's last positions in every piece): the last eight
    // bytes, shifted down past the ones before `i`.
    if let (Some(last), true) = (bytes.last_chunk::<8>(), i < bytes.len()) {
        return u64::from_le_bytes(*last) >> (8 * (i + 8 - bytes.len()));
    }
    // A piece shorter than eight bytes (or `i` past its end).
    let mut w = [0u8; 8];
    for (k, &b) in bytes.get(i..).unwrap_or_default().iter().enumerate() {
        w[k] = b;
    }
    u64::from_le_bytes(w)
}

/// Longest key: five bytes. Prose shares a four-byte prefix with some pattern of a
/// thousand at about 1.6 % of its positions (`ther…` for `there`), a five-byte one at 0.1 %.
pub(super) const KEY_BYTES: usize = 5;

/// Slots per table: with 1,000 patterns 1.5 % of them are set, with 10,000 about 14 %.
pub(super) const TABLE_LOG2: u32 = 16;

/// At most this many matchers share one filter (one bit per slot each).
pub(super) const MAX_TAGS: usize = 2;

/// One table over keys of `q` bytes: per hash slot, one bit per tag (the matchers sharing the
/// filter), the bits of slot `s` at `s * tags..`.
#[derive(Debug, Clone)]
pub(super) struct Table {
    /// Selects the key's first `q` bytes (of a key's eight, little-endian).
    pub(super) mask: u64,
    /// Fixed size (16 KiB, so a table stays in L1), so that indexing it needs no bounds check
    /// and the vector kernel's gather stays inside it.
    pub(super) bits: Box<[u64; MAX_TAGS << (TABLE_LOG2 - 6)]>,
}

impl Table {
    /// An empty table over keys masked with `mask`.
    pub(super) fn new(mask: u64) -> Self {
        Table {
            mask,
            bits: Box::new([0; MAX_TAGS << (TABLE_LOG2 - 6)]),
        }
    }

    /// Sets `tag`'s bit (of `tags`) in `key`'s slot.
    pub(super) fn set(&mut self, key: u64, tags: usize, tag: usize) {
        let bit = self.slot(key) * tags + tag;
        self.bits[bit >> 6] |= 1 << (bit & 63);
    }

    /// How many bytes of a key the table looks at.
    pub(super) fn key_bytes(&self) -> usize {
        (64 - self.mask.leading_zeros() as usize) / 8
    }

    /// The key's slot: its two halves hashed in 32-bit arithmetic, as the vector kernel does.
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        let key = key & self.mask;
        let hash =
            (key as u32).wrapping_mul(GRAM_MUL) ^ ((key >> 32) as u32).wrapping_mul(GRAM_MUL_HIGH);
        (hash >> (32 - TABLE_LOG2)) as usize
    }

    /// The tags whose bit is set in `key`'s slot.
    #[inline(always)]
    pub(super) fn tags(&self, key: u64, tags: usize) -> u64 {
        let bit = self.slot(key) * tags;
        (self.bits[bit >> 6] >> (bit & 63)) & ((1 << tags) - 1)
    }
}

/// The class of a folded byte (see [`fold4`]) for the vector kernel's pair test, indexed by the
/// folded byte's low seven bits (every non-ASCII byte folds to 0x80, so index 0): one class per
/// letter, and a few for the rest. Bytes that share a class only cost false positives.
pub(super) const PAIR_CLASS: [u8; 128] = {
    let mut class = [31u8; 128];
    let mut b = 0;
    while b < 128 {
        class[b] = match b as u8 {
            b'a'..=b'z' => b as u8 - b'a' + 1,
            0 => 27,
            b' ' => 28,
            b'0'..=b'9' => 29,
            // `-`, and `_` folded (0x7F).
            b'-' | 0x7F => 30,
            _ => 31,
        };
        b += 1;
    }
    class
};

/// A cheaper test the vector kernels run before the hashed lookup: whether the first two bytes
/// of a position, and its third and fourth (and, on AVX-512, its second and third), are byte
/// pairs that some key has there. Pairs are of [`PAIR_CLASS`] classes (32 × 32 bits each); it
/// only ever lets through more than the keys.
#[derive(Debug, Clone)]
pub(super) struct Pairs {
    /// Bit `b % 8` of byte `b / 8`, for `b = class(first) * 32 + class(second)`.
    pub(super) first: [u8; 128],
    /// The same for the third and fourth bytes.
    pub(super) second: [u8; 128],
    /// The same for the second and third bytes, tested by the AVX-512 kernel only (fewer
    /// survivors to gather: +4–6 % on prose there; on the AVX2 kernel its lookup cost as
    /// much as it saved).
    pub(super) middle: [u8; 128],
}

impl Pairs {
    pub(super) fn new(keys: impl IntoIterator<Item = (usize, u64)>) -> Self {
        let mut pairs = Pairs {
            first: [0; 128],
            second: [0; 128],
            middle: [0; 128],
        };
        let class = |key: u64, k: u32| PAIR_CLASS[((key >> (8 * k)) & 0x7F) as usize];
        let set = |table: &mut [u8; 128], a: u8, b: Option<u8>| {
            for b in b.map_or(0..=31, |b| b..=b) {
                let bit = usize::from(a) * 32 + usize::from(b);
                table[bit / 8] |= 1 << (bit % 8);
            }
        };
        for (q, key) in keys {
            // Bytes 1 and 2: unknown past a short key.
            match q {
                3.. => set(&mut pairs.middle, class(key, 1), Some(class(key, 2))),
                2 => set(&mut pairs.middle, class(key, 1), None),
                _ => {
                    for a in 0..32 {
                        set(&mut pairs.middle, a, None);
                    }
                }
            }

            match q {
                4.. => {
                    set(&mut pairs.first, class(key, 0), Some(class(key, 1)));
                    set(&mut pairs.second, class(key, 2), Some(class(key, 3)));
                }
                // Shorter keys say nothing about the bytes after them.
                _ => {
                    let second = (q >= 2).then(|| class(key, 1));
                    set(&mut pairs.first, class(key, 0), second);
                    for a in 0..32 {
                        set(&mut pairs.second, a, None);
                    }
                }
            }
        }
        pairs
    }
}
