//! Import cycles between the source files of `src/`: every `use` of `crate::`, `super::`,
//! `self::` or a child module, and every such path written inline, is an arrow from the file
//! it is written in to the file that defines the module it names. A set of files that reach one
//! another through these arrows is a cycle. Comments and `#[cfg(test)]` items are not read; a
//! module reaching into its own submodules is not counted (a parent owns its children; only
//! the children's arrows back up can close a loop).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn no_import_cycles_between_source_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&root);
    let cycles = cycles(&graph);
    for c in &cycles {
        eprintln!("cycle: {}", c.join(", "));
    }
    assert!(
        cycles.is_empty(),
        "import cycles between source files: {cycles:#?}"
    );
}

#[test]
fn the_reader_finds_a_planted_cycle_and_skips_comments_and_tests() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;"),
        ("a.rs", "use crate::b::X; // use crate::c::Y;\n"),
        (
            "b.rs",
            "/* use crate::c::Z; */\nfn f() { crate::a::g() }\n#[cfg(test)]\nmod tests { use crate::c::Z; }",
        ),
        ("c.rs", "use super::{a::{self, B}, b::C};"),
    ];
    let graph = graph_of(
        files
            .iter()
            .map(|(p, s)| (PathBuf::from(p), s.to_string()))
            .collect(),
    );
    assert_eq!(
        cycles(&graph),
        vec![vec!["a.rs".to_owned(), "b.rs".to_owned()]]
    );
    assert_eq!(
        graph["c.rs"],
        BTreeSet::from(["a.rs".into(), "b.rs".into()])
    );
}

/// File (relative to `src/`) → the files it imports from.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn graph(root: &Path) -> Graph {
    let mut files = Vec::new();
    collect(root, root, &mut files);
    graph_of(files)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.strip_prefix(root).unwrap().to_path_buf(), text));
        }
    }
}

fn graph_of(files: Vec<(PathBuf, String)>) -> Graph {
    // Module path ("a::b") → file; files only compiled for tests are left out.
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    for (path, _) in &files {
        let name = path.to_string_lossy().replace('\\', "/");
        if name == "main.rs" || name.starts_with("bin/") {
            continue;
        }
        modules.insert(module_of(&name), name);
    }
    let mut test_only = BTreeSet::new();
    let mut sources = BTreeMap::new();
    for (path, text) in &files {
        let name = path.to_string_lossy().replace('\\', "/");
        if !modules.values().any(|f| *f == name) {
            continue;
        }
        let module = module_of(&name);
        let (code, tests) = strip(text);
        for t in tests {
            test_only.insert(join(&module, &t));
        }
        sources.insert(name, (module, code));
    }
    modules.retain(|m, _| {
        !test_only
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    });
    let mut graph = Graph::new();
    for (module, file) in &modules {
        let code = &sources[file].1;
        let edges = graph.entry(file.clone()).or_default();
        for path in paths(code) {
            let Some(target) = resolve(module, &path, &modules) else {
                continue;
            };
            let descendant = target == *module
                || module.is_empty()
                || target.starts_with(&format!("{module}::"));
            if !descendant {
                edges.insert(modules[&target].clone());
            }
        }
    }
    graph
}

/// `a/b.rs`, `a/b/mod.rs` → `a::b`; `lib.rs` → the crate root, "".
fn module_of(file: &str) -> String {
    let stem = file.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" {
        String::new()
    } else {
        stem.replace('/', "::")
    }
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_owned()
    } else {
        format!("{a}::{b}")
    }
}

