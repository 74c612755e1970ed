//! CSS that hides text or reorders it, as far as the view reads it: an element's `style`
//! attribute, and the rules of a `<style>` element before it.
//!
//! The view shows an element's text (what a model reads, and a browser without the style); a
//! browser applying the style may not show it. Each declaration is read for what it can do to
//! the text: it **hides** it (`display: none`, `visibility: hidden`, a font size or opacity
//! near zero, a transparent or white text colour, a colour equal to the background, a clip or
//! mask, a zero or near-zero box, an offset or indent off the page, a scale near zero), or it
//! cannot (a font weight, a border, a padding, …: a list of properties known to leave text
//! readable). A property not on that list, a value the reader cannot read (an escape, a
//! comment, `var()`), is read as hiding — so the browser's reading is recorded whenever the
//! style might hide, never skipped because a declaration was not understood. An element whose
//! style may hide its text is read both ways: the view shows it, and the text before it joined
//! to the text after it is an aside (`join.rs`, the waiting browser's reading).
//!
//! `unicode-bidi: bidi-override` (or `isolate-override`) with `direction: rtl` or `ltr` shows
//! the text in the forced direction, as a `<bdo>` does (`elements.rs`).
//!
//! A `<style>` element's rules apply to the elements after it: each rule whose declarations may
//! hide is kept by its subject (the last compound selector: a tag name, classes, an id;
//! combinators, pseudo-classes and attribute selectors are not read, so a rule is read as
//! applying to more elements than it does, never fewer). Past [`MAX_RULES`] subjects, or a
//! style sheet longer than [`MAX_SHEET`], or a `<link>` to one, every element after it is read
//! both ways.

/// What a `style` attribute does to its element's text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::scan::normal) struct Style {
    /// It may hide the text.
    pub hides: bool,
    /// It forces a direction (`Some(true)`: right to left).
    pub overrides: Option<bool>,
}

/// Properties whose any value leaves the text shown where it is written.
const KEEPS_TEXT: [&str; 44] = [
    "font-weight",
    "font-style",
    "font-family",
    "font-variant",
    "font-stretch",
    "font-feature-settings",
    "font-kerning",
    "text-decoration",
    "text-decoration-line",
    "text-decoration-color",
    "text-decoration-style",
    "text-decoration-thickness",
    "text-underline-offset",
    "text-transform",
    "text-align",
    "text-shadow",
    "vertical-align",
    "white-space",
    "word-break",
    "word-wrap",
    "overflow-wrap",
    "hyphens",
    "cursor",
    "list-style",
    "list-style-type",
    "list-style-position",
    "border",
    "border-radius",
    "border-color",
    "border-style",
    "border-width",
    "border-collapse",
    "outline",
    "padding",
    "padding-left",
    "padding-right",
    "padding-top",
    "padding-bottom",
    "box-shadow",
    "line-height",
    "overflow",
    "float",
    "clear",
    "box-sizing",
];

