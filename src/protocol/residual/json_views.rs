//! JSON held in the conversation's strings (a tool result or arguments whose text is JSON,
//! or text with JSON escapes in it), read decoded as a model reads it: one more message per
//! such text, with its strings and keys, or its escapes resolved level after level.

use crate::policy::json_text::JsonTextDecoder;

/// How deep JSON held in strings held in JSON is unwrapped.
const MAX_JSON_IN_STRING: usize = 8;

/// JSON held in a string (a tool result or arguments whose text is itself JSON): its escapes
/// are text to the model (`{"status":"\u0066orbidden"}` reads `forbidden`), so every text of
/// the conversation that is JSON with an escape in it gets one more message: its strings and
/// object keys decoded, one per line, and the same again for strings that are JSON themselves.
/// A text without a backslash needs none: its strings and keys stand in it as they are.
/// These are the modelled texts read right, so it runs whatever `unknown_content` says (after
/// [`add_request_residuals`], whose strings it reads too).
pub fn add_json_views(conversation: &mut crate::delta::Conversation) {
    use crate::delta::{Message, Role};
    let mut views = Vec::new();
    for m in &conversation.messages {
        for t in m.read_strings() {
            let mut view = String::new();
            json_view(t, 0, &mut view);
            if !view.is_empty() {
                views.push(Message::text(Role::Other("decoded".into()), vec![view]));
            }
        }
    }
    conversation.messages.extend(views);
}

/// Appends to `out` the decoded strings and keys of `text` when it is JSON with an escape,
/// every literal in its order (a duplicated key's values included, as the model reads both).
pub(super) fn json_view(text: &str, depth: usize, out: &mut String) {
    let t = text.trim();
    if depth >= MAX_JSON_IN_STRING || memchr::memchr(b'\\', t.as_bytes()).is_none() {
        return;
    }
    if !t.starts_with(['{', '[', '"']) || serde_json::from_str::<serde::de::IgnoredAny>(t).is_err()
    {
        return escapes_view(t, depth, out);
    }
    // Valid JSON: outside string literals there is no quote, inside one a quote is escaped.
    let bytes = t.as_bytes();
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'"', &bytes[i..]) {
        let start = i + at;
        let mut end = start + 1;
        while let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[end..]) {
            end += at;
            if bytes[end] == b'\\' {
                end += 2;
            } else {
                break;
            }
        }
        let lit = t.get(start..=end).unwrap_or_default();
        i = end + 1;
        let Ok(s) = serde_json::from_str::<String>(lit) else {
            return;
        };
        if !s.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&s);
            json_view(&s, depth + 1, out);
        }
        if i >= bytes.len() {
            break;
        }
    }
}

/// A text with escapes that is not one JSON text (JSON after a prefix or with text after it,
/// cut short, JSON lines): read as the answers' side reads it (`policy/guard/escaped.rs`) —
/// every escape resolved wherever it stands, level after level while escapes are left (a
/// model reads `\u0020` as a space in any of them).
fn escapes_view(text: &str, depth: usize, out: &mut String) {
    let mut level = std::borrow::Cow::Borrowed(text);
    for _ in depth..MAX_JSON_IN_STRING {
        let mut decoder = JsonTextDecoder::anywhere();
        let mut next = decoder.decode(&level).into_owned();
        next.push_str(&decoder.finish());
        if next == *level {
            return;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&next);
        level = std::borrow::Cow::Owned(next);
    }
}
