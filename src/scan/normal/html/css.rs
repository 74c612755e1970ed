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
//! `unicode-bidi: bidi-override` (or `isolate-override`) shows the text in the forced
//! direction, as a `<bdo>` does (`elements.rs`): the element's `direction` (from its style, a
//! rule, a presentation attribute, its `dir`, or inherited from the elements around it).
//! Either declaration may come from a rule of its own.
//!
//! A `<style>` element's rules (`css/sheet.rs`) apply to the elements after it: each rule whose declarations may
//! hide is kept by its subject (the last compound selector: a tag name, classes, an id;
//! combinators, pseudo-classes and attribute selectors are not read, so a rule is read as
//! applying to more elements than it does, never fewer). Past 256 subjects every element
//! after it is read both ways (a rule that orders text past them is refused). A sheet the
//! view does not read — longer than [`MAX_SHEET`], imported, nested, escaped, or linked
//! (`attributes.rs`) — may hide or reorder any text: refused.

pub(in crate::scan::normal) mod readings;
mod sheet;
pub(in crate::scan::normal) use sheet::{StyleSheet, MAX_SHEET};

/// What a `style` attribute does to its element's text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::scan::normal) struct Style {
    /// It may hide the text.
    pub hides: bool,
    /// It overrides the direction of its text (`unicode-bidi: bidi-override` or
    /// `isolate-override`).
    pub bidi_override: bool,
    /// The direction it sets (`Some(true)`: right to left).
    pub direction: Option<bool>,
    /// It sets how the element is displayed (`display`, `all`, `appearance`): a break its tag
    /// makes may not be there.
    pub display: bool,
    /// It may show an element a browser does not show by default (a `display` other than
    /// `none`, `all`, `appearance`).
    pub shows: bool,
    /// It does something to the text the view does not read: text it generates (a string in
    /// `quotes` or `list-style-type`, a counter), an override or direction through a variable.
    pub unread: bool,
    /// It sets how the element's box is drawn (its border, background, appearance): a
    /// control's value is apart from the text around it only inside the box a browser draws
    /// for it by default (`elements.rs`).
    pub draws_box: bool,
}

/// Whether `tag` is a form control drawn in a box of its own.
pub(in crate::scan::normal) fn is_control(tag: &str) -> bool {
    matches!(tag, "input" | "select" | "textarea" | "button")
}

/// Properties whose any value leaves the text shown where it is written.
const KEEPS_TEXT: [&str; 43] = [
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
    "clear",
    "box-sizing",
];

/// What the declarations `value` (a `style` attribute's, or a rule's block) do to text.
pub(in crate::scan::normal) fn declarations(value: &str) -> Style {
    let mut style = Style::default();
    if value.contains('\\') || value.contains("/*") {
        style.hides = true;
        style.draws_box = true;
        return style;
    }
    let (mut color, mut background, mut bidi_override, mut direction) = (None, None, false, None);
    // A control's box: a property that may take its border away (or draw over it), and a
    // background a person sees (the value is then in a box all the same).
    let (mut box_removed, mut box_filled) = (false, false);
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
        if removes_box(&property, v) {
            box_removed = true;
        }
        if matches!(property.as_str(), "background" | "background-color") && shown_colour(v) {
            box_filled = true;
        }
        // Text a style generates (a marker's or a quotation mark's string, a counter).
        if matches!(
            property.as_str(),
            "quotes" | "list-style" | "list-style-type" | "content"
        ) && (v.contains(['"', '\'']) || v.contains("counter"))
        {
            style.unread = true;
        }
        if v.contains("var(") || v.contains("calc(") || v.contains("env(") || v.contains("attr(") {
            style.hides = true;
            style.unread |= matches!(property.as_str(), "direction" | "unicode-bidi");
            style.display |= property == "display";
            style.shows |= property == "display";
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
            // A float sets its box beside the text after it, not above it (a table's `align`
            // attribute is read as one in `elements.rs`).
            "float" => {
                style.display |= v != "none";
                false
            }
            "display" => {
                style.display = true;
                style.shows |= v != "none";
                v == "none"
            }
            // Every property reset (`display: inline` among them), or a control drawn as text.
            "all" | "appearance" | "-webkit-appearance" => {
                style.display = true;
                style.shows = true;
                true
            }
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
                direction = match v {
                    "rtl" => Some(true),
                    "ltr" => Some(false),
                    // (`inherit`, `unset`: the direction around it.)
                    _ => None,
                };
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
        style.hides |= match rgba(c) {
            Some((text, _)) => b
                .split_whitespace()
                .filter_map(rgba)
                .any(|(ground, _)| near(text, ground)),
            // A colour not read here: as near as any.
            None => true,
        };
    }
    style.bidi_override = bidi_override;
    style.direction = direction;
    style.draws_box = box_removed && !box_filled;
    style
}