/// The code without comments, string contents and `#[cfg(test)]` items, and the names of the
/// `#[cfg(test)] mod x;` declarations (files compiled for tests only).
fn strip(text: &str) -> (String, Vec<String>) {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"'
            || (b[i] == b'r'
                && matches!(b.get(i + 1), Some(b'"' | b'#'))
                && !(i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')))
        {
            i = skip_string(b, i);
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    let mut code = String::with_capacity(out.len());
    let mut tests = Vec::new();
    let mut rest = out.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let end = item_end(item);
        let head = item[..end].trim();
        if let Some(name) = head
            .strip_prefix("pub ")
            .unwrap_or(head)
            .strip_prefix("mod ")
            .and_then(|m| m.strip_suffix(';'))
        {
            tests.push(name.trim().to_owned());
        }
        rest = &item[end..];
    }
    code.push_str(rest);
    (code, tests)
}

/// Past a string literal (plain or raw) starting at `i`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    if b[i] == b'r' {
        i += 1;
        let mut hashes = 0;
        while b[i] == b'#' {
            hashes += 1;
            i += 1;
        }
        if b[i] != b'"' {
            return i;
        }
        i += 1;
        while i < b.len() {
            if b[i] == b'"'
                && b[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|c| **c == b'#')
                    .count()
                    == hashes
            {
                return i + 1 + hashes;
            }
            i += 1;
        }
        return i;
    }
    i += 1;
    while i < b.len() && b[i] != b'"' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    i + 1
}

/// The length of the item at the start of `s`: up to its `;` or its closing brace.
fn item_end(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    s.len()
}

/// Every module path the code names: the leaves of each `use` tree, and inline paths that
/// start with `crate::`, `super::` or `self::`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let words: Vec<(usize, &str)> = word_starts(code);
    let mut past_use = 0;
    for (at, word) in &words {
        if *at < past_use {
            continue;
        }
        if *word == "use" {
            let tree = &code[at + 3..];
            let end = tree.find(';').unwrap_or(tree.len());
            expand(&tree[..end], &mut Vec::new(), &mut out);
            past_use = at + 3 + end;
        } else if matches!(*word, "crate" | "super" | "self")
            && code[at + word.len()..].starts_with("::")
        {
            let tail = &code[*at..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            out.push(
                tail[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            );
        }
    }
    out
}

/// Offsets and text of the identifiers of `code` (not preceded by `::`, `.` or an identifier).
fn word_starts(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let before = code[..start].trim_end();
            if !(before.ends_with("::") || before.ends_with('.')) {
                out.push((start, &code[start..i]));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The paths of a use tree (`a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e).
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        prefix.truncate(n);
    } else {
        let tree = tree.split(" as ").next().unwrap_or("").trim();
        if tree.is_empty() {
            return;
        }
        let mut path = prefix.clone();
        path.extend(
            tree.split("::")
                .map(|s| s.trim().to_owned())
                .filter(|s| s != "self"),
        );
        out.push(path);
    }
}

/// The module (one that has a file) that `path`, written in `module`, names: the longest
/// prefix of its absolute path that is a file's module.
fn resolve(module: &str, path: &[String], modules: &BTreeMap<String, String>) -> Option<String> {
    let mut abs: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            abs.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                abs.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A relative path: only a submodule of this one (else an external crate).
            if !modules.contains_key(&join(module, first)) {
                return None;
            }
        }
        None => return None,
    }
    abs.extend(rest.iter().map(String::as_str));
    (0..=abs.len())
        .rev()
        .map(|n| abs[..n].join("::"))
        .find(|m| modules.contains_key(m))
}

/// The strongly connected sets of more than one file, each sorted, in order.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for start in graph.keys() {
        if seen.contains(start) {
            continue;
        }
        let forward = reach(graph, start, false);
        let backward = reach(graph, start, true);
        let set: Vec<String> = forward.intersection(&backward).cloned().collect();
        seen.extend(set.iter().cloned());
        if set.len() > 1 {
            found.push(set);
        }
    }
    found.sort();
    found
}

fn reach(graph: &Graph, start: &str, reverse: bool) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([start.to_owned()]);
    let mut todo = vec![start.to_owned()];
    while let Some(f) = todo.pop() {
        let next: Vec<&String> = if reverse {
            graph
                .iter()
                .filter(|(_, to)| to.contains(&f))
                .map(|(k, _)| k)
                .collect()
        } else {
            graph.get(&f).into_iter().flatten().collect()
        };
        for n in next {
            if seen.insert(n.clone()) {
                todo.push(n.clone());
            }
        }
    }
    seen
}
