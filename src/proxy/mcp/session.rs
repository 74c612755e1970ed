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
//! The state lives behind one trait, [`SessionStore`] (in process: [`LocalSessions`]; a
//! shared backend for fleets is issue 50's), which the request flow reaches from one place:
//! the request opens its [`SessionView`] once it is admitted (authenticated, its body read,
//! its in-flight permit taken), and every read and write goes through that view. Loading
//! never makes an entry: a session is made by the first write of an admitted request.
//!
//! Tenants are kept apart: each key has a quota of sessions ([`MAX_SESSIONS_PER_KEY`]), and a
//! key at its quota evicts its own least recently used session. The total
//! ([`MAX_SESSIONS`]) is a memory bound; when it is reached, the session evicted is the least
//! recently used of the key that holds the most, so a key never loses a session to a key that
//! holds fewer.
//!
//! Memory is bounded: each session holds at most [`MAX_SESSION_BYTES`] of calls (the oldest
//! calls are forgotten first; a call's arguments longer than [`MAX_ARGS_BYTES`] are kept as
//! unreadable, so the checks that read them answer their `on_error`) and [`MAX_REMOVED`]
//! removed tool names. Forgotten calls stay counted exactly ([`CallTally`]): the session
//! checks (counts, repeats, anti-patterns, fields sent) decide the same however much history
//! is kept.

use crate::policy::tools::{CallRecord, CallTally, ToolHistory};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Sessions held at once, over every route and key.
pub const MAX_SESSIONS: usize = 4096;
/// Sessions one client key holds at once (without keys, one tenant holds all
/// [`MAX_SESSIONS`]).
pub const MAX_SESSIONS_PER_KEY: usize = 1024;
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

/// A tool removed from a session's `tools/list`: its name (or its first bytes), and the
/// validator that removed it.
#[derive(Debug, Clone)]
pub struct Removed {
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

/// A session's state as a request starts.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Its forwarded calls (the latest kept, the older ones counted).
    pub history: ToolHistory,
    pub removed: Vec<Removed>,
}

/// What an admitted request adds to its session.
#[derive(Debug, Clone)]
pub enum Change {
    /// Calls forwarded, in order.
    Called(Vec<CallRecord>),
    /// A tool removed from a `tools/list` answer.
    Removed(Removed),
}

/// Where sessions live. Every method is one step of one request: a backend shared by
/// replicas implements the same three.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// The session's state; an unknown session is empty, and nothing is made.
    fn load(&self, key: &Key) -> Snapshot;
    /// Adds what a request did; makes the session if it is new, within its key's quota.
    fn save(&self, key: &Key, change: Change);
    /// The client ended the session (DELETE).
    fn end(&self, key: &Key);
}

#[derive(Debug, Default)]
struct State {
    calls: VecDeque<CallRecord>,
    bytes: usize,
    /// The calls forgotten past [`MAX_SESSION_BYTES`], counted.
    forgotten: CallTally,
    removed: Vec<Removed>,
    last_used: u64,
}

impl State {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Called(new) => {
                for mut call in new {
                    call.message = self.calls.back().map_or(0, |c| c.message + 1);
                    self.bytes += call.name.len() + call.args.len();
                    self.calls.push_back(call);
                }
                while self.bytes > MAX_SESSION_BYTES {
                    let Some(old) = self.calls.pop_front() else {
                        break;
                    };
                    self.bytes -= old.name.len() + old.args.len();
                    self.forgotten.add(&old);
                }
            }
            Change::Removed(removed) => {
                if self.removed.iter().any(|r| r.name == removed.name) {
                    return;
                }
                if self.removed.len() >= MAX_REMOVED {
                    self.removed.remove(0);
                }
                self.removed.push(removed);
            }
        }
    }
}

