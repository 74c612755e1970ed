//! Vector versions of the scanner's two stateless passes, chosen at run time.
//!
//! The scanner steps automata only where something can happen (see [`super::gram`] and
//! [`super::regex`]); what remains per byte is deciding *where*: which positions could begin a
//! literal (a hashed q-gram looked up in a bitset) and which bytes would wake an idle regex
//! automaton (a byte-set test). Both judge every position independently, which vector units do
//! 16–64 positions per instruction, and leave their verdicts as bitmaps ([`super::marks`]). On
//! x86-64 CPUs with AVX-512 (F, BW, VBMI) the kernels below run; everywhere else, or with
//! `GUARDWIRE_SIMD=off` in the environment, the scalar code in the callers does. The byte-set
//! kernel computes exactly what its scalar twin does; the start-filter kernel marks a subset of
//! the scalar filter's positions (a cheaper pre-test drops some hash collisions) that holds
//! every real start. The tests compare them on random input.
//!
//! This module is the crate's second reviewed exception to `unsafe_code = "deny"`: loads
//! through raw pointers (always from in-bounds, fully readable ranges) and the call into the
//! kernels, which is sound once the CPU features were detected. Each `unsafe` block says why.
#![allow(unsafe_code)]

use super::gram::{Pairs, Table as GramTable, PAIR_CLASS};
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
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> bool {
    false
}

/// Up to eight byte sets laid out for the vector pass: bit `k` of `lanes[b / 64][b % 64]` says
/// whether byte `b` is in set `k`.
#[derive(Debug, Clone)]
pub(super) struct ByteLanes {
    lanes: [[u8; 64]; 4],
    /// How many sets (bits) are in use.
    sets: usize,
}

impl ByteLanes {
    /// `flags(b)` has bit `k` set when `b` is in set `k`; `sets` (at most 8) are in use.
    pub(super) fn new(sets: usize, flags: impl Fn(u8) -> u8) -> Self {
        debug_assert!(sets <= 8);
        let mut lanes = [[0u8; 64]; 4];
        for b in 0..=255u8 {
            lanes[usize::from(b / 64)][usize::from(b % 64)] = flags(b);
        }
        ByteLanes { lanes, sets }
    }

    /// Marks the positions of `bytes` whose byte is in each set: set `k` as a bitmap (see
    /// [`super::marks`]) in `out[k * words..(k + 1) * words]`, `words` = `marks::words(bytes.len())`.
    /// Only call when [`enabled`] is true.
    pub(super) fn mark(&self, bytes: &[u8], out: &mut Vec<u64>) {
        let words = super::marks::words(bytes.len());
        out.clear();
        out.resize(words * self.sets, 0);
        #[cfg(target_arch = "x86_64")]
        {
            debug_assert!(enabled());
            // SAFETY: `enabled()` is true only when the CPU has AVX-512 F, BW and VBMI, which
            // is everything `x86::mark_members` is compiled for.
            unsafe { x86::mark_members(&self.lanes, self.sets, bytes, out) }
        }
        // `enabled()` is false off x86-64, so callers take their scalar path and never get here.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = &self.lanes;
    }
}

/// Hash multiplier shared with the scalar filter ([`super::gram`]).
pub(super) const GRAM_MUL: u32 = 0x9E37_79B1;

