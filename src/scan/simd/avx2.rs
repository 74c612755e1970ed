//! The AVX2 kernels, for x86-64 CPUs without AVX-512: byte sets looked up 32 bytes at a time
//! with 16-entry shuffles, and the start filter's hashed test computed for eight positions at
//! once (windows built with a shuffle, table bits fetched with a gather).
use super::{Pairs, Unless, PAIR_CLASS};
use std::arch::x86_64::*;
use std::sync::OnceLock;

/// `bytes[i..i + N]`, or what there is of it copied into `tail` (zeroed), zero-padded.
#[inline]
fn padded<'a, const N: usize>(bytes: &'a [u8], i: usize, tail: &'a mut [u8; N]) -> &'a [u8; N] {
    match bytes.get(i..).and_then(<[u8]>::first_chunk::<N>) {
        Some(block) => block,
        None => {
            let rest = bytes.get(i..).unwrap_or_default();
            tail[..rest.len()].copy_from_slice(rest);
            tail
        }
    }
}

/// 64 bytes of `bytes` from `i` as two 32-byte halves, zero-padded past the end (the tail
/// through a copy: AVX2 has no masked byte loads).
#[inline]
#[target_feature(enable = "avx2")]
fn load64(bytes: &[u8], i: usize) -> (__m256i, __m256i) {
    let mut tail = [0u8; 64];
    let block = padded(bytes, i, &mut tail);
    // SAFETY: `block` is 64 readable bytes; unaligned loads are allowed.
    unsafe {
        (
            _mm256_loadu_si256(block.as_ptr().cast()),
            _mm256_loadu_si256(block.as_ptr().add(32).cast()),
        )
    }
}

/// The same 16 bytes in both 128-bit halves (`vpshufb` looks up within each half).
#[inline]
#[target_feature(enable = "avx2")]
fn twice(table: &[u8; 16]) -> __m256i {
    // SAFETY: a 16-byte array is 16 readable bytes.
    unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast())) }
}

/// The low and the high nibble of each byte.
#[inline]
#[target_feature(enable = "avx2")]
fn nibbles(v: __m256i) -> (__m256i, __m256i) {
    let nibble = _mm256_set1_epi8(0x0F);
    (
        _mm256_and_si256(v, nibble),
        _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble),
    )
}

/// Most distinct table rows a byte-set table can have (one per high nibble).
const MAX_ROWS: usize = 16;

/// A 256-entry byte table for 32 bytes at a time: its distinct non-zero rows of 16 (see
/// `super::nibble_rows`), each looked up by the low nibble where the high nibble is one of the
/// row's.
struct NibbleTable {
    rows: [(__m256i, __m256i); MAX_ROWS],
    len: usize,
}

impl NibbleTable {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(rows: &[([u8; 16], [u8; 16])]) -> Self {
        let zero = _mm256_setzero_si256();
        let mut table = NibbleTable {
            rows: [(zero, zero); MAX_ROWS],
            len: rows.len().min(MAX_ROWS),
        };
        for (t, (row, nibbles)) in table.rows.iter_mut().zip(rows) {
            *t = (twice(row), twice(nibbles));
        }
        table
    }

    /// Each byte of `v` looked up.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn get(&self, v: __m256i) -> __m256i {
        let (low, high) = nibbles(v);
        self.rows[..self.len]
            .iter()
            .fold(_mm256_setzero_si256(), |f, &(row, nibbles)| {
                let hit = _mm256_and_si256(
                    _mm256_shuffle_epi8(row, low),
                    _mm256_shuffle_epi8(nibbles, high),
                );
                _mm256_or_si256(f, hit)
            })
    }
}

/// See `ByteLanes::mark`; `rows` as `ByteLanes::rows`; `out` holds `marked` zeroed bitmaps of
/// `bytes.len()` positions.
#[target_feature(enable = "avx2,popcnt,bmi1")]
pub(super) fn mark_members(
    rows: &[([u8; 16], [u8; 16])],
    marked: usize,
    unless: &[Unless],
    bytes: &[u8],
    out: &mut [u64],
) {
    let table = NibbleTable::new(rows);
    let flags = |v: __m256i| table.get(v);
    let flat = |b: u8| {
        rows.iter()
            .find(|(_, nibbles)| nibbles[usize::from(b >> 4)] != 0)
            .map_or(0, |(row, _)| row[usize::from(b & 15)])
    };
    // Set `k`'s bit of 64 flag bytes, moved to each byte's top bit and gathered.
    let bits = |(a, b): (__m256i, __m256i), k: usize| {
        let shift = _mm_cvtsi32_si128(7 - k as i32);
        let low = _mm256_movemask_epi8(_mm256_sll_epi16(a, shift)) as u32;
        let high = _mm256_movemask_epi8(_mm256_sll_epi16(b, shift)) as u32;
        u64::from(low) | u64::from(high) << 32
    };
    let words = out.len() / marked.max(1);
    for w in 0..words {
        let i = 64 * w;
        let (a, b) = load64(bytes, i);
        let set = (flags(a), flags(b));
        let valid = super::valid_bits(bytes.len(), i);
        let after = || bytes.get(i + 64).map_or(0, |&b| flat(b));
        let marks = super::block_marks(marked, unless, after, |k| bits(set, k) & valid);
        for (k, &m) in marks.iter().enumerate().take(marked) {
            out[k * words + w] = m;
        }
    }
}

