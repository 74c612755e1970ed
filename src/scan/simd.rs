//! Vector versions of the scanner's two stateless passes, chosen at run time.
//!
//! The scanner steps automata only where something can happen (see [`super::gram`] and
//! [`super::regex`]); what remains per byte is deciding *where*: which positions could begin a
//! literal (a hashed q-gram looked up in a bitset) and which bytes would wake an idle regex
//! automaton (a byte-set test). Both judge every position independently, which vector units do
//! 16–64 positions per instruction: the byte sets leave bitmaps ([`super::marks`]), the start
//! filter a list of its (few) candidates ([`super::gram::StartLists`]). On
//! x86-64 CPUs with AVX-512 (F, BW, VBMI) the kernels below run; everywhere else, or with
//! `GUARDWIRE_SIMD=off` in the environment, the scalar code in the callers does. The byte-set
//! kernel computes exactly what its scalar twin does; the start-filter kernel lists a subset of
//! the scalar filter's positions (a cheaper pre-test drops some hash collisions) that holds
//! every real start. The tests compare them on random input.
//!
//! This module is the crate's second reviewed exception to `unsafe_code = "deny"`: loads
//! through raw pointers (always from in-bounds, fully readable ranges) and the call into the
//! kernels, which is sound once the CPU features were detected. Each `unsafe` block says why.
#![allow(unsafe_code)]

use super::gram::{Pairs, Table as GramTable, MAX_TAGS, PAIR_CLASS};
use std::sync::OnceLock;

/// Runs shorter than this are left to the scalar code: setting up a kernel (table loads, the
/// zero-padded tail copy) costs more than it saves on them.
pub(super) const MIN_RUN: usize = 32;

/// Whether the AVX-512 kernels may run on this CPU (and were not turned off).
pub(super) fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        let off = std::env::var("GUARDWIRE_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("off"));
        !off && detected()
    })
}

#[cfg(target_arch = "x86_64")]
fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("popcnt")
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> bool {
    false
}

/// Up to eight byte sets laid out for the vector pass: bit `k` of `lanes[b / 64][b % 64]` says
/// whether byte `b` is in set `k`. The first sets are marked; the others only serve [`Unless`]
/// exceptions.
#[derive(Debug, Clone)]
pub(super) struct ByteLanes {
    lanes: [[u8; 64]; 4],
    /// How many sets (the first ones) get a bitmap.
    marked: usize,
    unless: Vec<Unless>,
}

/// An exception to the marks of set `set`: a position whose byte is in set `first` and whose
/// next byte (in the same piece) is in set `second` is left unmarked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unless {
    pub(super) set: usize,
    pub(super) first: usize,
    pub(super) second: usize,
}

impl ByteLanes {
    /// `flags(b)` has bit `k` set when `b` is in set `k` (eight sets at most); the first
    /// `marked` sets get bitmaps, with the `unless` exceptions applied.
    pub(super) fn new(marked: usize, unless: Vec<Unless>, flags: impl Fn(u8) -> u8) -> Self {
        debug_assert!(marked <= 8 && unless.iter().all(|u| u.set < marked));
        let mut lanes = [[0u8; 64]; 4];
        for b in 0..=255u8 {
            lanes[usize::from(b / 64)][usize::from(b % 64)] = flags(b);
        }
        ByteLanes {
            lanes,
            marked,
            unless,
        }
    }

    /// Marks the positions of `bytes` whose byte is in each marked set (minus its exceptions):
    /// set `k` as a bitmap (see [`super::marks`]) in `out[k * words..(k + 1) * words]`, `words`
    /// = `marks::words(bytes.len())`. Only call when [`enabled`] is true.
    pub(super) fn mark(&self, bytes: &[u8], out: &mut Vec<u64>) {
        let words = super::marks::words(bytes.len());
        out.clear();
        out.resize(words * self.marked, 0);
        #[cfg(target_arch = "x86_64")]
        {
            debug_assert!(enabled());
            // SAFETY: `enabled()` is true only when the CPU has AVX-512 F, BW and VBMI, which
            // is everything `x86::mark_members` is compiled for.
            unsafe { x86::mark_members(&self.lanes, self.marked, &self.unless, bytes, out) }
        }
        // `enabled()` is false off x86-64, so callers take their scalar path and never get here.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (&self.lanes, &self.unless);
    }
}

