//! The metrics that need no model and no reference package: HoloDeck's `equality` and
//! `numeric` evaluators (its `lib/evaluators/deterministic.py`), its `response_path` (the leaf
//! of a JSON answer a standard metric grades instead of the whole answer:
//! `lib/evaluators/response_path.py`) and Puck's `matches` grader (a regex found in the
//! output). Each follows its reference's code, Python's string and number rules included
//! (`str.casefold`, `string.punctuation`, `\s`, `float()`, `str()` of a JSON leaf).

use crate::scoring::py_isspace;
use serde_json::Value;

/// HoloDeck's `EqualityEvaluator`: the answer equals the ground truth after the flags'
/// normalisation (case folded, then punctuation removed, then white space runs collapsed and
/// trimmed — that order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Equality {
    pub case_insensitive: bool,
    pub strip_whitespace: bool,
    pub strip_punctuation: bool,
}

impl Equality {
    pub fn equal(&self, answer: &str, expected: &str) -> bool {
        self.normalise(answer) == self.normalise(expected)
    }

    fn normalise(&self, text: &str) -> String {
        let mut out = if self.case_insensitive {
            caseless::default_case_fold_str(text)
        } else {
            text.to_owned()
        };
        if self.strip_punctuation {
            // Python's `string.punctuation`: ASCII's 32 punctuation and symbol characters.
            out.retain(|c| !c.is_ascii_punctuation());
        }
        if self.strip_whitespace {
            // `re.sub(r"\s+", " ", out).strip()`.
            out = out
                .split(py_isspace)
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
        }
        out
    }
}

/// HoloDeck's `NumericEvaluator`: both sides read as numbers; equal within
/// `absolute_tolerance` (inclusive), or within `relative_tolerance` × |expected| when that is
/// positive.
#[derive(Debug, Clone, PartialEq)]
pub struct Numeric {
    pub absolute_tolerance: f64,
    pub relative_tolerance: f64,
    pub accept_percent: bool,
    pub accept_thousands_separators: bool,
}

impl Default for Numeric {
    fn default() -> Self {
        Numeric {
            absolute_tolerance: 1e-6,
            relative_tolerance: 0.0,
            accept_percent: false,
            accept_thousands_separators: false,
        }
    }
}

/// What HoloDeck reads as a thousands separator: comma, underscore, NBSP, narrow NBSP.
const THOUSANDS: [char; 4] = [',', '_', '\u{a0}', '\u{202f}'];

impl Numeric {
    /// Whether the two are equal as numbers; `Err` says which side does not read as one.
    pub fn equal(&self, answer: &str, expected: &str) -> Result<bool, String> {
        let actual = self.parse(answer)?;
        let expected = self.parse(expected)?;
        let diff = (actual - expected).abs();
        let abs_ok = diff <= self.absolute_tolerance;
        let rel_ok =
            self.relative_tolerance > 0.0 && diff <= self.relative_tolerance * expected.abs();
        Ok(abs_ok || rel_ok)
    }

    /// HoloDeck's `_try_parse_number`: trimmed, a trailing `%` (with `accept_percent`) divides
    /// by 100, separators removed (with `accept_thousands_separators`, else refused), then
    /// Python's `float()`.
    fn parse(&self, value: &str) -> Result<f64, String> {
        let mut raw = value.trim_matches(py_isspace).to_owned();
        if raw.is_empty() {
            return Err("value is empty".into());
        }
        let percent = raw.ends_with('%');
        if percent && !self.accept_percent {
            return Err(format!(
                "percent sign in {raw:?} but accept_percent is false"
            ));
        }
        if percent {
            raw.pop();
            raw = raw.trim_matches(py_isspace).to_owned();
        }
        if self.accept_thousands_separators {
            raw.retain(|c| !THOUSANDS.contains(&c));
        } else if raw.contains(THOUSANDS) {
            return Err(format!(
                "thousands separator in {raw:?} but accept_thousands_separators is false"
            ));
        }
        let parsed =
            py_float(&raw).ok_or_else(|| format!("could not parse {value:?} as a number"))?;
        Ok(if percent { parsed / 100.0 } else { parsed })
    }
}

