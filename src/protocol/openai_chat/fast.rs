//! The fast path of chat chunks: the same structs serde fills, filled by the [`Skim`] reader
//! in place — every chunk of a streamed answer comes this way, so it is the hot path of the
//! proxy. Anything the reader is unsure of ([`Unsure`]: escapes it does not resolve, keys seen
//! twice, unexpected types) goes to serde_json instead, so both paths read the same.

use super::{ChoiceDelta, Chunk, ChunkChoice, CustomDelta, FunctionDelta, ToolCallDelta, Usage};
use crate::protocol::residual::structure_shaped;
use crate::protocol::skim::{Holes, Skim, Skimmed, Unsure};

/// [`crate::protocol::residual::Structural::is_structural_key`] for chat, as one `match`: the fast path asks it for every
/// member it skips, and a scan of the two lists costs ~5 % of a streamed answer's CPU. The
/// test `structural_keys_match_the_lists` holds it to `STRUCTURAL` and `COMMON_KEYS`.
pub(super) fn structural(key: &[u8]) -> bool {
    matches!(
        key,
        b"id"
            | b"object"
            | b"type"
            | b"role"
            | b"model"
            | b"status"
            | b"created"
            | b"created_at"
            | b"finish_reason"
            | b"system_fingerprint"
            | b"service_tier"
            | b"obfuscation"
    )
}

/// Fills `chunk` from a chunk or whole response read with [`Skim`], in place (the structs are
/// large enough that moving them shows in the profile); [`Unsure`] sends it to serde_json.
/// Returns whether a skipped value may carry text, and the strings the reading does not depend
/// on (the content text's marked) for the stream's template.
pub(super) fn skim_chunk<'a>(data: &'a [u8], chunk: &mut Chunk<'a>) -> Skimmed<(bool, Holes)> {
    let mut s = Skim::new(data);
    let mut seen = Seen::default();
    s.object(|s, key| match key {
        b"choices" => {
            seen.once(0)?;
            s.array(|s| {
                chunk.choices.push(ChunkChoice::default());
                match chunk.choices.last_mut() {
                    Some(choice) => skim_choice(s, choice),
                    None => Err(Unsure),
                }
            })
        }
        b"usage" => {
            seen.once(1)?;
            if !s.null() {
                chunk.usage = Some(skim_usage(s)?);
            }
            Ok(())
        }
        b"error" => Err(Unsure),
        _ => s.skip_unread(key, structural),
    })?;
    s.end()?;
    Ok((s.unread_text(), s.holes()))
}

fn skim_choice<'a>(s: &mut Skim<'a>, choice: &mut ChunkChoice<'a>) -> Skimmed<()> {
    let mut seen = Seen::default();
    s.object(|s, key| match key {
        b"index" => {
            seen.once(0)?;
            choice.index = s.u32()?;
            Ok(())
        }
        // `message` is an alias of `delta`: the two together are a duplicate field.
        b"delta" | b"message" => {
            seen.once(1)?;
            if !s.null() {
                skim_delta(s, choice.delta.insert(ChoiceDelta::default()))?;
            }
            Ok(())
        }
        b"finish_reason" => {
            seen.once(2)?;
            let start = s.value_start();
            choice.finish_reason = s.opt_str()?;
            // A reason that does not look like one is text for the fallback (serde's path).
            if choice.finish_reason.is_some() && !structure_shaped(s.since(start)) {
                return Err(Unsure);
            }
            Ok(())
        }
        _ => s.skip_unread(key, structural),
    })
}

fn skim_delta<'a>(s: &mut Skim<'a>, d: &mut ChoiceDelta<'a>) -> Skimmed<()> {
    let mut seen = Seen::default();
    s.object(|s, key| {
        let (bit, slot) = match key {
            b"content" => {
                seen.once(0)?;
                let start = s.value_start();
                d.content = s.opt_str()?;
                if d.content.is_some() {
                    s.mark_hole(start);
                }
                return Ok(());
            }
            b"refusal" => (1, &mut d.refusal),
            b"reasoning_content" => (2, &mut d.reasoning_content),
            b"reasoning" => (3, &mut d.reasoning),
            b"function_call" => {
                seen.once(5)?;
                if !s.null() {
                    skim_function(s, d.function_call.insert(FunctionDelta::default()))?;
                }
                return Ok(());
            }
            b"tool_calls" => {
                seen.once(4)?;
                if !s.null() {
                    let mut calls = Vec::new();
                    s.array(|s| {
                        calls.push(skim_tool_call(s)?);
                        Ok(())
                    })?;
                    d.tool_calls = Some(calls);
                }
                return Ok(());
            }
            _ => return s.skip_unread(key, structural),
        };
        seen.once(bit)?;
        *slot = s.opt_str()?;
        Ok(())
    })
}

fn skim_tool_call<'a>(s: &mut Skim<'a>) -> Skimmed<ToolCallDelta<'a>> {
    let mut call = ToolCallDelta::default();
    let mut seen = Seen::default();
    s.object(|s, key| match key {
        b"index" => {
            seen.once(0)?;
            call.index = if s.null() { None } else { Some(s.u32()?) };
            Ok(())
        }
        b"id" => {
            seen.once(1)?;
            call.id = s.opt_str()?;
            Ok(())
        }
        b"function" => {
            seen.once(2)?;
            if !s.null() {
                skim_function(s, call.function.insert(FunctionDelta::default()))?;
            }
            Ok(())
        }
        b"custom" => {
            seen.once(3)?;
            if !s.null() {
                let c = call.custom.insert(CustomDelta::default());
                let mut seen = Seen::default();
                s.object(|s, key| {
                    let (bit, slot) = match key {
                        b"name" => (0, &mut c.name),
                        b"input" => (1, &mut c.input),
                        _ => return s.skip_unread(key, structural),
                    };
                    seen.once(bit)?;
                    *slot = s.opt_str()?;
                    Ok(())
                })?;
            }
            Ok(())
        }
        _ => s.skip_unread(key, structural),
    })?;
    if call.function.is_some() && call.custom.is_some() {
        return Err(Unsure); // one of them would go unread
    }
    Ok(call)
}

fn skim_function<'a>(s: &mut Skim<'a>, f: &mut FunctionDelta<'a>) -> Skimmed<()> {
    let mut seen = Seen::default();
    s.object(|s, key| {
        let (bit, slot) = match key {
            b"name" => (0, &mut f.name),
            b"arguments" => (1, &mut f.arguments),
            _ => return s.skip_unread(key, structural),
        };
        seen.once(bit)?;
        *slot = s.opt_str()?;
        Ok(())
    })
}

fn skim_usage(s: &mut Skim<'_>) -> Skimmed<Usage> {
    let mut u = Usage::default();
    let mut seen = Seen::default();
    s.object(|s, key| {
        let (bit, slot) = match key {
            b"prompt_tokens" => (0, &mut u.prompt_tokens),
            b"completion_tokens" => (1, &mut u.completion_tokens),
            _ => return s.skip_unread(key, structural),
        };
        seen.once(bit)?;
        *slot = s.opt_u64()?;
        Ok(())
    })?;
    Ok(u)
}

/// Known keys seen in one object: serde rejects a known key that comes twice.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    fn once(&mut self, bit: u8) -> Skimmed<()> {
        if self.0 & (1 << bit) != 0 {
            return Err(Unsure);
        }
        self.0 |= 1 << bit;
        Ok(())
    }
}
