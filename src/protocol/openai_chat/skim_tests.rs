//! The skim fast path against serde_json: on any input the fast path accepts, both must give
//! the same deltas; on ordinary chunks the fast path must accept.

use super::*;
use proptest::prelude::*;

/// SplitMix64, so that one proptest seed yields a whole chunk.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn chance(&mut self, per_cent: u64) -> bool {
        self.below(100) < per_cent
    }
}

/// Renders chunks with random whitespace, escapes and (when `weird`) wrong types, duplicate
/// keys, escaped keys and malformed numbers.
pub(crate) struct Gen {
    pub(crate) rng: Rng,
    pub(crate) weird: bool,
    pub(crate) out: String,
}

impl Gen {
    pub(crate) fn ws(&mut self) {
        for _ in 0..self.rng.below(3).saturating_sub(1) {
            let c = [' ', '\n', '\t', '\r'][self.rng.below(4) as usize];
            self.out.push(c);
        }
    }

    pub(crate) fn string(&mut self) {
        const CHARS: [char; 14] = [
            'a', 'Z', ' ', '"', '\\', '/', '\n', '\u{1}', 'é', '😀', '\u{2028}', '0', '{', ':',
        ];
        self.out.push('"');
        for _ in 0..self.rng.below(12) {
            let c = CHARS[self.rng.below(CHARS.len() as u64) as usize];
            match (c, self.rng.below(3)) {
                ('"', _) => self.out.push_str("\\\""),
                ('\\', _) => self.out.push_str("\\\\"),
                ('\n', 0) => self.out.push_str("\\n"),
                ('\u{1}' | '\n', _) => self.out.push_str(&format!("\\u{:04x}", c as u32)),
                ('/', 0) => self.out.push_str("\\/"),
                (c, 0) if (c as u32) > 0xFFFF => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{u:04X}"));
                    }
                }
                (c, 0) => self.out.push_str(&format!("\\u{:04x}", c as u32)),
                (c, _) => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    /// A string of the shape of structure (`residual::structure_shaped`): an id, a reason.
    pub(crate) fn token(&mut self) {
        const CHARS: &[u8] = b"aZ09_-.:/+=";
        self.out.push('"');
        for _ in 0..self.rng.below(12) {
            self.out.push(char::from(
                CHARS[self.rng.below(CHARS.len() as u64) as usize],
            ));
        }
        self.out.push('"');
    }

    pub(crate) fn number(&mut self) {
        const NUMS: [&str; 8] = [
            "0",
            "7",
            "4294967295",
            "1735689600",
            "2.5",
            "-1",
            "1e3",
            "-0.0",
        ];
        const BAD: [&str; 4] = ["4294967296", "18446744073709551616", "01", "1."];
        if self.weird && self.rng.chance(10) {
            let n = BAD[self.rng.below(BAD.len() as u64) as usize];
            self.out.push_str(n);
        } else {
            let n = NUMS[self.rng.below(NUMS.len() as u64) as usize];
            self.out.push_str(n);
        }
    }

    fn index(&mut self) {
        if self.weird && self.rng.chance(30) {
            self.number()
        } else {
            let n = self.rng.below(3).to_string();
            self.out.push_str(&n)
        }
    }

    /// Any value, for keys guardwire ignores.
    pub(crate) fn any(&mut self, depth: u32) {
        match self.rng.below(if depth > 2 { 5 } else { 7 }) {
            0 => self.out.push_str("null"),
            1 => self
                .out
                .push_str(["true", "false"][self.rng.below(2) as usize]),
            2 => self.number(),
            3 | 4 => self.string(),
            5 => {
                let n = self.rng.below(3);
                self.array(n, |g| g.any(depth + 1))
            }
            _ => {
                let n = self.rng.below(3);
                self.object(n, |g, _| {
                    g.key("k");
                    g.any(depth + 1)
                })
            }
        }
    }

    fn key(&mut self, k: &str) {
        self.ws();
        if self.weird && self.rng.chance(3) && !k.is_empty() {
            // An escaped first letter: serde_json unescapes keys before matching them.
            self.out
                .push_str(&format!("\"\\u{:04x}{}\"", k.as_bytes()[0], &k[1..]));
        } else {
            self.out.push('"');
            self.out.push_str(k);
            self.out.push('"');
        }
        self.ws();
        self.out.push(':');
        self.ws();
    }

    fn array(&mut self, n: u64, mut each: impl FnMut(&mut Self)) {
        self.out.push('[');
        for i in 0..n {
            if i > 0 {
                self.out.push(',');
            }
            self.ws();
            each(self);
            self.ws();
        }
        self.out.push(']');
    }

    fn object(&mut self, n: u64, mut each: impl FnMut(&mut Self, u64)) {
        self.out.push('{');
        for i in 0..n {
            if i > 0 {
                self.out.push(',');
            }
            each(self, i);
            self.ws();
        }
        self.out.push('}');
    }

    /// `key: value` for a field of the given kind, sometimes of a wrong type when weird.
    fn field(&mut self, k: &str, kind: Kind) {
        self.key(k);
        if self.weird && self.rng.chance(8) {
            return self.any(1);
        }
        match kind {
            Kind::OptStr if self.rng.chance(25) => self.out.push_str("null"),
            Kind::OptStr | Kind::Str => self.string(),
            // A finish reason: of the shape of structure, but for weird chunks (a reason
            // that is not is text for the fallback, so the fast path leaves it to serde).
            Kind::Reason if self.rng.chance(25) => self.out.push_str("null"),
            Kind::Reason if self.weird => self.string(),
            Kind::Reason => self.token(),
            Kind::Index => self.index(),
            Kind::Ignored => self.any(0),
            Kind::Delta if self.rng.chance(10) => self.out.push_str("null"),
            Kind::Delta => self.delta(),
            Kind::Choices => {
                let n = self.rng.below(3);
                self.array(n, |g| g.choice())
            }
            Kind::Usage if self.rng.chance(20) => self.out.push_str("null"),
            Kind::Usage => self.fields(&[
                ("prompt_tokens", Kind::Index),
                ("completion_tokens", Kind::Index),
                ("total_tokens", Kind::Ignored),
            ]),
            Kind::ToolCalls => {
                let n = self.rng.below(3);
                self.array(n, |g| {
                    g.fields(&[
                        ("index", Kind::Index),
                        ("id", Kind::OptStr),
                        ("type", Kind::Str),
                        ("function", Kind::Function),
                    ])
                })
            }
            Kind::Function => self.fields(&[("name", Kind::OptStr), ("arguments", Kind::OptStr)]),
        }
    }

    /// An object of a random subset of `fields` in random order, with unknown keys mixed in
    /// and, when weird, a field repeated.
    fn fields(&mut self, fields: &[(&str, Kind)]) {
        let mut picked: Vec<(&str, Kind)> = fields
            .iter()
            .copied()
            .filter(|_| self.rng.chance(70))
            .collect();
        if self.rng.chance(30) {
            picked.push(("logprobs", Kind::Ignored));
        }
        if self.weird && self.rng.chance(10) && !picked.is_empty() {
            let again = picked[self.rng.below(picked.len() as u64) as usize];
            picked.push(again);
        }
        for i in (1..picked.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            picked.swap(i, j);
        }
        let n = picked.len() as u64;
        self.object(n, |g, i| {
            let (k, kind) = picked[i as usize];
            g.field(k, kind)
        });
    }

    fn delta(&mut self) {
        self.fields(&[
            ("role", Kind::Str),
            ("content", Kind::OptStr),
            ("refusal", Kind::OptStr),
            ("reasoning_content", Kind::OptStr),
            ("reasoning", Kind::OptStr),
            ("tool_calls", Kind::ToolCalls),
        ])
    }

    fn choice(&mut self) {
        let body = if self.rng.chance(20) {
            "message"
        } else {
            "delta"
        };
        let mut fields = vec![
            ("index", Kind::Index),
            (body, Kind::Delta),
            ("finish_reason", Kind::Reason),
        ];
        if self.weird && self.rng.chance(5) {
            fields.push(("message", Kind::Delta)); // with `delta`: a duplicate field to serde
        }
        self.fields(&fields)
    }

    fn chunk(&mut self) {
        self.ws();
        let mut fields = vec![
            ("id", Kind::Str),
            ("object", Kind::Str),
            ("created", Kind::Ignored),
            ("model", Kind::Str),
            ("system_fingerprint", Kind::OptStr),
            ("choices", Kind::Choices),
            ("usage", Kind::Usage),
        ];
        if self.weird && self.rng.chance(5) {
            fields.push(("error", Kind::Ignored));
        }
        self.fields(&fields);
        self.ws();
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    OptStr,
    Reason,
    Index,
    Ignored,
    Delta,
    Choices,
    Usage,
    ToolCalls,
    Function,
}

fn render(seed: u64, weird: bool) -> String {
    let mut g = Gen {
        rng: Rng(seed),
        weird,
        out: String::new(),
    };
    g.chunk();
    g.out
}

/// serde_json's verdict: the deltas, or `None` for an error or an in-band error object.
fn by_serde(data: &[u8]) -> Option<Vec<Delta<'_>>> {
    let mut chunk: Chunk = serde_json::from_slice(data).ok()?;
    if chunk.error.is_some() {
        return None;
    }
    let mut out = Vec::new();
    chunk_deltas(&mut chunk, &mut out);
    Some(out)
}

fn by_skim(data: &[u8]) -> Option<Vec<Delta<'_>>> {
    let mut chunk = Chunk::default();
    skim_chunk(data, &mut chunk).ok()?;
    let mut out = Vec::new();
    chunk_deltas(&mut chunk, &mut out);
    Some(out)
}

