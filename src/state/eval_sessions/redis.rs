//! The session-level evals' sessions on the state server shared by replicas. Everything lives
//! under one hash tag (`{evals}`), so each step is one script on one slot:
//! - a session is a hash (`in`, `out`, `usd`: sums, `u` once unknown; `turns`; `last`, its
//!   last turn's JSON; `idx`, its key's index), named by its [`SessionRef`] as JSON;
//! - `due`, a sorted set of every open session by when it ends;
//! - per key, a sorted set of its open sessions by last use (the quota), and one of those it
//!   ended early that wait to be claimed (`:e`): with the open ones, at most the quota and a
//!   quarter more, so one key's backlog of last turns is bounded in the shared store.
//!
//! A claim removes the session from `due` first (`ZREM` answers 1 to one caller only), so two
//! replicas that see it end at once never both run its evals. A session's keys expire an hour
//! after it should have ended, should no replica be left to claim it.

use super::{Ended, EvalSessions, Last, SessionRef, Spent};
use crate::state::redis::Conn;
use crate::state::{StoreError, StoreFuture};
use std::sync::Arc;

/// How long a session's keys outlive its end, unclaimed.
const UNCLAIMED_MS: u64 = 3_600_000;

/// KEYS: 1 the session, 2 `due`, 3 its key's index. ARGV: 1 the member, 2–4 the turn's input
/// tokens, output tokens and micro-USD ('' unknown), 5 its JSON ('' not kept), 6 idle ms, 7 the
/// key's quota, 8 the sessions' prefix, 9 the keys' TTL, 10 '1' for spend only (no eval turn:
/// `turns` and `last` stay). Returns the three sums, or nothing when the key's sessions are at
/// their bound.
const RECORD: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local backlog = KEYS[3] .. ':e'
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- The key's sessions ended early and not claimed yet count with its open ones, up to its
  -- quota and a quarter more: past it a new session is refused (one key's backlog holds at
  -- most that many last turns in the shared store).
  redis.call('ZREMRANGEBYSCORE', backlog, '-inf', now - tonumber(ARGV[9]))
  local quota = tonumber(ARGV[7])
  if redis.call('ZCARD', KEYS[3]) + redis.call('ZCARD', backlog) >= quota + math.max(1, math.floor(quota / 4)) then
    return {}
  end
  if redis.call('ZCARD', KEYS[3]) >= quota then
    local old = redis.call('ZRANGE', KEYS[3], 0, 0)
    if old[1] then
      redis.call('ZREM', KEYS[3], old[1])
      redis.call('ZADD', KEYS[2], now, old[1])
      redis.call('ZADD', backlog, now, old[1])
      redis.call('PEXPIRE', backlog, ARGV[9])
    end
  end
end
local function add(f, v)
  local cur = redis.call('HGET', KEYS[1], f)
  local n = (v ~= '' and cur ~= 'u') and ((tonumber(cur) or 0) + tonumber(v)) or nil
  -- Past 2^53 a Lua number is no longer exact: the sum is unknown from then on.
  if not n or n >= 9007199254740992 then
    redis.call('HSET', KEYS[1], f, 'u')
    return 'u'
  end
  local s = string.format('%.0f', n)
  redis.call('HSET', KEYS[1], f, s)
  return s
end
local sums = {add('in', ARGV[2]), add('out', ARGV[3]), add('usd', ARGV[4])}
if ARGV[10] == '1' then
  redis.call('HINCRBY', KEYS[1], 'turns', 0)
else
  redis.call('HINCRBY', KEYS[1], 'turns', 1)
  if ARGV[5] == '' then redis.call('HDEL', KEYS[1], 'last') else redis.call('HSET', KEYS[1], 'last', ARGV[5]) end
