//! Scanner throughput, stream-length independence, per-stream state memory, and the policy
//! layer (`ExchangeGuard`) on top of the scanner.
//!
//! Everything is generated deterministically (fixed-seed PRNG, fixed vocabulary): no downloads.
//! The text contains no match, so every benchmark scans to the end. Before any measurement the
//! bench prints, per pattern count, the compiled automata sizes, build times and the per-stream
//! `ScanState` size to stderr.
//!
//! Groups:
//! - `scan/{10,1000,10000}_literals+20_regex/{8,64,1024}`: a 64 KiB text fed in deltas of that
//!   many bytes from a fresh state, `feed` + `safe_pos` per delta (as the proxy does), `finish`.
//! - `scan/literals_only/1000/1024`, `scan/regex_only/20/1024`: the two automata separately;
//! - `stream_length/1000_literals+20_regex/{1KiB,1MiB}`: per-byte cost vs. stream length: the
//!   same 1 MiB of text in 1 KiB deltas, as 1,024 one-delta streams or as one stream.
//! - `stream_guard/default_pack/64`: `ExchangeGuard::on_chunk` + `safe_pos` over `Delta::Text`.
//! - `pii/all_kinds/1024`: the all-kinds `PiiMatcher` alone over 1 MiB of prose with PII (valid
//!   and near misses) sprinkled every few hundred bytes, in 1 KiB deltas. This text does match.
//!   `pii/worst_case/1024`: 256 KiB of text where candidates end every two or three bytes
//!   (`1 1 1 …`, `1.1.1.…`, `1:1:…`, `a@b.cc.cc.…`, `+1 1 1 …`), each followed by a reverse run.
//!   `cargo bench --bench scanner -- pii` builds only these fixtures.
//!
//! Run: `cargo bench --bench scanner` (filter: `cargo bench --bench scanner -- stream_length`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{BenchmarkId, Criterion, Throughput};
use guardwire::delta::{Channel, Delta};
use guardwire::policy::Policy;
use guardwire::scan::{
    build_forbidden, compile_hir, ForbiddenRegexes, Hit, LiteralMatcher, LiteralRule, PiiMatcher,
    PiiRule, RegexRule, ScanSet, ScanState,
};
use std::borrow::Cow;
use std::collections::HashSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::fixtures::{syllable_word, Rng};

// ---------------------------------------------------------------------------------------------
// Deterministic generation
// ---------------------------------------------------------------------------------------------

/// Common English words the prose is made of. Literal patterns that occur inside any of them
/// (or inside the non-ASCII sprinkles) are discarded, so the text holds no match.
const FUNCTION_WORDS: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "with", "was", "on",
    "be", "by", "this", "are", "or", "from", "at", "an", "but", "not", "have", "has", "had",
    "they", "we", "you", "he", "she", "their", "our", "its", "which", "will", "would", "can",
    "could", "should", "may", "might", "there", "when", "where", "what", "how", "if", "then",
    "than", "so", "some", "all", "more", "most", "other", "into", "over", "after", "before",
    "about", "also", "only", "very", "just", "each", "both", "many", "such", "these", "those",
];

