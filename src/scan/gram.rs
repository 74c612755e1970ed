//! A q-gram start filter: a cheap, stateless test of whether a literal could begin at a text
//! position.
//!
//! Stepping an automaton is one *dependent* table lookup per byte, so it cannot go faster than
//! the memory latency of its table. Most text positions cannot begin any pattern, though, and
//! that can be decided from the next few bytes alone, independently at every position: hash the
//! (case-folded) 1–5 bytes starting there and look the hash up in a small bitset of the
//! patterns' first bytes. The lookups of neighbouring positions do not wait on each other, so the
//! CPU overlaps them; the automata then run only from positions the filter lets through.
//!
//! A piece is judged whole before the matchers run ([`StartFilter::mark`]): one sorted list of
//! positions for each matcher sharing the filter (literals and prefixed regexes), so each jumps
//! from one of its candidates to the next. A cheaper test runs first and drops the positions
//! whose byte pairs no key has (most of them, in prose): on CPUs with AVX-512,
//! [`super::simd::gram_starts`] tests classes of pairs, lists the rest and looks them up 16 per
//! gather; with AVX2, [`super::simd::pair_marks_avx2`] tests the same class pairs 32 positions
//! at a time; elsewhere an exact byte-pair bitset is tested one position at a time. The
//! survivors of the latter two are looked up one at a time (gathers are slow on the AVX2
//! CPUs measured). The last positions of a piece, where a whole key does
//! not fit, are judged by the bytes there are (a key's first bytes must match), so a piece
//! ending in ordinary text starts no run of the automata that carries into the next piece.
//!
//! The filter has false positives (hash collisions, folded punctuation) but never false
//! negatives: every position where a pattern starts passes it.
//!
//! This module is the filter's scalar side and its results ([`StartLists`], [`Starts`]); how keys
//! are folded and hashed and how the tables are laid out is in [`super::gram_layout`], which the
//! vector kernels ([`super::simd`]) read too, and which CPU tier runs is [`super::cpu`]'s answer.

use super::cpu::Level;
use super::gram_layout::{fold8, load8, Pairs, Table, KEY_BYTES, MAX_TAGS};

/// Where one matcher's patterns can begin, as filter keys: the folded first bytes of each
/// (see [`fold8`]), with how many of them count.
#[derive(Debug, Clone, Default)]
pub(super) struct StartKeys {
    /// `(q, key)`: a start of `q` bytes (1, 2, 4 or [`KEY_BYTES`]; 3-byte starts enter as
    /// 4-byte keys with every fourth byte).
    keys: Vec<(usize, u64)>,
    /// Some start was empty: the pattern can begin anywhere, so no filter can be built.
    anywhere: bool,
}

impl StartKeys {
    /// The keys of literals beginning with any of `starts` (compared ASCII-case-insensitively;
    /// non-ASCII characters match anything of the same UTF-8 length).
    pub(super) fn new<'a>(starts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut keys = Vec::new();
        let mut anywhere = false;
        for s in starts {
            match s.len() {
                0 => anywhere = true,
                // Three bytes: every possible fourth byte, so the four-byte table covers it.
                3 => keys.extend((0..=255u8).map(|b| (4, fold8(load8(&[s[0], s[1], s[2], b], 0))))),
                len => {
                    let q = len.min(KEY_BYTES);
                    keys.push((q, fold8(load8(&s[..q], 0))));
                }
            }
        }
        StartKeys { keys, anywhere }
    }
}

/// The scalar path's pre-test, exact where [`Pairs`] groups bytes into classes: whether the
/// first two folded bytes of a position, and its third and fourth, are byte pairs some key has
/// there. A pair is indexed by the two bytes' low seven bits (folding keeps them apart: folded
/// ASCII has bit 5 set, every non-ASCII byte folds to 0x80, index 0), 2^14 bits a table.
#[derive(Debug, Clone)]
pub(super) struct PairBits {
    first: Box<[u64; 256]>,
    second: Box<[u64; 256]>,
}

