//! What guardwire keeps of an MCP session between its HTTP requests: the `tools/call`s it
//! forwarded (so the packs' session tool checks — `tools_not_called`, counts, anti-patterns,
//! repeats, workflows, `tool_args_excluded_session`, … — see the whole session, not one call)
//! and the tools it removed from the session's `tools/list` answers (a call naming one is
//! refused; `poisoned_tools: remove`).
//!
//! A session is keyed by the client's guardwire key, the route and the `Mcp-Session-Id` the
//! client sends: the id is the client's to choose, so one client cannot reach another key's
//! state with it. Requests without a session id (the stateless servers, the 2026-07-28
//! envelope) share one entry per key and route, which holds removed tools only: they have no
//! session whose calls could be counted.
//!
//! Memory is bounded: at most [`MAX_SESSIONS`] entries (the least recently used is evicted),
//! each holding at most [`MAX_SESSION_BYTES`] of calls (the oldest calls are forgotten first; a
//! call's arguments longer than [`MAX_ARGS_BYTES`] are kept as unreadable, so the checks that
//! read them answer their `on_error`) and [`MAX_REMOVED`] removed tool names.

use crate::policy::tools::{CallRecord, ToolHistory};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Sessions held at once, over every route and key.
pub const MAX_SESSIONS: usize = 4096;
/// The calls of one session, names and arguments, in bytes.
pub const MAX_SESSION_BYTES: usize = 32 * 1024;
/// One call's arguments kept readable, in bytes.
pub const MAX_ARGS_BYTES: usize = 4096;
/// Removed tool names remembered per session.
pub const MAX_REMOVED: usize = 256;
/// A removed tool's name is remembered by at most this many bytes (a call whose name starts
/// with a longer one's prefix is refused).
const MAX_NAME_BYTES: usize = 256;
/// The longest `Mcp-Session-Id` accepted.
pub const MAX_SESSION_ID_BYTES: usize = 1024;

/// Arguments too long to keep: not JSON, so the checks reading them cannot pass on a guess.
const UNREADABLE_ARGS: &str = "\u{0}arguments too long to keep";

/// Which session: the client's key, the route, the client's `Mcp-Session-Id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub key_id: Option<&'static str>,
    pub route: &'static str,
    pub session: Option<Box<str>>,
}

#[derive(Debug, Default)]
struct State {
    calls: VecDeque<CallRecord>,
    bytes: usize,
    /// (name or its first bytes, truncated, the validator that removed it)
    removed: Vec<Removed>,
    last_used: u64,
}

#[derive(Debug, Clone)]
struct Removed {
    name: String,
    truncated: bool,
    validator: String,
}

impl Removed {
    fn matches(&self, name: &str) -> bool {
        match self.truncated {
            true => name.as_bytes().starts_with(self.name.as_bytes()),
            false => self.name == name,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Key, State>,
    clock: u64,
}

/// Every MCP route's sessions (one store per gateway; it outlives reloads).
#[derive(Debug, Default)]
pub struct Sessions {
    inner: Mutex<Inner>,
}

impl Sessions {
    fn with<R>(&self, key: &Key, f: impl FnOnce(&mut State) -> R) -> R {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        if !inner.map.contains_key(key) && inner.map.len() >= MAX_SESSIONS {
            let oldest = inner
                .map
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.map.remove(&k);
            }
        }
        let state = inner.map.entry(key.clone()).or_default();
        state.last_used = now;
        f(state)
    }

    /// The session's state as a request starts.
    pub fn view(self: &Arc<Self>, key: Key) -> SessionView {
        let (calls, removed) = self.with(&key, |s| {
            (s.calls.iter().cloned().collect(), s.removed.clone())
        });
        SessionView {
            store: Some((Arc::clone(self), key)),
            history: ToolHistory {
                calls,
                turn_start: 0,
            },
            removed,
            added: 0,
        }
    }

    /// The client ended the session (DELETE).
    pub fn end(&self, key: &Key) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.map.remove(key);
    }

    /// Sessions held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.map.len()
    }
}

/// One request's view of its session: the calls before it (the checks' history) and the
/// removed tools; what the request adds is written back.
#[derive(Debug, Default)]
pub struct SessionView {
    store: Option<(Arc<Sessions>, Key)>,
    history: ToolHistory,
    removed: Vec<Removed>,
    /// Calls of this request, at the end of `history`, not yet written back.
    added: usize,
}

impl SessionView {
    /// The calls the checks see: the whole session is one turn (MCP has no user turns).
    pub fn history(&self) -> ToolHistory {
        self.history.clone()
    }

    fn has_session(&self) -> bool {
        matches!(&self.store, Some((_, k)) if k.session.is_some())
    }

    /// The validator that removed `name` from a `tools/list` of this session, if one did.
    pub fn removed_by(&self, name: &str) -> Option<&str> {
        self.removed
            .iter()
            .find(|r| r.matches(name))
            .map(|r| r.validator.as_str())
    }

    /// A `tools/call` passed its checks (`arguments`: JSON text): later calls of the same
    /// request see it; [`SessionView::commit`] keeps it for the session once forwarded.
    pub fn called(&mut self, name: &str, arguments: &str) {
        if !self.has_session() {
            return;
        }
        let args = match arguments.len() > MAX_ARGS_BYTES {
            true => UNREADABLE_ARGS.to_owned(),
            false => arguments.to_owned(),
        };
        self.history.calls.push(CallRecord {
            name: name.to_owned(),
            args,
            result: None,
            result_is_error: false,
            message: self.history.calls.len(),
        });
        self.added += 1;
    }

