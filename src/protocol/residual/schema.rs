//! The fallback by position, for protocols whose answers have a schema guardwire knows
//! (A2A): a string may be structure only where the schema puts an id, a kind or a state, and is
//! there only when it has the shape of an identifier ([`crate::protocol::identifier`]; then the
//! caller runs the secret and PII patterns over it, [`Place::Identifier`]); anything else at
//! such a place is text. Everywhere else — free-form data, metadata, objects of unknown fields —
//! every string is text, and so is every object key the schema does not name.
//!
//! [`super::Structural::keys`] exempt a key's string value wherever it appears, which suits
//! the model providers' flat answers; a schema of nested messages, parts and free-form data
//! needs the position: `{"data": {"id": "…"}}` is the agent's data, not a part's id.

use super::{step, Unwalkable, MAX_DEPTH};
use crate::protocol::identifier::literal_is_identifier;
use std::ops::Range;

/// What the value at a position is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Structure: a string (or a list of strings) that skips the text checks when it has the
    /// shape of an identifier. An object under it is read as free-form data.
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
    /// A member named in camelCase is also named by its snake_case spelling (`contextId`,
    /// `context_id`), as protobuf's JSON reader and pydantic's `populate_by_name` accept.
    pub snake_case: bool,
}

/// An object's members by key.
pub type Node = &'static [(&'static str, Slot)];

impl Schema {
    /// The slot of `key` in an object of node `node`; `None`: not in the schema.
    fn member(&self, node: u16, key: &[u8]) -> Option<Slot> {
        self.nodes
            .get(usize::from(node))?
            .iter()
            .find(|(k, _)| k.as_bytes() == key || (self.snake_case && is_snake_of(k, key)))
            .map(|&(_, s)| s)
    }
}

/// True when `key` is `camel`'s snake_case spelling (`contextId` → `context_id`), and differs
/// from it.
pub fn is_snake_of(camel: &str, key: &[u8]) -> bool {
    let mut k = key.iter();
    let mut differs = false;
    for c in camel.bytes() {
        if c.is_ascii_uppercase() {
            differs = true;
            if k.next() != Some(&b'_') || k.next() != Some(&c.to_ascii_lowercase()) {
                return false;
            }
        } else if k.next() != Some(&c) {
            return false;
        }
    }
    differs && k.next().is_none()
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

/// What a string the walk reports is to the checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Text at a place the schema names (a name, a description, free-form data of a known
    /// field).
    Text,
    /// Text under a member the schema does not name (or that member's key): what
    /// `unknown_content` decides about.
    Unknown,
    /// A value at a place of structure without an identifier's shape: text, which the
    /// checks read whatever `unknown_content` says (the schema names the field).
    Structure,
    /// An identifier-shaped value at a place of structure: read by the secret and PII
    /// patterns only.
    Identifier,
}

/// A string the fallback reads: its literal (quotes included), the id of its path, and what
/// it is to the checks.
pub struct Left {
    pub literal: Range<usize>,
    pub path: u32,
    pub place: Place,
}

fn text_place(known: bool) -> Place {
    if known {
        Place::Text
    } else {
        Place::Unknown
    }
}

/// Appends to `out` every string literal of `data` (values and keys) that is not a field name
/// of the schema and not inside one of `known` (sorted by start: what the decoder read), with
/// its [`Place`].
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
                            place: text_place(unknown_from.is_none() && !unknown_member),
                        });
                        if unknown_member && unknown_from.is_none() {
                            unknown_from = Some(depth);
                        }
                    }
                } else {
                    // At a place of structure: skipped by the text checks only in the shape
                    // of an identifier (an empty string is nothing to read).
                    let exempt = value_slot(&stack) == Slot::Exempt;
                    let place = if !exempt {
                        text_place(unknown_from.is_none())
                    } else if literal.len() <= 2 {
                        continue;
                    } else if literal_is_identifier(&data[literal.clone()]) {
                        Place::Identifier
                    } else {
                        Place::Structure
                    };
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
                            place,
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