/// Python's `float(text)` on what HoloDeck hands it (separators already handled): white space
/// around, a sign, decimal digits with `_` only between digits, a fraction, an exponent, or
/// `inf`/`infinity`/`nan` in any case. Python also reads other scripts' decimal digits
/// (`float("٣")` is 3.0): those of [`decimal_digit`] are read here too.
pub fn py_float(text: &str) -> Option<f64> {
    // float() strips Unicode's White_Space — not the separators U+001C–U+001F that
    // `str.strip()` also removes (it reads an ASCII text as bytes, with C's isspace).
    let t = text.trim_matches(char::is_whitespace);
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    // Digits of any script to ASCII; `_` only between two digits.
    let chars: Vec<char> = body.chars().collect();
    let mut ascii = String::with_capacity(chars.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            let digit = |j: Option<&char>| j.is_some_and(|d| decimal_digit(*d).is_some());
            if !(i > 0 && digit(chars.get(i - 1)) && digit(chars.get(i + 1))) {
                return None;
            }
            continue;
        }
        match decimal_digit(c) {
            Some(d) => ascii.push(char::from(b'0' + d)),
            None if matches!(c, '.' | 'e' | 'E' | '+' | '-') => ascii.push(c),
            None => return None,
        }
    }
    // Rust's grammar for the rest is Python's: digits with an optional fraction and exponent
    // (`1.`, `.5`, `1e5`, `1E-5`); a second sign or dot fails both.
    if ascii.is_empty() || ascii.starts_with(['+', '-']) {
        return None;
    }
    let lower = ascii.to_ascii_lowercase();
    if lower.contains("inf") || lower.contains("nan") {
        return None;
    }
    ascii.parse::<f64>().ok().map(|v| sign * v)
}

/// A Unicode decimal digit (general category Nd) as its value: the blocks of ten
/// consecutive digits Unicode assigns, found by their zero.
fn decimal_digit(c: char) -> Option<u8> {
    if c.is_ascii_digit() {
        return Some(c as u8 - b'0');
    }
    let cp = u32::from(c);
    // The zeros of the Basic Multilingual Plane's decimal digit runs and of the mathematical
    // digits (each run is 0–9). Digits of the other planes' scripts are not read: such a
    // value fails the metric as unreadable.
    const ZEROS: [u32; 41] = [
        0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6,
        0x0D66, 0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0,
        0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0,
        0xAA50, 0xABF0, 0xFF10, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6,
    ];
    ZEROS
        .iter()
        .find(|&&z| (z..z + 10).contains(&cp))
        .map(|&z| (cp - z) as u8)
}

