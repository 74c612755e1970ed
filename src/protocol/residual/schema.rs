//! The fallback by position, for protocols whose answers have a schema guardwire knows
//! (A2A): a string is structure only where the schema puts an id, a kind or a state; everywhere
//! else — free-form data, metadata, objects of unknown fields — every string is text, and so is
//! every object key the schema does not name.
//!
//! [`super::Structural::keys`] exempt a key's string value wherever it appears, which suits
//! the model providers' flat answers; a schema of nested messages, parts and free-form data
//! needs the position: `{"data": {"id": "…"}}` is the agent's data, not a part's id.

use super::{step, Unwalkable, MAX_DEPTH};
use std::ops::Range;

/// What the value at a position is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Structure: a string (or a list of strings) the checks skip. An object under it is read
    /// as free-form data.
    Exempt,
    /// Text, or free-form data: every string is read, and every key of every object inside.
    Read,
    /// An object (or a list of objects) of the schema's node with this index.
    Node(u16),
}

/// The positions of a protocol's JSON: nodes of named members; a member an object's node does
/// not name is unknown — its key is read as text and its value as free-form data.
pub struct Schema {
    /// The node of the top value.
    pub top: u16,
    pub nodes: &'static [Node],
}

/// An object's members by key.
pub type Node = &'static [(&'static str, Slot)];

impl Schema {
    /// The slot of `key` in an object of node `node`; `None`: not in the schema.
    fn member(&self, node: u16, key: &[u8]) -> Option<Slot> {
        self.nodes
            .get(usize::from(node))?
            .iter()
            .find(|(k, _)| k.as_bytes() == key)
            .map(|&(_, s)| s)
    }
}

#[derive(Clone, Copy)]
struct Level {
    object: bool,
    path: u32,
    /// An object: `Node(n)`, or `Read` for free-form; an array: its elements' slot.
    slot: Slot,
    expect_key: bool,
    member: Option<(usize, usize)>,
    member_slot: Slot,
}

/// A string the fallback reads: its literal (quotes included), the id of its path, and whether
/// the schema names its place (false: an unknown member's key or anything under one).
pub struct Left {
    pub literal: Range<usize>,
    pub path: u32,
    pub known: bool,
}

/// Appends to `out` every string literal of `data` (values and keys) the schema does not
/// exempt and that is not inside one of `known` (sorted by start: what the decoder read).
pub fn schema_strings(
    data: &[u8],
    schema: &Schema,
    known: &[Range<usize>],
    out: &mut Vec<Left>,
) -> Result<(), Unwalkable> {
    let mut stack: Vec<Level> = Vec::with_capacity(8);
    // Places under an unknown member: the depth at which the first one started.
    let mut unknown_from: Option<usize> = None;
    let mut known_at = 0;
    let mut i = 0;
    let value_slot = |stack: &[Level]| match stack.last() {
        None => Slot::Node(schema.top),
        Some(l) if l.object => l.member_slot,
        Some(l) => l.slot,
    };
    let value_path = |stack: &[Level]| match stack.last() {
        None => 0,
        Some(l) => match l.member {
            Some((a, b)) if l.object => step(l.path, &data[a..b]),
            _ => step(l.path, b"[]"),
        },
    };
    while i < data.len() {
        match data[i] {
            b'"' => {
                let start = i;
                i = super::string_end(data, i)?;
                let literal = start..i.min(data.len());
                let depth = stack.len();
                let in_key = stack.last().is_some_and(|l| l.object && l.expect_key);
                if in_key {
                    let l = stack.last_mut().ok_or(Unwalkable)?;
                    let key = &data[literal.start + 1..literal.end - 1];
                    let named = match l.slot {
                        Slot::Node(n) => schema.member(n, key),
                        Slot::Read | Slot::Exempt => None,
                    };
                    l.expect_key = false;
                    l.member = Some((literal.start + 1, literal.end - 1));
                    l.member_slot = named.unwrap_or(Slot::Read);
                    if named.is_none() {
                        // A key of free-form data, or an unknown member of a known object.
                        let unknown_member = matches!(l.slot, Slot::Node(_));
                        out.push(Left {
                            literal,
                            path: l.path,
                            known: unknown_from.is_none() && !unknown_member,
                        });
                        if unknown_member && unknown_from.is_none() {
                            unknown_from = Some(depth);
                        }
                    }
                } else if value_slot(&stack) != Slot::Exempt {
                    while known.get(known_at).is_some_and(|k| k.end <= literal.start) {
                        known_at += 1;
                    }
                    let inside = known
                        .get(known_at)
                        .is_some_and(|k| k.start <= literal.start && literal.end <= k.end);
                    if !inside {
                        out.push(Left {
                            literal,
                            path: value_path(&stack),
                            known: unknown_from.is_none(),
                        });
                    }
                }
            }
            c @ (b'{' | b'[') => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Unwalkable);
                }
                let slot = match value_slot(&stack) {
                    Slot::Exempt if c == b'{' => Slot::Read,
                    s => s,
                };
                let path = value_path(&stack);
                stack.push(Level {
                    object: c == b'{',
                    path,
                    slot,
                    expect_key: c == b'{',
                    member: None,
                    member_slot: Slot::Read,
                });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop().ok_or(Unwalkable)?;
                if unknown_from.is_some_and(|d| stack.len() < d) {
                    unknown_from = None;
                }
                i += 1;
            }
            b',' => {
                if let Some(l) = stack.last_mut() {
                    if l.object {
                        l.expect_key = true;
                        l.member = None;
                        l.member_slot = Slot::Read;
                        if unknown_from == Some(stack.len()) {
                            unknown_from = None;
                        }
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(Unwalkable)
    }
}
