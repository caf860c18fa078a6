//! The Lua scripts of the Redis backend and how they are called: `EVALSHA`, and on `NOSCRIPT`
//! (a fresh node, a promoted replica, the new owner of a migrated slot) `EVAL` of the body on
//! the same slot, which also caches it there. Unlike `redis::Script` this never sends
//! `SCRIPT LOAD`, which a cluster client fans out to every node and which fails while one node
//! is down — during a failover, exactly when scripts meet new nodes.

use super::conn::Conn;
use super::parse::key;
use crate::domain::EventId;
use redis::{ErrorKind, FromRedisValue, RedisResult, ToRedisArgs};

/// A script body and its SHA-1.
#[derive(Debug)]
pub(super) struct Lua {
    code: String,
    sha: String,
}

impl Lua {
    pub(super) fn new(code: String) -> Self {
        let sha = redis::Script::new(&code).get_hash().to_owned();
        Self { code, sha }
    }

    /// Starts a call with the event's keys `parts` (`meta`, `num`, …), in order.
    pub(super) fn on(&self, event: &EventId, parts: &[&str]) -> Call<'_> {
        let mut call = Call {
            lua: self,
            keys: Vec::new(),
            args: Vec::new(),
        };
        call.keys(parts.iter().map(|p| key(event, p)));
        call
    }

    /// Starts a call with its first key.
    pub(super) fn key<K: ToRedisArgs>(&self, key: K) -> Call<'_> {
        let mut call = Call {
            lua: self,
            keys: Vec::new(),
            args: Vec::new(),
        };
        call.key(key);
        call
    }
}

/// One call: `KEYS` and `ARGV` in order. Every key the script touches is in `KEYS`.
pub(super) struct Call<'a> {
    lua: &'a Lua,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Call<'_> {
    pub(super) fn key<K: ToRedisArgs>(&mut self, key: K) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    pub(super) fn keys<K: ToRedisArgs>(&mut self, keys: impl IntoIterator<Item = K>) -> &mut Self {
        for k in keys {
            self.key(k);
        }
        self
    }

    pub(super) fn arg<A: ToRedisArgs>(&mut self, arg: A) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    fn cmd(&self, verb: &str, script: &str) -> redis::Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(script).arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(k.as_slice());
        }
        for a in &self.args {
            cmd.arg(a.as_slice());
        }
        cmd
    }

    pub(super) async fn invoke_async<T: FromRedisValue>(&self, con: &mut Conn) -> RedisResult<T> {
        match self.cmd("EVALSHA", &self.lua.sha).query_async(con).await {
            Err(e) if e.kind() == ErrorKind::NoScriptError => {
                self.cmd("EVAL", &self.lua.code).query_async(con).await
            }
            other => other,
        }
    }
}
