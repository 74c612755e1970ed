//! The Porter stemmer exactly as NLTK's `nltk.stem.porter.PorterStemmer()` runs it by default
//! (mode `NLTK_EXTENSIONS`): Martin Porter's 1980 algorithm with the NLTK extensions (irregular
//! forms, `ies`/`ied` of four letters, `y` → `i` only after a consonant, `alli`, `fulli`,
//! `logi`, and words of one or two letters left alone). Both `rouge-score` (with
//! `use_stemmer=True`) and NLTK's METEOR use this stemmer.
//!
//! It works on characters (Python's string indexing), so a word with non-ASCII letters stems
//! the way NLTK stems it; the rules only ever remove or add ASCII suffixes.

/// NLTK's irregular forms: form → stem.
const IRREGULAR: &[(&str, &str)] = &[
    ("sky", "sky"),
    ("skies", "sky"),
    ("dying", "die"),
    ("lying", "lie"),
    ("tying", "tie"),
    ("news", "news"),
    ("innings", "inning"),
    ("inning", "inning"),
    ("outings", "outing"),
    ("outing", "outing"),
    ("cannings", "canning"),
    ("canning", "canning"),
    ("howe", "howe"),
    ("proceed", "proceed"),
    ("exceed", "exceed"),
    ("succeed", "succeed"),
];

/// The stem of `word` (lowercased first, as NLTK's `stem(word)` does).
pub fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    if let Some((_, stem)) = IRREGULAR.iter().find(|(form, _)| *form == lower) {
        return (*stem).to_string();
    }
    // NLTK tests the length of the word as given, before lowercasing.
    if word.chars().count() <= 2 {
        return lower;
    }
    let mut w: Vec<char> = lower.chars().collect();
    w = step1a(w);
    w = step1b(w);
    w = step1c(w);
    w = step2(w);
    w = step3(w);
    w = step4(w);
    w = step5a(w);
    w = step5b(w);
    w.into_iter().collect()
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// `_is_consonant(word, i)`: a `y` is a consonant when the letter before it is not.
fn is_consonant(w: &[char], mut i: usize) -> bool {
    if is_vowel(w[i]) {
        return false;
    }
    if w[i] == 'y' {
        let mut negate = false;
        while i > 0 && w[i] == 'y' {
            negate = !negate;
            i -= 1;
        }
        return is_vowel(w[i]) == negate;
    }
    true
}

/// Every position's class in one pass (the same answers as `is_consonant`).
fn consonant_flags(w: &[char]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(w.len());
    for (i, &c) in w.iter().enumerate() {
        let flag = if is_vowel(c) {
            false
        } else if c == 'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(flag);
    }
    flags
}

/// m in [C](VC){m}[V].
fn measure(stem: &[char]) -> usize {
    consonant_flags(stem)
        .windows(2)
        .filter(|pair| !pair[0] && pair[1])
        .count()
}

fn contains_vowel(stem: &[char]) -> bool {
    consonant_flags(stem).iter().any(|consonant| !consonant)
}

/// *d: ends with a double consonant.
fn ends_double_consonant(w: &[char]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

/// *o: ends consonant-vowel-consonant, the last not w, x or y (NLTK: or a two-letter
/// vowel-consonant word).
fn ends_cvc(w: &[char]) -> bool {
    let n = w.len();
    (n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], 'w' | 'x' | 'y'))
        || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

fn ends_with(w: &[char], suffix: &str) -> bool {
    let n = suffix.chars().count();
    n <= w.len() && w[w.len() - n..].iter().copied().eq(suffix.chars())
}

/// `word` without its last `n` characters, then `replacement`.
fn replace(w: &[char], n: usize, replacement: &str) -> Vec<char> {
    let mut out = w[..w.len() - n].to_vec();
    out.extend(replacement.chars());
    out
}

type Condition<'a> = &'a dyn Fn(&[char]) -> bool;

