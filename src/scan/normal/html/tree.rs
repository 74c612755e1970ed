//! The tree builder's rules the view follows (HTML's parsing algorithm, as Chromium implements
//! it): which open elements a start tag closes, which end tags a scope boundary or a special
//! element stops, the formatting elements a browser re-opens, the tags a table or an option
//! reads otherwise. The element stack itself is `elements.rs`.

/// HTML elements whose start tag ends foreign content (HTML's "breakout" tags; `<font>`
/// only with some attributes, read here as always).
#[rustfmt::skip]
pub(super) const BREAKOUT: [&str; 45] = [
    "b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em",
    "embed", "font", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li",
    "listing", "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong",
    "strike", "sub", "sup", "table", "tt", "u", "ul", "var",
];

/// Start tags that close a `<p>` open (HTML's parser: "close a p element").
#[rustfmt::skip]
pub(super) const CLOSES_P: [&str; 41] = [
    "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div",
    "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu",
    "nav", "ol", "p", "search", "section", "summary", "ul", "h1", "h2", "h3", "h4", "h5", "h6",
    "pre", "listing", "form", "table", "xmp", "hr", "li", "dd", "dt", "plaintext",
];

const HEADINGS: [&str; 6] = ["h1", "h2", "h3", "h4", "h5", "h6"];

/// The open elements a start tag `name` closes, as the parser's implied end tags and the
/// adoption agency close them (`<a>` and `<nobr>` their own; list items, definitions, options
/// and headings their kind; a block the open `<p>`; a control a `<select>`).
pub(super) fn closed_by(name: &str) -> &'static [&'static str] {
    match name {
        "a" => &["a"],
        "nobr" => &["nobr"],
        "button" => &["button"],
        "li" => &["li"],
        "dd" | "dt" => &["dd", "dt"],
        "option" => &["option"],
        "optgroup" => &["option", "optgroup"],
        "select" | "input" | "keygen" | "textarea" => &["select"],
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => &HEADINGS,
        _ => &[],
    }
}

/// A table's parts, whose start tags a browser ignores outside a table.
#[rustfmt::skip]
pub(super) const TABLE_PARTS: [&str; 11] = [
    "caption", "col", "colgroup", "frame", "head", "tbody", "td", "tfoot", "th", "thead", "tr",
];

/// Elements that bound a scope (HTML's "has an element in scope"): an end tag whose element
/// is open outside one of them is ignored by the parser (`<div>a<applet></div>b` shows `ab`).
/// (MathML's token elements count inside a `<math>` only, SVG's `<title>`, `<desc>` and
/// `<foreignObject>` inside an `<svg>`: elsewhere they are unknown HTML elements.)
#[rustfmt::skip]
pub(super) const SCOPE_BOUNDARY: [&str; 9] = [
    "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template",
];

/// Elements of HTML's "special" category (with the scope boundaries): an end tag of an element
/// not among them (`</span>`, `</x-y>`) is ignored when one of them is open inside its element.
#[rustfmt::skip]
/// (As Chromium lists them: not `search` or `keygen`.)
pub(super) const SPECIAL: [&str; 70] = [
    "address", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote", "body",
    "br", "button", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt",
    "embed", "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "h1",
    "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "iframe", "img", "input",
    "li", "link", "listing", "main", "menu", "meta", "nav", "noembed", "noframes", "noscript",
    "ol", "p", "param", "plaintext", "pre", "script", "section", "select", "source", "style",
    "summary", "tbody", "textarea", "tfoot", "thead", "title", "tr", "track", "ul",
];

/// Formatting elements: closed by another element's end tag, a browser's parser keeps them in
/// its list of active formatting elements and opens a copy of each (its attributes, its style)
/// around the text that follows.
#[rustfmt::skip]
pub(super) const FORMATTING: [&str; 14] = [
    "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt",
    "u",
];

/// Elements inside an `<option>` whose text its label reads as the view does (in line, shown).
/// An option is drawn as its label, its descendants' text with no break and nothing hidden
/// (a `<br>`, a `<div>`, a `<style>`'s or an `<svg>`'s text: all in line): any other tag in one
/// is refused.
#[rustfmt::skip]
pub(super) const IN_LABEL: [&str; 31] = [
    "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt",
    "u", "span", "sub", "sup", "mark", "q", "abbr", "cite", "dfn", "kbd", "samp", "var", "time",
    "data", "ins", "del", "label", "wbr",
];

/// The open element (of `open`, outermost first) an end tag `name` closes, as a browser's
/// parser finds it: the innermost of that name, unless a scope boundary is open inside it
/// (or, for an element that is not special, any special element): then the tag is ignored.
pub(super) fn closed_by_end_tag<E: AsRef<str>>(open: &[E], name: &str) -> Option<usize> {
    let i = open.iter().rposition(|e| e.as_ref() == name)?;
    // (`</template>` closes the innermost template whatever is open inside it.)
    if name == "template" {
        return Some(i);
    }
    let inside = |at: usize, outer: &str| open[..at].iter().any(|e| e.as_ref() == outer);
    let scope = |at: usize, e: &E| {
        SCOPE_BOUNDARY.contains(&e.as_ref())
            || (matches!(e.as_ref(), "title" | "desc" | "foreignobject") && inside(at, "svg"))
            || (matches!(
                e.as_ref(),
                "mi" | "mo" | "mn" | "ms" | "mtext" | "annotation-xml"
            ) && inside(at, "math"))
            || (name == "li" && matches!(e.as_ref(), "ol" | "ul"))
            || (name == "p" && e.as_ref() == "button")
    };
    let special = SPECIAL.contains(&name)
        || SCOPE_BOUNDARY.contains(&name)
        || FORMATTING.contains(&name)
        || matches!(
            name,
            "svg" | "math" | "mi" | "mo" | "mn" | "ms" | "mtext" | "annotation-xml"
        );
    let blocked = open[i + 1..]
        .iter()
        .enumerate()
        .any(|(k, e)| scope(i + 1 + k, e) || (!special && SPECIAL.contains(&e.as_ref())));
    (!blocked).then_some(i)
}

/// An element's namespace, as the tree builder decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    Html,
    Svg,
    Math,
}

/// The namespace of an element `name` a start tag inserts under `parent` (its namespace and
/// name; none: at the top): `<svg>` and `<math>` start foreign content, and inside it every
/// element is foreign unless its parent is where foreign content holds HTML — SVG's
/// `<foreignObject>`, `<desc>` and `<title>`, MathML's token elements (but for `<mglyph>` and
/// `<malignmark>`). (Breakout tags have closed the foreign elements before: `elements.rs`.)
pub(super) fn inserted_in(parent: Option<(Space, &str)>, name: &str) -> Space {
    match name {
        "svg" => return Space::Svg,
        "math" => return Space::Math,
        _ => {}
    }
    match parent {
        None | Some((Space::Html, _)) => Space::Html,
        Some((Space::Svg, "foreignobject" | "desc" | "title")) => Space::Html,
        Some((Space::Math, "mi" | "mo" | "mn" | "ms" | "mtext"))
            if !matches!(name, "mglyph" | "malignmark") =>
        {
            Space::Html
        }
        Some((space, _)) => space,
    }
}

/// The namespace of the innermost of `open` (outermost first), and its name.
pub(super) fn current<E: AsRef<str>>(open: &[E]) -> Option<(Space, &str)> {
    open.iter().fold(None, |parent, e| {
        Some((inserted_in(parent, e.as_ref()), e.as_ref()))
    })
}
