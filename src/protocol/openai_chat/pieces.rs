//! A Chat stream's tool calls as the readers assemble them from pieces over several chunks.

use super::Chunk;
use crate::protocol::DecodeError;

/// A tool call's `id` and `name` as the readers assemble them: openai-python's stream helper
/// joins every string of a call's deltas (`accumulate_delta`), openai-node keeps the last.
/// Each piece is checked where it stands (the last one read alone); an id that came in pieces
/// is checked joined as well ([`StreamDecoder::joined_values`]); a name that came in pieces
/// ends the answer — the readers would call different tools, and no check can be both.
#[derive(Default)]
pub(super) struct CallPieces {
    calls: Vec<CallSoFar>,
    /// The ids of the last frame that joined a piece to an earlier one.
    pub(super) joined: Vec<String>,
}

/// One tool call's pieces so far.
struct CallSoFar {
    /// (choice, index — `u32::MAX` for the legacy `function_call`).
    key: (u32, u32),
    named: bool,
    id: String,
    id_pieces: u8,
}

/// Tool calls one answer may make, bytes one call's id may hold and pieces it may come in: far
/// past any provider's (ids of ~30 characters, sent once), and each joined id is checked again
/// whole, so their product bounds that work per call.
const MAX_CALLS: usize = 4096;
const MAX_CALL_ID: usize = 256;
const MAX_ID_PIECES: u8 = 8;

impl CallPieces {
    pub(super) fn read(&mut self, chunk: &Chunk<'_>) -> Result<(), DecodeError> {
        for c in &chunk.choices {
            let Some(d) = &c.delta else { continue };
            let legacy = d
                .function_call
                .as_ref()
                .map(|f| (u32::MAX, None, f.name.as_deref()));
            let calls = d.tool_calls.iter().flatten().enumerate().map(|(i, call)| {
                let name = match (&call.function, &call.custom) {
                    (Some(f), _) => f.name.as_deref(),
                    (None, Some(custom)) => custom.name.as_deref(),
                    (None, None) => None,
                };
                (call.index.unwrap_or(i as u32), call.id.as_deref(), name)
            });
            for (index, id, name) in calls.chain(legacy) {
                self.piece((c.index, index), id, name)?;
            }
        }
        Ok(())
    }

    fn piece(
        &mut self,
        key: (u32, u32),
        id: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), DecodeError> {
        let (id, name) = (id.filter(|v| !v.is_empty()), name.filter(|v| !v.is_empty()));
        if id.is_none() && name.is_none() {
            return Ok(());
        }
        let at = match self.calls.iter().position(|c| c.key == key) {
            Some(at) => at,
            None if self.calls.len() < MAX_CALLS => {
                self.calls.push(CallSoFar {
                    key,
                    named: false,
                    id: String::new(),
                    id_pieces: 0,
                });
                self.calls.len() - 1
            }
            None => return Err(DecodeError("an answer with too many tool calls".into())),
        };
        let call = &mut self.calls[at];
        if name.is_some() {
            if call.named {
                return Err(DecodeError(
                    "a tool call whose name came in pieces (readers join them differently)".into(),
                ));
            }
            call.named = true;
        }
        if let Some(id) = id {
            let joined = !call.id.is_empty();
            call.id_pieces = call.id_pieces.saturating_add(1);
            if call.id.len() + id.len() > MAX_CALL_ID || call.id_pieces > MAX_ID_PIECES {
                return Err(DecodeError("a tool call id past its bound".into()));
            }
            call.id.push_str(id);
            if joined {
                self.joined.push(call.id.clone());
            }
        }
        Ok(())
    }
}
