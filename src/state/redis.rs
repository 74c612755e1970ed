//! The Redis (and Valkey) backend: every limit operation is one Lua script over the key's own
//! keys, so check-and-reserve is atomic whichever replica runs it, and its time is the
//! server's (`TIME`), so replicas with drifting clocks count one window. A key's keys share
//! the hash tag `{<key id>}`: on a Cluster they live in one slot. Every key has a TTL: a
//! replica that dies leaves nothing that lasts past its reservations' expiry.

use super::limits::{Ask, Counts, Decision, KeyLimits, Limit, Quota, Used};
use super::{LimitStore, StoreError, StoreFuture};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A connection to the state server, made on first use and remade after a failure (at most
/// one attempt per [`RECONNECT_INTERVAL`], so a server that is down costs requests no connect
/// attempts of their own); multiplexed: requests share it, pipelined. Under `server.runtime:
/// per_core` each worker has its own: a connection's task runs on the event loop of the thread
/// that made it, and a request on another worker would hand every round trip over to that
/// thread and back (the hand-over `per_core` is there to avoid).
pub struct Conn {
    client: redis::Client,
    timeout: Duration,
    /// The connection of every thread but a `per_core` worker's.
    shared: Slot,
    workers: Box<[Slot]>,
}

/// One connection, and when connecting it last failed.
#[derive(Default)]
struct Slot {
    managed: Mutex<Option<ConnectionManager>>,
    connecting: tokio::sync::Mutex<Option<Instant>>,
}

impl Slot {
    /// The connection made, if one is.
    fn made(&self) -> Option<ConnectionManager> {
        self.managed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

const RECONNECT_INTERVAL: Duration = Duration::from_millis(500);

impl Conn {
    /// `workers`: the `per_core` workers, each with a connection of its own (0: one shared).
    pub fn new(url: &str, timeout: Duration, workers: usize) -> Result<Conn, String> {
        let client = redis::Client::open(url).map_err(|e| {
            format!(
                "state.url: {}: {e}",
                crate::config::state::without_password(url)
            )
        })?;
        Ok(Conn {
            client,
            timeout,
            shared: Slot::default(),
            workers: (0..workers).map(|_| Slot::default()).collect(),
        })
    }

    /// The connection of the thread this runs on (see `workers`).
    fn slot(&self) -> &Slot {
        crate::upstream::worker_index()
            .and_then(|i| self.workers.get(i))
            .unwrap_or(&self.shared)
    }

    /// This thread's connection, connecting when there is none.
    pub async fn get(&self) -> Result<ConnectionManager, StoreError> {
        let slot = self.slot();
        if let Some(c) = slot.made() {
            return Ok(c);
        }
        let mut last = slot.connecting.lock().await;
        // Another request may have connected while this one waited.
        if let Some(c) = slot.made() {
            return Ok(c);
        }
        if last.is_some_and(|at| at.elapsed() < RECONNECT_INTERVAL) {
            return Err(StoreError::Unreachable(
                "connecting failed; retrying shortly".into(),
            ));
        }
        *last = Some(Instant::now());
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let c = self
            .client
            .get_connection_manager_with_config(config)
            .await
            .map_err(|e| StoreError::Unreachable(e.to_string()))?;
        *slot.managed.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
        Ok(c)
    }

    /// Runs `script` with `keys` and `args`: one round trip (`EVALSHA`, loading it once).
    pub async fn run<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, StoreError> {
        let mut conn = self.get().await?;
        let mut call = script.prepare_invoke();
        for k in keys {
            call.key(k);
        }
        for a in args {
            call.arg(a);
        }
        call.invoke_async(&mut conn).await.map_err(store_error)
    }

    /// Sends one command: one round trip.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let mut conn = self.get().await?;
        cmd.query_async(&mut conn).await.map_err(store_error)
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        self.query::<String>(&redis::cmd("PING")).await.map(drop)
    }
}

fn store_error(e: redis::RedisError) -> StoreError {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        StoreError::Unreachable(e.to_string())
    } else {
        StoreError::Protocol(e.to_string())
    }
}

/// What every script starts with: the server's time, and the key's counts aged to it
/// (expired reservations given back, requests and token buckets past the minute dropped, a
/// budget whose window ended started again). KEYS: 1 requests (sorted set of admissions),
/// 2 tokens (hash second -> tokens), 3 budget (hash start, spent, reserved), 4 reservations
/// (hash id -> "second tokens micro"), 5 their expiries (sorted set).
/// ARGV 1..4: rpm, tpm, budget max (micro-USD), budget duration (ms); 0: none. What a key has
/// no limit for is neither read nor aged (a key with `rpm_limit` alone costs seven calls).
const PRELUDE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sec = math.floor(now / 1000)
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local bmax = tonumber(ARGV[3])
local bdur = tonumber(ARGV[4])
local holds = tpm > 0 or bmax > 0
local stale = {}
if holds then stale = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now) end
for _, rid in ipairs(stale) do
  local v = redis.call('HGET', KEYS[4], rid)
  if v then
    local s, tk, mc = string.match(v, '^(%d+) (%d+) (%d+)$')
    if tonumber(tk) > 0 and redis.call('HEXISTS', KEYS[2], s) == 1 then
      redis.call('HINCRBY', KEYS[2], s, -tonumber(tk))
    end
    if tonumber(mc) > 0 then redis.call('HINCRBY', KEYS[3], 'reserved', -tonumber(mc)) end
    redis.call('HDEL', KEYS[4], rid)
  end
  redis.call('ZREM', KEYS[5], rid)
