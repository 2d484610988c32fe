//! Several resources at once, all or none: one script per node sets every key or none (the
//! keys sorted, so two clients locking overlapping sets cannot deadlock). Safe by the plain
//! lock's argument applied to each key: on each node the keys are all ours or none is, and a
//! quorum holds all of them.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, Outcome};
use crate::error::{Error, Result};
use crate::kinds::{Caller, Grant, Held, Kind, check_resource_name};
use crate::wire::{Command, Keys, Reply, Script, owned_fn};

/// Most resources one lock takes.
pub const MAX_RESOURCES: usize = 64;

/// All-or-nothing acquire of several keys (given sorted): if any exists, nothing is set.
pub(crate) static ACQUIRE: Script = Script::new(
    r#"for _, k in ipairs(KEYS) do
    if redis.call("exists", k) == 1 then
        return 0
    end
end
for _, k in ipairs(KEYS) do
    redis.call("set", k, ARGV[1], "PX", ARGV[2])
end
return 1"#,
);

/// Extends all keys only if every one of them still holds our token.
pub(crate) static EXTEND: Script = Script::new(concat!(
    owned_fn!(),
    r#"for _, k in ipairs(KEYS) do
    if not owned(k) then
        return 0
    end
end
for _, k in ipairs(KEYS) do
    redis.call("pexpire", k, ARGV[2])
end
return 1"#
));

/// Deletes each key that holds our token and, unless the nonce (ARGV[2]) is empty, announces
/// each one's release on its own channel (the second half of KEYS, in the same order); 1 only
/// if all of them were ours.
pub(crate) static RELEASE: Script = Script::new(concat!(
    owned_fn!(),
    r#"local n = 0
local keys = #KEYS / 2
for i = 1, keys do
    if owned(KEYS[i]) then
        redis.call("del", KEYS[i])
        if ARGV[2] ~= "" then
            redis.call("publish", KEYS[keys + i], ARGV[2])
        end
        n = n + 1
    end
end
if n == keys then
    return 1
end
return 0"#
));

#[derive(Debug)]
pub(crate) struct Many {
    /// The sorted names joined with `,`.
    name: Arc<str>,
    keys: Arc<[Arc<str>]>,
}

impl Many {
    /// Checks and sorts the resources.
    pub(crate) fn new<I, S>(resources: I) -> Result<Many>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut keys: Vec<Arc<str>> = Vec::new();
        for r in resources {
            let r = r.as_ref();
            check_resource_name(r, &format!("resource name {} of the list", keys.len()))?;
            keys.push(r.into());
            if keys.len() > MAX_RESOURCES {
                return Err(Error::invalid(format!(
                    "more than {MAX_RESOURCES} resources in one lock"
                )));
            }
        }
        if keys.is_empty() {
            return Err(Error::invalid("the list of resources is empty"));
        }
        keys.sort();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(format!(
                "resource {:?} is listed twice",
                &*w[0]
            )));
        }
        Ok(Many {
            name: keys.join(",").into(),
            keys: keys.into(),
        })
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        Command::script(&RELEASE, Reply::Flag)
            .keys(Keys::List(Arc::clone(&self.keys)))
            .text(nonce)
            .announcing()
    }
}

impl Kind for Many {
    fn name(&self) -> &'static str {
        "many"
    }

    fn resource(&self) -> &Arc<str> {
        &self.name
    }

    fn keys(&self) -> &[Arc<str>] {
        &self.keys
    }

    fn acquire(&self, ttl_ms: u64, _: &Config) -> Command {
        Command::script(&ACQUIRE, Reply::Flag)
            .keys(Keys::List(Arc::clone(&self.keys)))
            .number(ttl_ms)
            .acquiring()
    }

    fn grant(&self, _: &Engine, _: &Outcome, _: &Arc<str>, _: &Caller) -> Grant {
        Grant::done(HeldMany {
            keys: Arc::clone(&self.keys),
            release: self.release(Arc::from("")),
        })
    }

    fn release_command(&self, nonce: Arc<str>) -> Command {
        self.release(nonce)
    }
}

#[derive(Debug)]
struct HeldMany {
    keys: Arc<[Arc<str>]>,
    /// The release without its nonce.
    release: Command,
}

impl Held for HeldMany {
    fn extend(&self, ttl_ms: u64) -> Command {
        Command::script(&EXTEND, Reply::Flag)
            .keys(Keys::List(Arc::clone(&self.keys)))
            .number(ttl_ms)
    }

    fn release(&self, nonce: Arc<str>) -> Command {
        self.release.clone().text(nonce)
    }

    fn resources(&self) -> Option<&[Arc<str>]> {
        Some(&self.keys)
    }
}
