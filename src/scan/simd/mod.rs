//! Vector versions of the scanner's two stateless passes, chosen at run time.
//!
//! The scanner steps automata only where something can happen (see [`super::gram`] and
//! [`super::regex`]); what remains per byte is deciding *where*: which positions could begin a
//! literal (a hashed q-gram looked up in a bitset) and which bytes would wake an idle regex
//! automaton (a byte-set test). Both judge every position independently, which vector units do
//! 8–64 positions per instruction: the byte sets leave bitmaps ([`super::marks`]), the start
//! filter a list of its (few) candidates ([`super::gram::StartLists`]).
//!
//! Two tiers on x86-64, picked once per process ([`level`], in [`super::cpu`]): AVX-512 (F, BW,
//! VBMI; `avx512.rs`) and AVX2 (`avx2.rs`, for the many servers without AVX-512). Everywhere
//! else, or with `GUARDWIRE_SIMD=off` in the environment, the scalar code in the callers runs;
//! `GUARDWIRE_SIMD=avx2` stops at the AVX2 tier. The start filter's tables are laid out in
//! [`super::gram_layout`], which the kernels read as the scalar code does (same hash, same
//! sizes). The byte-set kernels compute exactly what their scalar twin does. The start-filter
//! kernels list subsets of the one-position hashed test
//! ([`super::gram::StartFilter::tags_at`]) that hold every real start: AVX2 exactly that test,
//! AVX-512 after a cheaper pair test that drops some hash collisions. The tests compare every
//! tier the CPU has on random input.
//!
//! This module is the crate's second reviewed exception to `unsafe_code = "deny"`: loads
//! through raw pointers (always from in-bounds, fully readable ranges), gathers from fixed-size
//! tables, and the calls into the kernels, which are sound once the CPU features were
//! detected. Each `unsafe` block says why.
#![allow(unsafe_code)]

use super::cpu::{detected, level, Level};
use super::gram_layout::{Pairs, Table as GramTable, MAX_TAGS, PAIR_CLASS};

/// Runs shorter than this are left to the scalar code: setting up a kernel (table loads, the
/// zero-padded tail copy) costs more than it saves on them.
pub(super) const MIN_RUN: usize = 32;

/// Up to eight byte sets laid out for the vector passes: bit `k` of `lanes[b / 64][b % 64]`
/// says whether byte `b` is in set `k`. The first sets are marked; the others only serve
/// [`Unless`] exceptions.
#[derive(Debug, Clone)]
pub(super) struct ByteLanes {
    lanes: [[u8; 64]; 4],
    /// The same table for 16-entry lookups (AVX2): one `(row, nibbles)` per distinct non-zero
    /// row of 16 bytes, `nibbles[h]` = 0xFF for the high nibbles `h` whose row it is.
    rows: Vec<([u8; 16], [u8; 16])>,
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

/// One block of 64 positions' marks for the first `marked` sets, the `unless` exceptions
/// dropped: `member(k)` is set `k`'s bitmask of the block (its valid positions only),
/// `after()` the flags of the byte after the block (0 past the end of the piece).
#[inline(always)]
fn block_marks(
    marked: usize,
    unless: &[Unless],
    after: impl FnOnce() -> u8,
    member: impl Fn(usize) -> u64,
) -> [u64; 8] {
    let mut marks = [0u64; 8];
    for (k, m) in marks.iter_mut().enumerate().take(marked) {
        *m = member(k);
    }
    if !unless.is_empty() {
        let after = after();
        for u in unless {
            let followed = (member(u.second) >> 1) | (u64::from(after >> u.second & 1) << 63);
            marks[u.set] &= !(member(u.first) & followed);
        }
    }
    marks
}

/// The positions of a block of 64 from `i` that lie in a piece of `len` bytes, as a bitmask.
#[inline(always)]
fn valid_bits(len: usize, i: usize) -> u64 {
    let left = len - i;
    if left < 64 {
        (1u64 << left) - 1
    } else {
        !0
    }
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
            rows: nibble_rows(flags),
            marked,
            unless,
        }
    }

    /// Marks the positions of `bytes` whose byte is in each marked set (minus its exceptions):
    /// set `k` as a bitmap (see [`super::marks`]) in `out[k * words..(k + 1) * words]`, `words`
    /// = `marks::words(bytes.len())`. Only call when [`super::cpu::enabled`] is true.
    pub(super) fn mark(&self, bytes: &[u8], out: &mut Vec<u64>) {
        self.mark_at(level(), bytes, out);
    }

    /// [`Self::mark`] with the kernels of `level`, a vector tier the CPU has.
    pub(super) fn mark_at(&self, level: Level, bytes: &[u8], out: &mut Vec<u64>) {
        let words = super::marks::words(bytes.len());
        out.clear();
        out.resize(words * self.marked, 0);
        assert!(
            detected().contains(&level),
            "mark_at: {level:?} is not available"
        );
        #[cfg(target_arch = "x86_64")]
        match level {
            // SAFETY: the CPU has the features of `level` (just checked, and `level()` only
            // picks detected tiers), which is everything each kernel is compiled for.
            Level::Avx512 => unsafe {
                avx512::mark_members(&self.lanes, self.marked, &self.unless, bytes, out)
            },
            // SAFETY: as above.
            Level::Avx2 => unsafe {
                avx2::mark_members(&self.rows, self.marked, &self.unless, bytes, out)
            },
            Level::Scalar => unreachable!("callers take their scalar path"),
        }
        // Only the scalar tier is detected off x86-64, and callers take their scalar path.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (&self.lanes, &self.rows, &self.unless);
    }
}