const CONTENT_WORDS: &[&str] = &[
    "time",
    "people",
    "year",
    "way",
    "day",
    "thing",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "model",
    "answer",
    "request",
    "response",
    "stream",
    "token",
    "example",
    "function",
    "value",
    "table",
    "list",
    "report",
    "method",
    "process",
    "support",
    "design",
    "market",
    "energy",
    "policy",
    "language",
    "network",
    "problem",
    "solution",
    "weather",
    "garden",
    "river",
    "mountain",
    "music",
    "travel",
    "kitchen",
    "recipe",
    "coffee",
    "bread",
    "summer",
    "winter",
    "evening",
    "letter",
    "picture",
    "window",
    "street",
    "station",
    "train",
    "simple",
    "small",
    "large",
    "early",
    "recent",
    "public",
    "local",
    "social",
    "important",
    "different",
    "possible",
    "available",
    "likely",
    "general",
    "specific",
    "clear",
    "careful",
    "quick",
    "quiet",
    "bright",
    "gentle",
    "useful",
    "modern",
    "ancient",
    "natural",
    "common",
    "say",
    "make",
    "go",
    "know",
    "take",
    "see",
    "come",
    "think",
    "look",
    "want",
    "give",
    "use",
    "find",
    "tell",
    "ask",
    "seem",
    "feel",
    "try",
    "leave",
    "call",
    "keep",
    "let",
    "begin",
    "help",
    "talk",
    "turn",
    "start",
    "show",
    "hear",
    "play",
    "run",
    "move",
    "like",
    "live",
    "believe",
    "hold",
    "bring",
    "happen",
    "write",
    "provide",
    "sit",
    "stand",
    "lose",
    "pay",
    "meet",
    "include",
    "continue",
    "set",
    "learn",
    "lead",
    "understand",
    "watch",
    "follow",
    "stop",
    "create",
    "speak",
    "read",
    "allow",
    "add",
    "spend",
    "grow",
    "open",
    "walk",
    "win",
    "offer",
    "remember",
    "love",
    "consider",
    "appear",
    "buy",
    "wait",
    "serve",
    "send",
    "expect",
    "build",
    "stay",
    "fall",
    "reach",
    "remain",
    "suggest",
    "raise",
    "pass",
    "sell",
    "require",
    "explain",
    "describe",
    "improve",
    "measure",
    "compare",
    "generally",
    "usually",
    "often",
    "rather",
    "quite",
    "perhaps",
    "therefore",
    "however",
    "instead",
    "together",
    "already",
];

/// Non-ASCII words sprinkled into the prose.
const SPRINKLES: &[&str] = &[
    "café",
    "naïve",
    "Zürich",
    "São Paulo",
    "résumé",
    "jalapeño",
    "Ångström",
    "façade",
    "crème brûlée",
    "東京",
    "Москва",
    "Αθήνα",
    "—",
    "“quoted”",
    "…",
    "€12",
    "Kraków",
    "señor",
];

const NUMBERS: &[&str] = &[
    "2024", "3.5", "42", "17%", "100", "1,200", "7", "0.25", "1999",
];

/// Lowercase non-ASCII banned words (the matcher folds case).
const NON_ASCII_PATTERNS: &[&str] = &[
    "straße",
    "привет",
    "schöne grüße",
    "добрый день",
    "ελευθερία",
    "mañana",
    "çok güzel",
    "żółw",
    "łódź",
    "κρυφό",
    "秘密",
    "機密情報",
    "geheimnisvoll ärger",
    "секрет",
];

/// `n` distinct banned words/phrases, 4–20 bytes, none occurring in the prose. About 15% are
/// two-word phrases, ~1% (at least one) non-ASCII; every other one uses word boundaries.
fn literal_rules(n: usize, seed: u64) -> Vec<LiteralRule> {
    let mut rng = Rng(seed);
    let mut haystack: Vec<String> = FUNCTION_WORDS
        .iter()
        .chain(CONTENT_WORDS)
        .chain(SPRINKLES)
        .chain(NUMBERS)
        .map(|w| w.to_lowercase())
        .collect();
    haystack.push("guardwire".into());
    let occurs = |p: &str| haystack.iter().any(|w| w.contains(p));
    let mut seen = HashSet::new();
    let mut patterns = Vec::with_capacity(n);
    let non_ascii = (n / 100).clamp(1, NON_ASCII_PATTERNS.len());
    for p in &NON_ASCII_PATTERNS[..non_ascii] {
        seen.insert((*p).to_owned());
        patterns.push((*p).to_owned());
    }
    while patterns.len() < n {
        let p = if rng.chance(15) {
            let a = rng.range(3, 9);
            let b = rng.range(3, 10);
            let (wa, wb) = (syllable_word(&mut rng, a), syllable_word(&mut rng, b));
            if occurs(&wa) || occurs(&wb) {
                continue;
            }
            format!("{wa} {wb}")
        } else {
            let len = rng.range(4, 14);
            let w = syllable_word(&mut rng, len);
            if occurs(&w) {
                continue;
            }
            w
        };
        if seen.insert(p.clone()) {
            patterns.push(p);
        }
    }
    // Interleave the non-ASCII ones so word_boundary alternates over all kinds.
    patterns.rotate_left(non_ascii / 2);
    patterns
        .into_iter()
        .enumerate()
        .map(|(i, pattern)| LiteralRule {
            pattern,
            owner: i as u32,
            word_boundary: i % 2 == 0,
        })
        .collect()
}