end
local nreq, oldest_req, newest_req = 0, -1, -1
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
  nreq = redis.call('ZCARD', KEYS[1])
end
if nreq > 0 then
  oldest_req = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
  newest_req = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
end
local tok, oldest_s, newest_s = 0, -1, -1
local buckets = {}
if tpm > 0 then buckets = redis.call('HGETALL', KEYS[2]) end
for i = 1, #buckets, 2 do
  local s, n = tonumber(buckets[i]), tonumber(buckets[i + 1])
  if s + 60 <= sec then
    redis.call('HDEL', KEYS[2], buckets[i])
  elseif n > 0 then
    tok = tok + n
    if oldest_s < 0 or s < oldest_s then oldest_s = s end
    if s > newest_s then newest_s = s end
  end
end
local start, spent, reserved = -1, 0, 0
if bmax > 0 then
  local b = redis.call('HMGET', KEYS[3], 'start', 'spent', 'reserved')
  start = tonumber(b[1] or '-1')
  spent = tonumber(b[2] or '0')
  reserved = tonumber(b[3] or '0')
end
if start >= 0 and bdur > 0 and now >= start + bdur then
  redis.call('HDEL', KEYS[3], 'start')
  redis.call('HSET', KEYS[3], 'spent', 0)
  start = -1
  spent = 0
end
local function budget_ttl(ttl)
  if bdur > 0 then redis.call('PEXPIRE', KEYS[3], bdur + ttl) else redis.call('PERSIST', KEYS[3]) end
end
-- The reservations live as long as what counts them: a budget without a duration holds its
-- `reserved` for ever, so its reservations too (aging removes each once it expires).
local function reservations_ttl(ttl)
  if bmax > 0 and bdur == 0 then
    redis.call('PERSIST', KEYS[4])
    redis.call('PERSIST', KEYS[5])
  else
    local keep = math.max(2 * ttl, 61000)
    if bmax > 0 then keep = math.max(keep, bdur + ttl) end
    redis.call('PEXPIRE', KEYS[4], keep)
    redis.call('PEXPIRE', KEYS[5], keep)
  end
end
local function counts()
  return {nreq, oldest_req, newest_req, tok, oldest_s, newest_s, spent, reserved, start, now}
end
"#;

/// ARGV 5..8: tokens and micro-USD asked, the reservation's id and TTL (ms); 9: `reserve`, or
/// `usage` (counts only). Returns {limit (0: admitted, 1 requests, 2 tokens, 3 budget),
/// retry ms (-1: none), counts...}. The rule is [`Counts::refusal`]'s, line for line.
const RESERVE: &str = r#"
local ask_tokens, ask_micro = tonumber(ARGV[5]), tonumber(ARGV[6])
local id, ttl, mode = ARGV[7], tonumber(ARGV[8]), ARGV[9]
if mode == 'usage' then
  local c = counts()
  table.insert(c, 1, -1)
  table.insert(c, 1, 0)
  return c