/// HoloDeck's `response_path`: dotted keys (`[A-Za-z_][\w-]*`) each with optional `[N]`
/// indices — `answer`, `result.value`, `items[0].score`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsePath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl ResponsePath {
    /// The path, or why it is not of the grammar.
    pub fn parse(path: &str) -> Result<ResponsePath, String> {
        let bad = || {
            format!(
                "response_path {path:?} is not dotted keys with optional [N] indices (answer, result.value, items[0].score)"
            )
        };
        let mut steps = Vec::new();
        // HoloDeck checks the grammar with `re.match(r"^…$")`, whose `$` also matches before
        // a final line break: `answer\n` is the path `answer`.
        let grammar = path.strip_suffix('\n').unwrap_or(path);
        for segment in grammar.split('.') {
            let (key, mut rest) = match segment.find('[') {
                Some(i) => segment.split_at(i),
                None => (segment, ""),
            };
            let mut chars = key.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            // Python's `\w` on a str pattern is Unicode's word characters.
            if !first_ok || !chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
                return Err(bad());
            }
            steps.push(Step::Key(key.to_owned()));
            while !rest.is_empty() {
                let close = rest.find(']').ok_or_else(bad)?;
                let digits = &rest[1..close];
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                steps.push(Step::Index(digits.parse().unwrap_or(usize::MAX)));
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(bad());
                }
            }
        }
        Ok(ResponsePath {
            text: path.to_owned(),
            steps,
        })
    }

    /// The leaf at the path in `answer` (a JSON document) as Python's `str()` writes it, or
    /// why there is none (not JSON, a missing key or index, a container at the end).
    pub fn extract(&self, answer: &str) -> Result<String, String> {
        let path = &self.text;
        let data: Value = serde_json::from_str(answer)
            .map_err(|e| format!("response_path={path:?} but the response is not JSON ({e})"))?;
        let mut cursor = &data;
        for step in &self.steps {
            cursor = match (step, cursor) {
                (Step::Index(i), Value::Array(items)) => items.get(*i).ok_or_else(|| {
                    format!(
                        "response_path={path:?}: index [{i}] out of range (len={})",
                        items.len()
                    )
                })?,
                (Step::Index(i), other) => {
                    return Err(format!(
                        "response_path={path:?}: expected list at index [{i}], got {}",
                        py_type(other)
                    ))
                }
                (Step::Key(k), Value::Object(map)) => map.get(k).ok_or_else(|| {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    format!("response_path={path:?}: key {k:?} not found (available: {keys:?})")
                })?,
                (Step::Key(k), other) => {
                    return Err(format!(
                        "response_path={path:?}: expected dict at key {k:?}, got {}",
                        py_type(other)
                    ))
                }
            };
        }
        match cursor {
            Value::Object(_) | Value::Array(_) => Err(format!(
                "response_path={path:?}: leaf is {}, expected a scalar (str/number/bool/null)",
                py_type(cursor)
            )),
            leaf => Ok(py_str(leaf)),
        }
    }
}

fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `str()` of a JSON scalar as `json.loads` reads it.
fn py_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (_, Some(u)) => u.to_string(),
            _ => py_float_repr(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Array(_) | Value::Object(_) => v.to_string(),
    }
}

/// Python's `repr(float)`: the shortest digits that read back, fixed notation with at least
/// one fractional digit when the decimal exponent is from -4 to 15, else `d.ddde+XX`.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..16).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let plain = format!("{f}");
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

/// Puck's `matches(regex)`: the pattern is found anywhere in the output (Elixir's
/// `Regex.match?`). Elixir's regexes are PCRE; this is Rust's `regex` syntax, which reads the
/// common PCRE (classes, quantifiers, `(?i)` flags, named groups) in linear time and refuses,
/// at load, what it does not: look-around and back-references.
#[derive(Debug, Clone)]
pub struct Matches {
    pub pattern: String,
    regex: regex::Regex,
}

impl PartialEq for Matches {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Matches {
    pub fn new(pattern: &str) -> Result<Matches, String> {
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 22)
            .build()
            .map_err(|e| format!("pattern {pattern:?} does not compile: {e}"))?;
        Ok(Matches {
            pattern: pattern.to_owned(),
            regex,
        })
    }