impl PairBits {
    fn new(keys: impl IntoIterator<Item = (usize, u64)>) -> Self {
        let mut bits = PairBits {
            first: Box::new([0; 256]),
            second: Box::new([0; 256]),
        };
        let byte = |key: u64, k: u32| ((key >> (8 * k)) & 0x7F) as usize;
        let set = |table: &mut [u64; 256], a: usize, b: Option<usize>| {
            for b in b.map_or(0..=127, |b| b..=b) {
                let bit = a | b << 7;
                table[bit >> 6] |= 1 << (bit & 63);
            }
        };
        for (q, key) in keys {
            let second = (q >= 2).then(|| byte(key, 1));
            set(&mut bits.first, byte(key, 0), second);
            if q >= 4 {
                set(&mut bits.second, byte(key, 2), Some(byte(key, 3)));
            } else {
                // Shorter keys say nothing about the bytes after them.
                for a in 0..128 {
                    set(&mut bits.second, a, None);
                }
            }
        }
        bits
    }

    /// Whether the position whose folded bytes are `key` (see [`fold8`]) passes: 1 or 0.
    #[inline(always)]
    fn test(&self, key: u64) -> u64 {
        let first = (key & 0x7F) | ((key >> 1) & 0x3F80);
        let second = ((key >> 16) & 0x7F) | ((key >> 17) & 0x3F80);
        (self.first[(first >> 6) as usize] >> (first & 63))
            & (self.second[(second >> 6) as usize] >> (second & 63))
            & 1
    }
}

/// Which positions of a text could begin a pattern of each of up to [`MAX_TAGS`] matchers (see
/// the module docs): one pass over a piece lists them all.
#[derive(Debug, Clone)]
pub struct StartFilter {
    /// One table per key length in use, the longest first: 5 bytes, 4 bytes (3-byte starts
    /// enter it with every fourth byte), plus 1- or 2-byte tables for starts that short, which
    /// let much more through.
    tables: Vec<Table>,
    /// How many matchers (tags) share the filter.
    tags: usize,
    /// The longest key: a position is judged by the tables when this many bytes follow it.
    reach: usize,
    /// For the last positions of a piece, with `k < reach` bytes left: `near_end[k - 1]` holds
    /// the first `k` bytes of every key of `k` bytes or more (shorter keys are in `tables`).
    near_end: Vec<Table>,
    /// Which kernel lists a piece's positions (see [`super::cpu::level`]).
    level: Level,
    /// The AVX-512 kernel's pair test (see [`super::simd::gram_starts`]).
    pairs: Box<Pairs>,
    /// The scalar path's pair test.
    pair_bits: PairBits,
}

impl StartFilter {
    /// A filter for the matchers whose starts are `sets` (tag `k` for `sets[k]`; at most
    /// [`MAX_TAGS`]). `None` when there is no key at all, or a start is empty (it would let
    /// every position through).
    pub(super) fn new(sets: &[&StartKeys]) -> Option<Self> {
        let tags = sets.len();
        if tags == 0 || tags > MAX_TAGS || sets.iter().any(|s| s.anywhere) {
            return None;
        }
        let mut tables: Vec<Table> = Vec::new();
        let mut reach = 0;
        for (tag, set) in sets.iter().enumerate() {
            for &(q, key) in &set.keys {
                let mask = (1u64 << (8 * q)) - 1;
                let at = match tables.iter().position(|t| t.mask == mask) {
                    Some(at) => at,
                    None => {
                        tables.push(Table::new(mask));
                        tables.len() - 1
                    }
                };
                tables[at].set(key, tags, tag);
                reach = reach.max(q);
            }
        }
        if tables.is_empty() {
            return None;
        }
        // The longest keys reject the most positions: test their table first.
        tables.sort_by_key(|t| std::cmp::Reverse(t.mask));
        let near_end = (1..reach)
            .map(|k| {
                let mut table = Table::new((1u64 << (8 * k)) - 1);
                for (tag, set) in sets.iter().enumerate() {
                    for &(_, key) in set.keys.iter().filter(|&&(q, _)| q >= k) {
                        table.set(key, tags, tag);
                    }
                }
                table
            })
            .collect();
        Some(StartFilter {
            tables,
            tags,
            reach,
            near_end,
            level: super::cpu::level(),
            pairs: Box::new(Pairs::new(sets.iter().flat_map(|s| s.keys.iter().copied()))),
            pair_bits: PairBits::new(sets.iter().flat_map(|s| s.keys.iter().copied())),
        })
    }

    /// The same filter with the kernels of `level`, a tier the CPU has.
    #[cfg(test)]
    pub(super) fn at_level(mut self, level: Level) -> Self {
        assert!(
            super::cpu::detected().contains(&level),
            "{level:?} is not available"
        );
        self.level = level;
        self
    }