/// Each byte's pair class (`gram_layout::PAIR_CLASS` of the byte folded as `gram_layout::fold4`
/// folds it), as distinct rows for 16-entry lookups (see `ByteLanes::rows`).
fn class_rows() -> &'static [([u8; 16], [u8; 16])] {
    static ROWS: OnceLock<Vec<([u8; 16], [u8; 16])>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let fold = |b: u8| super::super::gram_layout::fold4(u32::from(b)) as u8;
        super::nibble_rows(|b| PAIR_CLASS[usize::from(fold(b) & 0x7F)])
    })
}

/// 32 bytes of `bytes` from `i`, zero-padded past the end.
#[inline]
#[target_feature(enable = "avx2")]
fn load32(bytes: &[u8], i: usize) -> __m256i {
    let mut tail = [0u8; 32];
    let block = padded(bytes, i, &mut tail);
    // SAFETY: `block` is 32 readable bytes; unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(block.as_ptr().cast()) }
}

/// A 128-entry byte table as eight 16-byte rows, for 7-bit indices.
struct Table128([__m256i; 8]);

impl Table128 {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(table: &[u8; 128]) -> Self {
        Table128(std::array::from_fn(|h| {
            twice(table[16 * h..16 * h + 16].try_into().unwrap_or(&[0; 16]))
        }))
    }

    /// Each byte of `index` (all below 128) looked up.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn get(&self, index: __m256i) -> __m256i {
        let (low, high) = nibbles(index);
        let mut out = _mm256_setzero_si256();
        for (h, row) in self.0.iter().enumerate() {
            let here = _mm256_cmpeq_epi8(high, _mm256_set1_epi8(h as i8));
            let got = _mm256_and_si256(_mm256_shuffle_epi8(*row, low), here);
            out = _mm256_or_si256(out, got);
        }
        out
    }
}

/// Which of 32 positions have classes `(a, b)` that are a pair in `table` (see
/// `gram_layout::Pairs`), one bit each.
#[inline]
#[target_feature(enable = "avx2")]
fn pair_test(table: &Table128, a: __m256i, b: __m256i) -> u32 {
    // Classes are below 32, so 16-bit shifts move no bits between bytes that matter.
    let byte = _mm256_or_si256(
        _mm256_slli_epi16::<2>(a),
        _mm256_and_si256(_mm256_srli_epi16::<3>(b), _mm256_set1_epi8(3)),
    );
    let bits = table.get(byte);
    let one_hot = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let bit = _mm256_shuffle_epi8(one_hot, _mm256_and_si256(b, _mm256_set1_epi8(7)));
    let clear = _mm256_cmpeq_epi8(_mm256_and_si256(bits, bit), _mm256_setzero_si256());
    !(_mm256_movemask_epi8(clear) as u32)
}

/// See `super::pair_marks_avx2`.
#[target_feature(enable = "avx2,popcnt,bmi1")]
pub(super) fn pair_marks(pairs: &Pairs, bytes: &[u8], limit: usize, out: &mut [u64]) {
    let table = NibbleTable::new(class_rows());
    let classes = |v: __m256i| table.get(v);
    let (first, second) = (Table128::new(&pairs.first), Table128::new(&pairs.second));
    let mut here = classes(load32(bytes, 0));
    let mut i = 0;
    while i < limit {
        let next = classes(load32(bytes, i + 32));
        // The classes of the bytes 1, 2 and 3 after each position.
        let across = _mm256_permute2x128_si256::<0x21>(here, next);
        let c1 = _mm256_alignr_epi8::<1>(across, here);
        let c2 = _mm256_alignr_epi8::<2>(across, here);
        let c3 = _mm256_alignr_epi8::<3>(across, here);
        let pass = pair_test(&first, here, c1) & pair_test(&second, c2, c3);
        let left = limit - i;
        let pass = if left < 32 {
            pass & ((1u32 << left) - 1)
        } else {
            pass
        };
        out[i / 64] |= u64::from(pass) << (i % 64);
        here = next;
        i += 32;
    }
}