/// A 256-entry byte table as its distinct non-zero rows of 16 (one per high nibble at most),
/// each with the high nibbles it stands for (`nibbles[h]` = 0xFF): the form 16-entry shuffles
/// look it up in. Rows of zeros are left out.
fn nibble_rows(table: impl Fn(u8) -> u8) -> Vec<([u8; 16], [u8; 16])> {
    let mut rows: Vec<([u8; 16], [u8; 16])> = Vec::new();
    for high in 0..16u8 {
        let row: [u8; 16] = std::array::from_fn(|low| table(high << 4 | low as u8));
        if row == [0; 16] {
            continue;
        }
        match rows.iter_mut().find(|(r, _)| *r == row) {
            Some((_, nibbles)) => nibbles[usize::from(high)] = 0xFF,
            None => {
                let mut nibbles = [0; 16];
                nibbles[usize::from(high)] = 0xFF;
                rows.push((row, nibbles));
            }
        }
    }
    rows
}

/// Positions the AVX-512 start filter judges per round: its pair test's survivors of one
/// section are listed, then looked up.
pub(super) const SECTION: usize = 4096;

/// The AVX-512 start filter: lists, per tag, the positions in `0..limit` where a start filter's
/// patterns could begin: tag `k`'s in `rows[k]`, in increasing order; returns how many each row
/// got. A position is listed for the tags whose bit is set in its key's slot of any of the
/// `tables` (the key masked with the table's mask, hashed to
/// [`super::gram_layout::TABLE_LOG2`] bits), as `StartFilter::tags_at` says; first, though, a
/// cheaper test rejects the positions whose byte pairs no key has (`pairs`), so only the others
/// are looked up. Keys are the eight bytes at a position, so `limit + 7 <= bytes.len()`;
/// `bytes.len()` must fit in an `i32` (gather offsets). `survivors` needs `SECTION + 16` entries
/// and each used row `limit + 16` (the kernel stores 16 lanes at a time). Only call when
/// [`level`] is AVX-512.
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
            && rows.iter().take(tags).all(|r| r.len() >= limit + 16)
            && detected().contains(&Level::Avx512),
        "gram_starts: buffers too small, or no AVX-512"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the features were detected; the sizes the kernel relies on were just
        // checked.
        unsafe { avx512::gram_starts(tables, tags, pairs, bytes, limit, survivors, rows) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tables, pairs, survivors);
        [0; MAX_TAGS]
    }
}