/// `_apply_rule_list`: the first rule whose suffix the word ends with decides: its condition
/// holds on the stem → stem + replacement, else the word unchanged.
fn apply_rules(w: Vec<char>, rules: &[(&str, &str, Condition<'_>)]) -> Vec<char> {
    for (suffix, replacement, condition) in rules {
        if ends_with(&w, suffix) {
            let n = suffix.chars().count();
            let stem = &w[..w.len() - n];
            return if condition(stem) {
                replace(&w, n, replacement)
            } else {
                w
            };
        }
    }
    w
}

fn always(_: &[char]) -> bool {
    true
}

fn positive_measure(stem: &[char]) -> bool {
    measure(stem) > 0
}

fn measure_gt_1(stem: &[char]) -> bool {
    measure(stem) > 1
}

fn step1a(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "ies") && w.len() == 4 {
        return replace(&w, 3, "ie");
    }
    apply_rules(
        w,
        &[
            ("sses", "ss", &always),
            ("ies", "i", &always),
            ("ss", "ss", &always),
            ("s", "", &always),
        ],
    )
}

fn step1b(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "ied") {
        return replace(&w, 3, if w.len() == 4 { "ie" } else { "i" });
    }
    if ends_with(&w, "eed") {
        let stem = &w[..w.len() - 3];
        return if measure(stem) > 0 {
            replace(&w, 3, "ee")
        } else {
            w
        };
    }
    let mut intermediate = None;
    for suffix in ["ed", "ing"] {
        if ends_with(&w, suffix) {
            let stem = &w[..w.len() - suffix.len()];
            if contains_vowel(stem) {
                intermediate = Some(stem.to_vec());
                break;
            }
        }
    }
    let Some(s) = intermediate else {
        return w;
    };
    // NLTK's rule list over the intermediate stem: at, bl, iz, then the double consonant
    // ("*d", also matched as a literal suffix when the special test fails), then "" (+e).
    for (suffix, replacement) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if ends_with(&s, suffix) {
            return replace(&s, 2, replacement);
        }
    }
    // `s` is not empty: it contains a vowel.
    let last = s[s.len() - 1];
    let keep_double = matches!(last, 'l' | 's' | 'z');
    if ends_double_consonant(&s) || ends_with(&s, "*d") {
        return if keep_double {
            s
        } else {
            let mut out = s[..s.len() - 2].to_vec();
            out.push(last);
            out
        };
    }
    if measure(&s) == 1 && ends_cvc(&s) {
        let mut out = s;
        out.push('e');
        return out;
    }
    s
}

fn step1c(w: Vec<char>) -> Vec<char> {
    let condition = |stem: &[char]| stem.len() > 1 && is_consonant(stem, stem.len() - 1);
    apply_rules(w, &[("y", "i", &condition)])
}

fn step2(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "alli") && positive_measure(&w[..w.len() - 4]) {
        return step2(replace(&w, 4, "al"));
    }
    let whole = w.clone();
    let logi = move |_: &[char]| whole.len() >= 3 && positive_measure(&whole[..whole.len() - 3]);
    let p: Condition<'_> = &positive_measure;
    apply_rules(
        w,
        &[
            ("ational", "ate", p),
            ("tional", "tion", p),
            ("enci", "ence", p),
            ("anci", "ance", p),
            ("izer", "ize", p),
            ("bli", "ble", p),
            ("alli", "al", p),
            ("entli", "ent", p),
            ("eli", "e", p),
            ("ousli", "ous", p),
            ("ization", "ize", p),
            ("ation", "ate", p),
            ("ator", "ate", p),
            ("alism", "al", p),
            ("iveness", "ive", p),
            ("fulness", "ful", p),
            ("ousness", "ous", p),
            ("aliti", "al", p),
            ("iviti", "ive", p),
            ("biliti", "ble", p),
            ("fulli", "ful", p),
            ("logi", "log", &logi),
        ],
    )
}

fn step3(w: Vec<char>) -> Vec<char> {
    let p: Condition<'_> = &positive_measure;
    apply_rules(
        w,
        &[
            ("icate", "ic", p),
            ("ative", "", p),
            ("alize", "al", p),
            ("iciti", "ic", p),
            ("ical", "ic", p),
            ("ful", "", p),
            ("ness", "", p),
        ],
    )
}

fn step4(w: Vec<char>) -> Vec<char> {
    let m: Condition<'_> = &measure_gt_1;
    let ion = |stem: &[char]| measure(stem) > 1 && matches!(stem.last(), Some('s' | 't'));
    apply_rules(
        w,
        &[
            ("al", "", m),
            ("ance", "", m),
            ("ence", "", m),
            ("er", "", m),
            ("ic", "", m),
            ("able", "", m),
            ("ible", "", m),
            ("ant", "", m),
            ("ement", "", m),
            ("ment", "", m),
            ("ent", "", m),
            ("ion", "", &ion),
            ("ou", "", m),
            ("ism", "", m),
            ("ate", "", m),
            ("iti", "", m),
            ("ous", "", m),
            ("ive", "", m),
            ("ize", "", m),
        ],
    )
}

fn step5a(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "e") {
        let stem = &w[..w.len() - 1];
        let m = measure(stem);
        if m > 1 || (m == 1 && !ends_cvc(stem)) {
            return stem.to_vec();
        }
    }
    w
}

fn step5b(w: Vec<char>) -> Vec<char> {
    let whole = w.clone();
    let condition = move |_: &[char]| measure(&whole[..whole.len() - 1]) > 1;
    apply_rules(w, &[("ll", "l", &condition)])
}