end
redis.call('HSET', KEYS[1], 'idx', KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
return sums
"#;

/// KEYS: 1 `due`. ARGV: 1 the sessions' prefix, 2 a member to claim, or '' for those due, 3
/// at most that many. Returns six values per session claimed: the member, the three sums, the
/// turns and the last turn (nil when not kept).
const CLAIM: &str = r#"
local members
if ARGV[2] ~= '' then
  members = {ARGV[2]}
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
end
local out = {}
for _, m in ipairs(members) do
  if redis.call('ZREM', KEYS[1], m) == 1 then
    local h = ARGV[1] .. m
    local v = redis.call('HMGET', h, 'in', 'out', 'usd', 'turns', 'last', 'idx')
    redis.call('DEL', h)
    if v[6] then
      redis.call('ZREM', v[6], m)
      redis.call('ZREM', v[6] .. ':e', m)
    end
    if v[4] then
      table.insert(out, m)
      for i = 1, 5 do table.insert(out, v[i] or false) end
    end
  end
end
return out
"#;

pub struct RedisEvalSessions {
    conn: Arc<Conn>,
    /// `<state.key_prefix>{evals}:`.
    prefix: String,
    max_per_key: usize,
    record: redis::Script,
    claim: redis::Script,
}

impl RedisEvalSessions {
    pub fn new(conn: Arc<Conn>, prefix: &str, max_per_key: usize) -> RedisEvalSessions {
        RedisEvalSessions {
            conn,
            prefix: format!("{prefix}{{evals}}:"),
            max_per_key,
            record: redis::Script::new(RECORD),
            claim: redis::Script::new(CLAIM),
        }
    }

    fn sessions(&self) -> String {
        format!("{}s:", self.prefix)
    }

    fn due(&self) -> String {
        format!("{}due", self.prefix)
    }

    async fn claim_members(&self, member: &str, max: usize) -> Result<Vec<Ended>, StoreError> {
        let args = [self.sessions(), member.to_owned(), max.to_string()];
        let flat: Vec<Option<String>> = self.conn.run(&self.claim, &[self.due()], &args).await?;
        let mut ended = Vec::new();
        for v in flat.chunks(6) {
            let [Some(member), input, output, usd, Some(turns), last] = v else {
                return Err(StoreError::Protocol("a claimed session's fields".into()));
            };
            let session: SessionRef = serde_json::from_str(member)
                .map_err(|e| StoreError::Protocol(format!("a session's name: {e}")))?;
            let turns = turns
                .parse()
                .map_err(|e| StoreError::Protocol(format!("a session's turns: {e}")))?;
            ended.push(Ended {
                session,
                spent: Spent {
                    input_tokens: sum(input)?,
                    output_tokens: sum(output)?,
                    micro_usd: sum(usd)?,
                },
                turns,
                last: last.clone(),
            });
        }
        Ok(ended)
    }
}

/// A sum as the store keeps it: a number, or `u` (unknown).
fn sum(v: &Option<String>) -> Result<Option<u64>, StoreError> {
    match v.as_deref() {
        None | Some("u") => Ok(None),
        Some(n) => n
            .parse()
            .map(Some)
            .map_err(|e| StoreError::Protocol(format!("a session's sum {n:?}: {e}"))),
    }
}

fn arg(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

impl EvalSessions for RedisEvalSessions {
    fn record<'a>(
        &'a self,
        session: &'a SessionRef,
        spent: Spent,
        last: Last<'a>,
        idle_ms: u64,
    ) -> StoreFuture<'a, Spent> {
        Box::pin(async move {
            let member = member(session)?;
            let tenant = session.key_id.as_deref().unwrap_or("");
            let keys = [
                format!("{}{member}", self.sessions()),
                self.due(),
                // The key id as JSON: no id can spell another's index.
                format!("{}k:{}", self.prefix, serde_json::json!(tenant)),
            ];
            let args = [
                member,
                arg(spent.input_tokens),
                arg(spent.output_tokens),
                arg(spent.micro_usd),
                match last {
                    Last::Kept(l) => l.to_owned(),
                    Last::TooLarge | Last::Unchanged => String::new(),
                },
                idle_ms.to_string(),
                self.max_per_key.to_string(),
                self.sessions(),
                idle_ms.saturating_add(UNCLAIMED_MS).to_string(),
                if matches!(last, Last::Unchanged) {
                    "1"
                } else {
                    "0"
                }
                .to_owned(),
            ];
            let sums: Vec<String> = self.conn.run(&self.record, &keys, &args).await?;
            if sums.is_empty() {
                return Err(StoreError::Unreachable(
                    "the key's eval sessions are at their bound (state.max_sessions_per_key); ended ones wait to be claimed".into(),
                ));
            }
            let [input, output, usd] = sums.as_slice() else {
                return Err(StoreError::Protocol("a session's sums".into()));
            };
            Ok(Spent {
                input_tokens: sum(&Some(input.clone()))?,
                output_tokens: sum(&Some(output.clone()))?,
                micro_usd: sum(&Some(usd.clone()))?,
            })
        })
    }

    fn spent<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Spent> {
        Box::pin(async move {
            let key = format!("{}{}", self.sessions(), member(session)?);
            let v: Vec<Option<String>> = self
                .conn
                .query(redis::cmd("HMGET").arg(key).arg("in").arg("out").arg("usd"))
                .await?;
            let [input, output, usd] = v.as_slice() else {
                return Err(StoreError::Protocol("a session's sums".into()));
            };
            // A session not open has spent nothing; a sum it has not kept is unknown.
            if v.iter().all(Option::is_none) {
                return Ok(Spent::ZERO);
            }
            Ok(Spent {
                input_tokens: sum(input)?,
                output_tokens: sum(output)?,
                micro_usd: sum(usd)?,
            })
        })
    }

    fn claim_due(&self, max: usize) -> StoreFuture<'_, Vec<Ended>> {
        Box::pin(self.claim_members("", max))
    }

    fn claim<'a>(&'a self, session: &'a SessionRef) -> StoreFuture<'a, Option<Ended>> {
        Box::pin(async move {
            let member = member(session)?;
            Ok(self.claim_members(&member, 1).await?.into_iter().next())
        })
    }
}

/// A session's name in the store: its [`SessionRef`] as JSON.
fn member(session: &SessionRef) -> Result<String, StoreError> {
    serde_json::to_string(session)
        .map_err(|e| StoreError::Protocol(format!("a session's name: {e}")))
}
