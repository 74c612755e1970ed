//! The docs are kept true to the code: every config key guardwire accepts and every check type
//! of the catalog is documented under `docs/`, and every key and type the docs' tables name
//! exists. Any `docs/*.md` file is read, so pages may be added or split freely.
//!
//! The config keys come from the code itself: a probe key at each level of the config makes
//! serde list the keys it knows there (`deny_unknown_fields`), level by level.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use guardwire::config::Config;
use guardwire::policy::catalog::CATALOG;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const PROBE: &str = "zz_docs_probe";

/// Every `docs/*.md` file, by name.
fn docs() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "no docs/*.md");
    pages
}

/// The keys serde knows where `probe` sits in `doc`, if it is a struct there.
fn keys_at(doc: &Value) -> Option<Vec<String>> {
    let err = serde_norway::from_str::<Config>(&doc.to_string()).err()?;
    let msg = err.to_string();
    let rest = msg
        .split(&format!("unknown field `{PROBE}`, expected"))
        .nth(1)?;
    Some(
        rest.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

/// `value` placed at `path` (each step a key, and how the key holds its value).
fn nest(path: &[(String, Shape)], value: Value) -> Value {
    path.iter().rev().fold(value, |inner, (key, shape)| {
        let held = match shape {
            Shape::Struct => inner,
            Shape::List => json!([inner]),
            Shape::Map => json!({ "some-name": inner }),
        };
        json!({ key.as_str(): held })
    })
}

#[derive(Clone, Copy)]
enum Shape {
    Struct,
    List,
    Map,
}

/// Every key path the config accepts, as dotted names without list and map steps
/// (`judges.retry.max_retries`, `routes.path_prefix`), with whether it is a leaf.
fn config_keys() -> Vec<(String, bool)> {
    fn walk(path: &mut Vec<(String, Shape)>, keys: &[String], out: &mut Vec<(String, bool)>) {
        for key in keys {
            let mut found = None;
            for shape in [Shape::Struct, Shape::List, Shape::Map] {
                path.push((key.clone(), shape));
                let probe = nest(path, json!({ PROBE: 1 }));
                path.pop();
                if let Some(inner) = keys_at(&probe) {
                    found = Some((shape, inner));
                    break;
                }
            }
            path.push((key.clone(), Shape::Struct));
            let name = path
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(".");
            path.pop();
            match found {
                Some((shape, inner)) => {
                    out.push((name, false));
                    path.push((key.clone(), shape));
                    walk(path, &inner, out);
                    path.pop();
                }
                None => out.push((name, true)),
            }
        }
    }
    let top = keys_at(&json!({ PROBE: 1 })).expect("the config refuses unknown keys");
    let mut out = Vec::new();
    walk(&mut Vec::new(), &top, &mut out);
    out
}

/// The `code spans` of `text`, outside fenced blocks: a span opens with a run of backticks and
/// closes with the next run as long (so ```` ```json ```` is one span).
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('`') {
            let run = rest[open..].len() - rest[open..].trim_start_matches('`').len();
            let fence = "`".repeat(run);
            let inner = &rest[open + run..];
            // The next run of exactly `run` backticks.
            let close = inner.char_indices().map(|(i, _)| i).find(|&i| {
                inner[i..].starts_with(&fence)
                    && !inner[i + run..].starts_with('`')
                    && !inner[..i].ends_with('`')
            });
            let Some(close) = close else { break };
            spans.push(&inner[..close]);
            rest = &inner[close + run..];
        }
    }
    spans
}

