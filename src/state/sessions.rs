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
//! The state lives behind one trait, [`SessionStore`] (in process: [`LocalSessions`]; on the
//! state server shared by replicas: [`redis::RedisSessions`], so a session spread over
//! replicas is checked as one), which the request flow reaches from one place: the request
//! opens its [`SessionView`] once it is admitted (authenticated, its body read, its in-flight
//! permit taken), and every read and write goes through that view. Loading never makes an
//! entry: a session is made by the first write of an admitted request.
//!
//! Tenants are kept apart: each key has a quota of sessions (`state.max_sessions_per_key`,
//! [`MAX_SESSIONS_PER_KEY`] by default), and a
//! key at its quota evicts its own least recently used session. The total
//! (`state.max_sessions`, [`MAX_SESSIONS`] by default) is a memory bound; when it is reached, the session evicted is the least
//! recently used of the key that holds the most, so a key never loses a session to a key that
//! holds fewer.
//!
//! Memory is bounded: each session holds at most [`MAX_SESSION_BYTES`] of calls (the oldest
//! calls are forgotten first; a call's arguments longer than [`MAX_ARGS_BYTES`] are kept as
//! unreadable, so the checks that read them answer their `on_error`) and [`MAX_REMOVED`]
//! removed tool names. Forgotten calls stay counted exactly ([`CallTally`]): the session
//! checks (counts, repeats, anti-patterns, fields sent) decide the same however much history
//! is kept.

pub mod redis;

use super::{StoreError, StoreFuture};
use crate::policy::tools::{CallRecord, CallTally, ToolHistory};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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

/// What an admitted request adds to its session (a shared store appends it as JSON).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Change {
    /// Calls forwarded, in order.
    Called(Vec<CallRecord>),
    /// A tool removed from a `tools/list` answer.
    Removed(Removed),
}

/// Where sessions live. Every method is one step of one request; the in-process store's
/// futures are ready at once, a shared store's are one or two round trips.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// The session's state; an unknown session is empty, and nothing is made.
    fn load<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Snapshot>;
    /// Adds what a request did, atomically (two replicas writing one session at once both
    /// land); makes the session if it is new, within its key's quota.
    fn save<'a>(&'a self, key: &'a Key, change: Change) -> StoreFuture<'a, ()>;
    /// The client ended the session (DELETE).
    fn end<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, ()>;
}

/// One session's state, as kept (a shared store keeps it as JSON).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    calls: VecDeque<CallRecord>,
    bytes: usize,
    /// The calls forgotten past [`MAX_SESSION_BYTES`], counted.
    forgotten: CallTally,
    removed: Vec<Removed>,
    #[serde(skip)]
    last_used: u64,
}

impl State {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            history: ToolHistory {
                calls: self.calls.iter().cloned().collect(),
                turn_start: 0,
                forgotten: self.forgotten.clone(),
            },
            removed: self.removed.clone(),
        }
    }

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
    fn make_room(&mut self, key_id: Option<&'static str>, per_key: usize, total: usize) {
        let quota = match key_id {
            Some(_) => per_key,
            None => total,
        };
        let own = self.tenants.get(&key_id).map_or(0, |t| t.sessions.len());
        let evict_from = if own >= quota {
            Some(key_id)
        } else if self.held >= total {
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
#[derive(Debug)]
pub struct LocalSessions {
    inner: Mutex<Inner>,
    /// `state.max_sessions_per_key` and `state.max_sessions`.
    per_key: usize,
    total: usize,
}

impl Default for LocalSessions {
    fn default() -> Self {
        LocalSessions::new(MAX_SESSIONS_PER_KEY, MAX_SESSIONS)
    }
}

impl LocalSessions {
    pub fn new(per_key: usize, total: usize) -> LocalSessions {
        LocalSessions {
            inner: Mutex::new(Inner::default()),
            per_key,
            total,
        }
    }

    /// Sessions held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.held
    }
}

impl LocalSessions {
    fn load_now(&self, key: &Key) -> Snapshot {
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
        let snapshot = state.snapshot();
        tenant.by_use.insert(now, id);
        snapshot
    }

    fn save_now(&self, key: &Key, change: Change) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = inner.tick();
        let id = (key.route, key.session.clone());
        let known = inner
            .tenants
            .get(&key.key_id)
            .is_some_and(|t| t.sessions.contains_key(&id));
        if !known {
            inner.make_room(key.key_id, self.per_key, self.total);
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

    fn end_now(&self, key: &Key) {
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

impl SessionStore for LocalSessions {
    fn load<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Snapshot> {
        let snapshot = self.load_now(key);
        Box::pin(async move { Ok(snapshot) })
    }

    fn save<'a>(&'a self, key: &'a Key, change: Change) -> StoreFuture<'a, ()> {
        self.save_now(key, change);
        Box::pin(async { Ok(()) })
    }

    fn end<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, ()> {
        self.end_now(key);
        Box::pin(async { Ok(()) })
    }
}

/// Runs `fut` to its end now when it is ready at once (the in-process store's always are),
/// else on the runtime, detached: for writes made where a request cannot wait (a `tools/list`
/// answer being relayed).
fn detach(fut: impl Future<Output = ()> + Send + 'static) {
    let mut fut = Box::pin(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    if fut.as_mut().poll(&mut cx).is_pending() {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(fut);
        }
    }
}

/// Opens the view of `key`'s session for a request that was admitted: the one place the
/// request flow reaches the store. A store that cannot answer: an error, or with `fail_open`
/// an empty view (the session's checks then see this request only; counted by the caller).
pub async fn open(
    store: &Arc<dyn SessionStore>,
    key: Key,
    fail_open: bool,
) -> Result<SessionView, StoreError> {
    let Snapshot { history, removed } = match store.load(&key).await {
        Ok(snapshot) => snapshot,
        Err(_) if fail_open => Snapshot::default(),
        Err(e) => return Err(e),
    };
    Ok(SessionView {
        store: Some((Arc::clone(store), key)),
        fail_open,
        history,
        removed,
        added: 0,
    })
}

/// One request's view of its session: the calls before it (the checks' history) and the
/// removed tools; what the request adds is written back.
#[derive(Debug, Default)]
pub struct SessionView {
    store: Option<(Arc<dyn SessionStore>, Key)>,
    /// `state.on_error: fail_open`: a write the store refuses is let go.
    fail_open: bool,
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

    /// The request's calls are about to be forwarded: the session keeps them first, so the
    /// session's next request, on any replica, sees them. An error (under `fail_closed`): the
    /// request must not be forwarded.
    pub async fn commit(&mut self) -> Result<(), StoreError> {
        let Some((store, key)) = &self.store else {
            return Ok(());
        };
        let new = &self.history.calls[self.history.calls.len() - self.added..];
        if new.is_empty() {
            return Ok(());
        }
        match store.save(key, Change::Called(new.to_vec())).await {
            Ok(()) => {}
            Err(_) if self.fail_open => {}
            Err(e) => return Err(e),
        }
        self.added = 0;
        Ok(())
    }

    /// The client ended the session (its DELETE was answered with success). A store that
    /// cannot answer lets the session expire instead.
    pub async fn end(&self) {
        if let Some((store, key)) = &self.store {
            let _ = store.end(key).await;
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
        let (store, key, change) = (
            Arc::clone(store),
            key.clone(),
            Change::Removed(removed.clone()),
        );
        detach(async move {
            if let Err(e) = store.save(&key, change).await {
                tracing::warn!(error = %e, "a removed tool could not be written to the session store");
            }
        });
        self.removed.push(removed);
    }
}

#[cfg(test)]
mod tests;