/// Twenty forbidden regexes of the kind real policies carry (RE2 dialect, as in packs).
const REGEXES: [&str; 20] = [
    // US SSN
    r"\b\d{3}-\d{2}-\d{4}\b",
    // Credit-card-ish digit runs
    r"\b(?:\d[ -]?){13,16}\b",
    // E-mail address
    r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
    // IPv4
    r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
    // OpenAI key
    r"sk-[A-Za-z0-9_-]{20,}",
    // AWS access key id
    r"AKIA[0-9A-Z]{16}",
    // GitHub personal token
    r"ghp_[A-Za-z0-9]{36}",
    // Slack token
    r"xox[baprs]-[A-Za-z0-9-]{10,48}",
    // Keywords
    r"(?i)\brouting number\b",
    r"(?i)\bconfidential\b",
    // IBAN-like
    r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}\b",
    // North-American phone number
    r"(?:\+1[ .-]?)?\b\d{3}[ .-]\d{3}[ .-]\d{4}\b",
    // JWT
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    // PEM private key header
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    // Google API key
    r"AIza[0-9A-Za-z_-]{35}",
    // Stripe live key
    r"(?:sk|rk)_live_[0-9a-zA-Z]{24}",
    // Password assignment
    r"(?i)\bpassword\s*[:=]\s*[A-Za-z0-9!@#$%^&*_+-]{6,}",
    // Distribution markings
    r"(?i)\b(?:internal use only|do not distribute)\b",
    // Bearer token
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    // Azure storage connection string
    r"(?i)AccountKey=[A-Za-z0-9+/=]{40,}",
];

fn regex_rules() -> Vec<RegexRule> {
    REGEXES
        .iter()
        .enumerate()
        .map(|(i, p)| RegexRule {
            hir: compile_hir(p).unwrap_or_else(|e| panic!("regex {i} `{p}`: {e}")),
            owner: 100_000 + i as u32,
            exact: false,
        })
        .collect()
}

fn build_regexes(rules: &[RegexRule]) -> ForbiddenRegexes {
    build_forbidden(rules).unwrap_or_else(|(i, e)| panic!("regex {i} `{}`: {e}", REGEXES[i]))
}