/// What the declarations `value` (a `style` attribute's, or a rule's block) do to text.
pub(in crate::scan::normal) fn declarations(value: &str) -> Style {
    let mut style = Style::default();
    if value.contains('\\') || value.contains("/*") {
        style.hides = true;
        return style;
    }
    let (mut color, mut background, mut bidi_override, mut direction) = (None, None, false, None);
    for declaration in value.split(';') {
        let Some((property, v)) = declaration.split_once(':') else {
            // A lone word is no declaration (a browser drops it).
            continue;
        };
        let property = property.trim().to_ascii_lowercase();
        let v = v.to_ascii_lowercase();
        let v = v.trim().trim_end_matches("!important").trim();
        if property.is_empty() || v.is_empty() {
            continue;
        }
        if v.contains("var(") || v.contains("calc(") || v.contains("env(") || v.contains("attr(") {
            style.hides = true;
            continue;
        }
        let hides = match property.as_str() {
            p if KEEPS_TEXT.contains(&p)
                || p.starts_with("border-")
                || p.starts_with("padding") =>
            {
                false
            }
            p if p.starts_with("--") => false,
            "display" => v == "none",
            "visibility" => v == "hidden" || v == "collapse",
            "content-visibility" => v == "hidden",
            "opacity" => numbers(v).any(|(n, unit)| small(n, unit, 0.2)),
            "font-size" => font_size_hides(v),
            "font" => v.split_whitespace().any(|t| {
                let size = t.split('/').next().unwrap_or(t);
                size.starts_with(|c: char| c.is_ascii_digit() || c == '.') && font_size_hides(size)
            }),
            "zoom" | "scale" => numbers(v).any(|(n, unit)| small(n, unit, 0.2)),
            "transform" => {
                v.contains("scale") && numbers(v).any(|(n, unit)| unit.is_empty() && n.abs() < 0.2)
            }
            "color" | "-webkit-text-fill-color" => {
                color = Some(v.to_owned());
                invisible_colour(v)
            }
            "background" | "background-color" => {
                background = Some(v.to_owned());
                false
            }
            "margin" | "margin-left" | "margin-top" | "margin-right" | "margin-bottom"
            | "text-indent" | "letter-spacing" | "word-spacing" | "left" | "top" | "right"
            | "bottom" | "inset" => numbers(v).any(|(n, _)| n < 0.0),
            "position" => v == "absolute" || v == "fixed",
            "width" | "height" | "max-width" | "max-height" => {
                numbers(v).any(|(n, unit)| n <= 2.0 && unit != "%" || n <= 1.0)
            }
            "unicode-bidi" => {
                bidi_override = v.contains("override");
                false
            }
            "direction" => {
                direction = Some(v == "rtl");
                false
            }
            "min-width" | "min-height" | "background-image" | "writing-mode" | "z-index" => false,
            // Anything else (a clip, a mask, a filter, a property not known here) may hide.
            _ => true,
        };
        style.hides |= hides;
    }
    // Text in the colour of its background (or near it).
    if let (Some(c), Some(b)) = (&color, &background) {
        style.hides |= match rgb(c) {
            Some(text) => b
                .split_whitespace()
                .filter_map(rgb)
                .any(|ground| near(text, ground)),
            // A colour not read here: as near as any.
            None => true,
        };
    }
    if bidi_override {
        style.overrides = direction;
    }
    style
}

/// The numbers in a value, each with its unit (`px`, `em`, `%`, or none).
fn numbers(v: &str) -> impl Iterator<Item = (f64, &str)> {
    let bytes = v.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let start = i;
            let signed = bytes[i] == b'-' || bytes[i] == b'+';
            let mut j = i + usize::from(signed);
            let digits = j;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
                j += 1;
            }
            // A number starts a token (not the `2` of `h2`, `#f0f`).
            let at_token = start == 0
                || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'#');
            if j > digits && at_token {
                let unit_start = j;
                while j < bytes.len() && (bytes[j].is_ascii_alphabetic() || bytes[j] == b'%') {
                    j += 1;
                }
                i = j;
                if let Ok(n) = v[start..unit_start].parse::<f64>() {
                    return Some((n, &v[unit_start..j]));
                }
                continue;
            }
            i = start + 1;
        }
        None
    })
}

/// Whether `n` (in `unit`) is below `ratio` of the whole (`%` read as hundredths).
fn small(n: f64, unit: &str, ratio: f64) -> bool {
    if unit == "%" {
        n < ratio * 100.0
    } else {
        n < ratio
    }
}

/// Whether a font size is too small to read: zero, under 5 px or pt, under 0.3 em (rem, ex,
/// ch), under 30 %, or a unit not read here.
fn font_size_hides(v: &str) -> bool {
    let mut read = false;
    for (n, unit) in numbers(v) {
        read = true;
        let hides = match unit {
            "px" | "pt" | "" => n < 5.0,
            "em" | "rem" | "ex" | "ch" | "lh" => n < 0.3,
            "%" => n < 30.0,
            _ => true,
        };
        if hides {
            return true;
        }
    }
    // Keywords (`small`, `xx-small`, `larger`, `inherit`) are readable sizes.
    !read && !v.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
}