end
if bmax > 0 and start < 0 then
  start = now
  redis.call('HSET', KEYS[3], 'start', now)
  budget_ttl(ttl)
end
local limit, retry = 0, -1
local committed = spent + reserved
if bmax > 0 and (committed >= bmax or committed + ask_micro > bmax) then
  limit = 3
  if bdur > 0 then retry = math.max(1, start + bdur - now) end
elseif rpm > 0 and nreq >= rpm then
  limit = 1
  retry = math.max(1, oldest_req + 60000 - now)
elseif tpm > 0 and tok > 0 and tok + ask_tokens > tpm then
  limit = 2
  retry = math.max(1, (oldest_s + 60) * 1000 - now)
end
if limit == 0 then
  if rpm > 0 then
    redis.call('ZADD', KEYS[1], now, id)
    redis.call('PEXPIRE', KEYS[1], 61000)
    nreq = nreq + 1
    if oldest_req < 0 then oldest_req = now end
    newest_req = now
  end
  local tokens = 0
  if tpm > 0 then tokens = ask_tokens end
  if tokens > 0 then
    redis.call('HINCRBY', KEYS[2], sec, tokens)
    redis.call('PEXPIRE', KEYS[2], 61000)
    tok = tok + tokens
    if oldest_s < 0 then oldest_s = sec end
    newest_s = sec
  end
  local micro = 0
  if bmax > 0 then micro = ask_micro end
  if micro > 0 then
    redis.call('HINCRBY', KEYS[3], 'reserved', micro)
    reserved = reserved + micro
    budget_ttl(ttl)
  end
  -- A reservation that holds nothing (a key with `rpm_limit` alone) is not kept: its request
  -- is counted, and there is nothing to settle.
  if holds then
    redis.call('HSET', KEYS[4], id, sec .. ' ' .. tokens .. ' ' .. micro)
    redis.call('ZADD', KEYS[5], now + ttl, id)
    reservations_ttl(ttl)
  end
end
local c = counts()
table.insert(c, 1, retry)
table.insert(c, 1, limit)
return c
"#;