/// English-like prose of exactly... at least `len` bytes (cut on a char boundary), with
/// sentences, paragraphs, numbers and some non-ASCII words.
fn prose(len: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut out = String::with_capacity(len + 64);
    let mut sentences_in_par = 0;
    while out.len() < len {
        let words = rng.range(6, 22);
        for i in 0..words {
            let word: &str = if rng.chance(3) {
                rng.pick(SPRINKLES)
            } else if rng.chance(2) {
                rng.pick(NUMBERS)
            } else if rng.chance(45) {
                rng.pick(FUNCTION_WORDS)
            } else {
                rng.pick(CONTENT_WORDS)
            };
            if i == 0 {
                let mut cs = word.chars();
                if let Some(c) = cs.next() {
                    out.extend(c.to_uppercase());
                    out.push_str(cs.as_str());
                }
            } else {
                out.push_str(word);
            }
            if i + 1 < words {
                out.push_str(if rng.chance(8) { ", " } else { " " });
            }
        }
        out.push_str(match rng.range(0, 9) {
            0 => "?",
            1 => "!",
            _ => ".",
        });
        sentences_in_par += 1;
        if sentences_in_par >= rng.range(3, 7) {
            out.push_str("\n\n");
            sentences_in_par = 0;
        } else {
            out.push(' ');
        }
    }
    let mut end = len;
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

/// Splits `text` into deltas of `size` bytes (extended to the next char boundary).
fn deltas(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The measured loop
// ---------------------------------------------------------------------------------------------

/// One stream, as the proxy scans it: fresh state, `feed` + `safe_pos` per delta, `finish`.
#[inline(never)]
fn scan_stream(set: &ScanSet, pieces: &[&str], hits: &mut Vec<Hit>) -> u64 {
    let mut st = set.start();
    let mut safe = 0;
    for piece in pieces {
        set.feed(&mut st, piece, hits);
        safe = set.safe_pos(&st);
        black_box(safe);
    }
    set.finish(&mut st, hits);
    safe
}

/// Scans all of `text` and panics if anything matches (the benchmarks must scan to the end).
fn assert_no_match(name: &str, set: &ScanSet, text: &str) {
    let mut hits = Vec::new();
    scan_stream(set, &deltas(text, 1024), &mut hits);
    assert!(hits.is_empty(), "{name}: the bench text matches: {hits:?}");
}

// ---------------------------------------------------------------------------------------------
// Fixtures and the memory report
// ---------------------------------------------------------------------------------------------

struct Fixture {
    literals: usize,
    set: ScanSet,
}

const TEXT_LEN: usize = 64 << 10;
const LONG_LEN: usize = 1 << 20;
const LITERAL_COUNTS: [usize; 3] = [10, 1000, 10_000];

/// Per-stream memory of a `ScanState`, in bytes: its inline size plus an estimate of its heap.
///
/// `ScanState` exposes no heap accessor, and the bench may not use a counting allocator (the
/// crate forbids `unsafe`). The heap is, from `src/scan/{mod.rs,literal.rs,regex/dfa.rs}`:
/// - `regex: Vec<RegexState>`: one 16-byte `RegexState` (u32 `StateID` + u64 `idle_pos`,
///   padded) per regex DFA, allocated exactly by `collect()`;
/// - `literal.tail: Vec<u8>`: the last `max pattern bytes + 4` bytes of text when any rule uses
///   word boundaries (capacity = that length after a delta at least that long; with shorter
///   deltas `Vec` growth can reach about twice it);
/// - `literal.pending: Vec<Hit>`: empty unless a word-boundary match ends exactly at a delta's
///   end (never in this text).
///
/// The element counts are read from the state's `Debug` output after a real stream, which checks
/// the structural estimate against what the state actually holds.
/// The cost split: literals alone and regexes alone.
struct Extras {
    literals_only: ScanSet,
    regex_only: ScanSet,
}

fn build_fixtures(text: &str, long: &str) -> (Vec<Fixture>, Extras) {
    let regex_rules = regex_rules();
    eprintln!();
    eprintln!("== guardwire scanner: automata and per-stream state ==");
    eprintln!(
        "machine: {} logical CPUs; text {} B (64 KiB) / {} B (1 MiB); size_of::<ScanState>() = {} B",
        std::thread::available_parallelism().map_or(0, usize::from),
        text.len(),
        long.len(),
        std::mem::size_of::<ScanState>()
    );
    eprintln!(
        "{:>8} | {:>12} | {:>10} | {:>12} | {:>10} | {:>8} | {:>9} | {:>16}",
        "literals",
        "lit automaton",
        "lit build",
        "regex DFA(s)",
        "rx build",
        "#rx autom.",
        "max pat B",
        "state B (in+heap)"
    );
    let mut fixtures = Vec::new();
    for &n in &LITERAL_COUNTS {
        let rules = literal_rules(n, 0x5EED_0000 + n as u64);
        let t0 = Instant::now();
        let lit = LiteralMatcher::new(&rules).expect("literal automaton");
        let lit_build = t0.elapsed();
        let lit_mem = lit.memory_usage();
        let t1 = Instant::now();
        let rx = build_regexes(&regex_rules);
        let rx_build = t1.elapsed();
        let rx_count = rx.dfas.len() + rx.inner.len() + usize::from(rx.prefixed.is_some());
        let set = ScanSet::new(Some(lit), rx, None);
        let rx_mem = set.memory_usage() - lit_mem;
        assert_no_match(&format!("{n} literals"), &set, long);
        // Per-stream state after a realistic stream (64 KiB in 8-byte deltas: worst tail growth).
        let mut st = set.start();
        let mut hits = Vec::new();
        for piece in deltas(text, 8) {
            set.feed(&mut st, piece, &mut hits);
        }
        let heap = st.heap_bytes();
        let inline = std::mem::size_of::<ScanState>();
        let max_pat = rules.iter().map(|r| r.pattern.len()).max().unwrap_or(0);
        eprintln!(
            "{:>8} | {:>10.2} MiB | {:>7.1} ms | {:>8.1} KiB | {:>7.1} ms | {:>10} | {:>9} | {:>5} + {:>3} = {:>4}",
            n,
            lit_mem as f64 / (1 << 20) as f64,
            lit_build.as_secs_f64() * 1e3,
            rx_mem as f64 / 1024.0,
            rx_build.as_secs_f64() * 1e3,
            rx_count,
            max_pat,
            inline,
            heap,
            inline + heap,
        );
        fixtures.push(Fixture { literals: n, set });
    }
    // The two automata alone, for the cost split.
    let rules = literal_rules(1000, 0x5EED_0000 + 1000);
    let literals_only = ScanSet::new(
        Some(LiteralMatcher::new(&rules).expect("literals")),
        ForbiddenRegexes::default(),
        None,
    );
    let rx = build_regexes(&regex_rules);
    let rx_count = rx.dfas.len() + rx.inner.len() + usize::from(rx.prefixed.is_some());
    let regex_only = ScanSet::new(None, rx, None);
    assert_no_match("literals only", &literals_only, long);
    assert_no_match("regex only", &regex_only, long);
    eprintln!(
        "regex-only (20): {:.1} KiB in {} automata; literals-only (1000): {:.2} MiB",
        regex_only.memory_usage() as f64 / 1024.0,
        rx_count,
        literals_only.memory_usage() as f64 / (1 << 20) as f64,
    );
    eprintln!(
        "(state B = size_of::<ScanState>() + ScanState::heap_bytes() after 64 KiB in 8-byte deltas)"
    );
    eprintln!();
    let extras = Extras {
        literals_only,
        regex_only,
    };
    (fixtures, extras)
}

// ---------------------------------------------------------------------------------------------
// Benchmarks
// ---------------------------------------------------------------------------------------------

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(15)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

fn bench_scan(c: &mut Criterion, fixtures: &[Fixture], extras: &Extras, text: &str) {
    let mut hits = Vec::new();
    for f in fixtures {
        let mut group = c.benchmark_group(format!("scan/{}_literals+20_regex", f.literals));
        configure(&mut group);
        group.throughput(Throughput::Bytes(text.len() as u64));
        for size in [8usize, 64, 1024] {
            let pieces = deltas(text, size);
            group.bench_with_input(BenchmarkId::from_parameter(size), &pieces, |b, pieces| {
                b.iter(|| scan_stream(&f.set, pieces, &mut hits));
            });
        }
        group.finish();
    }
    let pieces = deltas(text, 1024);
    let split = [
        ("literals_only", "1000", &extras.literals_only),
        ("regex_only", "20", &extras.regex_only),
    ];
    for (name, param, set) in split {
        let mut group = c.benchmark_group(format!("scan/{name}/{param}"));
        configure(&mut group);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(1024), &pieces, |b, pieces| {
            b.iter(|| scan_stream(set, pieces, &mut hits));
        });
        group.finish();
    }
    assert!(hits.is_empty());
}

fn bench_stream_length(c: &mut Criterion, f: &Fixture, long: &str) {
    let mut hits = Vec::new();
    let mut group = c.benchmark_group(format!("stream_length/{}_literals+20_regex", f.literals));
    configure(&mut group);
    // The same 1 MiB of text in 1 KiB deltas, either as 1,024 streams of one delta each (fresh
    // state, `finish`) or as one stream: only the stream length differs, not the bytes.
    let pieces = deltas(long, 1024);
    group.throughput(Throughput::Bytes(long.len() as u64));
    group.bench_function(BenchmarkId::from_parameter("1KiB"), |b| {
        b.iter(|| {
            pieces
                .iter()
                .map(|p| scan_stream(&f.set, std::slice::from_ref(p), &mut hits))
                .sum::<u64>()
        });
    });
    group.bench_function(BenchmarkId::from_parameter("1MiB"), |b| {
        b.iter(|| scan_stream(&f.set, &pieces, &mut hits));
    });
    group.finish();
    assert!(hits.is_empty());
}

/// The exchange guard over a 64-byte-delta answer with one pack: `name` is the bench group's
/// (`stream_guard/<name>`).
fn bench_stream_guard(c: &mut Criterion, text: &str, name: &str, pack: &str) {
    let policy = Arc::new(Policy::load(&[pack]).unwrap_or_else(|e| panic!("{pack}: {e}")));
    let pieces = deltas(text, 64);
    let run = |pieces: &[&str]| {
        let mut guard = policy.exchange_guard(Default::default(), None);
        let mut safe = 0;
        for piece in pieces {
            let delta = Delta::Text {
                choice: 0,
                channel: Channel::Content,
                text: Cow::Borrowed(piece),
            };
            match guard.on_chunk(&delta) {
                Ok(Some((id, _pos))) => safe = guard.safe_pos(id),
                Ok(None) => {}
                Err(f) => panic!("the bench text violates {pack}: {f:?}"),
            }
            black_box(safe);
        }
        guard
            .after_call()
            .unwrap_or_else(|f| panic!("the bench text violates {pack}: {f:?}"));
        safe
    };
    run(&pieces);
    eprintln!(
        "{name}: {:.1} KiB of automata",
        policy.memory_usage() as f64 / 1024.0
    );
    let mut group = c.benchmark_group(format!("stream_guard/{name}"));
    configure(&mut group);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_with_input(BenchmarkId::from_parameter(64), &pieces, |b, pieces| {
        b.iter(|| run(pieces));
    });
    group.finish();
}

/// PII (and near misses) sprinkled into the `pii` bench text.
const PII_SAMPLES: &[&str] = &[
    "john.doe@example.com",
    "a.b+tag@mail.example.co.uk",
    "(415) 555-0132",
    "+44 20 7946 0958",
    "415.555.0132",
    "4111 1111 1111 1111",
    "4111 1111 1111 1112",
    "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765433",
    "123-45-6789",
    "666-12-3456",
    "192.168.0.1",
    "1.2.3.4.5",
    "2001:db8::1",
    "12:30:45",
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "2024-01-15",
    "v1.2.3",
];

/// About `len` bytes of prose with a PII sample (or near miss) every 200–800 bytes.
fn pii_text(prose: &str, len: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut out = String::with_capacity(len + 1024);
    let mut rest = prose;
    while out.len() < len {
        let mut cut = rng.range(200, 800).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        // Insert after a word, so the sample stands alone.
        let at = rest[..cut].rfind(' ').map_or(cut, |i| i + 1);
        out.push_str(&rest[..at]);
        out.push_str(rng.pick(PII_SAMPLES));
        out.push(' ');
        rest = &rest[at..];
        if rest.len() < 1024 {
            rest = prose;
        }
    }
    out
}

fn bench_pii(c: &mut Criterion, long: &str) {
    let text = pii_text(long, LONG_LEN, 0x9111);
    let t = Instant::now();
    let pii = PiiMatcher::new(&[PiiRule {
        kinds: Vec::new(),
        owner: 0,
    }])
    .expect("pii matcher");
    let built = t.elapsed();
    let mem = pii.memory_usage();
    let set = ScanSet::new(None, ForbiddenRegexes::default(), Some(pii));
    let pieces = deltas(&text, 1024);
    let mut hits = Vec::new();
    scan_stream(&set, &pieces, &mut hits);
    eprintln!(
        "pii (all kinds): {:.1} KiB of DFAs, built in {:.1} ms; text {} B, {} hits",
        mem as f64 / 1024.0,
        built.as_secs_f64() * 1e3,
        text.len(),
        hits.len()
    );
    let mut worst = String::new();
    for unit in ["1 ", "1.", "1:", "+1 1 "] {
        worst.push_str(&unit.repeat((48 << 10) / unit.len()));
        worst.push('\n');
    }
    worst.push_str(&format!("a@b{}\n", ".cc".repeat((64 << 10) / 3)));
    let worst_pieces = deltas(&worst, 1024);
    for (name, text, pieces) in [
        ("all_kinds", &text, &pieces),
        ("worst_case", &worst, &worst_pieces),
    ] {
        let mut group = c.benchmark_group(format!("pii/{name}"));
        configure(&mut group);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(1024), pieces, |b, pieces| {
            b.iter(|| {
                hits.clear();
                scan_stream(&set, pieces, &mut hits)
            });
        });
        group.finish();
    }
}