/// Whether a declaration may take a control's border away or draw over it: a border
/// property (any spelling: `-webkit-border-start`) not known to leave one a person sees (a
/// width, a style and a colour that shows), an outline (one inside the box covers its border),
/// a clip or mask, an appearance, `all`, a filter. (A border's radius, collapse or spacing
/// never does.)
fn removes_box(property: &str, v: &str) -> bool {
    if property.contains("border") {
        if property.ends_with("radius")
            || property.ends_with("collapse")
            || property.ends_with("spacing")
        {
            return false;
        }
        let keyword = v.split_whitespace().any(|t| {
            matches!(
                t,
                "none"
                    | "hidden"
                    | "transparent"
                    | "inherit"
                    | "initial"
                    | "unset"
                    | "revert"
                    | "revert-layer"
            )
        });
        let zero = numbers(v).any(|(n, _)| n <= 0.0);
        return property.contains("image") || keyword || zero || hidden_colour_in(v);
    }
    property.contains("outline")
        || property.contains("clip")
        || property.contains("mask")
        || property.ends_with("appearance")
        || property.ends_with("filter")
        || property == "all"
}

/// Whether a value names a colour a person may not see on a white page (white-ish,
/// transparent, or a colour function or hex not read).
fn hidden_colour_in(v: &str) -> bool {
    let functions = [
        "rgb", "hsl", "hwb", "lab", "lch", "oklab", "oklch", "color(",
    ];
    v.contains("white")
        || v.contains("snow")
        || v.contains("ivory")
        || v.split_whitespace()
            .filter(|t| t.starts_with('#'))
            .any(invisible_colour)
        || functions.iter().any(|f| {
            v.match_indices(f).any(|(at, _)| {
                let call = &v[at..];
                invisible_colour(
                    call.get(..=call.find(')').unwrap_or(call.len() - 1))
                        .unwrap_or(call),
                )
            })
        })
}

/// Whether a background value holds a colour a person sees on a white page (a hex or `rgb()`
/// colour, or a common name, not white-ish or transparent).
fn shown_colour(v: &str) -> bool {
    const NAMES: [&str; 16] = [
        "black",
        "red",
        "green",
        "blue",
        "navy",
        "teal",
        "purple",
        "maroon",
        "orange",
        "gray",
        "grey",
        "olive",
        "brown",
        "darkblue",
        "darkgreen",
        "crimson",
    ];
    if hidden_colour_in(v) {
        return false;
    }
    v.split_whitespace().any(|t| {
        t.starts_with('#') || t.starts_with("rgb") || NAMES.contains(&t.trim_end_matches(','))
    })
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
    if v.starts_with('#') || v.starts_with("rgb") {
        return rgba(v).is_none_or(|(c, alpha)| alpha < 0.2 || c.iter().all(|&x| x >= 230));
    }
    if v.starts_with("hsl") || v.starts_with("hwb") {
        let n: Vec<f64> = numbers(v)
            .map(|(n, unit)| if unit == "%" { n / 100.0 } else { n })
            .collect();
        // hsl(h s l [/ a]): lightness near 1 or alpha near 0.
        return n.get(2).is_none_or(|l| *l > 0.9) || n.get(3).is_some_and(|a| *a < 0.2);
    }
    // Other names are colours a page shows (`red`, `navy`); functions not read here may not be.
    !v.chars().all(|c| c.is_ascii_alphabetic())
}

/// A colour's red, green and blue, and its alpha (1: opaque), when it is one the view reads
/// (`#rgb`, `#rrggbb`, with alpha too, `rgb()`/`rgba()` with three or four numbers, and a few
/// names).
fn rgba(v: &str) -> Option<([u8; 3], f64)> {
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
        let alpha = c.get(3).map_or(1.0, |&a| f64::from(a) / 255.0);
        return Some(([c[0], c[1], c[2]], alpha));
    }
    if v.starts_with("rgb") {
        let n: Vec<(f64, &str)> = numbers(v).collect();
        if n.len() != 3 && n.len() != 4 {
            return None;
        }
        let channel = |(n, unit): (f64, &str)| {
            let n = if unit == "%" { n * 2.55 } else { n };
            n.clamp(0.0, 255.0) as u8
        };
        let alpha = n
            .get(3)
            .map_or(1.0, |&(a, unit)| if unit == "%" { a / 100.0 } else { a });
        return Some(([channel(n[0]), channel(n[1]), channel(n[2])], alpha));
    }
    let named = match v {
        "black" => [0, 0, 0],
        "white" => [255, 255, 255],
        "red" => [255, 0, 0],
        "green" => [0, 128, 0],
        "blue" => [0, 0, 255],
        "gray" | "grey" => [128, 128, 128],
        _ => return None,
    };
    Some((named, 1.0))
}

/// Whether two colours are too near to read one on the other.
fn near(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) < 48)
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
        let both = declarations("unicode-bidi:bidi-override;direction:rtl");
        assert!(both.bidi_override && both.direction == Some(true));
        let direction = declarations("direction:rtl");
        assert!(!direction.bidi_override && direction.direction == Some(true));
        assert!(declarations("unicode-bidi:isolate-override").bidi_override);
        assert_eq!(declarations("direction:inherit").direction, None);
    }
}
