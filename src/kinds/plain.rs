//! The plain lock: `SET resource token NX PX ttl`, Redlock as docs/redlock.md states it. Other
//! Redlock clients (redsync, node-redlock, redlock-py) put the same bytes at the same key, so
//! they and we exclude each other.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::kinds::{Caller, Grant, Held, Kind};
use crate::wire::{Command, Reply, Script, owned_fn};

/// Compare-and-delete: removes the key only while it holds our token, and then, unless the
/// nonce (ARGV[2]) is empty, announces the release on the key's channel (KEYS[2]) so that waiters
/// wake at once instead of polling (`notify/`; subscribers receive it only after the script
/// has ended, so they never see the key yet). An undo of a failed attempt passes no nonce:
/// waking a waiter for a resource still held by whoever refused us would start a chain of
/// doomed attempts.
pub(crate) static RELEASE: Script = Script::new(concat!(
    owned_fn!(),
    r#"if owned(KEYS[1]) then
    if ARGV[2] ~= "" then
        redis.call("publish", KEYS[2], ARGV[2])
    end
    return redis.call("del", KEYS[1])
else
    return 0
end"#
));

/// Compare-and-pexpire: sets a new TTL only while the key holds our token; never deletes.
pub(crate) static EXTEND: Script = Script::new(concat!(
    owned_fn!(),
    r#"if owned(KEYS[1]) then
    return redis.call("pexpire", KEYS[1], ARGV[2])
else
    return 0
end"#
));

pub(crate) fn extend(ttl_ms: u64) -> Command {
    Command::script(&EXTEND, Reply::Flag).number(ttl_ms)
}

pub(crate) fn release(nonce: Arc<str>) -> Command {
    Command::script(&RELEASE, Reply::Flag)
        .text(nonce)
        .announcing()
}

#[derive(Debug)]
pub(crate) struct Plain {
    resource: Arc<str>,
    keys: [Arc<str>; 1],
}

impl Plain {
    pub(crate) fn new(resource: Arc<str>) -> Plain {
        Plain {
            keys: [Arc::clone(&resource)],
            resource,
        }
    }
}

impl Kind for Plain {
    fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn queues(&self) -> bool {
        true
    }

    fn acquire(&self, ttl_ms: u64, _: &Config) -> Command {
        Command::set_nx(ttl_ms)
    }

    fn grant(&self, _: &Engine, _: &Outcome, _: &Arc<str>, _: &Caller) -> Grant {
        Grant::done(HeldPlain)
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        release(nonce)
    }
}

#[derive(Debug)]
pub(crate) struct HeldPlain;

impl Held for HeldPlain {
    fn extend(&self, ttl_ms: u64) -> Command {
        extend(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        release(nonce)
    }
}