/// The AVX2 start filter's first stage: sets bit `p % 64` of `out[p / 64]` for each position
/// `p < limit` whose byte pairs pass the AVX-512 kernel's pair test (`pairs`); `out` holds
/// `marks::words(limit)` zeroed words, and `limit + 3 <= bytes.len()` (the test reads four
/// bytes a position). Only call when the CPU has AVX2.
pub(super) fn pair_marks_avx2(pairs: &Pairs, bytes: &[u8], limit: usize, out: &mut [u64]) {
    assert!(
        limit + 3 <= bytes.len()
            && out.len() >= super::marks::words(limit)
            && detected().contains(&Level::Avx2),
        "pair_marks_avx2: buffers too small, or no AVX2"
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the features were detected; the kernel indexes `out` with bounds checks.
    unsafe {
        avx2::pair_marks(pairs, bytes, limit, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (pairs, bytes, out);
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

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
            let vector: Vec<Level> =
                detected().iter().copied().filter(|&l| l > Level::Scalar).collect();
            let marks: Vec<Vec<u64>> = vector
                .iter()
                .map(|&level| {
                    let mut marks = Vec::new();
                    lanes.mark_at(level, &bytes, &mut marks);
                    marks
                })
                .collect();
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
                // Every mark, found by jumping from one to the next.
                let want: Vec<usize> = (from..bytes.len())
                    .filter(|&i| members.contains(&bytes[i]) && !excepted(k, i))
                    .collect();
                for (level, marks) in vector.iter().zip(&marks) {
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
                    prop_assert_eq!(&got, &want, "{:?}", level);
                }
            }
        }

        /// The scalar start filter lists exactly the positions its one-position test passes;
        /// every tier lists, in order, a subset of the positions the hashed tables pass (pair
        /// tests reject some hash collisions) that holds every position where a key really
        /// begins. For one or two tags and tables of one to four key lengths (keys of 1, 2, 4
        /// and 5 bytes).
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
            // Positions from here on are judged one at a time, without a pair test.
            let whole = limit.min(bytes.len().saturating_sub(7));
            let mut scalar_want = vec![Vec::new(); sets.len()];
            let mut tables_pass = vec![Vec::new(); sets.len()];
            let mut real = vec![Vec::new(); sets.len()];
            for i in 0..bytes.len() {
                for (k, set) in sets.iter().enumerate() {
                    let tables = i < limit && filter.tags_at(&bytes, i) >> k & 1 != 0;
                    if tables {
                        tables_pass[k].push(i as u32);
                    }
                    let passes = if i < whole { filter.passes(&bytes, i) >> k & 1 != 0 } else { tables };
                    if passes {
                        scalar_want[k].push(i as u32);
                    }
                    // A key begins here, or its start agrees with every byte left.
                    let begins = set.iter().any(|s| {
                        let n = s.len().min(super::super::gram_layout::KEY_BYTES);
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
            for &level in detected() {
                let mut lists = StartLists::default();
                let filter = filter.clone().at_level(level);
                prop_assert_eq!(filter.mark(&bytes, &mut lists), bytes.len());
                for k in 0..sets.len() {
                    let row = lists.row(k);
                    let before = row.partition_point(|&p| (p as usize) < limit);
                    if level == Level::Scalar {
                        prop_assert_eq!(&row[..before], &scalar_want[k][..]);
                    }
                    prop_assert!(row.windows(2).all(|w| w[0] < w[1]), "{:?}: not in order: {:?}", level, row);
                    prop_assert!(
                        row[..before].iter().all(|p| tables_pass[k].contains(p)),
                        "{:?} listed more than the hashed tables pass", level
                    );
                    prop_assert!(
                        real[k].iter().all(|p| row.contains(p)),
                        "{:?}: a real start was not listed", level
                    );
                }
            }
        }
    }
}
