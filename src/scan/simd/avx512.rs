//! The AVX-512 (F, BW, VBMI) kernels: 64 bytes a step, byte lookups with `vpermi2b`, lists
//! packed with `vpcompressd`.
use super::super::gram_layout::{GRAM_MUL, GRAM_MUL_HIGH, TABLE_LOG2};
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
        let valid = super::valid_bits(bytes.len(), i);
        let after = || bytes.get(i + 64).map_or(0, |&b| flat(b));
        let marks = super::block_marks(marked, unless, after, |k| {
            _mm512_test_epi8_mask(flags, bits[k]) & valid
        });
        for (k, &m) in marks.iter().enumerate().take(marked) {
            out[k * words + w] = m;
        }
    }
}

/// Each byte folded as `gram_layout::fold4` does: ASCII gets bit 5, every non-ASCII byte is
/// 0x80.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn fold(v: __m512i) -> __m512i {
    _mm512_min_epu8(
        _mm512_or_si512(v, _mm512_set1_epi8(0x20)),
        _mm512_set1_epi8(0x80u8 as i8),
    )
}

/// 64 bytes of `bytes` from `i` folded as `gram_layout::fold4` does (ASCII gets bit 5, every
/// non-ASCII byte is 0x80), then mapped to their pair classes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt")]
fn classes(bytes: &[u8], i: usize, class: (__m512i, __m512i)) -> __m512i {
    let folded = fold(load64(bytes, i));
    // The table lookup uses the low seven bits: non-ASCII (0x80) reads entry 0.
    _mm512_permutex2var_epi8(class.0, folded, class.1)
}

/// The positions whose classes `(a, b)` are a pair in `table` (see `gram_layout::Pairs`).
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
    let middle = halves(&pairs.middle);
    let mut lens = [0usize; MAX_TAGS];
    // Whether any table's keys are longer than four bytes.
    let wide = tables.iter().any(|t| t.mask >> 32 != 0);
    let mut section = 0;
    while section < limit {
        let end = (section + SECTION).min(limit);
        // The pair test (bytes 0–1, 1–2 and 2–3), 64 positions a round, without branches:
        // each group of 16 stores all its positions, and the count moves past those that
        // passed.
        let mut n = 0;
        let mut start = section;
        while start < end {
            let c: [__m512i; 4] = std::array::from_fn(|k| classes(bytes, start + k, class));
            let valid = super::valid_bits(end, start);
            let pass = pair_test(first, c[0], c[1])
                & pair_test(middle, c[1], c[2])
                & pair_test(second, c[2], c[3])
                & valid;
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
            let gather = |from: usize| {
                // SAFETY: every active lane's position is below `limit`, and `limit + 7 <=
                // bytes.len()`: its eight bytes are in bounds. Inactive lanes read nothing.
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
    let mul = _mm512_set1_epi32(GRAM_MUL as i32);
    let mul_high = _mm512_set1_epi32(GRAM_MUL_HIGH as i32);
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
        let slot = _mm512_srli_epi32::<{ 32 - TABLE_LOG2 }>(hash);
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