/// Whether a text colour is not seen on a page: transparent, nearly so, or white (or nearly:
/// a page is most often white).
fn invisible_colour(v: &str) -> bool {
    if v == "transparent" || v == "white" || v == "snow" || v == "ivory" || v.contains("white") {
        return true;
    }
    let hex = |s: &str| u8::from_str_radix(s, 16).ok();
    if let Some(h) = v.strip_prefix('#') {
        let full: Option<Vec<u8>> = match h.len() {
            3 | 4 => h
                .chars()
                .map(|c| hex(&format!("{c}{c}")))
                .collect::<Option<Vec<u8>>>(),
            6 | 8 => (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(hex))
                .collect(),
            _ => None,
        };
        return match full {
            Some(c) => light_or_clear(&c),
            None => true,
        };
    }
    if v.starts_with("rgb") || v.starts_with("hsl") || v.starts_with("hwb") {
        let n: Vec<f64> = numbers(v)
            .map(|(n, unit)| if unit == "%" { n / 100.0 } else { n })
            .collect();
        if v.starts_with("rgb") {
            let c: Vec<u8> = n.iter().map(|x| x.clamp(0.0, 255.0) as u8).collect();
            return match c.len() {
                3 => light_or_clear(&c),
                4 => n[3] < 0.2 || light_or_clear(&c[..3]),
                _ => true,
            };
        }
        // hsl(h s l [/ a]): lightness near 1 or alpha near 0.
        return n.get(2).is_none_or(|l| *l > 0.9) || n.get(3).is_some_and(|a| *a < 0.2);
    }
    // Other names are colours a page shows (`red`, `navy`); functions not read here may not be.
    !v.chars().all(|c| c.is_ascii_alphabetic())
}

/// A colour's red, green and blue, when it is one the view reads (`#rgb`, `#rrggbb`, with
/// alpha too, `rgb()`/`rgba()`, and a few names).
fn rgb(v: &str) -> Option<[u8; 3]> {
    let hex = |s: &str| u8::from_str_radix(s, 16).ok();
    if let Some(h) = v.strip_prefix('#') {
        let c: Vec<u8> = match h.len() {
            3 | 4 => h
                .chars()
                .map(|c| hex(&format!("{c}{c}")))
                .collect::<Option<_>>()?,
            6 | 8 => (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(hex))
                .collect::<Option<_>>()?,
            _ => return None,
        };
        return Some([c[0], c[1], c[2]]);
    }
    if v.starts_with("rgb") {
        let n: Vec<u8> = numbers(v)
            .map(|(n, unit)| if unit == "%" { n * 2.55 } else { n })
            .map(|n| n.clamp(0.0, 255.0) as u8)
            .collect();
        return (n.len() >= 3).then(|| [n[0], n[1], n[2]]);
    }
    match v {
        "black" => Some([0, 0, 0]),
        "white" => Some([255, 255, 255]),
        "red" => Some([255, 0, 0]),
        "green" => Some([0, 128, 0]),
        "blue" => Some([0, 0, 255]),
        "gray" | "grey" => Some([128, 128, 128]),
        _ => None,
    }
}

/// Whether two colours are too near to read one on the other.
fn near(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) < 48)
}

/// Whether an RGB(A) colour is near white or near transparent.
fn light_or_clear(c: &[u8]) -> bool {
    let alpha_clear = c.len() == 4 && c[3] < 51;
    alpha_clear || c.iter().take(3).all(|&x| x >= 230)
}

/// Past this many hiding rules' subjects, every element is read both ways.
const MAX_RULES: usize = 256;

/// A style sheet longer than this is read as hiding every element.
pub(in crate::scan::normal) const MAX_SHEET: usize = 16 * 1024;

/// An element a hiding rule applies to: its tag name, classes and id (each absent: any).
#[derive(Debug, Clone, Default)]
struct Subject {
    tag: Option<String>,
    classes: Vec<String>,
    id: Option<String>,
}

/// The hiding rules of the style sheets read so far, and the elements seen before them.
#[derive(Debug, Clone, Default)]
pub(in crate::scan::normal) struct StyleSheet {
    subjects: Vec<Subject>,
    /// Every element may be hidden (a rule for any element, a sheet not read).
    all: bool,
    /// The elements started so far, as a rule would select them (tag, classes, id): a style
    /// sheet applies to the elements before it too, whose text may have been released.
    seen: Vec<(String, String, String)>,
    /// Their hashes, so an element seen again costs no allocation.
    seen_hashes: std::collections::HashSet<u64>,
    /// More than [`MAX_SEEN`] kinds of element were seen.
    seen_past_bound: bool,
}