/// Whatever the fast path accepts, serde_json accepts with the same deltas.
fn agree(data: &[u8]) -> Result<bool, TestCaseError> {
    let Some(fast) = by_skim(data) else {
        return Ok(false);
    };
    let slow = by_serde(data);
    prop_assert_eq!(
        Some(&fast),
        slow.as_ref(),
        "{}",
        String::from_utf8_lossy(data)
    );
    Ok(true)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn ordinary_chunks_take_the_fast_path_with_serdes_result(seed in any::<u64>()) {
        let json = render(seed, false);
        prop_assert!(agree(json.as_bytes())?, "fast path refused an ordinary chunk: {json}");
    }

    #[test]
    fn odd_chunks_agree_with_serde_whenever_the_fast_path_accepts(seed in any::<u64>()) {
        agree(render(seed, true).as_bytes())?;
    }

    #[test]
    fn corrupted_chunks_agree_with_serde_whenever_the_fast_path_accepts(
        seed in any::<u64>(), at in any::<prop::sample::Index>(), byte in any::<u8>(), how in 0..3u8,
    ) {
        let mut data = render(seed, false).into_bytes();
        let i = at.index(data.len());
        match how {
            0 => data[i] = byte,
            1 => data.insert(i, byte),
            _ => data.truncate(i),
        }
        agree(&data)?;
    }
}

#[test]
fn the_generator_makes_both_kinds_of_input() {
    // The properties above only mean something if weird inputs sometimes go each way.
    let (mut fast, mut slow) = (0, 0);
    for seed in 0..2000 {
        if by_skim(render(seed, true).as_bytes()).is_some() {
            fast += 1;
        } else {
            slow += 1;
        }
    }
    assert!(fast > 200 && slow > 200, "fast {fast}, slow {slow}");
}
