//! The patterns' side of the normalised view: a banned phrase or a regex's literals read as the
//! view reads text, so a pattern means the same in the view as in raw text.

use super::chars::{class, latin_twin, Class};
use super::{normalize_fragment, normalize_str, Normalize};
use regex_syntax::hir::{
    self, Capture, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Literal, Repetition,
};

/// Words of a phrase whose mixed spellings are all looked for (2^n forms); a longer phrase gets
/// its own view and its all-Latin form only.
const MIXED_WORDS: usize = 4;

/// The forms of a literal pattern to look for in the view: its own view, and with `full`, the
/// forms where words with look-alike letters are read as Latin (how a mixed-script spelling of
/// a Cyrillic or Greek word reads in the view) — every combination of such words for a phrase
/// of up to [`MIXED_WORDS`] of them, since each word of the text is read on its own.
pub fn normalize_pattern(pattern: &str, mode: Normalize) -> Vec<String> {
    let own = normalize_str(pattern, mode);
    if mode != Normalize::Full {
        return vec![own];
    }
    // The view cut into words and what lies between them, each word with its Latin form.
    let mut pieces: Vec<(String, String)> = Vec::new();
    let mut word = false;
    for c in own.chars() {
        let is_word = class(c) != Class::NotWord;
        let latin = if class(c) == Class::LookAlike {
            latin_twin(c).unwrap_or(c)
        } else {
            c
        };
        match pieces.last_mut() {
            Some((o, l)) if is_word == word => {
                o.push(c);
                l.push(latin);
            }
            _ => pieces.push((c.to_string(), latin.to_string())),
        }
        word = is_word;
    }
    let varying: Vec<usize> = (0..pieces.len())
        .filter(|&i| pieces[i].0 != pieces[i].1)
        .collect();
    let combos: Vec<u32> = if varying.len() <= MIXED_WORDS {
        (0..1u32 << varying.len()).collect()
    } else {
        vec![0, (1u32 << MIXED_WORDS) - 1]
    };
    let mut forms = vec![own];
    for combo in combos.into_iter().skip(1) {
        let latin_at = |i: usize| match varying.iter().position(|&v| v == i) {
            Some(k) if varying.len() <= MIXED_WORDS => combo & (1 << k) != 0,
            Some(_) => true,
            None => false,
        };
        let form: String = pieces
            .iter()
            .enumerate()
            .map(|(i, (o, l))| if latin_at(i) { l.as_str() } else { o.as_str() })
            .collect();
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// Classes of at most this many characters are rewritten for the view (larger ones, like
/// `\w` or `[^x]`, already hold every form the view can have).
const SMALL_CLASS: usize = 256;

/// A regex as it must read the view: its literals in their view, and small classes whose
/// characters change in the view (`[é]`, `(?i)é`) matching the view of those characters.
pub fn normalize_hir(hir: &Hir, mode: Normalize) -> Hir {
    if mode == Normalize::None {
        return hir.clone();
    }
    let norm = |h: &Hir| normalize_hir(h, mode);
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
        HirKind::Literal(Literal(bytes)) => match std::str::from_utf8(bytes) {
            Ok(text) => Hir::literal(normalize_fragment(text, mode).into_bytes()),
            Err(_) => hir.clone(),
        },
        HirKind::Class(hir::Class::Unicode(class)) => {
            let count: usize = class
                .ranges()
                .iter()
                .map(|r| (r.end() as usize).saturating_sub(r.start() as usize) + 1)
                .sum();
            if count > SMALL_CLASS {
                return hir.clone();
            }
            let mut same = Vec::new();
            let mut changed = Vec::new();
            for c in class.ranges().iter().flat_map(|r| r.start()..=r.end()) {
                let view = normalize_str(c.encode_utf8(&mut [0; 4]), mode);
                if view.is_empty() || view.chars().eq(std::iter::once(c)) {
                    same.push(ClassUnicodeRange::new(c, c));
                } else {
                    changed.push(view);
                }
            }
            if changed.is_empty() {
                return hir.clone();
            }
            changed.sort();
            changed.dedup();
            let mut alternatives = vec![Hir::class(hir::Class::Unicode(ClassUnicode::new(same)))];
            alternatives.extend(changed.into_iter().map(|v| Hir::literal(v.into_bytes())));
            Hir::alternation(alternatives)
        }
        HirKind::Class(hir::Class::Bytes(_)) => hir.clone(),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(norm(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(Capture {
            sub: Box::new(norm(&c.sub)),
            ..c.clone()
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(norm).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(norm).collect()),
    }
}
