//! Exact counts of the calls a bounded history no longer keeps (an MCP session's oldest calls,
//! forgotten past its byte bound): what the session checks need of them — calls per tool, the
//! last calls' names and the run of one tool at the end, the argument fields each tool was sent
//! with — so that those checks decide the same however much history is kept.
//!
//! The tally is bounded too, and where a bound cuts what it knows it answers an upper bound, so
//! that the checks that read it (counts with a maximum, repeats, anti-patterns, tools that
//! must not be called) fail closed: a name longer than [`MAX_NAME_BYTES`] is kept by its first
//! bytes and matches every name that starts with them; calls of tools past [`MAX_TOOLS`]
//! distinct names count as calls of any tool; argument fields past [`MAX_FIELDS`] (over every
//! tool) make `invariant_fields_preserved` answer its `on_error`. Only the last [`RECENT`]
//! names are kept for anti-patterns (a longer pattern is matched against those only).

use super::{parse_args, CallRecord};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Distinct tool names counted one by one.
pub const MAX_TOOLS: usize = 64;
/// A tool name (or an argument field) is kept by at most this many bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Names of the last calls kept, for anti-patterns that begin among the forgotten calls.
pub const RECENT: usize = 32;
/// Argument fields remembered, over every tool. With the bounds above a tally holds at most
/// about 28 KiB of names.
pub const MAX_FIELDS: usize = 128;

/// A tool name as kept: its first [`MAX_NAME_BYTES`] bytes, and whether it was longer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
struct Name {
    kept: String,
    cut: bool,
}

impl Name {
    fn of(name: &str) -> Name {
        let mut end = name.len().min(MAX_NAME_BYTES);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        Name {
            kept: name[..end].to_owned(),
            cut: end < name.len(),
        }
    }

