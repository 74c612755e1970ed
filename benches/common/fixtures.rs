//! Deterministic text and the realistic pack, shared by the benches: a SplitMix64 generator,
//! pronounceable words, the answer vocabulary, and the pack every end-to-end figure is measured
//! with (1,000 banned words and phrases with word boundaries, 20 secret/PII/hostname regexes,
//! `max_length`, optionally `pii`).
#![allow(dead_code)] // each bench uses a part

use std::fmt::Write as _;

/// SplitMix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() - 1)]
    }

    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// The answer's vocabulary: ordinary words, a few non-ASCII ones, no digits, no `@` — nothing
/// the realistic pack (or a PII detector) should flag.
pub const VOCAB: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "with",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "but",
    "not",
    "have",
    "they",
    "we",
    "you",
    "which",
    "will",
    "can",
    "could",
    "should",
    "may",
    "there",
    "when",
    "where",
    "how",
    "if",
    "then",
    "so",
    "some",
    "more",
    "other",
    "into",
    "over",
    "after",
    "also",
    "only",
    "very",
    "just",
    "each",
    "garden",
    "river",
    "water",
    "light",
    "plant",
    "plants",
    "soil",
    "summer",
    "morning",
    "evening",
    "shade",
    "flowers",
    "tomatoes",
    "beans",
    "herbs",
    "roots",
    "leaves",
    "season",
    "weather",
    "rain",
    "sun",
    "careful",
    "simple",
    "small",
    "large",
    "early",
    "gentle",
    "useful",
    "natural",
    "common",
    "bright",
    "quiet",
    "plan",
    "grow",
    "keep",
    "choose",
    "place",
    "space",
    "row",
    "bed",
    "path",
    "compost",
    "mulch",
    "week",
    "day",
    "time",
    "way",
    "idea",
    "example",
    "method",
    "design",
    "café",
    "naïve",
    "façade",
    "jalapeño",
    "—",
    "…",
];

/// `n` deltas of about five tokens (five words) each.
pub fn answer_deltas(seed: u64, n: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let mut s = String::new();
            for w in 0..5 {
                let word = rng.pick(VOCAB);
                if i == 0 && w == 0 {
                    s.push_str("The");
                } else {
                    s.push_str(word);
                }
                s.push(if rng.range(0, 11) == 0 { ',' } else { ' ' });
                if s.ends_with(',') {
                    s.push(' ');
                }
            }
            if i % 8 == 7 {
                s.pop();
                s.push_str(". ");
            }
            s
        })
        .collect()
}

pub const ONSETS: &[&str] = &[
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "st",
    "tr", "ch", "sh", "br", "gr", "pl", "cl", "dr", "fl", "sk", "th", "qu", "x", "y",
];
pub const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou", "ea", "y", "oo", "ie"];
pub const CODAS: &[&str] = &[
    "", "", "", "n", "r", "s", "t", "l", "m", "nd", "rt", "ck", "x",
];
pub const NON_ASCII_WORDS: &[&str] = &[
    "straße",
    "привет",
    "добрый день",
    "ελευθερία",
    "mañana",
    "çok güzel",
    "żółw",
    "秘密",
    "機密情報",
    "секрет",
];

/// A pronounceable lowercase word of exactly `len` bytes (English-like letter statistics, which
/// drives the literal automaton into deeper states than uniform random letters would).
pub fn syllable_word(rng: &mut Rng, len: usize) -> String {
    let mut w = String::new();
    while w.len() < len {
        w.push_str(rng.pick(ONSETS));
        w.push_str(rng.pick(NUCLEI));
        w.push_str(rng.pick(CODAS));
    }
    w.truncate(len);
    w
}

/// 1,000 distinct banned words/phrases (4–14 bytes, ~15 % two-word phrases, 10 non-ASCII),
/// none of which occurs in the answer vocabulary.
pub fn banned_words() -> Vec<String> {
    let mut rng = Rng(0x5eed_0001);
    let vocab: Vec<String> = VOCAB.iter().map(|w| w.to_lowercase()).collect();
    let occurs = |p: &str| vocab.iter().any(|w| w.contains(p) || p == w);
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<String> = NON_ASCII_WORDS.iter().map(|s| (*s).to_owned()).collect();
    seen.extend(out.iter().cloned());
    while out.len() < 1000 {
        let p = if rng.range(0, 99) < 15 {
            let (a, b) = (rng.range(3, 8), rng.range(3, 9));
            format!(
                "{} {}",
                syllable_word(&mut rng, a),
                syllable_word(&mut rng, b)
            )
        } else {
            let len = rng.range(4, 14);
            syllable_word(&mut rng, len)
        };
        if p.split(' ').any(occurs) {
            continue;
        }
        if seen.insert(p.clone()) {
            out.push(p);
        }
    }
    out
}

/// Twenty forbidden regexes of the kind real policies carry (secrets, card-like numbers,
/// internal hostnames, markings), in the RE2 dialect packs are written in.
pub const REGEXES: [&str; 20] = [
    r"\b\d{3}-\d{2}-\d{4}\b",
    r"\b(?:\d[ -]?){13,16}\b",
    r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
    r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
    r"sk-[A-Za-z0-9_-]{20,}",
    r"AKIA[0-9A-Z]{16}",
    r"ghp_[A-Za-z0-9]{36}",
    r"xox[baprs]-[A-Za-z0-9-]{10,48}",
    r"(?i)\brouting number\b",
    r"(?i)\bconfidential\b",
    r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}\b",
    r"(?:\+1[ .-]?)?\b\d{3}[ .-]\d{3}[ .-]\d{4}\b",
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"AIza[0-9A-Za-z_-]{35}",
    r"(?:sk|rk)_live_[0-9a-zA-Z]{24}",
    r"(?i)\bpassword\s*[:=]\s*[A-Za-z0-9!@#$%^&*_+-]{6,}",
    r"(?i)\b(?:internal use only|do not distribute)\b",
    r"(?i)\b[a-z0-9-]+\.(?:corp|internal|intra)\.example\.com\b",
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
];

pub fn yaml_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The realistic pack as YAML: 1,000 banned words, 20 regexes, `max_length`, and `pii` if asked.
/// `max_length` allows 100,000 characters, or twice the answer when it is longer.
pub fn realistic_pack(pii: bool, answer_chars: usize) -> String {
    let mut y = String::from("name: load-realistic\nvalidators:\n");
    y.push_str("  - id: banned-words\n    type: content_excludes\n    params:\n      match_mode: word_boundary\n      patterns:\n");
    for w in banned_words() {
        let _ = writeln!(y, "        - {}", yaml_quote(&w));
    }
    for (i, re) in REGEXES.iter().enumerate() {
        // A few apply to prompts as well, as real packs do for secrets.
        let dir = if i == 4 || i == 5 {
            "\n      direction: both"
        } else {
            ""
        };
        let _ = writeln!(
            y,
            "  - id: re-{i}\n    type: regex\n    params:\n      pattern: {}\n      expect_match: false{dir}",
            yaml_quote(re)
        );
    }
    let max = answer_chars.saturating_mul(2).max(100_000);
    let _ = writeln!(
        y,
        "  - id: length\n    type: max_length\n    params:\n      max: {max}"
    );
    if pii {
        y.push_str("  - id: pii\n    type: pii\n");
    }
    y
}
