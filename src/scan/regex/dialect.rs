//! Guardwire's regex dialect: how a pattern is parsed, and how a forbidden pattern is cut to
//! what finding it needs.
//!
//! The dialect is Go's RE2, which PromptKit packs are written for: `\d`, `\w`, `\s` and `\b`
//! are ASCII-only (`\s` also takes `\v`), while literals, `.` and `(?i)` stay Unicode-aware.
//! Besides compatibility this keeps DFAs small (Unicode `\d{3}` alone is megabytes) and lets word
//! boundaries be compiled into a DFA at all. Every matcher (regexes and PII shapes alike) takes
//! its patterns through [`compile_hir`]; nothing here builds an automaton.

use super::rule::RegexError;
use regex_syntax::ast::{self, Ast, ClassSet, ClassSetItem};
use regex_syntax::hir::{self, Hir, HirKind, Look};

/// Parses `pattern` in guardwire's dialect (see the module docs).
pub fn compile_hir(pattern: &str) -> Result<Hir, RegexError> {
    let syntax = |e: regex_syntax::Error| Box::new(e);
    let mut parsed = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| syntax(e.into()))?;
    ascii_perl_classes(&mut parsed);
    let hir = regex_syntax::hir::translate::Translator::new()
        .translate(pattern, &parsed)
        .map_err(|e| syntax(e.into()))?;
    Ok(ascii_word_boundaries(hir))
}

/// `\d` → `[[:digit:]]`, `\w` → `[[:word:]]`, `\s` → `[[:space:]]` (negations likewise).
fn ascii_perl_classes(a: &mut Ast) {
    match a {
        Ast::ClassPerl(perl) => {
            let item = ClassSetItem::Ascii(ascii_of(perl));
            *a = Ast::class_bracketed(ast::ClassBracketed {
                span: perl.span,
                negated: false,
                kind: ClassSet::Item(item),
            });
        }
        Ast::ClassBracketed(b) => ascii_in_set(&mut b.kind),
        Ast::Repetition(r) => ascii_perl_classes(&mut r.ast),
        Ast::Group(g) => ascii_perl_classes(&mut g.ast),
        Ast::Alternation(alt) => alt.asts.iter_mut().for_each(ascii_perl_classes),
        Ast::Concat(c) => c.asts.iter_mut().for_each(ascii_perl_classes),
        _ => {}
    }
}

fn ascii_in_set(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => ascii_in_item(item),
        ClassSet::BinaryOp(op) => {
            ascii_in_set(&mut op.lhs);
            ascii_in_set(&mut op.rhs);
        }
    }
}

fn ascii_in_item(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(perl) => *item = ClassSetItem::Ascii(ascii_of(perl)),
        ClassSetItem::Bracketed(b) => ascii_in_set(&mut b.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(ascii_in_item),
        _ => {}
    }
}

fn ascii_of(perl: &ast::ClassPerl) -> ast::ClassAscii {
    ast::ClassAscii {
        span: perl.span,
        kind: match perl.kind {
            ast::ClassPerlKind::Digit => ast::ClassAsciiKind::Digit,
            ast::ClassPerlKind::Space => ast::ClassAsciiKind::Space,
            ast::ClassPerlKind::Word => ast::ClassAsciiKind::Word,
        },
        negated: perl.negated,
    }
}

/// For a pattern whose matches only need to be *found* (a forbidden pattern), a trailing
/// `X{n,m}`, `X+` or `X*` can be cut to its minimum `X{n}`: text holds a match of the original
/// exactly when it holds one of the cut form, which is found as early or earlier, keeps the
/// longest match (and so the hold-back) bounded, and keeps DFAs small — counted runs at the end
/// of secret-token patterns otherwise multiply DFA states by thousands.
pub fn trim_for_existence(h: Hir) -> Hir {
    match h.into_kind() {
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            max: Some(r.min),
            ..r
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            sub: Box::new(trim_for_existence(*c.sub)),
            ..c
        }),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.into_iter().map(trim_for_existence).collect())
        }
        HirKind::Concat(mut subs) => {
            while let Some(last) = subs.pop() {
                let trimmed = trim_for_existence(last);
                // `X*` cut to `X{0}` is the empty pattern (the constructor simplifies it so).
                let vanished = matches!(trimmed.kind(), HirKind::Empty)
                    || matches!(trimmed.kind(), HirKind::Repetition(r) if r.max == Some(0));
                if !vanished {
                    subs.push(trimmed);
                    break;
                }
            }
            Hir::concat(subs)
        }
        kind => rebuild(kind),
    }
}

fn rebuild(kind: HirKind) -> Hir {
    match kind {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(class) => Hir::class(class),
        HirKind::Look(look) => Hir::look(look),
        HirKind::Repetition(r) => Hir::repetition(r),
        HirKind::Capture(c) => Hir::capture(c),
        HirKind::Concat(subs) => Hir::concat(subs),
        HirKind::Alternation(subs) => Hir::alternation(subs),
    }
}

fn ascii_word_boundaries(h: Hir) -> Hir {
    match h.into_kind() {
        HirKind::Look(look) => Hir::look(match look {
            Look::WordUnicode => Look::WordAscii,
            Look::WordUnicodeNegate => Look::WordAsciiNegate,
            Look::WordStartUnicode => Look::WordStartAscii,
            Look::WordEndUnicode => Look::WordEndAscii,
            Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
            Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
            other => other,
        }),
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            sub: Box::new(ascii_word_boundaries(*r.sub)),
            ..r
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            sub: Box::new(ascii_word_boundaries(*c.sub)),
            ..c
        }),
        HirKind::Concat(subs) => Hir::concat(subs.into_iter().map(ascii_word_boundaries).collect()),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.into_iter().map(ascii_word_boundaries).collect())
        }
        kind => rebuild(kind),
    }
}
