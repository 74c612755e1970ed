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
    // Two-byte characters (Latin, Greek, Cyrillic, ...: most non-ASCII text the scanner folds)
    // from a table, since `to_lowercase` searches the whole Unicode case table.
    if let Some(&folded) = TWO_BYTE_FOLDS.get(c as usize - 0x80) {
        return char::from_u32(u32::from(folded)).unwrap_or(c);
    }
    fold_by_lowercase(c)
}

/// [`fold_char`] of every character from U+0080 to U+07FF (the two-byte UTF-8 ones).
static TWO_BYTE_FOLDS: std::sync::LazyLock<Box<[u16]>> = std::sync::LazyLock::new(|| {
    (0x80..0x800u32)
        .map(|u| char::from_u32(u).map_or(u, |c| u32::from(fold_by_lowercase(c))) as u16)
        .collect()
});

fn fold_by_lowercase(c: char) -> char {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The table agrees with folding by `to_lowercase` for every character it covers, and
    /// every fold keeps the UTF-8 length.
    #[test]
    fn two_byte_table_agrees_with_lowercase_folding() {
        for u in 0x80..0x800u32 {
            let Some(c) = char::from_u32(u) else { continue };
            assert_eq!(fold_char(c), fold_by_lowercase(c), "U+{u:04X}");
            assert_eq!(fold_char(c).len_utf8(), c.len_utf8(), "U+{u:04X}");
        }
        assert_eq!(fold_char('Ñ'), 'ñ');
        assert_eq!(fold_char('Ж'), 'ж');
        assert_eq!(fold_char('İ'), 'İ', "lowercase is longer: kept");
        assert_eq!(fold_char('Ａ'), 'ａ', "three-byte characters fold too");
    }
}
