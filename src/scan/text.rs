//! Character rules shared by the scanner and the checks.

/// Unicode word character, as `\w` defines it (letters, marks, digits, connector punctuation).
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || regex_syntax::is_word_character(c)
}

/// Case folding that keeps every character's UTF-8 length, so byte positions in folded text are
/// byte positions in the original. ASCII is left alone (the automaton folds it itself); a
/// character whose lowercase form has another length (`İ`, the Kelvin sign) is kept as it is.
pub fn fold_char(c: char) -> char {
    if c.is_ascii() {
        return c;
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) if l.len_utf8() == c.len_utf8() => l,
        _ => c,
    }
}

/// [`fold_char`] over a whole string.
pub fn fold_str(s: &str) -> String {
    s.chars().map(fold_char).collect()
}

/// True when folding changes some non-ASCII character of `s`, i.e. matching `s` needs Unicode
/// case folding of the input.
pub fn needs_unicode_fold(s: &str) -> bool {
    s.chars()
        .any(|c| !c.is_ascii() && (c.is_lowercase() || c.is_uppercase()))
}

/// Number of characters (not bytes) in `s`.
pub fn char_count(s: &str) -> u64 {
    s.chars().count() as u64
}
