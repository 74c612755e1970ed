//! What is kept of a session between its turns, for the packs' session-level evals
//! (`on_session_complete`, `sample_sessions`) and for `cost_budget` (validators and evals read
//! the session's spend): the spend summed over its turns, how many turns the evals recorded,
//! its last turn (what the session evals read — clients resend the conversation with every
//! turn, so the last turn holds it all), and when it ends.
//!
//! A session ends when the client says so (the `evals.session_end_header` on an LLM route's
//! request, an MCP `DELETE`), or `evals.session_idle_ms` after its last turn. Ending *claims*
//! the session: it is taken out of the store atomically, so its session evals run exactly once
//! whichever replica recorded its turns and whichever replica notices the end (each replica
//! looks for ended sessions every second).
//!
//! Bounded like the MCP sessions: a key holds at most `state.max_sessions_per_key` open
//! sessions and the store `state.max_sessions` (in process); past its quota a key's least
//! recently used session is ended early (its evals run on what it had), never dropped unseen.
//! A last turn larger than [`MAX_LAST_TURN_BYTES`] is not kept (in process, neither is one
//! past [`LOCAL_MAX_BYTES`] of last turns in all); its session evals report an error rather
//! than judge an earlier turn.

pub mod redis;

use super::{StoreError, StoreFuture};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The largest last turn kept (its JSON).
pub const MAX_LAST_TURN_BYTES: usize = 1 << 20;
/// The last turns one process keeps in all (in-process state; a Redis server bounds its own
/// memory).
pub const LOCAL_MAX_BYTES: usize = 64 << 20;

/// Which session: the route, the client's key, and the session id (the session header, an
/// MCP session id, an A2A context, or the conversation's opening).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SessionRef {
    pub route: String,
    pub key_id: Option<String>,
    pub session: String,
}

/// Spend summed over turns. A sum is `None` once a turn that reached the provider reported
/// (or was estimated) without it: a total that misses a turn is not the session's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spent {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub micro_usd: Option<u64>,
}

impl Spent {
    /// Nothing spent yet.
    pub const ZERO: Spent = Spent {
        input_tokens: Some(0),
        output_tokens: Some(0),
        micro_usd: Some(0),
    };

    /// This and `turn` together.
    pub fn plus(self, turn: Spent) -> Spent {
        let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        Spent {
            input_tokens: sum(self.input_tokens, turn.input_tokens),
            output_tokens: sum(self.output_tokens, turn.output_tokens),
            micro_usd: sum(self.micro_usd, turn.micro_usd),
        }
    }
}

/// What a record does to the session's last turn.
#[derive(Debug, Clone, Copy)]
pub enum Last<'a> {
    /// An eval turn: this JSON becomes the last turn.
    Kept(&'a str),
    /// An eval turn too large to keep: the session evals will report so.
    TooLarge,
    /// Spend only (a `cost_budget` validator's): no eval turn, the last one stays.
    Unchanged,
}

/// A session taken out of the store: it ended, and its session evals are to run now.
#[derive(Debug, Clone)]
pub struct Ended {
    pub session: SessionRef,
    pub spent: Spent,
    pub turns: u64,
    /// Its last turn as recorded (JSON), `None` when it was too large to keep.
    pub last: Option<String>,
}

/// Where the sessions of the session-level evals live. Every method is one atomic step (one
/// round trip on a shared store).
pub trait EvalSessions: Send + Sync {
    /// Adds a turn to the session (made if new): its spend, what becomes of the session's
    /// last turn, and the session's new end, `idle_ms` from now. Returns the session's spend
    /// with this turn.
    fn record<'a>(
        &'a self,
        session: &'a SessionRef,
        spent: Spent,
        last: Last<'a>,
        idle_ms: u64,
    ) -> StoreFuture<'a, Spent>;
    /// The session's spend so far ([`Spent::ZERO`] for a session not open).
    fn spent<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Spent>;
    /// Claims up to `max` sessions whose end has passed.
    fn claim_due(&self, max: usize) -> StoreFuture<'_, Vec<Ended>>;
    /// Claims the session now (its client ended it); `None` when it is unknown or another
    /// replica claimed it first.
    fn claim<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Option<Ended>>;
}

/// Milliseconds since the Unix epoch: a shared store's ends must mean the same on every
/// replica.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Entry {
    spent: Spent,
    turns: u64,
    last: Option<String>,
    /// When it ends (ms since the epoch).
    ends_at: u64,
    /// When it last had a turn, for the quotas' least recently used.
    used_at: u64,
}

/// The sessions of one process, and the bytes of their last turns.
pub struct LocalEvalSessions {
    entries: Mutex<(HashMap<SessionRef, Entry>, usize)>,
    max_per_key: usize,
    max_total: usize,
    max_bytes: usize,
}

