//! Config errors a person can act on: figment names the key and the source (file or
//! environment variable); for a key the config does not know, this adds where it is in the file
//! (line and column, from the YAML parser) and the known key it was most likely meant to be.

use super::Config;
use figment::error::Kind;

/// One line per error: `key: what (in source)`, with the line and a suggestion for unknown
/// keys. `text` is the YAML the error came from, when it is at hand.
pub(super) fn format_figment_error(e: figment::Error, text: Option<&str>) -> String {
    e.into_iter()
        .map(|e| {
            let key = if e.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.path.join("."))
            };
            let source = e
                .metadata
                .as_ref()
                .and_then(|m| m.source.as_ref())
                .map(|s| format!(" (in {s})"))
                .unwrap_or_default();
            let what = match &e.kind {
                Kind::UnknownField(field, expected) => {
                    let at = text
                        .and_then(|t| unknown_key_location(t, field))
                        .map(|(line, col)| format!(" at line {line}, column {col}"))
                        .unwrap_or_default();
                    let hint = did_you_mean(field, expected)
                        .map(|k| format!("; did you mean `{k}`?"))
                        .unwrap_or_default();
                    format!(
                        "unknown key `{field}`{at}{hint} (known here: {})",
                        expected.join(", ")
                    )
                }
                kind => kind.to_string(),
            };
            format!("{key}{what}{source}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the unknown key `field` is. Reading the text straight into [`Config`] stops at the
/// first unknown key with its position; when that is another key (figment reads keys in
/// another order than the file's), the one line of the file that starts with `field:` (or
/// `- field:`), if there is exactly one.
fn unknown_key_location(text: &str, field: &str) -> Option<(usize, usize)> {
    if let Some(err) = serde_norway::from_str::<Config>(text).err() {
        if err
            .to_string()
            .contains(&format!("unknown field `{field}`"))
        {
            if let Some(at) = err.location() {
                return Some((at.line(), at.column()));
            }
        }
    }
    let mut found = text.lines().enumerate().filter_map(|(i, line)| {
        let rest = line.trim_start();
        let indent = line.len() - rest.len();
        let (rest, indent) = match rest.strip_prefix("- ") {
            Some(r) => (r.trim_start(), line.len() - r.trim_start().len()),
            None => (rest, indent),
        };
        let after = rest.strip_prefix(field)?;
        after
            .trim_start()
            .starts_with(':')
            .then_some((i + 1, indent + 1))
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// The known key `field` was most likely meant to be: a small edit away (a typo, a letter
/// missing or swapped), or the known key it is a part of (`prefix` for `path_prefix`).
fn did_you_mean<'a>(field: &str, expected: &[&'a str]) -> Option<&'a str> {
    let field = field.to_ascii_lowercase();
    let close = |k: &str| strsim::damerau_levenshtein(&field, k) <= (field.len() / 3).max(1);
    let part = |k: &str| field.len() >= 3 && k.split('_').any(|w| w == field);
    expected
        .iter()
        .copied()
        .filter(|k| close(k))
        .min_by_key(|k| strsim::damerau_levenshtein(&field, k))
        .or_else(|| expected.iter().copied().find(|k| part(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_typos_or_parts_of_a_known_key() {
        let top = ["listen", "upstreams", "packs", "log", "routes", "keys"];
        assert_eq!(did_you_mean("logg", &top), Some("log"));
        assert_eq!(did_you_mean("upstream", &top), Some("upstreams"));
        assert_eq!(did_you_mean("lisetn", &top), Some("listen"));
        assert_eq!(did_you_mean("Packs", &top), Some("packs"));
        assert_eq!(did_you_mean("colour", &top), None);
        let route = ["name", "protocol", "path_prefix", "strip_prefix", "packs"];
        assert_eq!(did_you_mean("prefix", &route), Some("path_prefix"));
        assert_eq!(did_you_mean("x", &route), None);
    }

    #[test]
    fn unknown_keys_are_found_in_the_file() {
        let text = "listen: 127.0.0.1:9000\nlogg: {}\nroutes:\n  - name: a\n    prefix: /a\n";
        // The parser stops at `logg`, the first unknown key in the file.
        assert_eq!(unknown_key_location(text, "logg"), Some((2, 1)));
        // `prefix` is found by its one line.
        assert_eq!(unknown_key_location(text, "prefix"), Some((5, 5)));
        let text = "routes:\n  - prefix: /a\n  - prefix: /b\n";
        assert_eq!(unknown_key_location(text, "prefix"), Some((2, 5)));
        let text = "logg: 1\nroutes:\n  - name: a\n    x: 1\n  - name: b\n    x: 2\n";
        // Two lines start with `x:`: which one figment meant is unknown.
        assert_eq!(unknown_key_location(text, "x"), None);
    }
}