fn main() {
    let long = prose(LONG_LEN, 0x7E47);
    // `-- decode` runs only the frame decoding group.
    if std::env::args().skip(1).any(|a| a == "decode") {
        let mut c = Criterion::default().configure_from_args();
        bench_decode(&mut c);
        c.final_summary();
        return;
    }
    // `-- normalize` runs only the normalised view group.
    if std::env::args().skip(1).any(|a| a == "normalize") {
        let mut c = Criterion::default().configure_from_args();
        bench_normalize(&mut c, &long);
        c.final_summary();
        return;
    }
    // `-- headers` runs only the answer-head check group.
    if std::env::args().skip(1).any(|a| a == "headers") {
        let mut c = Criterion::default().configure_from_args();
        bench_headers(&mut c);
        c.final_summary();
        return;
    }
    // `-- pii` runs only the PII group: skip building the other (slow) fixtures.
    if std::env::args().skip(1).any(|a| a == "pii") {
        let mut c = Criterion::default().configure_from_args();
        bench_pii(&mut c, &long);
        c.final_summary();
        return;
    }
    let mut end = TEXT_LEN;
    while !long.is_char_boundary(end) {
        end -= 1;
    }
    let text = &long[..end];
    let non_ascii = long.chars().filter(|c| !c.is_ascii()).count();
    let (fixtures, extras) = build_fixtures(text, &long);
    eprintln!(
        "prose: {} B, {:.2}% non-ASCII chars; sample: {:?}",
        long.len(),
        100.0 * non_ascii as f64 / long.chars().count() as f64,
        &text[..text.char_indices().nth(160).map_or(text.len(), |(i, _)| i)]
    );

    let mut c = Criterion::default().configure_from_args();
    bench_scan(&mut c, &fixtures, &extras, text);
    let thousand = fixtures
        .iter()
        .find(|f| f.literals == 1000)
        .expect("1000-literal fixture");
    bench_stream_length(&mut c, thousand, &long);
    let dir = env!("CARGO_MANIFEST_DIR");
    let default_pack = format!("{dir}/config/packs/default.yaml");
    bench_stream_guard(&mut c, text, "default_pack", &default_pack);
    // The same answer as a JSON string (its quotes and line breaks escaped): from the first
    // escape on, the guard also reads it decoded (`policy/guard/escaped.rs`).
    let json = serde_json::to_string(text).expect("JSON text");
    bench_stream_guard(&mut c, &json, "default_pack_json", &default_pack);
    let limits = format!("{dir}/benches/common/limits.yaml");
    bench_stream_guard(&mut c, text, "limits", &limits);
    bench_pii(&mut c, &long);
    bench_normalize(&mut c, &long);
    bench_decode(&mut c);
    bench_headers(&mut c);
    c.final_summary();
}