/// Marks, per tag, the positions in `0..limit` where a start filter's patterns could begin:
/// row `k` of `out` for tag `k`, each `out.len() / tags` words, zeroed by the caller. A position
/// is marked for the tags whose bit is set in its key's slot of any of the `tables` (the key
/// masked with the table's mask, hashed to [`super::gram::TABLE_LOG2`] bits), as
/// `StartFilter::tags_at` says; first, though, a cheaper test rejects the positions whose byte
/// pairs no key has (`pairs`), so only the others are looked up. Keys are the next four bytes,
/// zero-padded past the end of `bytes`; `bytes.len()` must fit in a `u32`. Only call when
/// [`enabled`] is true.
pub(super) fn gram_marks(
    tables: &[GramTable],
    tags: usize,
    pairs: &Pairs,
    bytes: &[u8],
    limit: usize,
    out: &mut [u64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        debug_assert!(enabled() && u32::try_from(bytes.len()).is_ok());
        // SAFETY: as in `ByteLanes::mark`: the features were detected.
        unsafe { x86::gram_marks(tables, tags, pairs, bytes, limit, out) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tables, tags, pairs, bytes, limit, out);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GramTable, Pairs, PAIR_CLASS};
    use std::arch::x86_64::*;

    /// 64 bytes of `bytes` from `i`, zero-padded past the end.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn load64(bytes: &[u8], i: usize) -> __m512i {
        match bytes.get(i..i + 64) {
            // SAFETY: the 64 bytes from the pointer are in bounds (just checked); unaligned
            // loads are allowed.
            Some(block) => unsafe { _mm512_loadu_si512(block.as_ptr().cast()) },
            None => {
                let mut buf = [0u8; 64];
                let tail = bytes.get(i..).unwrap_or_default();
                buf[..tail.len()].copy_from_slice(tail);
                // SAFETY: `buf` is 64 readable bytes.
                unsafe { _mm512_loadu_si512(buf.as_ptr().cast()) }
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn lanes(lanes: &[u8; 64]) -> __m512i {
        // SAFETY: a 64-byte array is 64 readable bytes.
        unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) }
    }

    /// See `ByteLanes::mark`; `out` holds `sets` zeroed bitmaps of `bytes.len()` positions.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) fn mark_members(set: &[[u8; 64]; 4], sets: usize, bytes: &[u8], out: &mut [u64]) {
        let (t0, t1, t2, t3) = (
            lanes(&set[0]),
            lanes(&set[1]),
            lanes(&set[2]),
            lanes(&set[3]),
        );
        let words = out.len() / sets.max(1);
        for w in 0..words {
            let i = 64 * w;
            let v = load64(bytes, i);
            // One 128-entry table lookup per half of the byte range, picked by the top bit.
            let ascii = _mm512_permutex2var_epi8(t0, v, t1);
            let high = _mm512_permutex2var_epi8(t2, v, t3);
            let flags = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), ascii, high);
            let left = bytes.len() - i;
            let valid = if left < 64 { (1u64 << left) - 1 } else { !0 };
            for k in 0..sets {
                let bit = _mm512_set1_epi8((1u8 << k) as i8);
                out[k * words + w] = _mm512_test_epi8_mask(flags, bit) & valid;
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
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn classes(bytes: &[u8], i: usize, class: (__m512i, __m512i)) -> __m512i {
        let folded = fold(load64(bytes, i));
        // The table lookup uses the low seven bits: non-ASCII (0x80) reads entry 0.
        _mm512_permutex2var_epi8(class.0, folded, class.1)
    }

    /// The positions whose classes `(a, b)` are a pair in `table` (see `gram::Pairs`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
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

    /// See `super::gram_marks`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) fn gram_marks(
        tables: &[GramTable],
        tags: usize,
        pairs: &Pairs,
        bytes: &[u8],
        limit: usize,
        out: &mut [u64],
    ) {
        // Dword k holds bytes k..k+4 of a 64-byte load: the key of position k.
        let window = _mm512_set_epi32(
            0x1211_100F,
            0x1110_0F0E,
            0x100F_0E0D,
            0x0F0E_0D0C,
            0x0E0D_0C0B,
            0x0D0C_0B0A,
            0x0C0B_0A09,
            0x0B0A_0908,
            0x0A09_0807,
            0x0908_0706,
            0x0807_0605,
            0x0706_0504,
            0x0605_0403,
            0x0504_0302,
            0x0403_0201,
            0x0302_0100,
        );
        let lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        let class = halves(&PAIR_CLASS);
        let (first, second) = (halves(&pairs.first), halves(&pairs.second));
        let words = super::super::marks::words(bytes.len());
        // Keys (and their positions) of positions that passed the pair test, in the first
        // `pending` lanes, looked up 16 at a time (one gather per table).
        let (mut keys, mut positions) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        let mut pending = 0u32;
        for w in 0..words {
            let start = 64 * w;
            if start >= limit {
                break;
            }
            let c: [__m512i; 4] = std::array::from_fn(|k| classes(bytes, start + k, class));
            let left = limit - start;
            let valid = if left < 64 { (1u64 << left) - 1 } else { !0 };
            let pass = pair_test(first, c[0], c[1]) & pair_test(second, c[2], c[3]) & valid;
            for g in 0..4 {
                let group = (pass >> (16 * g)) as u16;
                if group == 0 {
                    continue;
                }
                let base = start + 16 * g;
                let new_keys = _mm512_permutexvar_epi8(window, load64(bytes, base));
                let new_keys = fold(new_keys);
                let new_positions = _mm512_add_epi32(lane, _mm512_set1_epi32(base as i32));
                // The passing lanes packed, then rotated up by `pending`: lanes from `pending`
                // on continue the batch, lanes below it (if any) start the next one.
                let count = u32::from(group.count_ones() as u16);
                let rotate = _mm512_and_si512(
                    _mm512_sub_epi32(lane, _mm512_set1_epi32(pending as i32)),
                    _mm512_set1_epi32(15),
                );
                let new_keys =
                    _mm512_permutexvar_epi32(rotate, _mm512_maskz_compress_epi32(group, new_keys));
                let new_positions = _mm512_permutexvar_epi32(
                    rotate,
                    _mm512_maskz_compress_epi32(group, new_positions),
                );
                let fill = (((1u32 << count) - 1) << pending) as u16;
                keys = _mm512_mask_mov_epi32(keys, fill, new_keys);
                positions = _mm512_mask_mov_epi32(positions, fill, new_positions);
                pending += count;
                if pending >= 16 {
                    judge(tables, tags, keys, positions, 0xFFFF, words, out);
                    keys = new_keys;
                    positions = new_positions;
                    pending -= 16;
                }
            }
        }
        if pending > 0 {
            let lanes = ((1u32 << pending) - 1) as u16;
            judge(tables, tags, keys, positions, lanes, words, out);
        }
    }

    /// Looks up the keys of `lanes` and marks their positions for the tags whose bit is set.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn judge(
        tables: &[GramTable],
        tags: usize,
        keys: __m512i,
        positions: __m512i,
        lanes: u16,
        words: usize,
        out: &mut [u64],
    ) {
        let mul = _mm512_set1_epi32(super::GRAM_MUL as i32);
        // Slot `s` keeps its tags' bits from bit `s * tags`.
        let tag_shift = _mm_cvtsi32_si128(i32::from(tags == 2));
        let mut found = [0u16; 2];
        for t in tables {
            let key = _mm512_and_si512(keys, _mm512_set1_epi32(t.mask as i32));
            let slot = _mm512_srli_epi32::<{ 32 - super::super::gram::TABLE_LOG2 }>(
                _mm512_mullo_epi32(key, mul),
            );
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
        if found[0] | found[1] == 0 {
            return;
        }
        let mut at = [0u32; 16];
        // SAFETY: `at` is 16 writable dwords.
        unsafe { _mm512_storeu_si512(at.as_mut_ptr().cast(), positions) };
        for (k, &f) in found.iter().enumerate().take(tags) {
            let mut f = f;
            while f != 0 {
                let p = at[f.trailing_zeros() as usize] as usize;
                out[k * words + p / 64] |= 1 << (p % 64);
                f &= f - 1;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::gram::{StartFilter, StartKeys};
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
        /// finds, for each of several sets.
        #[test]
        fn byte_set_marks_agree_with_the_scalar_loop(
            sets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..9),
            bytes in text(),
            from in 0usize..320,
        ) {
            let lanes = ByteLanes::new(sets.len(), |b| {
                sets.iter().enumerate().fold(0, |f, (k, s)| f | (u8::from(s.contains(&b)) << k))
            });
            let mut marks = Vec::new();
            if enabled() {
                lanes.mark(&bytes, &mut marks);
            }
            let words = super::super::marks::words(bytes.len());
            for (k, members) in sets.iter().enumerate() {
                let want = (from..bytes.len())
                    .find(|&i| members.contains(&bytes[i]))
                    .unwrap_or(bytes.len().max(from));
                let others: [bool; 256] = std::array::from_fn(|b| !members.contains(&(b as u8)));
                prop_assert_eq!(super::super::regex::skip_while(&bytes, from, &others), want);
                if enabled() {
                    let row = &marks[k * words..(k + 1) * words];
                    prop_assert_eq!(super::super::marks::next(row, from, bytes.len()), want);
                }
            }
        }

        /// The scalar start filter marks exactly the positions the one-position test passes;
        /// the vector kernel marks a subset of them (its pair test rejects some hash
        /// collisions) that holds every position where a key really begins. For one or two
        /// tags and tables of one to three key lengths (keys of 1, 2 and 4 bytes).
        #[test]
        fn gram_marks_agree_with_the_scalar_test(
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
            let words = super::super::marks::words(bytes.len());
            let mut scalar_want = vec![0u64; words * sets.len()];
            let mut real = vec![0u64; words * sets.len()];
            for i in 0..limit {
                for (k, set) in sets.iter().enumerate() {
                    if filter.tags_at(&bytes, i) >> k & 1 != 0 {
                        scalar_want[k * words + i / 64] |= 1 << (i % 64);
                    }
                    let begins = set.iter().any(|s| {
                        let n = s.len().min(4);
                        bytes.get(i..i + n).is_some_and(|t| {
                            t.iter().zip(s).all(|(&t, &p)| {
                                t == p || (t >= 0x80 && p >= 0x80) || t.eq_ignore_ascii_case(&p)
                            })
                        })
                    });
                    if begins {
                        real[k * words + i / 64] |= 1 << (i % 64);
                    }
                }
            }
            let mut scalar = Vec::new();
            filter.clone().scalar().mark(&bytes, &mut scalar);
            prop_assert_eq!(&scalar, &scalar_want);
            let mut vector = Vec::new();
            filter.mark(&bytes, &mut vector);
            for ((&v, &s), &r) in vector.iter().zip(&scalar).zip(&real) {
                prop_assert_eq!(v & !s, 0, "the vector kernel marked more than the scalar test");
                prop_assert_eq!(r & !v, 0, "a real start was not marked");
            }
        }
    }
}