impl LocalEvalSessions {
    /// At most `max_per_key` open sessions per key and `max_total` in all (ended ones waiting
    /// to be claimed: a quarter more), and `max_bytes` of last turns: past it a last turn is
    /// not kept (its session evals report so).
    pub fn new(max_per_key: usize, max_total: usize, max_bytes: usize) -> LocalEvalSessions {
        LocalEvalSessions {
            entries: Mutex::new((HashMap::new(), 0)),
            max_per_key,
            max_total,
            max_bytes,
        }
    }

    fn take(
        (entries, bytes): &mut (HashMap<SessionRef, Entry>, usize),
        session: &SessionRef,
    ) -> Option<Ended> {
        let e = entries.remove(session)?;
        *bytes -= e.last.as_ref().map_or(0, String::len);
        Some(Ended {
            session: session.clone(),
            spent: e.spent,
            turns: e.turns,
            last: e.last,
        })
    }
}

/// A bound and a quarter more (at least one more): room for ended sessions waiting for the
/// sweep.
fn with_a_quarter(n: usize) -> usize {
    n.saturating_add((n / 4).max(1))
}

/// A new session of `key` needs room: the least recently used open session of that key (at
/// its quota), or of the key that holds the most (at the total), ends now.
fn make_room(
    entries: &mut HashMap<SessionRef, Entry>,
    key: &Option<String>,
    max_per_key: usize,
    max_total: usize,
    now: u64,
) {
    let open = |e: &Entry| e.ends_at > now;
    let of_key = entries
        .iter()
        .filter(|(s, e)| &s.key_id == key && open(e))
        .count();
    let victim_key = if of_key >= max_per_key {
        Some(key.clone())
    } else if entries.values().filter(|e| open(e)).count() >= max_total {
        let mut counts: HashMap<&Option<String>, usize> = HashMap::new();
        for (s, e) in entries.iter() {
            if open(e) {
                *counts.entry(&s.key_id).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(k, _)| k.clone())
    } else {
        None
    };
    if let Some(victim_key) = victim_key {
        if let Some(e) = entries
            .iter_mut()
            .filter(|(s, e)| s.key_id == victim_key && open(e))
            .min_by_key(|(_, e)| e.used_at)
            .map(|(_, e)| e)
        {
            e.ends_at = now;
        }
    }
}

/// Room for a last turn of `need` bytes for `session`: while it does not fit, the key holding
/// the most bytes of last turns — when that is another key, holding more than `session`'s
/// would — loses its least recently used ones (their session evals then report that the
/// last turn was not kept). One tenant filling the store cannot crowd out another's.
fn make_byte_room(
    entries: &mut HashMap<SessionRef, Entry>,
    bytes: &mut usize,
    session: &SessionRef,
    need: usize,
    max_bytes: usize,
) {
    let len = |e: &Entry| e.last.as_ref().map_or(0, String::len);
    // (The session's own last turn is replaced.)
    let own = entries.get(session).map_or(0, len);
    let fits = |bytes: usize| bytes.saturating_sub(own).saturating_add(need) <= max_bytes;
    if fits(*bytes) {
        return;
    }
    let mut per_key: HashMap<&Option<String>, usize> = HashMap::new();
    for (s, e) in entries.iter() {
        *per_key.entry(&s.key_id).or_default() += len(e);
    }
    let mine = per_key
        .get(&session.key_id)
        .copied()
        .unwrap_or(0)
        .saturating_sub(own)
        .saturating_add(need);
    let Some((heaviest, held)) = per_key
        .into_iter()
        .filter(|(k, _)| **k != session.key_id)
        .max_by_key(|(_, n)| *n)
        .map(|(k, n)| (k.clone(), n))
    else {
        return;
    };
    if held <= mine {
        return;
    }
    let mut theirs: Vec<(u64, &mut Entry)> = entries
        .iter_mut()
        .filter(|(s, e)| s.key_id == heaviest && e.last.is_some())
        .map(|(_, e)| (e.used_at, e))
        .collect();
    theirs.sort_by_key(|(used_at, _)| *used_at);
    let mut left = held;
    for (_, e) in theirs {
        if fits(*bytes) || left <= mine {
            break;
        }
        let dropped = e.last.take().map_or(0, |l| l.len());
        *bytes -= dropped;
        left -= dropped;
    }
}

impl EvalSessions for LocalEvalSessions {
    fn record<'a>(
        &'a self,
        session: &'a SessionRef,
        spent: Spent,
        last: Last<'a>,
        idle_ms: u64,
    ) -> StoreFuture<'a, Spent> {
        let now = now_ms();
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, bytes) = &mut *guard;
        if !entries.contains_key(session) {
            // Ended sessions not claimed yet count too, so a burst of new sessions cannot grow
            // the store past its bounds before the next sweep — a key's own (its quota and a
            // quarter more), and the total's, which refuses only the key that holds the most:
            // one key's backlog never refuses another key's sessions.
            let mut counts: HashMap<&Option<String>, usize> = HashMap::new();
            for s in entries.keys() {
                *counts.entry(&s.key_id).or_default() += 1;
            }
            let of_key = counts.get(&session.key_id).copied().unwrap_or(0);
            let heaviest = counts.values().copied().max().unwrap_or(0);
            let over_key = of_key >= with_a_quarter(self.max_per_key);
            let over_total = entries.len() >= with_a_quarter(self.max_total) && of_key >= heaviest;
            if over_key || over_total {
                return Box::pin(std::future::ready(Err(StoreError::Unreachable(
                    "the key's eval sessions are at their bound (state.max_sessions_per_key, state.max_sessions); ended ones wait to be claimed".into(),
                ))));
            }
            make_room(
                entries,
                &session.key_id,
                self.max_per_key,
                self.max_total,
                now,
            );
        }
        // The store's bytes are shared fairly: a last turn that does not fit takes room from
        // the key holding the most (its least recently used last turns), never from a key
        // holding less than this one would.
        if let Last::Kept(l) = &last {
            make_byte_room(entries, bytes, session, l.len(), self.max_bytes);
        }
        let e = entries.entry(session.clone()).or_insert(Entry {
            spent: Spent::ZERO,
            turns: 0,
            last: None,
            ends_at: 0,
            used_at: 0,
        });
        e.spent = e.spent.plus(spent);
        let last = match last {
            Last::Kept(l) => Some(Some(l)),
            Last::TooLarge => Some(None),
            Last::Unchanged => None,
        };
        if let Some(last) = last {
            e.turns += 1;
            *bytes -= e.last.take().map_or(0, |l| l.len());
            let fits = last.is_some_and(|l| bytes.saturating_add(l.len()) <= self.max_bytes);
            e.last = last.filter(|_| fits).map(str::to_owned);
            *bytes += e.last.as_ref().map_or(0, String::len);
        }
        e.ends_at = now.saturating_add(idle_ms);
        e.used_at = now;
        let total = e.spent;
        Box::pin(std::future::ready(Ok(total)))
    }

    fn spent<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Spent> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let spent = entries.0.get(session).map_or(Spent::ZERO, |e| e.spent);
        Box::pin(std::future::ready(Ok(spent)))
    }

    fn claim_due(&self, max: usize) -> StoreFuture<'_, Vec<Ended>> {
        let now = now_ms();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let due: Vec<SessionRef> = entries
            .0
            .iter()
            .filter(|(_, e)| e.ends_at <= now)
            .map(|(s, _)| s.clone())
            .take(max)
            .collect();
        let ended = due
            .iter()
            .filter_map(|s| Self::take(&mut entries, s))
            .collect();
        Box::pin(std::future::ready(Ok(ended)))
    }

    fn claim<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Option<Ended>> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let ended = Self::take(&mut entries, session);
        Box::pin(std::future::ready(Ok(ended)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn s(key: &str, id: &str) -> SessionRef {
        SessionRef {
            route: "r".into(),
            key_id: Some(key.into()),
            session: id.into(),
        }
    }

    fn turn(i: u64, o: u64) -> Spent {
        Spent {
            input_tokens: Some(i),
            output_tokens: Some(o),
            micro_usd: Some(i + o),
        }
    }

    #[tokio::test]
    async fn spend_sums_over_turns_and_a_claim_takes_the_session_once() {
        let store = LocalEvalSessions::new(10, 100, 1 << 20);
        let a = s("k", "a");
        assert_eq!(
            store
                .record(&a, turn(10, 5), Last::Kept("1"), 60_000)
                .await
                .unwrap(),
            turn(10, 5)
        );
        let total = store
            .record(&a, turn(1, 2), Last::Kept("2"), 60_000)
            .await
            .unwrap();
        assert_eq!(total, turn(11, 7));
        // A turn without usage makes the sums unknown from then on.
        let unknown = Spent {
            input_tokens: None,
            ..turn(0, 0)
        };
        assert_eq!(
            store
                .record(&a, unknown, Last::Kept("3"), 60_000)
                .await
                .unwrap()
                .input_tokens,
            None
        );
        assert!(
            store.claim_due(10).await.unwrap().is_empty(),
            "not idle yet"
        );
        let ended = store.claim(&a).await.unwrap().unwrap();
        assert_eq!((ended.turns, ended.last.as_deref()), (3, Some("3")));
        assert_eq!(ended.spent.output_tokens, Some(7));
        assert!(store.claim(&a).await.unwrap().is_none(), "claimed once");
    }

    #[tokio::test]
    async fn an_idle_session_is_due_and_a_key_past_its_quota_ends_its_oldest() {
        let store = LocalEvalSessions::new(2, 100, 1 << 20);
        store
            .record(&s("k", "a"), turn(1, 1), Last::TooLarge, 0)
            .await
            .unwrap();
        let due = store.claim_due(10).await.unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].last, None);
        for id in ["x", "y"] {
            store
                .record(&s("k", id), turn(1, 1), Last::TooLarge, 60_000)
                .await
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        store
            .record(&s("other", "o"), turn(1, 1), Last::TooLarge, 60_000)
            .await
            .unwrap();
        // A third session of `k`: its oldest (`x`) ends now; `other`'s stays open.
        store
            .record(&s("k", "z"), turn(1, 1), Last::TooLarge, 60_000)
            .await
            .unwrap();
        let due = store.claim_due(10).await.unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].session, s("k", "x"));
    }

    #[tokio::test]
    async fn last_turns_past_the_byte_bound_are_not_kept_and_the_count_is_bounded() {
        let store = LocalEvalSessions::new(100, 4, 10);
        store
            .record(&s("k", "a"), turn(1, 1), Last::Kept("123456"), 60_000)
            .await
            .unwrap();
        // 6 + 6 > 10: not kept; the first is.
        store
            .record(&s("k", "b"), turn(1, 1), Last::Kept("abcdef"), 60_000)
            .await
            .unwrap();
        assert_eq!(store.claim(&s("k", "b")).await.unwrap().unwrap().last, None);
        // A session's new last turn replaces its old one's bytes.
        store
            .record(&s("k", "a"), turn(1, 1), Last::Kept("1234567890"), 60_000)
            .await
            .unwrap();
        let a = store.claim(&s("k", "a")).await.unwrap().unwrap();
        assert_eq!(a.last.as_deref(), Some("1234567890"));
        // Four open sessions and one ended waiting: a sixth is refused, not kept unbounded.
        for id in ["1", "2", "3", "4", "5"] {
            store
                .record(&s("k", id), turn(1, 1), Last::TooLarge, 60_000)
                .await
                .unwrap();
        }
        assert!(store
            .record(&s("k", "6"), turn(1, 1), Last::TooLarge, 60_000)
            .await
            .is_err());
        // Another key is not refused for `k`'s backlog (its session ends `k`'s oldest).
        assert!(store
            .record(&s("j", "1"), turn(1, 1), Last::TooLarge, 60_000)
            .await
            .is_ok());
        assert_eq!(store.claim_due(10).await.unwrap().len(), 2);
        assert!(store
            .record(&s("k", "6"), turn(1, 1), Last::TooLarge, 60_000)
            .await
            .is_ok());
    }

    /// One key filling the bytes for last turns does not crowd out another key's: the key
    /// holding the most gives up its least recently used ones; a key never takes room from
    /// one holding less than it would.
    #[tokio::test]
    async fn one_key_filling_the_last_turns_does_not_crowd_out_another() {
        let store = LocalEvalSessions::new(100, 1000, 100);
        for id in 0..10 {
            store
                .record(
                    &s("noisy", &id.to_string()),
                    turn(1, 1),
                    Last::Kept(&"x".repeat(10)),
                    60_000,
                )
                .await
                .unwrap();
        }
        // Full: another key's turns are kept; the noisy key gives up its least recently used
        // (the store stays within its bytes).
        for (id, n) in [("q", 15), ("r", 30)] {
            store
                .record(
                    &s("quiet", id),
                    turn(1, 1),
                    Last::Kept(&"q".repeat(n)),
                    60_000,
                )
                .await
                .unwrap();
        }
        // Now the noisy key holds less than it would with another turn, more than the quiet
        // key: its new turns are not kept, the quiet key's stay.
        for id in 10..14 {
            store
                .record(
                    &s("noisy", &id.to_string()),
                    turn(1, 1),
                    Last::Kept(&"y".repeat(10)),
                    60_000,
                )
                .await
                .unwrap();
        }
        for id in ["q", "r"] {
            let ended = store.claim(&s("quiet", id)).await.unwrap().unwrap();
            assert!(ended.last.is_some(), "{id}");
        }
        let mut kept = 0;
        for id in 0..14 {
            let ended = store
                .claim(&s("noisy", &id.to_string()))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(ended.turns, 1);
            kept += usize::from(ended.last.is_some());
        }
        assert_eq!(kept, 5);
    }
}