/// The check of an answer's relayed headers (`proxy::headers::check_relayed`), on the head an
/// OpenAI chat answer comes with (19 headers), with the default pack: what every answer pays,
/// beside the same exchange guard made without it (`none`).
fn bench_headers(c: &mut Criterion) {
    use http::{HeaderMap, HeaderName, HeaderValue};
    let dir = env!("CARGO_MANIFEST_DIR");
    let pack = format!("{dir}/config/packs/default.yaml");
    let policy = Arc::new(Policy::load(&[pack.as_str()]).expect("the default pack"));
    let mut head = HeaderMap::new();
    for (name, value) in [
        ("date", "Sat, 28 Nov 2026 16:20:21 GMT"),
        ("content-type", "application/json"),
        ("transfer-encoding", "chunked"),
        ("connection", "keep-alive"),
        ("access-control-expose-headers", "X-Request-ID"),
        ("openai-organization", "user-abc123def456"),
        ("openai-processing-ms", "412"),
        ("openai-version", "2020-10-01"),
        (
            "strict-transport-security",
            "max-age=31536000; includeSubDomains; preload",
        ),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-limit-tokens", "30000000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-remaining-tokens", "29999969"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-reset-tokens", "0s"),
        ("x-request-id", "req_4c3f1b2a9d8e7f6a5b4c3d2e1f0a9b8c"),
        ("cf-cache-status", "DYNAMIC"),
        ("server", "cloudflare"),
        ("cf-ray", "8f1c2d3e4a5b6c7d-AMS"),
    ] {
        head.append(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    let mut group = c.benchmark_group("headers/openai_answer");
    configure(&mut group);
    group.bench_function("none", |b| {
        b.iter(|| black_box(policy.exchange_guard(Default::default(), None)))
    });
    group.bench_function("check_relayed", |b| {
        b.iter(|| {
            let mut guard = policy.exchange_guard(Default::default(), None);
            let verdict = guardwire::proxy::headers::check_relayed(&mut guard, black_box(&head));
            assert!(verdict.is_ok());
            guard
        })
    });
    group.finish();
}

/// The normalised view alone (`normalize: full`), in 64-byte deltas with `pending_start` per
/// delta (as the text checks ask): `plain` is the prose with its non-ASCII sprinkles turned
/// into ASCII (the fast path), `prose` the prose as generated.
fn bench_normalize(c: &mut Criterion, long: &str) {
    use guardwire::scan::normal::{Normalize, Normalizer};
    let prose = &long[..long
        .char_indices()
        .nth(256 * 1024)
        .map_or(long.len(), |(i, _)| i)];
    let plain: String = prose
        .chars()
        .map(|c| if c.is_ascii() { c } else { 'x' })
        .collect();
    // The prose with inline HTML every few words: tags, a style that cannot hide, one that
    // may (read both ways), classes after a style sheet.
    let mut html = String::from("<style>.note{font-size:0}</style>");
    for (i, word) in plain.split(' ').enumerate() {
        match i % 24 {
            3 => html.push_str("<b>"),
            5 => html.push_str("</b>"),
            9 => html.push_str("<span style=\"color:#333;font-weight:bold\">"),
            12 => html.push_str("</span>"),
            15 => html.push_str("<i class=\"note\">"),
            16 => html.push_str("</i>"),
            19 => html.push_str("<span style=\"position:absolute\">"),
            21 => html.push_str("</span>"),
            _ => {}
        }
        html.push_str(word);
        html.push(' ');
    }
    let mut group = c.benchmark_group("normalize/full");
    configure(&mut group);
    for (name, text) in [("plain", plain.as_str()), ("prose", prose), ("html", &html)] {
        let pieces = deltas(text, 64);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::new(name, 64), &pieces, |b, pieces| {
            b.iter(|| {
                let mut n = Normalizer::new(Normalize::Full);
                let mut len = 0;
                for piece in pieces {
                    len += n.feed(piece).len();
                    black_box(n.pending_start());
                }
                len + n.finish().len()
            });
        });
    }
    group.finish();
}

/// Decoding one streamed Chat Completions event as the provider sends it (the load bench's
/// chunk): what every event costs before any check runs.
fn bench_decode(c: &mut Criterion) {
    let chunk = br#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps"},"logprobs":null,"finish_reason":null}]}"#;
    let escaped = br#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"\n\n\"quoted\" caf\u00e9"},"logprobs":null,"finish_reason":null}]}"#;
    let protocol = guardwire::protocol::by_name("openai_chat").expect("openai_chat");
    let mut decoder = protocol.stream_decoder();
    let mut group = c.benchmark_group("decode/openai_chat_chunk");
    for (name, data) in [("plain", &chunk[..]), ("escaped", &escaped[..])] {
        group.throughput(Throughput::Bytes(data.len() as u64));
        group.bench_function(name, |b| {
            let mut out = Vec::new();
            b.iter(|| {
                out.clear();
                let kind = decoder.decode(None, black_box(data), &mut out);
                black_box((&kind, out.len()));
            })
        });
    }
    group.finish();
}