/// The words of every code span in `text`: `{input_per_mtok, output_per_mtok}` gives both.
fn code_words(text: &str) -> BTreeSet<&str> {
    code_spans(text)
        .into_iter()
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The body rows of every table in `pages` whose header row is `header`: (page, first cell,
/// second cell, the whole row).
fn table_rows<'a>(
    pages: &'a [(String, String)],
    header: &str,
) -> Vec<(&'a str, &'a str, &'a str, &'a str)> {
    let mut rows = Vec::new();
    for (page, text) in pages {
        let mut in_table = false;
        for line in text.lines() {
            if line.starts_with('|') && in_table {
                if !line.starts_with("|---") {
                    let mut cells = line.split(" | ");
                    let first = cells.next().unwrap_or_default();
                    let second = cells.next().unwrap_or_default();
                    rows.push((page.as_str(), first, second, line));
                }
            } else {
                in_table = line.replace(' ', "") == header.replace(' ', "");
            }
        }
    }
    rows
}

/// A documented key as a dotted path: `judges[]` is `judges`, `exec.<name>` is `exec`.
fn key_path(documented: &str) -> String {
    documented
        .split('.')
        .filter(|step| !step.starts_with('<'))
        .map(|step| step.trim_end_matches("[]"))
        .collect::<Vec<_>>()
        .join(".")
}

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let pages = docs();
    let keys = config_keys();
    assert!(
        keys.iter().any(|(k, _)| k == "judges.retry.max_retries"),
        "the probe did not reach nested keys: {keys:?}"
    );
    let rows: Vec<_> = table_rows(&pages, "| key | default | meaning |")
        .into_iter()
        .map(|(page, first, _, row)| {
            let named: Vec<String> = code_spans(first).into_iter().map(key_path).collect();
            (page, named, code_words(row))
        })
        .collect();
    assert!(rows.len() > 40, "no configuration table in docs/: {rows:?}");

    // Every leaf key the code accepts: a row names it, or names a key above it and mentions
    // each step below (`judges[]`: … `retry` (`max_retries` 2, …)).
    let mut undocumented = Vec::new();
    for (key, _) in keys.iter().filter(|(_, leaf)| *leaf) {
        let steps: Vec<&str> = key.split('.').collect();
        let documented = rows.iter().any(|(_, named, words)| {
            named.iter().any(|n| {
                let above: Vec<&str> = n.split('.').collect();
                steps.starts_with(&above) && steps[above.len()..].iter().all(|s| words.contains(s))
            })
        });
        if !documented {
            undocumented.push(key.as_str());
        }
    }
    assert!(
        undocumented.is_empty(),
        "config keys missing from the configuration tables in docs/: {undocumented:?}"
    );

    // Every key a row names is one the code accepts.
    let known: BTreeSet<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    let unknown: Vec<_> = rows
        .iter()
        .flat_map(|(page, named, _)| named.iter().map(move |n| (page, n)))
        .filter(|(_, n)| !known.contains(n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/ name config keys the code does not accept: {unknown:?}"
    );
}

#[test]
fn every_catalog_type_is_documented_and_every_documented_type_exists() {
    let pages = docs();
    let all = pages
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let words = code_words(&all);
    let names: BTreeSet<&str> = CATALOG
        .iter()
        .flat_map(|e| std::iter::once(&e.name).chain(e.aliases.iter()))
        .copied()
        .collect();
    let missing: Vec<_> = names.iter().filter(|n| !words.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "catalog types and aliases docs/ never name: {missing:?}"
    );

    // The check tables' type and alias columns name catalog types only.
    let mut rows = Vec::new();
    for header in [
        "| type | aliases | params | when checked | modes |",
        "| type | aliases | params | what is judged |",
    ] {
        rows.extend(table_rows(&pages, header));
    }
    assert!(rows.len() > 40, "no check tables in docs/: {rows:?}");
    let mut unknown = Vec::new();
    for (page, first, second, _) in &rows {
        for cell in [first, second] {
            // A row that describes rather than names (*an `exec:` handler's name*) is skipped.
            if !cell.trim_start_matches('|').trim_start().starts_with('`') {
                continue;
            }
            for named in code_spans(cell) {
                if !names.contains(named) {
                    unknown.push((page, named));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "docs/ check tables name types the catalog does not have: {unknown:?}"
    );
}

#[test]
fn the_readme_stays_a_front_door() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md is {lines} lines; detail belongs in docs/"
    );
    for page in ["configuration.md", "packs.md", "testing.md"] {
        assert!(
            readme.contains(&format!("docs/{page}")),
            "README.md does not link docs/{page}"
        );
    }
}

#[test]
fn the_type_surface_table_has_a_row_per_catalog_type() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/packs.md"))
        .unwrap();
    let section = text
        .split("\n## Types and surfaces")
        .nth(1)
        .expect("docs/packs.md has no \"## Types and surfaces\" section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let header = section
        .lines()
        .find(|l| l.starts_with('|'))
        .expect("no table under \"## Types and surfaces\"");
    assert!(
        header.starts_with("| type"),
        "the table's first column is not the type: {header}"
    );
    let pages = [("packs.md".to_owned(), section.to_owned())];
    let rows = table_rows(&pages, header);

    // Each row: the canonical name, then exactly its aliases, and a cell per surface.
    let mut documented = BTreeSet::new();
    let mut wrong = Vec::new();
    for (_, first, _, row) in &rows {
        let cells = row.trim().trim_matches('|').split(" | ").count();
        let named = code_spans(first);
        let Some((&name, aliases)) = named.split_first() else {
            wrong.push(format!("a row names no type: {row}"));
            continue;
        };
        if cells != 4 {
            wrong.push(format!("`{name}`: {cells} cells, not 4"));
        }
        if !documented.insert(name) {
            wrong.push(format!("`{name}`: two rows"));
        }
        match CATALOG.iter().find(|e| e.name == name) {
            None => wrong.push(format!("`{name}`: not a canonical catalog name")),
            Some(e) => {
                let want: BTreeSet<&str> = e.aliases.iter().copied().collect();
                let got: BTreeSet<&str> = aliases.iter().copied().collect();
                if want != got || aliases.len() != got.len() {
                    wrong.push(format!(
                        "`{name}`: aliases {aliases:?}, the catalog's {:?}",
                        e.aliases
                    ));
                }
            }
        }
    }
    let catalog: BTreeSet<&str> = CATALOG.iter().map(|e| e.name).collect();
    let missing: Vec<_> = catalog.difference(&documented).collect();
    assert!(
        wrong.is_empty() && missing.is_empty(),
        "docs/packs.md, \"Types and surfaces\": {wrong:?}; catalog types without a row: {missing:?}"
    );
}