    /// Whether `name` may be this one (a cut name: any name that starts with what was kept).
    fn may_be(&self, name: &str) -> bool {
        match self.cut {
            false => self.kept == name,
            true => name.len() > self.kept.len() && name.starts_with(&self.kept),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct ToolTally {
    calls: u64,
    /// The top-level argument fields its calls were sent with.
    fields: BTreeSet<String>,
    /// Some fields were not remembered (too many, or too long).
    fields_lost: bool,
    /// Some call's arguments could not be read.
    unreadable: bool,
}

/// The calls a history no longer keeps, counted (oldest first, in the order they were made).
/// Serialized for a session kept in a shared store (`state::sessions`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallTally {
    calls: u64,
    /// As a list of pairs: JSON's keys are strings, these are names with a flag.
    #[serde(with = "pairs")]
    per_tool: BTreeMap<Name, ToolTally>,
    /// Calls of tools past [`MAX_TOOLS`] names: each may be of any tool.
    untracked: u64,
    /// Fields remembered over every tool.
    fields: usize,
    /// The last calls' names, oldest first.
    recent: VecDeque<Name>,
    /// How many calls in a row, at the end, were of the last name.
    run: u64,
}

/// A map with structured keys, written as a list of pairs.
mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer, K: Serialize, V: Serialize>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<
        'de,
        D: Deserializer<'de>,
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
    >(
        d: D,
    ) -> Result<BTreeMap<K, V>, D::Error> {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

/// An empty tally, for histories that forget nothing.
pub static NOTHING: CallTally = CallTally {
    calls: 0,
    per_tool: BTreeMap::new(),
    untracked: 0,
    fields: 0,
    recent: VecDeque::new(),
    run: 0,
};

impl CallTally {
    /// Counts one more call, made after every call counted so far.
    pub fn add(&mut self, call: &CallRecord) {
        self.calls += 1;
        let name = Name::of(&call.name);
        if self.recent.back() == Some(&name) && !name.cut {
            self.run += 1;
        } else {
            self.run = 1;
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(name.clone());
        if !self.per_tool.contains_key(&name) && self.per_tool.len() >= MAX_TOOLS {
            self.untracked += 1;
            return;
        }
        let tool = self.per_tool.entry(name).or_default();
        tool.calls += 1;
        match parse_args(&call.args) {
            None => tool.unreadable = true,
            Some(args) => {
                for field in args.keys() {
                    if tool.fields.contains(field.as_str()) {
                        continue;
                    }
                    if field.len() > MAX_NAME_BYTES || self.fields >= MAX_FIELDS {
                        tool.fields_lost = true;
                    } else {
                        tool.fields.insert(field.clone());
                        self.fields += 1;
                    }
                }
            }
        }
    }

    /// Calls counted.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Calls of `tool` (`None`: of any tool); an upper bound where names were cut or not
    /// tracked.
    pub fn count(&self, tool: Option<&str>) -> u64 {
        let Some(tool) = tool else {
            return self.calls;
        };
        let tracked: u64 = self
            .per_tool
            .iter()
            .filter(|(n, _)| n.may_be(tool))
            .map(|(_, t)| t.calls)
            .sum();
        tracked + self.untracked
    }

    /// Whether a call of one of `names` may have been made.
    pub fn may_have_called(&self, names: &[String]) -> bool {
        names.iter().any(|n| self.count(Some(n)) > 0)
    }

    /// How many calls in a row of `name` end the tally (an upper bound for a cut name).
    pub fn run_of(&self, name: &str) -> u64 {
        match self.recent.back() {
            Some(last) if last.may_be(name) => match last.cut {
                // A cut name's run is not counted apart: every call may have been it.
                true => self.calls,
                false => self.run,
            },
            _ => 0,
        }
    }

    /// Whether the tally's last names end with `names` (each may be cut).
    pub fn ends_with(&self, names: &[String]) -> bool {
        names.len() <= self.recent.len()
            && self
                .recent
                .iter()
                .skip(self.recent.len() - names.len())
                .zip(names)
                .all(|(kept, n)| kept.may_be(n))
    }

    /// What `tool`'s forgotten calls tell `invariant_fields_preserved`: the fields of `fields`
    /// they were sent with, and whether something could not be known (unreadable arguments, or
    /// fields not remembered).
    pub fn fields_of(&self, tool: &str, fields: &[String]) -> (Vec<String>, bool) {
        let mut seen = Vec::new();
        let mut unknown = self.untracked > 0 && self.count(Some(tool)) > 0;
        for (name, t) in self.per_tool.iter().filter(|(n, _)| n.may_be(tool)) {
            unknown |= t.unreadable || t.fields_lost || name.cut;
            for f in fields {
                if t.fields.contains(f) && !seen.contains(f) {
                    seen.push(f.clone());
                }
            }
        }
        (seen, unknown)
    }
}

/// What a check's calls leave out: the forgotten calls of the turn and of the session.
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    pub turn: &'a CallTally,
    pub session: &'a CallTally,
}

impl Earlier<'static> {
    /// Nothing forgotten.
    pub const NONE: Earlier<'static> = Earlier {
        turn: &NOTHING,
        session: &NOTHING,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> CallRecord {
        CallRecord {
            name: name.into(),
            args: args.into(),
            ..CallRecord::default()
        }
    }

    #[test]
    fn counts_runs_and_recent_names_are_exact() {
        let mut t = CallTally::default();
        for _ in 0..1000 {
            t.add(&call("add", "{}"));
        }
        t.add(&call("mul", r#"{"a":1}"#));
        t.add(&call("mul", r#"{"b":1}"#));
        assert_eq!(
            (t.calls(), t.count(Some("add")), t.count(Some("mul"))),
            (1002, 1000, 2)
        );
        assert_eq!(t.count(Some("div")), 0);
        assert_eq!((t.run_of("mul"), t.run_of("add")), (2, 0));
        assert!(t.ends_with(&["add".into(), "mul".into(), "mul".into()]));
        assert!(!t.ends_with(&["mul".into(), "add".into()]));
        assert!(t.may_have_called(&["mul".into()]));
        let (seen, unknown) = t.fields_of("mul", &["a".into(), "c".into()]);
        assert_eq!((seen, unknown), (vec!["a".to_owned()], false));
        t.add(&call("mul", "not json"));
        assert!(
            t.fields_of("mul", &["a".into()]).1,
            "unreadable arguments are unknown"
        );
    }

    #[test]
    fn bounds_answer_upper_bounds() {
        let mut t = CallTally::default();
        let long = "t".repeat(MAX_NAME_BYTES + 10);
        t.add(&call(&long, "{}"));
        t.add(&call(&format!("{long}x"), "{}"));
        assert_eq!(t.count(Some(&long)), 2, "both may be it");
        assert_eq!(t.count(Some("t")), 0);
        assert_eq!(t.run_of(&long), 2);
        for i in 0..MAX_TOOLS + 5 {
            t.add(&call(&format!("tool{i}"), "{}"));
        }
        assert_eq!(
            t.count(Some("never")),
            6,
            "untracked calls may be of any tool"
        );
        assert_eq!(t.recent.len(), RECENT);
    }
}