/// Kinds of element remembered for a later style sheet; past it, any hiding rule is read as
/// applying to one of them.
const MAX_SEEN: usize = 1024;

impl StyleSheet {
    /// Every element after it may be hidden (a `<link>` to a style sheet, one too long).
    pub(in crate::scan::normal) fn everything(&mut self) {
        self.all = true;
    }

    /// An element started: remembered for the style sheets after it.
    pub(in crate::scan::normal) fn seen(&mut self, tag: &str, class: &str, id: &str) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (tag, class, id).hash(&mut hasher);
        let hash = hasher.finish();
        if self.seen_hashes.contains(&hash) {
            return;
        }
        if self.seen.len() >= MAX_SEEN {
            self.seen_past_bound = true;
            return;
        }
        self.seen_hashes.insert(hash);
        self.seen.push((
            tag.to_owned(),
            class.to_ascii_lowercase(),
            id.trim().to_ascii_lowercase(),
        ));
    }

    /// A `<style>` element's text: its rules apply to the elements after it. Whether a rule
    /// that may hide text applies to an element before it (then already read as shown).
    pub(in crate::scan::normal) fn add_late(&mut self, text: &str) -> bool {
        let mut new = StyleSheet::default();
        new.add(text);
        let late = (new.all || !new.subjects.is_empty())
            && (self.seen_past_bound
                || self
                    .seen
                    .iter()
                    .any(|(tag, class, id)| new.applies(tag, class, id)));
        self.all |= new.all;
        for s in new.subjects {
            if self.subjects.len() >= MAX_RULES {
                self.all = true;
                break;
            }
            self.subjects.push(s);
        }
        late
    }

    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<StyleSheet>()
            + self.subjects.capacity() * std::mem::size_of::<Subject>()
            + self.seen_hashes.capacity() * 2 * std::mem::size_of::<u64>()
            + self
                .seen
                .iter()
                .map(|(a, b, c)| 3 * std::mem::size_of::<String>() + a.len() + b.len() + c.len())
                .sum::<usize>()
    }

    /// A `<style>` element's text.
    fn add(&mut self, text: &str) {
        if text.len() >= MAX_SHEET || text.contains('\\') {
            self.all = true;
            return;
        }
        // Comments go; a rule is `selectors { declarations }`; an at-rule's block (`@media
        // … { rules }`) is read on as rules of their own (its `}` ends no selector).
        let text = strip_comments(text);
        let mut pos = 0;
        while let Some(open) = text[pos..].find('{').map(|o| pos + o) {
            let selectors = text[pos..open].rsplit(['}', ';']).next().unwrap_or("");
            if selectors.trim_start().starts_with('@') {
                pos = open + 1;
                continue;
            }
            let close = text[open + 1..]
                .find('}')
                .map_or(text.len(), |c| open + 1 + c);
            let style = declarations(&text[open + 1..close]);
            pos = (close + 1).min(text.len());
            if style.hides || style.overrides.is_some() {
                for selector in selectors.split(',') {
                    self.subject(selector);
                }
            }
        }
    }

    /// A hiding rule's selector: its subject kept.
    fn subject(&mut self, selector: &str) {
        let last = selector
            .rsplit(|c: char| c.is_whitespace() || matches!(c, '>' | '+' | '~'))
            .find(|s| !s.is_empty())
            .unwrap_or("");
        // Pseudo-elements (`::before`) add text of their own, which no element shows: the
        // text of the element is not hidden by them.
        if last.contains("::") {
            return;
        }
        let mut subject = Subject::default();
        // `[attr]` and `:pseudo(…)` are not read: the subject applies more widely.
        let mut compound = String::new();
        let mut depth = 0;
        for c in last.chars() {
            match c {
                '[' | '(' => depth += 1,
                ']' | ')' => depth -= 1,
                _ if depth == 0 => compound.push(c),
                _ => {}
            }
        }
        let compound = compound
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let parts = compound.split_inclusive(['.', '#']);
        let mut kind = ' ';
        let mut push = |kind: char, name: &str| match kind {
            '.' => subject.classes.push(name.to_owned()),
            '#' => subject.id = Some(name.to_owned()),
            _ if !name.is_empty() && name != "*" => subject.tag = Some(name.to_owned()),
            _ => {}
        };
        for part in parts {
            let (name, next) = match part.strip_suffix(['.', '#']) {
                Some(name) => (name, part.chars().last().unwrap_or(' ')),
                None => (part, ' '),
            };
            push(kind, name);
            kind = next;
        }
        let any = subject.tag.is_none() && subject.classes.is_empty() && subject.id.is_none();
        if any || self.subjects.len() >= MAX_RULES {
            self.all = true;
        } else {
            self.subjects.push(subject);
        }
    }

    /// Whether an element `tag` with the `class` and `id` attributes given may be hidden.
    pub(in crate::scan::normal) fn applies(&self, tag: &str, class: &str, id: &str) -> bool {
        if self.all {
            return true;
        }
        let class = class.to_ascii_lowercase();
        let classes: Vec<&str> = class.split_ascii_whitespace().collect();
        let id = id.trim().to_ascii_lowercase();
        self.subjects.iter().any(|s| {
            s.tag.as_deref().is_none_or(|t| t == tag)
                && s.id.as_deref().is_none_or(|i| i == id)
                && s.classes.iter().all(|c| classes.contains(&c.as_str()))
        })
    }
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/*") {
        out.push_str(&rest[..at]);
        rest = rest[at + 2..].split_once("*/").map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_that_may_hide_text_and_those_that_cannot() {
        for hiding in [
            "display: none",
            "display:NONE !important",
            "visibility:hidden;position:absolute",
            "font-size:0",
            "font-size: 1px",
            "font-size:.1em",
            "font: 0/0 a",
            "color:transparent;font-size:1px",
            "color: #fff",
            "color:#FFFFFFFF",
            "color: rgba(0,0,0,0)",
            "color:hsl(0 0% 100%)",
            "color:red;background:red",
            "background-color:#000;color:#0a0a0a",
            "color: rgb(20, 20, 20); background: url(x) #111 no-repeat",
            "color: lab(50% 0 0); background: #000",
            "opacity:0.05",
            "opacity: 5%",
            "position:absolute;left:-9999px",
            "text-indent:-999em",
            "clip: rect(0 0 0 0)",
            "clip-path: inset(50%)",
            "transform: scale(0)",
            "height:0;overflow:hidden",
            "max-width: 1px",
            "dis\\70 lay:none",
            "display:/**/none",
            "font-size: var(--x)",
            "some-new-property: x",
            "zoom: 0.01",
        ] {
            assert!(declarations(hiding).hides, "{hiding}");
        }
        for shown in [
            "font-weight:bold",
            "color: red",
            "color:#333; font-family: serif",
            "display:block;padding:4px",
            "font-size: 12px",
            "font-size: small",
            "font: italic bold 12px/30px Georgia, serif",
            "border: 1px solid #ccc",
            "opacity: 0.9",
            "color: #000; background: #fff",
            "color: #123; background-color: rgb(250, 250, 250)",
            "margin: 0 auto",
            "width: 100%",
            "transform: rotate(2deg)",
            "--x: 0",
            "",
        ] {
            assert!(!declarations(shown).hides, "{shown}");
        }
        assert_eq!(
            declarations("unicode-bidi:bidi-override;direction:rtl").overrides,
            Some(true)
        );
        assert_eq!(declarations("direction:rtl").overrides, None);
    }

    #[test]
    fn a_style_sheets_hiding_rules_apply_to_their_subjects() {
        let mut sheet = StyleSheet::default();
        sheet.add(".x{display:none} p.y , #z { font-size: 0 } .ok { color: red } @media screen { .m { visibility: hidden } } div > span.q:hover{opacity:0}");
        assert!(sheet.applies("span", "x", ""));
        assert!(sheet.applies("span", "a x", ""));
        assert!(sheet.applies("p", "y", ""));
        assert!(!sheet.applies("div", "y", ""));
        assert!(sheet.applies("b", "", "z"));
        assert!(!sheet.applies("span", "ok", ""));
        assert!(sheet.applies("i", "m", ""));
        assert!(sheet.applies("span", "q", ""));
        assert!(!sheet.applies("span", "", ""));
        let mut all = StyleSheet::default();
        all.add("* { display: none }");
        assert!(all.applies("b", "", ""));
        let mut all = StyleSheet::default();
        all.add("[title] { display: none }");
        assert!(all.applies("b", "", ""));
    }
}
