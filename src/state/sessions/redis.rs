//! MCP sessions on the state server shared by replicas, so a session spread over replicas is
//! checked as one. Each session is a hash (`v`, its version; `s`, its state as JSON) and a list
//! of changes not yet folded into it, under its key's hash tag; each key has a sorted set of
//! its sessions by last use.
//!
//! A write appends its change to the list (one atomic `RPUSH`: two replicas writing one session
//! at once both land, nothing is ever overwritten); a read folds the list into the state with
//! the in-process store's own rule ([`State::apply`]). Once the list holds
//! [`COMPACT_AT`] changes a writer folds them into the hash, guarded by the version (another
//! writer that folded first wins; the list keeps what neither folded). Every key expires
//! `state.session_ttl_ms` after its session's last use; a key holding more than
//! `state.max_sessions_per_key` sessions loses its least recently used.

use super::{Change, Key, SessionStore, Snapshot, State};
use crate::state::redis::Conn;
use crate::state::{StoreError, StoreFuture};
use std::sync::Arc;

/// Changes appended before a writer folds them into the session's state.
const COMPACT_AT: usize = 8;

/// KEYS: 1 the state, 2 the changes, 3 its key's index. ARGV: 1 its member in the index, 2 the
/// TTL (ms). Returns the version, the state and the changes (each nil or empty when none); a
/// load touches the session.
const LOAD: &str = r#"
local v = redis.call('HMGET', KEYS[1], 'v', 's')
local p = redis.call('LRANGE', KEYS[2], 0, -1)
if v[1] or #p > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[3], 'XX', now, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return {v[1], v[2], p}
"#;

/// KEYS as LOAD. ARGV: 1 the change, 2 the member, 3 the TTL (ms), 4 the key's quota of
/// sessions, 5 the prefix that makes a member a session's key. Returns the changes waiting.
const APPEND: &str = r#"
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl)
redis.call('ZADD', KEYS[3], now, ARGV[2])
redis.call('PEXPIRE', KEYS[3], ttl)
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[3], over)
  for i = 1, #old, 2 do
    if old[i] ~= ARGV[2] then
      redis.call('DEL', ARGV[5] .. old[i], ARGV[5] .. old[i] .. '\n~changes')
    end
  end
end
return n
"#;

/// KEYS: 1 the state, 2 the changes. ARGV: 1 the version read ('' for none), 2 the state with
/// the first ARGV[3] changes folded in, 4 the TTL. Returns 0 when another writer folded first.
const FOLD: &str = r#"
local cur = redis.call('HGET', KEYS[1], 'v')
if (cur or '') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', (tonumber(cur) or 0) + 1, 's', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('LTRIM', KEYS[2], tonumber(ARGV[3]), -1)
return 1
"#;

pub struct RedisSessions {
    conn: Arc<Conn>,
    prefix: String,
    ttl_ms: u64,
    max_per_key: usize,
    load: redis::Script,
    append: redis::Script,
    fold: redis::Script,
}

impl std::fmt::Debug for RedisSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessions")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// A session's keys and names in the store.
struct Names {
    state: String,
    changes: String,
    index: String,
    member: String,
    members: String,
}

fn protocol_error(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Protocol(format!("{what}: {e}"))
}

impl RedisSessions {
    pub fn new(conn: Arc<Conn>, prefix: &str, ttl_ms: u64, max_per_key: usize) -> RedisSessions {
        RedisSessions {
            conn,
            prefix: prefix.to_owned(),
            ttl_ms,
            max_per_key,
            load: redis::Script::new(LOAD),
            append: redis::Script::new(APPEND),
            fold: redis::Script::new(FOLD),
        }
    }

    fn names(&self, key: &Key) -> Names {
        let tenant = key.key_id.unwrap_or("-");
        // Header values hold no newline: the separator cannot be forged by a session id.
        let member = format!("{}\n{}", key.route, key.session.as_deref().unwrap_or(""));
        let members = format!("{}{{{tenant}}}:mcp:", self.prefix);
        Names {
            state: format!("{members}{member}"),
            changes: format!("{members}{member}\n~changes"),
            index: format!("{}{{{tenant}}}:mcp-sessions", self.prefix),
            member,
            members,
        }
    }

    /// The session's state with every change waiting folded in, its version, and how many
    /// changes that was.
    async fn read(&self, n: &Names) -> Result<(State, String, usize), StoreError> {
        let keys = [n.state.clone(), n.changes.clone(), n.index.clone()];
        let args = [n.member.clone(), self.ttl_ms.to_string()];
        let (version, json, changes): (Option<String>, Option<String>, Vec<String>) =
            self.conn.run(&self.load, &keys, &args).await?;
        // A session guardwire cannot read is not one to check against: the request fails.
        let mut state: State = match json {
            None => State::default(),
            Some(j) => serde_json::from_str(&j)
                .map_err(|e| protocol_error("a session in the store cannot be read", e))?,
        };
        for c in &changes {
            let change: Change = serde_json::from_str(c)
                .map_err(|e| protocol_error("a session's change cannot be read", e))?;
            state.apply(change);
        }
        Ok((state, version.unwrap_or_default(), changes.len()))
    }
}

impl SessionStore for RedisSessions {
    fn load<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Snapshot> {
        Box::pin(async move { Ok(self.read(&self.names(key)).await?.0.snapshot()) })
    }

    fn save<'a>(&'a self, key: &'a Key, change: Change) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let n = self.names(key);
            let json = serde_json::to_string(&change)
                .map_err(|e| protocol_error("a session's change cannot be written", e))?;
            let keys = [n.state.clone(), n.changes.clone(), n.index.clone()];
            let args = [
                json,
                n.member.clone(),
                self.ttl_ms.to_string(),
                self.max_per_key.to_string(),
                n.members.clone(),
            ];
            let waiting: usize = self.conn.run(&self.append, &keys, &args).await?;
            if waiting >= COMPACT_AT {
                // Folding is housekeeping: the change is already kept, whoever folds it.
                let (state, version, folded) = self.read(&n).await?;
                let json = serde_json::to_string(&state)
                    .map_err(|e| protocol_error("a session cannot be written", e))?;
                let args = [version, json, folded.to_string(), self.ttl_ms.to_string()];
                let _: i64 = self
                    .conn
                    .run(&self.fold, &[n.state, n.changes], &args)
                    .await?;
            }
            Ok(())
        })
    }

    fn end<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let n = self.names(key);
            let mut conn = self.conn.get().await?;
            redis::pipe()
                .atomic()
                .del(&[&n.state, &n.changes])
                .zrem(&n.index, &n.member)
                .query_async::<()>(&mut conn)
                .await
                .map_err(|e| StoreError::Unreachable(e.to_string()))
        })
    }
}
