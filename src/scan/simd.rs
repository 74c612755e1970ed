//! Vector versions of the scanner's two stateless passes, chosen at run time.
//!
//! The scanner steps automata only where something can happen (see [`super::gram`] and
//! [`super::regex`]); what remains per byte is deciding *where*: which positions could begin a
//! literal (a hashed q-gram looked up in a bitset) and which bytes would wake an idle regex
//! automaton (a byte-set test). Both judge every position independently, which vector units do
//! 16–64 positions per instruction. On x86-64 CPUs with AVX-512 (F, BW, VBMI) the kernels below
//! run; everywhere else, or with `GUARDWIRE_SIMD=off` in the environment, the scalar code in
//! the callers does. Each kernel computes exactly what its scalar twin does; the tests compare
//! the two on random input.
//!
//! This module is the crate's second reviewed exception to `unsafe_code = "deny"`: loads
//! through raw pointers (always from in-bounds, fully readable ranges) and the call into the
//! kernels, which is sound once the CPU features were detected. Each `unsafe` block says why.
#![allow(unsafe_code)]

use super::gram::Table as GramTable;
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

/// Calls `found` with every position in `from..limit` that passes any of the start filter's
/// `tables` (a key masked with `mask`, hashed to 16 bits, whose bit is set), in order,
/// until it returns `false`. Positions are judged on their next four bytes, zero-padded past the
/// end of `bytes`. Only call when [`enabled`] is true.
#[inline]
pub(super) fn gram_starts(
    tables: &[GramTable],
    bytes: &[u8],
    from: usize,
    limit: usize,
    found: impl FnMut(usize) -> bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        debug_assert!(enabled());
        // SAFETY: as in `ByteLanes::mark`: the features were detected.
        unsafe { x86::gram_starts(tables, bytes, from, limit, found) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tables, bytes, from, limit, found);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::GramTable;
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

    /// See `super::gram_starts`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) fn gram_starts(
        tables: &[GramTable],
        bytes: &[u8],
        from: usize,
        limit: usize,
        mut found: impl FnMut(usize) -> bool,
    ) {
        // Dword k of a group holds bytes k..k+4 of the group: the key of position k.
        let windows = _mm512_set_epi32(
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
        let case = _mm512_set1_epi8(0x20);
        let non_ascii = _mm512_set1_epi8(0x80u8 as i8);
        let mul = _mm512_set1_epi32(super::GRAM_MUL as i32);
        let low5 = _mm512_set1_epi32(31);
        let one = _mm512_set1_epi32(1);
        let windows = [
            windows,
            _mm512_add_epi8(windows, _mm512_set1_epi8(16)),
            _mm512_add_epi8(windows, _mm512_set1_epi8(32)),
        ];
        let mut i = from;
        // Three groups of 16 positions per 64-byte load: the third reads up to byte 50.
        while i < limit {
            let block = load64(bytes, i);
            for (g, window) in windows.iter().enumerate() {
                let base = i + 16 * g;
                if base >= limit {
                    return;
                }
                let keys = _mm512_permutexvar_epi8(*window, block);
                // Fold as `gram::fold4` does: ASCII gets bit 5, every non-ASCII byte is 0x80.
                let keys = _mm512_min_epu8(_mm512_or_si512(keys, case), non_ascii);
                let mut pass: u16 = 0;
                for t in tables {
                    let key = _mm512_and_si512(keys, _mm512_set1_epi32(t.mask as i32));
                    let slot = _mm512_srli_epi32::<16>(_mm512_mullo_epi32(key, mul));
                    let word = _mm512_srli_epi32::<5>(slot);
                    // SAFETY: `slot` < 2^16, so `word` < 2048: every dword read lies inside
                    // the 1024 u64 (8 KiB) of `t.bits`, whose size its type fixes.
                    let got = unsafe { _mm512_i32gather_epi32::<4>(word, t.bits.as_ptr().cast()) };
                    let bit = _mm512_srlv_epi32(got, _mm512_and_si512(slot, low5));
                    pass |= _mm512_test_epi32_mask(bit, one);
                }
                let left = limit - base;
                if left < 16 {
                    pass &= (1u16 << left) - 1;
                }
                while pass != 0 {
                    if !found(base + pass.trailing_zeros() as usize) {
                        return;
                    }
                    pass &= pass - 1;
                }
            }
            i += 48;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::gram::StartFilter;
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

        /// The vector and the scalar start filter let through exactly the positions the
        /// one-position test does, for filters of one to three tables (keys of 1, 2 and 4
        /// bytes).
        #[test]
        fn gram_filter_agrees_with_the_scalar_test(
            patterns in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"abAB -@1\xC3\xA9".to_vec()), 1..6),
                1..40,
            ),
            bytes in text(),
            from in 0usize..320,
        ) {
            let Some(filter) = StartFilter::new(patterns.iter().map(Vec::as_slice)) else {
                return Ok(());
            };
            let limit = filter.judged(&bytes);
            let want: Vec<usize> = (0..limit).filter(|&i| filter.may_start(&bytes, i)).collect();
            let first = want.iter().copied().find(|&i| i >= from).unwrap_or(limit.max(from));
            for filter in [filter.clone(), filter.scalar()] {
                let mut got = Vec::new();
                filter.collect_starts(&bytes, limit, &mut got);
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(filter.next_start(&bytes, from, limit), first);
            }
        }
    }
}