    /// The tags (bit `k` for tag `k`) whose literals could begin at `bytes[i]`; needs
    /// `i + reach() <= bytes.len()`.
    #[inline(always)]
    pub fn tags_at(&self, bytes: &[u8], i: usize) -> u64 {
        let key = fold8(load8(bytes, i));
        self.tables
            .iter()
            .fold(0, |tags, t| tags | t.tags(key, self.tags))
    }

    /// The tags whose literals could begin at `bytes[i]`, one of the last positions of a piece
    /// (`k = bytes.len() - i` bytes left, `0 < k < reach`), judging by the bytes there are: a
    /// key's first `k` bytes, or a whole key of `k` bytes or fewer, must match. Whatever
    /// follows in the next piece, no pattern can begin where this is 0.
    fn tags_near_end(&self, bytes: &[u8], i: usize) -> u64 {
        let left = bytes.len() - i;
        let key = fold8(load8(bytes, i));
        let whole = self
            .tables
            .iter()
            .filter(|t| t.key_bytes() <= left)
            .fold(0, |tags, t| tags | t.tags(key, self.tags));
        whole | self.near_end[left - 1].tags(key, self.tags)
    }

    /// Lists, per tag, every position before the returned limit where a pattern could begin
    /// (see [`StartLists`]): the whole piece, including the positions too close to its end for
    /// the full keys (judged by what bytes there are). Positions from the limit on count as
    /// starts: the limit is 0 (no filtering at all) when the piece is too long for `u32`
    /// positions.
    pub fn mark(&self, bytes: &[u8], out: &mut StartLists) -> usize {
        if u32::try_from(bytes.len()).is_err() {
            out.lens = [0; MAX_TAGS];
            return 0;
        }
        let limit = self.judged(bytes);
        out.reserve(self.tags, bytes.len());
        out.lens = [0; MAX_TAGS];
        // The kernels read eight bytes at every position they judge; the positions from
        // `from` on are judged one at a time below.
        let from = limit.min(bytes.len().saturating_sub(7));
        let vector = limit >= super::simd::MIN_RUN && i32::try_from(bytes.len()).is_ok();
        match if vector { self.level } else { Level::Scalar } {
            Level::Avx512 => {
                out.lens = super::simd::gram_starts(
                    &self.tables,
                    self.tags,
                    &self.pairs,
                    bytes,
                    from,
                    &mut out.survivors,
                    &mut out.rows,
                );
            }
            level => self.pair_then_lookup(level, bytes, from, out),
        }
        for i in from..bytes.len() {
            let tags = if i < limit {
                self.tags_at(bytes, i)
            } else {
                self.tags_near_end(bytes, i)
            };
            for (k, row) in out.rows.iter_mut().enumerate().take(self.tags) {
                // Branch-free: the slot past the end is overwritten unless the tag passed.
                row[out.lens[k]] = i as u32;
                out.lens[k] += (tags >> k & 1) as usize;
            }
        }
        bytes.len()
    }

    /// Lists the positions in `0..end` that pass a pair test and then the hashed tables, into
    /// `out` (whose rows are empty and long enough); `end + 7 <= bytes.len()`. The pair test
    /// (which rejects most positions of prose) leaves a bitmap: with AVX2 the AVX-512 kernel's
    /// class-pair test, 32 positions an instruction sequence, else the exact byte-pair test
    /// ([`Self::passes`]). Only its set bits are looked up, branch-free.
    fn pair_then_lookup(&self, level: Level, bytes: &[u8], end: usize, out: &mut StartLists) {
        let (rows, lens, pass) = (&mut out.rows, &mut out.lens, &mut out.pass);
        pass.clear();
        pass.resize(super::marks::words(end), 0);
        if level == Level::Avx2 {
            super::simd::pair_marks_avx2(&self.pairs, bytes, end, pass);
        } else {
            for (w, word) in pass.iter_mut().enumerate() {
                let base = 64 * w;
                let block = &bytes[base..(base + 64).min(end) + 7];
                for (j, window) in block.windows(8).enumerate() {
                    let key = fold8(u64::from_le_bytes(window.try_into().unwrap_or_default()));
                    *word |= self.pair_bits.test(key) << j;
                }
            }
        }
        for (w, &word) in pass.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let i = 64 * w + word.trailing_zeros() as usize;
                word &= word - 1;
                let tags = self.tags_at(bytes, i);
                for (k, row) in rows.iter_mut().enumerate().take(self.tags) {
                    // Branch-free: the slot past the end is overwritten unless the tag passed.
                    row[lens[k]] = i as u32;
                    lens[k] += (tags >> k & 1) as usize;
                }
            }
        }
    }

    /// Whether a position passes the whole scalar test (the pair test, then the tables): the
    /// tags whose literals could begin at `bytes[i]`; needs `i + 8 <= bytes.len()`.
    #[cfg(test)]
    pub(super) fn passes(&self, bytes: &[u8], i: usize) -> u64 {
        let key = fold8(load8(bytes, i));
        if self.pair_bits.test(key) == 0 {
            return 0;
        }
        self.tags_at(bytes, i)
    }

    /// First position from which the full keys do not fit in `bytes` (too close to the end).
    pub fn judged(&self, bytes: &[u8]) -> usize {
        (bytes.len() + 1).saturating_sub(self.reach)
    }

    /// How many matchers share the filter.
    pub(super) fn tags(&self) -> usize {
        self.tags
    }

    /// Heap bytes of the tables.
    pub fn memory_usage(&self) -> usize {
        self.tables
            .iter()
            .chain(&self.near_end)
            .map(|t| t.bits.len() * 8)
            .sum::<usize>()
            + std::mem::size_of::<Pairs>()
            + std::mem::size_of_val(&*self.pair_bits.first)
            + std::mem::size_of_val(&*self.pair_bits.second)
    }
}