/// A session of one key: its route and `Mcp-Session-Id`.
type SessionId = (&'static str, Option<Box<str>>);

/// One key's sessions, and their order of use (oldest first).
#[derive(Debug, Default)]
struct Tenant {
    sessions: HashMap<SessionId, State>,
    by_use: BTreeMap<u64, SessionId>,
}

impl Tenant {
    fn evict_least_recently_used(&mut self) {
        if let Some((_, id)) = self.by_use.pop_first() {
            self.sessions.remove(&id);
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    tenants: HashMap<Option<&'static str>, Tenant>,
    /// Sessions held over every tenant.
    held: usize,
    clock: u64,
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Room for one more session of `key_id`: its own least recently used goes at its quota;
    /// at the total, the least recently used of the key that holds the most.
    fn make_room(&mut self, key_id: Option<&'static str>) {
        let quota = match key_id {
            Some(_) => MAX_SESSIONS_PER_KEY,
            None => MAX_SESSIONS,
        };
        let own = self.tenants.get(&key_id).map_or(0, |t| t.sessions.len());
        let evict_from = if own >= quota {
            Some(key_id)
        } else if self.held >= MAX_SESSIONS {
            self.tenants
                .iter()
                .max_by_key(|(k, t)| (t.sessions.len(), **k == key_id))
                .map(|(k, _)| *k)
        } else {
            None
        };
        let Some(from) = evict_from else {
            return;
        };
        if let Some(t) = self.tenants.get_mut(&from) {
            let before = t.sessions.len();
            t.evict_least_recently_used();
            self.held -= before - t.sessions.len();
            if t.sessions.is_empty() {
                self.tenants.remove(&from);
            }
        }
    }
}

/// Every MCP route's sessions, in this process (one store per gateway; it outlives reloads).
#[derive(Debug, Default)]
pub struct LocalSessions {
    inner: Mutex<Inner>,
}

impl LocalSessions {
    /// Sessions held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.held
    }
}

impl SessionStore for LocalSessions {
    fn load(&self, key: &Key) -> Snapshot {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = inner.tick();
        let Some(tenant) = inner.tenants.get_mut(&key.key_id) else {
            return Snapshot::default();
        };
        let id = (key.route, key.session.clone());
        let Some(state) = tenant.sessions.get_mut(&id) else {
            return Snapshot::default();
        };
        tenant.by_use.remove(&state.last_used);
        state.last_used = now;
        let snapshot = Snapshot {
            history: ToolHistory {
                calls: state.calls.iter().cloned().collect(),
                turn_start: 0,
                forgotten: state.forgotten.clone(),
            },
            removed: state.removed.clone(),
        };
        tenant.by_use.insert(now, id);
        snapshot
    }

    fn save(&self, key: &Key, change: Change) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = inner.tick();
        let id = (key.route, key.session.clone());
        let known = inner
            .tenants
            .get(&key.key_id)
            .is_some_and(|t| t.sessions.contains_key(&id));
        if !known {
            inner.make_room(key.key_id);
            inner.held += 1;
        }
        let tenant = inner.tenants.entry(key.key_id).or_default();
        let state = tenant.sessions.entry(id.clone()).or_default();
        if known {
            tenant.by_use.remove(&state.last_used);
        }
        state.last_used = now;
        state.apply(change);
        tenant.by_use.insert(now, id);
    }

    fn end(&self, key: &Key) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tenant) = inner.tenants.get_mut(&key.key_id) else {
            return;
        };
        let Some(state) = tenant.sessions.remove(&(key.route, key.session.clone())) else {
            return;
        };
        tenant.by_use.remove(&state.last_used);
        let empty = tenant.sessions.is_empty();
        inner.held -= 1;
        if empty {
            inner.tenants.remove(&key.key_id);
        }
    }
}

/// Opens the view of `key`'s session for a request that was admitted: the one place the
/// request flow reaches the store.
pub fn open(store: &Arc<dyn SessionStore>, key: Key) -> SessionView {
    let Snapshot { history, removed } = store.load(&key);
    SessionView {
        store: Some((Arc::clone(store), key)),
        history,
        removed,
        added: 0,
    }
}

