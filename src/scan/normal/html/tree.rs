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
pub(super) fn closed_by_end_tag<E: Node>(open: &[E], name: &str) -> Option<usize> {
    let i = open.iter().rposition(|e| e.name() == name)?;
    // (`</template>` closes the innermost template whatever is open inside it.)
    if name == "template" {
        return Some(i);
    }
    // (In foreign content the parser closes the innermost foreign element of the name, whatever
    // is inside it, as long as no HTML element is.)
    if open[i].space() != Space::Html && open[i + 1..].iter().all(|e| e.space() != Space::Html) {
        return Some(i);
    }
    let scope = |e: &E| {
        SCOPE_BOUNDARY.contains(&e.name()) && e.space() == Space::Html
            || (e.space() != Space::Html && holds(e.space(), e.name(), true) != Holds::Foreign)
            || (name == "li" && matches!(e.name(), "ol" | "ul") && e.space() == Space::Html)
            || (name == "p" && e.name() == "button" && e.space() == Space::Html)
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
        .any(|e| scope(e) || (!special && e.space() == Space::Html && SPECIAL.contains(&e.name())));
    (!blocked).then_some(i)
}

/// An element's namespace, as the tree builder decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    Html,
    Svg,
    Math,
}

/// What a foreign element lets through as HTML (HTML's integration points): the tree builder
/// reads a start tag inside one by HTML's rules, not foreign content's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holds {
    /// Nothing: its start tags make elements of its own namespace (breakout tags aside).
    Foreign,
    /// Every start tag (an HTML integration point: SVG's `<foreignObject>`, `<desc>` and
    /// `<title>`, a MathML `<annotation-xml>` whose `encoding` is `text/html` or
    /// `application/xhtml+xml`). HTML elements themselves, too.
    Html,
    /// Every start tag but `<mglyph>` and `<malignmark>` (a MathML text integration point:
    /// `<mi>`, `<mo>`, `<mn>`, `<ms>`, `<mtext>`).
    MathText,
    /// `<svg>` alone (any other MathML `<annotation-xml>`).
    Svg,
}

/// An open element as the tree builder places what starts inside it.
pub(super) trait Node {
    fn name(&self) -> &str;
    fn space(&self) -> Space;
}

impl Node for (&str, Space) {
    fn name(&self) -> &str {
        self.0
    }
    fn space(&self) -> Space {
        self.1
    }
}

/// What an element `name` of namespace `space` lets through as HTML (`html_encoding`: its
/// start tag's `encoding` names an HTML type).
pub(super) fn holds(space: Space, name: &str, html_encoding: bool) -> Holds {
    match (space, name) {
        (Space::Html, _) | (Space::Svg, "foreignobject" | "desc" | "title") => Holds::Html,
        (Space::Math, "mi" | "mo" | "mn" | "ms" | "mtext") => Holds::MathText,
        (Space::Math, "annotation-xml") if html_encoding => Holds::Html,
        (Space::Math, "annotation-xml") => Holds::Svg,
        _ => Holds::Foreign,
    }
}

/// The namespace of an element `name` a start tag inserts under `parent` (its namespace and
/// what it holds; none: at the top). By HTML's rules `<svg>` and `<math>` start foreign content
/// and every other name is HTML; inside foreign content every element takes its parent's
/// namespace — `<math><svg>` is a MathML element, `<svg><math>` an SVG one — unless the parent
/// lets it through as HTML ([`Holds`]). (Breakout tags have closed the foreign elements before:
/// `elements.rs`.)
pub(super) fn inserted_in(parent: Option<(Space, Holds)>, name: &str) -> Space {
    let by_html_rules = match parent {
        None | Some((_, Holds::Html)) => true,
        Some((_, Holds::MathText)) => !matches!(name, "mglyph" | "malignmark"),
        Some((_, Holds::Svg)) => name == "svg",
        Some((_, Holds::Foreign)) => false,
    };
    match (by_html_rules, parent) {
        (true, _) | (false, None) => match name {
            "svg" => Space::Svg,
            "math" => Space::Math,
            _ => Space::Html,
        },
        (false, Some((space, _))) => space,
    }
}

/// Whether a breakout tag (or `</p>`, `</br>`) read with `parent` the current node pops
/// foreign elements: the current node is foreign and reads no start tag by HTML's rules.
pub(super) fn breaks_out_of(parent: Option<(Space, Holds)>) -> bool {
    matches!(parent, Some((_, Holds::Foreign | Holds::Svg)))
}