/// ARGV 5..8: the reservation's id, tokens and micro-USD used, and the reservation TTL.
const SETTLE: &str = r#"
local id, used_tokens, used_micro, ttl = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local v = redis.call('HGET', KEYS[4], id)
if v then
  local s, tk, mc = string.match(v, '^(%d+) (%d+) (%d+)$')
  redis.call('HDEL', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  if tpm > 0 and redis.call('HEXISTS', KEYS[2], s) == 1 then
    redis.call('HINCRBY', KEYS[2], s, used_tokens - tonumber(tk))
  end
  if tonumber(mc) > 0 then redis.call('HINCRBY', KEYS[3], 'reserved', -tonumber(mc)) end
elseif tpm > 0 and used_tokens > 0 then
  redis.call('HINCRBY', KEYS[2], sec, used_tokens)
  redis.call('PEXPIRE', KEYS[2], 61000)
end
if bmax > 0 then
  if start < 0 then redis.call('HSET', KEYS[3], 'start', now) end
  redis.call('HINCRBY', KEYS[3], 'spent', used_micro)
  budget_ttl(ttl)
end
return 1
"#;

pub struct RedisLimits {
    conn: std::sync::Arc<Conn>,
    prefix: String,
    reserve: redis::Script,
    settle: redis::Script,
}

impl RedisLimits {
    pub fn new(conn: std::sync::Arc<Conn>, prefix: &str) -> RedisLimits {
        RedisLimits {
            conn,
            prefix: prefix.to_owned(),
            reserve: redis::Script::new(&format!("{PRELUDE}{RESERVE}")),
            settle: redis::Script::new(&format!("{PRELUDE}{SETTLE}")),
        }
    }

    fn keys(&self, key: &str) -> Vec<String> {
        ["requests", "tokens", "budget", "reservations", "expiries"]
            .iter()
            .map(|part| format!("{}{{{key}}}:{part}", self.prefix))
            .collect()
    }

    fn limit_args(limits: &KeyLimits) -> Vec<String> {
        let budget = limits.budget;
        vec![
            limits.rpm.unwrap_or(0).to_string(),
            limits.tpm.unwrap_or(0).to_string(),
            budget.map_or(0, |b| b.max_micro_usd).to_string(),
            budget.and_then(|b| b.duration_ms).unwrap_or(0).to_string(),
        ]
    }

    async fn counts(
        &self,
        key: &str,
        limits: &KeyLimits,
        ask: Ask,
        id: &str,
        ttl_ms: u64,
        mode: &str,
    ) -> Result<(i64, i64, Counts, u64), StoreError> {
        let mut args = Self::limit_args(limits);
        args.extend([
            ask.tokens.to_string(),
            ask.micro_usd.to_string(),
            id.to_owned(),
            ttl_ms.max(1).to_string(),
            mode.to_owned(),
        ]);
        let r: Vec<i64> = self.conn.run(&self.reserve, &self.keys(key), &args).await?;
        let [limit, retry, nreq, oldest_req, newest_req, tok, oldest_s, newest_s, spent, reserved, start, now] =
            r[..]
        else {
            return Err(StoreError::Protocol(format!(
                "the reserve script answered {} values, not 12",
                r.len()
            )));
        };
        let opt = |v: i64| u64::try_from(v).ok();
        let counts = Counts {
            requests: opt(nreq).unwrap_or(0),
            oldest_request_ms: opt(oldest_req),
            newest_request_ms: opt(newest_req),
            tokens: opt(tok).unwrap_or(0),
            oldest_token_s: opt(oldest_s),
            newest_token_s: opt(newest_s),
            spent: opt(spent).unwrap_or(0),
            reserved: opt(reserved).unwrap_or(0),
            budget_start_ms: opt(start),
        };
        Ok((limit, retry, counts, opt(now).unwrap_or(0)))
    }
}

impl LimitStore for RedisLimits {
    fn reserve<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        ask: Ask,
        id: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(async move {
            let (limit, retry, counts, now) =
                self.counts(key, limits, ask, id, ttl_ms, "reserve").await?;
            let quota = counts.quota(limits, now);
            let limit = match limit {
                0 => return Ok(Decision::Admitted(quota)),
                1 => Limit::Requests,
                2 => Limit::Tokens,
                3 => Limit::Budget,
                other => {
                    return Err(StoreError::Protocol(format!(
                        "the reserve script answered limit {other}"
                    )))
                }
            };
            Ok(Decision::Refused {
                limit,
                retry_after_ms: u64::try_from(retry).ok(),
                quota,
            })
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a str,
        limits: &'a KeyLimits,
        id: &'a str,
        used: Used,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            // A key with `rpm_limit` alone reserved nothing to settle (see RESERVE).
            if limits.tpm.is_none() && limits.budget.is_none() {
                return Ok(());
            }
            let mut args = Self::limit_args(limits);
            args.extend([
                id.to_owned(),
                used.tokens.to_string(),
                used.micro_usd.to_string(),
                // The budget's TTL past its window, as a reservation would set it.
                "60000".to_owned(),
            ]);
            let _: i64 = self.conn.run(&self.settle, &self.keys(key), &args).await?;
            Ok(())
        })
    }

    fn usage<'a>(&'a self, key: &'a str, limits: &'a KeyLimits) -> StoreFuture<'a, Quota> {
        Box::pin(async move {
            let (_, _, counts, now) = self
                .counts(key, limits, Ask::default(), "", 1, "usage")
                .await?;
            Ok(counts.quota(limits, now))
        })
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.conn.get().await?;
            redis::cmd("DEL")
                .arg(self.keys(key))
                .query_async::<i64>(&mut conn)
                .await
                .map(drop)
                .map_err(store_error)
        })
    }

    fn ping(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.conn.ping())
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}