    pub fn found(&self, output: &str) -> bool {
        self.regex.is_match(output)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn equality_normalises_as_holodeck_in_its_order() {
        let plain = Equality::default();
        assert!(plain.equal("Paris", "Paris"));
        assert!(!plain.equal("Paris ", "Paris"), "no trim without the flag");
        let ci = Equality {
            case_insensitive: true,
            ..Equality::default()
        };
        // casefold, not lower: ß folds to ss.
        assert!(ci.equal("STRASSE", "straße"));
        assert!(ci.equal("ΣΊΣΥΦΟΣ", "σίσυφος"));
        let all = Equality {
            case_insensitive: true,
            strip_whitespace: true,
            strip_punctuation: true,
        };
        assert!(all.equal("  The answer:\t42!\u{1c} ", "the answer 42"));
        // Only ASCII punctuation goes: « » stay.
        assert!(!all.equal("«42»", "42"));
        // Punctuation is removed before white space collapses: "a - b" → "a b".
        assert!(all.equal("a - b", "a b"));
    }

    #[test]
    fn numbers_read_as_holodeck_and_python_read_them() {
        let n = Numeric::default();
        assert!(n.equal("42", " 42.0000001 ").unwrap());
        assert!(!n.equal("42", "42.01").unwrap());
        assert!(n.equal("1e3", "1000").unwrap());
        assert!(
            n.equal("1_000", "1000").is_err(),
            "a separator without the flag"
        );
        assert!(n.equal("50%", "0.5").is_err(), "a percent without the flag");
        assert!(n.equal("forty-two", "42").is_err());
        assert!(n.equal("", "42").is_err());
        let loose = Numeric {
            accept_percent: true,
            accept_thousands_separators: true,
            relative_tolerance: 0.01,
            ..Numeric::default()
        };
        assert!(loose.equal("50 %", "0.5").unwrap());
        assert!(loose.equal("1,000,000", "1\u{a0}000\u{202f}000").unwrap());
        assert!(loose.equal("1005", "1000").unwrap(), "within 1 %");
        assert!(!loose.equal("1011", "1000").unwrap());
        for (text, want) in [
            ("  -1.5 ", Some(-1.5)),
            ("+.5", Some(0.5)),
            ("5.", Some(5.0)),
            ("1E-2", Some(0.01)),
            ("١٢", Some(12.0)),
            ("Infinity", Some(f64::INFINITY)),
            ("-inf", Some(f64::NEG_INFINITY)),
            ("1__0", None),
            ("_1", None),
            ("1e", None),
            ("--1", None),
            ("0x10", None),
            ("1.2.3", None),
        ] {
            assert_eq!(py_float(text), want, "{text:?}");
        }
    }

    #[test]
    fn response_paths_follow_the_grammar_and_python_str() {
        let p = ResponsePath::parse("data.items[1].score").unwrap();
        let doc = r#"{"data": {"items": [{"score": 1}, {"score": 2.50}]}}"#;
        assert_eq!(p.extract(doc).unwrap(), "2.5");
        for (doc, want) in [
            (r#"{"a": true}"#, "True"),
            (r#"{"a": null}"#, "None"),
            (r#"{"a": 1e16}"#, "1e+16"),
            (r#"{"a": 100.0}"#, "100.0"),
            (r#"{"a": 0.00001}"#, "1e-05"),
            (r#"{"a": -7}"#, "-7"),
            (r#"{"a": "x y"}"#, "x y"),
        ] {
            assert_eq!(
                ResponsePath::parse("a").unwrap().extract(doc).unwrap(),
                want
            );
        }
        let a = ResponsePath::parse("a").unwrap();
        assert!(a.extract("not json").unwrap_err().contains("not JSON"));
        assert!(a.extract(r#"{"b": 1}"#).unwrap_err().contains("not found"));
        assert!(a
            .extract(r#"{"a": [1]}"#)
            .unwrap_err()
            .contains("leaf is list"));
        assert!(ResponsePath::parse("a[3]")
            .unwrap()
            .extract(r#"{"a": [1]}"#)
            .unwrap_err()
            .contains("out of range"));
        for bad in [
            "", "1a", "a.", "a[]", "a[x]", "a[1]b", "a..b", "a b", "a[-1]",
        ] {
            assert!(ResponsePath::parse(bad).is_err(), "{bad:?}");
        }
        assert!(ResponsePath::parse("ans-wer_2[0][1].x").is_ok());
    }

    #[test]
    fn matches_finds_the_pattern_anywhere() {
        let m = Matches::new(r"\d{3}-\d{4}").unwrap();
        assert!(m.found("call 555-1234 now"));
        assert!(!m.found("call me"));
        assert!(Matches::new(r"(?i)^call").unwrap().found("CALL me"));
        assert!(Matches::new("(").is_err());
        let refused = Matches::new(r"(?<=\$)\d+").unwrap_err();
        assert!(refused.contains("does not compile"), "{refused}");
    }
}