/// One request's view of its session: the calls before it (the checks' history) and the
/// removed tools; what the request adds is written back.
#[derive(Debug, Default)]
pub struct SessionView {
    store: Option<(Arc<dyn SessionStore>, Key)>,
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
        store.save(key, Change::Called(new.to_vec()));
        self.added = 0;
    }

    /// The client ended the session (its DELETE was answered with success).
    pub fn end(&self) {
        if let Some((store, key)) = &self.store {
            store.end(key);
        }
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
        store.save(key, Change::Removed(removed.clone()));
        self.removed.push(removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(session: Option<&str>) -> Key {
        key_of("k", session)
    }

    fn key_of(key_id: &'static str, session: Option<&str>) -> Key {
        Key {
            key_id: Some(key_id),
            route: "r",
            session: session.map(Into::into),
        }
    }

    /// The store as the gateway holds it, and the view a request opens.
    struct Store(Arc<dyn SessionStore>, Arc<LocalSessions>);

    impl Store {
        fn new() -> Store {
            let local = Arc::new(LocalSessions::default());
            Store(local.clone(), local)
        }

        fn view(&self, key: Key) -> SessionView {
            open(&self.0, key)
        }

        fn end(&self, key: &Key) {
            self.0.end(key)
        }

        fn held(&self) -> usize {
            self.1.held()
        }
    }

    #[test]
    fn calls_are_kept_per_session_and_bounded() {
        let store = Store::new();
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
    fn a_key_at_its_quota_evicts_its_own_least_recently_used() {
        let store = Store::new();
        let mut other = store.view(key_of("other", Some("b")));
        other.called("add", "{}");
        other.commit();
        for i in 0..MAX_SESSIONS_PER_KEY + 10 {
            let mut v = store.view(key(Some(&i.to_string())));
            v.called("add", "{}");
            v.commit();
            if i == 100 {
                // Used again later: the oldest by use are evicted, not by creation.
                let _ = store.view(key(Some("5")));
            }
        }
        assert_eq!(store.held(), MAX_SESSIONS_PER_KEY + 1);
        assert_eq!(store.view(key(Some("5"))).history().calls.len(), 1);
        assert!(store.view(key(Some("0"))).history().calls.is_empty());
        let b = store.view(key_of("other", Some("b")));
        assert_eq!(
            b.history().calls.len(),
            1,
            "another key's session is untouched"
        );
    }

    #[test]
    fn at_the_total_the_key_holding_most_loses_a_session() {
        let store = Store::new();
        let keys: Vec<&'static str> = (0..MAX_SESSIONS / MAX_SESSIONS_PER_KEY)
            .map(|k| &*Box::leak(format!("key{k}").into_boxed_str()))
            .collect();
        // Every key but the last at its quota; the last holds one session.
        for (k, id) in keys.iter().enumerate() {
            let n = match k + 1 == keys.len() {
                true => MAX_SESSIONS_PER_KEY - 1,
                false => MAX_SESSIONS_PER_KEY,
            };
            for i in 0..n {
                let mut v = store.view(key_of(id, Some(&i.to_string())));
                v.called("add", "{}");
                v.commit();
            }
        }
        let small = "small";
        let mut v = store.view(key_of(small, Some("s")));
        v.called("add", "{}");
        v.commit();
        assert_eq!(store.held(), MAX_SESSIONS);
        // Another session of the small key: a key holding the most loses its oldest.
        let mut v = store.view(key_of(small, Some("t")));
        v.called("add", "{}");
        v.commit();
        assert_eq!(store.held(), MAX_SESSIONS);
        let kept =
            |k: &'static str, s: &str| !store.view(key_of(k, Some(s))).history().calls.is_empty();
        assert!(kept(small, "s") && kept(small, "t"));
        let lost: Vec<_> = keys.iter().filter(|k| !kept(k, "0")).collect();
        assert_eq!(lost.len(), 1, "one full key lost its oldest: {lost:?}");
        assert_ne!(Some(lost[0]), keys.last(), "not the key holding fewer");
    }

    #[test]
    fn loading_makes_no_session_and_forgotten_calls_stay_counted() {
        let store = Store::new();
        for i in 0..10 {
            let _ = store.view(key(Some(&i.to_string())));
        }
        assert_eq!(store.held(), 0, "a load makes nothing");
        let mut v = store.view(key(Some("long")));
        let args = format!(r#"{{"pad":"{}"}}"#, "x".repeat(100));
        for _ in 0..5000 {
            v.called("add", &args);
        }
        v.commit();
        let h = store.view(key(Some("long"))).history();
        assert!(h.calls.len() < 5000, "the history is bounded");
        assert_eq!(h.calls.len() as u64 + h.forgotten.count(Some("add")), 5000);
        assert_eq!(h.calls.len() as u64 + h.forgotten.calls(), 5000);
    }

    #[test]
    fn removed_tools_are_remembered_without_a_session_too() {
        let store = Store::new();
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