/// Hash multiplier shared with the scalar filter ([`super::gram`]).
pub(super) const GRAM_MUL: u32 = 0x9E37_79B1;
/// The same for a key's second half (its bytes 4..8).
pub(super) const GRAM_MUL_HIGH: u32 = 0x85EB_CA77;

/// Positions the vector start filter judges per round: its pair test's survivors of one
/// section are listed, then looked up.
pub(super) const SECTION: usize = 4096;

/// Lists, per tag, the positions in `0..limit` where a start filter's patterns could begin:
/// tag `k`'s in `rows[k]`, in increasing order; returns how many each row got. A position is
/// listed for the tags whose bit is set in its key's slot of any of the `tables` (the key
/// masked with the table's mask, hashed to [`super::gram::TABLE_LOG2`] bits), as
/// `StartFilter::tags_at` says; first, though, a cheaper test rejects the positions whose byte
/// pairs no key has (`pairs`), so only the others are looked up. Keys are the eight bytes at a
/// position, so `limit + 7 <= bytes.len()`; `bytes.len()` must fit in an `i32` (gather
/// offsets). `survivors` needs `SECTION + 16` entries and each used row `limit + 16` (the
/// kernel stores 16 lanes at a time). Only call when [`enabled`] is true.
pub(super) fn gram_starts(
    tables: &[GramTable],
    tags: usize,
    pairs: &Pairs,
    bytes: &[u8],
    limit: usize,
    survivors: &mut [u32],
    rows: &mut [Vec<u32>; MAX_TAGS],
) -> [usize; MAX_TAGS] {
    assert!(
        limit + 7 <= bytes.len()
            && i32::try_from(bytes.len()).is_ok()
            && survivors.len() >= SECTION + 16
            && tags <= MAX_TAGS
            && rows.iter().take(tags).all(|r| r.len() >= limit + 16),
        "gram_starts: buffers too small"
    );
    #[cfg(target_arch = "x86_64")]
    {
        debug_assert!(enabled());
        // SAFETY: as in `ByteLanes::mark`: the features were detected; the sizes the kernel
        // relies on were just checked.
        unsafe { x86::gram_starts(tables, tags, pairs, bytes, limit, survivors, rows) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tables, pairs, survivors);
        [0; MAX_TAGS]
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GramTable, Pairs, Unless, MAX_TAGS, PAIR_CLASS, SECTION};
    use std::arch::x86_64::*;

    /// 64 bytes of `bytes` from `i`, zero-padded past the end: the tail with a masked load (no
    /// copy, no call, so the callers' loops keep their constants in registers).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn load64(bytes: &[u8], i: usize) -> __m512i {
        if let Some(block) = bytes.get(i..).and_then(<[u8]>::first_chunk::<64>) {
            // SAFETY: 64 readable bytes; unaligned loads are allowed.
            return unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
        }
        let left = bytes.len().saturating_sub(i);
        let mask = (1u64 << left) - 1;
        // SAFETY: the lanes the mask selects are `bytes[i..i + left]`, in bounds; a masked-off
        // lane reads nothing and cannot fault. `wrapping_add` keeps the address computation
        // defined when `i` is past the end (then no lane is selected).
        unsafe { _mm512_maskz_loadu_epi8(mask, bytes.as_ptr().wrapping_add(i).cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn lanes(lanes: &[u8; 64]) -> __m512i {
        // SAFETY: a 64-byte array is 64 readable bytes.
        unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) }
    }

    /// See `ByteLanes::mark`; `out` holds `marked` zeroed bitmaps of `bytes.len()` positions.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
    pub(super) fn mark_members(
        set: &[[u8; 64]; 4],
        marked: usize,
        unless: &[Unless],
        bytes: &[u8],
        out: &mut [u64],
    ) {
        let (t0, t1, t2, t3) = (
            lanes(&set[0]),
            lanes(&set[1]),
            lanes(&set[2]),
            lanes(&set[3]),
        );
        let words = out.len() / marked.max(1);
        // The bit of each set, broadcast once.
        let bits: [__m512i; 8] = std::array::from_fn(|k| _mm512_set1_epi8((1u8 << k) as i8));
        let flat = |b: u8| set[usize::from(b / 64)][usize::from(b % 64)];
        for w in 0..words {
            let i = 64 * w;
            let v = load64(bytes, i);
            // One 128-entry table lookup per half of the byte range, picked by the top bit.
            let ascii = _mm512_permutex2var_epi8(t0, v, t1);
            let high = _mm512_permutex2var_epi8(t2, v, t3);
            let flags = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), ascii, high);
            let left = bytes.len() - i;
            let valid = if left < 64 { (1u64 << left) - 1 } else { !0 };
            let mut marks = [0u64; 8];
            for (k, m) in marks.iter_mut().enumerate().take(marked) {
                *m = _mm512_test_epi8_mask(flags, bits[k]) & valid;
            }
            if !unless.is_empty() {
                // The flags of the byte after this block's last one, looked up directly.
                let after = bytes.get(i + 64).map_or(0, |&b| flat(b));
                for u in unless {
                    let second = _mm512_test_epi8_mask(flags, bits[u.second]) & valid;
                    let followed = (second >> 1) | (u64::from(after >> u.second & 1) << 63);
                    marks[u.set] &= !(_mm512_test_epi8_mask(flags, bits[u.first]) & followed);
                }
            }
            for (k, &m) in marks.iter().enumerate().take(marked) {
                out[k * words + w] = m;
            }
        }
    }

    /// Each byte folded as `gram::fold4` does: ASCII gets bit 5, every non-ASCII byte is 0x80.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn fold(v: __m512i) -> __m512i {
        _mm512_min_epu8(
            _mm512_or_si512(v, _mm512_set1_epi8(0x20)),
            _mm512_set1_epi8(0x80u8 as i8),
        )
    }

    /// 64 bytes of `bytes` from `i` folded as `gram::fold4` does (ASCII gets bit 5, every
    /// non-ASCII byte is 0x80), then mapped to their pair classes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
    fn classes(bytes: &[u8], i: usize, class: (__m512i, __m512i)) -> __m512i {
        let folded = fold(load64(bytes, i));
        // The table lookup uses the low seven bits: non-ASCII (0x80) reads entry 0.
        _mm512_permutex2var_epi8(class.0, folded, class.1)
    }

    /// The positions whose classes `(a, b)` are a pair in `table` (see `gram::Pairs`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
    fn pair_test(table: (__m512i, __m512i), a: __m512i, b: __m512i) -> u64 {
        // Classes are below 32, so 16-bit shifts move no bits between bytes that matter.
        let byte = _mm512_or_si512(
            _mm512_slli_epi16::<2>(a),
            _mm512_and_si512(_mm512_srli_epi16::<3>(b), _mm512_set1_epi8(3)),
        );
        let bits = _mm512_permutex2var_epi8(table.0, byte, table.1);
        let one_hot = _mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64);
        let bit = _mm512_permutexvar_epi8(_mm512_and_si512(b, _mm512_set1_epi8(7)), one_hot);
        _mm512_test_epi8_mask(bits, bit)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn halves(table: &[u8; 128]) -> (__m512i, __m512i) {
        // SAFETY: both halves are 64 readable bytes of `table`.
        unsafe {
            (
                _mm512_loadu_si512(table.as_ptr().cast()),
                _mm512_loadu_si512(table.as_ptr().add(64).cast()),
            )
        }
    }

    /// See `super::gram_starts`, which checked the sizes this relies on.
    ///
    /// Both stages are free of data-dependent branches: survivors and found positions are
    /// compressed into lists (16 lanes stored, the length moved by their count). Measured on 1 MiB
    /// of prose in 1 KiB pieces (Xeon, Emerald Rapids): 0.47 ns/B, against 1.0 for packing the
    /// survivors' keys in registers and setting bitmap bits one found position at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
    pub(super) fn gram_starts(
        tables: &[GramTable],
        tags: usize,
        pairs: &Pairs,
        bytes: &[u8],
        limit: usize,
        survivors: &mut [u32],
        rows: &mut [Vec<u32>; MAX_TAGS],
    ) -> [usize; MAX_TAGS] {
        let lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        let class = halves(&PAIR_CLASS);
        let (first, second) = (halves(&pairs.first), halves(&pairs.second));
        let mut lens = [0usize; MAX_TAGS];
        // Whether any table's keys are longer than four bytes.
        let wide = tables.iter().any(|t| t.mask >> 32 != 0);
        let mut section = 0;
        while section < limit {
            let end = (section + SECTION).min(limit);
            // The pair test, 64 positions a round, without branches: each group of 16 stores
            // all its positions, and the count moves past those that passed.
            let mut n = 0;
            let mut start = section;
            while start < end {
                let c: [__m512i; 4] = std::array::from_fn(|k| classes(bytes, start + k, class));
                let left = end - start;
                let valid = if left < 64 { (1u64 << left) - 1 } else { !0 };
                let pass = pair_test(first, c[0], c[1]) & pair_test(second, c[2], c[3]) & valid;
                let mut positions = _mm512_add_epi32(lane, _mm512_set1_epi32(start as i32));
                for g in 0..4 {
                    let group = (pass >> (16 * g)) as u16;
                    // `n` <= positions of the section before this group <= SECTION - 16.
                    store16(
                        &mut survivors[n..n + 16],
                        _mm512_maskz_compress_epi32(group, positions),
                    );
                    n += group.count_ones() as usize;
                    positions = _mm512_add_epi32(positions, _mm512_set1_epi32(16));
                }
                start += 64;
            }
            // The survivors looked up, 16 a round.
            for batch in survivors[..n].chunks(16) {
                let lanes = ((1u32 << batch.len()) - 1) as u16;
                // SAFETY: `survivors` has 16 entries past `n`, so 16 are readable here.
                let positions = unsafe { _mm512_loadu_si512(batch.as_ptr().cast()) };
                // SAFETY: every active lane's position is below `limit`, and `limit + 7 <=
                // bytes.len()`: its eight bytes are in bounds. Inactive lanes read nothing.
                let gather = |from: usize| {
                    fold(unsafe {
                        _mm512_mask_i32gather_epi32::<1>(
                            _mm512_setzero_si512(),
                            lanes,
                            positions,
                            bytes.as_ptr().add(from).cast(),
                        )
                    })
                };
                let low = gather(0);
                let high = if wide {
                    gather(4)
                } else {
                    _mm512_setzero_si512()
                };
                let found = judge(tables, tags, (low, high), lanes);
                for (k, row) in rows.iter_mut().enumerate().take(tags) {
                    // `lens[k]` < positions listed so far < `limit`: 16 entries fit.
                    let at = lens[k];
                    store16(
                        &mut row[at..at + 16],
                        _mm512_maskz_compress_epi32(found[k], positions),
                    );
                    lens[k] += found[k].count_ones() as usize;
                }
            }
            section = end;
        }
        lens
    }

    /// Stores 16 dwords into `dst`, which is 16 entries long.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store16(dst: &mut [u32], v: __m512i) {
        debug_assert_eq!(dst.len(), 16);
        // SAFETY: `dst` is 16 writable dwords (its callers slice exactly 16).
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().cast(), v) }
    }

    /// For each tag, the lanes of `lanes` whose key (bytes 0..4 and 4..8) has the tag's bit set
    /// in its slot of any table.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
    fn judge(
        tables: &[GramTable],
        tags: usize,
        keys: (__m512i, __m512i),
        lanes: u16,
    ) -> [u16; MAX_TAGS] {
        let mul = _mm512_set1_epi32(super::GRAM_MUL as i32);
        let mul_high = _mm512_set1_epi32(super::GRAM_MUL_HIGH as i32);
        // Slot `s` keeps its tags' bits from bit `s * tags`.
        let tag_shift = _mm_cvtsi32_si128(i32::from(tags == 2));
        let mut found = [0u16; MAX_TAGS];
        for t in tables {
            // As `Table::slot` hashes.
            let low = _mm512_and_si512(keys.0, _mm512_set1_epi32(t.mask as i32));
            let mut hash = _mm512_mullo_epi32(low, mul);
            if t.mask >> 32 != 0 {
                let high = _mm512_and_si512(keys.1, _mm512_set1_epi32((t.mask >> 32) as i32));
                hash = _mm512_xor_si512(hash, _mm512_mullo_epi32(high, mul_high));
            }
            let slot = _mm512_srli_epi32::<{ 32 - super::super::gram::TABLE_LOG2 }>(hash);
            let bit = _mm512_sll_epi32(slot, tag_shift);
            let word = _mm512_srli_epi32::<5>(bit);
            // SAFETY: `slot` < 2^TABLE_LOG2 and `bit` < 2^(TABLE_LOG2 + 1), so `word`
            // < 2^(TABLE_LOG2 - 4): every dword read lies inside the
            // `MAX_TAGS << (TABLE_LOG2 - 6)` u64 of `t.bits`, whose size its type fixes.
            let got = unsafe {
                _mm512_mask_i32gather_epi32::<4>(
                    _mm512_setzero_si512(),
                    lanes,
                    word,
                    t.bits.as_ptr().cast(),
                )
            };
            let got = _mm512_srlv_epi32(got, _mm512_and_si512(bit, _mm512_set1_epi32(31)));
            found[0] |= _mm512_mask_test_epi32_mask(lanes, got, _mm512_set1_epi32(1));
            found[1] |= _mm512_mask_test_epi32_mask(lanes, got, _mm512_set1_epi32(2));
        }
        found
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::gram::{StartFilter, StartKeys, StartLists};
    use super::*;
    use proptest::prelude::*;

    /// Text from a small alphabet, so that patterns drawn from it occur, plus any byte at all.
    fn text() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::sample::select(b"abAB -@1\xC3\xA9".to_vec()),
                1 => any::<u8>(),
            ],
            0..300,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The vector byte-set marks and the scalar skip loop find what a byte-by-byte search
        /// finds, for each of several sets; with an exception, the marks leave out the
        /// positions of its first set followed by a byte of its second.
        #[test]
        fn byte_set_marks_agree_with_the_scalar_loop(
            sets in proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![
                        proptest::sample::select(b"abAB -@1\xC3\xA9".to_vec()),
                        any::<u8>(),
                    ],
                    0..12,
                ),
                1..9,
            ),
            exception in proptest::option::of((0usize..8, 0usize..8, 0usize..8)),
            bytes in text(),
            from in 0usize..100,
        ) {
            let unless: Vec<Unless> = exception
                .filter(|&(set, _, _)| set < sets.len().min(6))
                .map(|(set, first, second)| Unless {
                    set,
                    first: first % sets.len(),
                    second: second % sets.len(),
                })
                .into_iter()
                .collect();
            let marked = if unless.is_empty() { sets.len() } else { sets.len().min(6) };
            let lanes = ByteLanes::new(marked, unless.clone(), |b| {
                sets.iter().enumerate().fold(0, |f, (k, s)| f | (u8::from(s.contains(&b)) << k))
            });
            let mut marks = Vec::new();
            if enabled() {
                lanes.mark(&bytes, &mut marks);
            }
            let words = super::super::marks::words(bytes.len());
            let excepted = |k: usize, i: usize| {
                unless.iter().any(|u| {
                    u.set == k
                        && sets[u.first].contains(&bytes[i])
                        && bytes.get(i + 1).is_some_and(|b| sets[u.second].contains(b))
                })
            };
            for (k, members) in sets.iter().enumerate().take(marked) {
                let want = (from..bytes.len())
                    .find(|&i| members.contains(&bytes[i]))
                    .unwrap_or(bytes.len().max(from));
                let others: [bool; 256] = std::array::from_fn(|b| !members.contains(&(b as u8)));
                prop_assert_eq!(super::super::regex::skip_while(&bytes, from, &others), want);
                if enabled() {
                    // Every mark, found by jumping from one to the next.
                    let want: Vec<usize> = (from..bytes.len())
                        .filter(|&i| members.contains(&bytes[i]) && !excepted(k, i))
                        .collect();
                    let row = &marks[k * words..(k + 1) * words];
                    let mut got = Vec::new();
                    let mut at = from;
                    while at < bytes.len() {
                        at = super::super::marks::next(row, at, bytes.len());
                        if at < bytes.len() {
                            got.push(at);
                            at += 1;
                        }
                    }
                    prop_assert_eq!(got, want);
                }
            }
        }

        /// The scalar start filter lists exactly the positions the one-position test passes;
        /// the vector kernel lists a subset of them in order (its pair test rejects some hash
        /// collisions) that holds every position where a key really begins. For one or two
        /// tags and tables of one to four key lengths (keys of 1, 2, 4 and 5 bytes).
        #[test]
        fn gram_starts_agree_with_the_scalar_test(
            sets in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::collection::vec(
                        proptest::sample::select(b"abAB -@1\xC3\xA9".to_vec()),
                        1..6,
                    ),
                    1..40,
                ),
                1..=2,
            ),
            bytes in text(),
        ) {
            let keys: Vec<StartKeys> =
                sets.iter().map(|s| StartKeys::new(s.iter().map(Vec::as_slice))).collect();
            let refs: Vec<&StartKeys> = keys.iter().collect();
            let Some(filter) = StartFilter::new(&refs) else {
                return Ok(());
            };
            let limit = filter.judged(&bytes);
            let mut scalar_want = vec![Vec::new(); sets.len()];
            let mut real = vec![Vec::new(); sets.len()];
            for i in 0..bytes.len() {
                for (k, set) in sets.iter().enumerate() {
                    if filter.tags_at(&bytes, i) >> k & 1 != 0 && i < limit {
                        scalar_want[k].push(i as u32);
                    }
                    // A key begins here, or its start agrees with every byte left.
                    let begins = set.iter().any(|s| {
                        let n = s.len().min(super::super::gram::KEY_BYTES);
                        let t = &bytes[i..(i + n).min(bytes.len())];
                        t.iter().zip(s).all(|(&t, &p)| {
                            t == p || (t >= 0x80 && p >= 0x80) || t.eq_ignore_ascii_case(&p)
                        })
                    });
                    if begins {
                        real[k].push(i as u32);
                    }
                }
            }
            let mut scalar = StartLists::default();
            prop_assert_eq!(filter.clone().scalar().mark(&bytes, &mut scalar), bytes.len());
            let mut vector = StartLists::default();
            prop_assert_eq!(filter.mark(&bytes, &mut vector), bytes.len());
            for k in 0..sets.len() {
                // Before the limit, exactly the one-position test; after it, the real starts
                // at least.
                let before = scalar.row(k).partition_point(|&p| (p as usize) < limit);
                prop_assert_eq!(&scalar.row(k)[..before], &scalar_want[k][..]);
                prop_assert!(
                    real[k].iter().all(|p| scalar.row(k).contains(p)),
                    "a real start was not listed by the scalar filter"
                );
                let v = vector.row(k);
                prop_assert!(v.windows(2).all(|w| w[0] < w[1]), "not in order: {:?}", v);
                prop_assert!(
                    v.iter().all(|p| scalar.row(k).contains(p)),
                    "the vector kernel listed more than the scalar test"
                );
                prop_assert!(
                    real[k].iter().all(|p| v.contains(p)),
                    "a real start was not listed"
                );
            }
        }
    }
}