    /// The request's calls were forwarded: the session keeps them.
    pub fn commit(&mut self) {
        let Some((store, key)) = &self.store else {
            return;
        };
        let new = &self.history.calls[self.history.calls.len() - self.added..];
        if new.is_empty() {
            return;
        }
        store.with(key, |s| {
            for call in new {
                let mut call = call.clone();
                call.message = s.calls.back().map_or(0, |c| c.message + 1);
                s.bytes += call.name.len() + call.args.len();
                s.calls.push_back(call);
            }
            while s.bytes > MAX_SESSION_BYTES {
                let Some(old) = s.calls.pop_front() else {
                    break;
                };
                s.bytes -= old.name.len() + old.args.len();
            }
        });
        self.added = 0;
    }

    /// A `tools/list` answer lost `name` to `validator`: calls of it are refused from now on.
    pub fn tool_removed(&mut self, name: &str, validator: &str) {
        let Some((store, key)) = &self.store else {
            return;
        };
        let mut cut = name.len().min(MAX_NAME_BYTES);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let removed = Removed {
            name: name[..cut].to_owned(),
            truncated: cut < name.len(),
            validator: validator.to_owned(),
        };
        store.with(key, |s| {
            if s.removed.iter().any(|r| r.name == removed.name) {
                return;
            }
            if s.removed.len() >= MAX_REMOVED {
                s.removed.remove(0);
            }
            s.removed.push(removed.clone());
        });
        self.removed.push(removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(session: Option<&str>) -> Key {
        Key {
            key_id: Some("k"),
            route: "r",
            session: session.map(Into::into),
        }
    }

    #[test]
    fn calls_are_kept_per_session_and_bounded() {
        let store = Arc::new(Sessions::default());
        let mut v = store.view(key(Some("a")));
        v.called("add", "{}");
        v.called("add", "{}");
        assert_eq!(v.history().calls.len(), 2, "later calls of one POST see it");
        v.commit();
        assert_eq!(store.view(key(Some("a"))).history().calls.len(), 2);
        assert!(store.view(key(Some("b"))).history().calls.is_empty());
        let other_key = Key {
            key_id: Some("other"),
            ..key(Some("a"))
        };
        assert!(store.view(other_key).history().calls.is_empty());
        // Without a session nothing is counted.
        let mut v = store.view(key(None));
        v.called("add", "{}");
        v.commit();
        assert!(store.view(key(None)).history().calls.is_empty());
        // Long arguments are unreadable; the oldest calls go past the byte bound.
        let mut v = store.view(key(Some("a")));
        for _ in 0..100 {
            v.called("echo", &"x".repeat(MAX_ARGS_BYTES + 1));
            v.called("echo", &format!("\"{}\"", "y".repeat(1000)));
        }
        v.commit();
        let h = store.view(key(Some("a"))).history();
        let bytes: usize = h.calls.iter().map(|c| c.name.len() + c.args.len()).sum();
        assert!(bytes <= MAX_SESSION_BYTES, "{bytes}");
        assert!(h.calls.iter().any(|c| c.args == UNREADABLE_ARGS));
        assert!(h.calls.iter().all(|c| c.args.len() <= MAX_ARGS_BYTES));
        store.end(&key(Some("a")));
        assert!(store.view(key(Some("a"))).history().calls.is_empty());
    }

    #[test]
    fn sessions_are_capped_least_recently_used_first() {
        let store = Arc::new(Sessions::default());
        for i in 0..MAX_SESSIONS + 10 {
            let mut v = store.view(key(Some(&i.to_string())));
            v.called("add", "{}");
            v.commit();
            if i == 5 {
                // Touched again later: the oldest by use are evicted, not by creation.
                continue;
            }
            if i == 100 {
                let _ = store.view(key(Some("5")));
            }
        }
        assert_eq!(store.held(), MAX_SESSIONS);
        assert_eq!(store.view(key(Some("5"))).history().calls.len(), 1);
        assert!(store.view(key(Some("0"))).history().calls.is_empty());
    }

    #[test]
    fn removed_tools_are_remembered_without_a_session_too() {
        let store = Arc::new(Sessions::default());
        let mut v = store.view(key(None));
        v.tool_removed("weather", "no-injection");
        assert_eq!(v.removed_by("weather"), Some("no-injection"));
        let v = store.view(key(None));
        assert_eq!(v.removed_by("weather"), Some("no-injection"));
        assert_eq!(v.removed_by("add"), None);
        assert_eq!(store.view(key(Some("s"))).removed_by("weather"), None);
        let long = "t".repeat(1000);
        let mut v = store.view(key(Some("s")));
        v.tool_removed(&long, "x");
        assert_eq!(store.view(key(Some("s"))).removed_by(&long), Some("x"));
        for i in 0..MAX_REMOVED + 1 {
            v.tool_removed(&format!("tool{i}"), "x");
        }
        let v = store.view(key(Some("s")));
        assert_eq!(v.removed_by("tool0"), None, "the oldest name went");
        assert_eq!(v.removed_by(&format!("tool{MAX_REMOVED}")), Some("x"));
    }
}