/// What [`StartFilter::mark`] found in one piece: for each tag, the positions where its
/// patterns could begin, in increasing order. Kept from piece to piece (a thread-local scratch
/// of the scanner), so its buffers are allocated once.
#[derive(Debug, Default)]
pub struct StartLists {
    /// Tag `k`'s positions are `rows[k][..lens[k]]`. Rows are kept longer than that: the
    /// vector kernel stores 16 lanes at a time past the end.
    rows: [Vec<u32>; MAX_TAGS],
    lens: [usize; MAX_TAGS],
    /// The AVX-512 kernel's survivors of its pair test (see [`super::simd::gram_starts`]).
    survivors: Vec<u32>,
    /// The other paths' survivors of their pair test, as a bitmap.
    pass: Vec<u64>,
}

/// Room the vector kernel needs past the last entry it keeps (one 16-lane store).
const SPARE: usize = 16;

/// Rows longer than this (after a very long piece) are given back after the piece.
const KEEP: usize = (1 << 14) + SPARE;

impl StartLists {
    /// Tag `k`'s positions.
    pub fn row(&self, k: usize) -> &[u32] {
        &self.rows[k][..self.lens[k]]
    }

    /// Makes room for `tags` rows of positions below `limit`.
    fn reserve(&mut self, tags: usize, limit: usize) {
        for row in self.rows.iter_mut().take(tags) {
            if row.len() < limit + SPARE {
                row.resize(limit + SPARE, 0);
            }
        }
        let section = super::simd::SECTION + SPARE;
        if self.survivors.len() < section {
            self.survivors.resize(section, 0);
        }
    }

    /// Gives back the memory of rows grown by a very long piece.
    pub fn shrink(&mut self) {
        for row in &mut self.rows {
            if row.len() > KEEP {
                row.truncate(KEEP);
                row.shrink_to_fit();
            }
        }
    }
}

/// One matcher's view of where its patterns could begin in one piece of text: its row of the
/// [`StartLists`] made for the piece, read with a cursor, so positions must be asked about in
/// increasing order (as a matcher walks a piece from start to end).
pub(super) struct Starts<'a> {
    list: &'a [u32],
    /// Positions from here on were not judged (no filter, or a piece too long for `u32`
    /// positions): all count as starts.
    judged: usize,
    /// Entries before it are below every position asked about since.
    cursor: usize,
}

impl<'a> Starts<'a> {
    pub(super) fn new(list: &'a [u32], judged: usize) -> Self {
        Starts {
            list,
            judged,
            cursor: 0,
        }
    }

    /// Every position counts as a possible start (no filter could be built).
    pub(super) fn everywhere() -> Self {
        Starts::new(&[], 0)
    }

    /// The first position at or after `i` where a pattern could begin (at least `i`).
    #[inline]
    pub(super) fn next(&mut self, i: usize) -> usize {
        while let Some(&p) = self.list.get(self.cursor) {
            if p as usize >= i {
                return p as usize;
            }
            self.cursor += 1;
        }
        i.max(self.judged)
    }

    /// Whether a pattern could begin at `i`.
    #[inline]
    pub(super) fn at(&mut self, i: usize) -> bool {
        i >= self.judged || self.next(i) == i
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
