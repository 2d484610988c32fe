//! The wire: Lua scripts, the commands a node worker sends, and how their replies read as votes.
//!
//! The bottom layer. It knows no kind of lock: each kind (`kinds/`) builds its [`Command`]s from
//! its own scripts, and the node worker sends whatever it is handed. A command is either the
//! plain `SET key token NX PX ttl` or an `EVALSHA` of a [`Script`] with keys and arguments in a
//! fixed order (`KEYS`, then `ARGV[1]` = the token, `ARGV[2]` = the number, `ARGV[3]` = the
//! text, each present only when given).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::Value;

use crate::error::NodeProblem;
use crate::rules::quorum::Vote;

/// Lua: `owned(key)`, whether `key` holds our token (ARGV[1]). A key of another type (a
/// reentrant lock's hash) is not ours rather than a `WRONGTYPE` error; any other error (a
/// `NOPERM` of a tight ACL, say) is raised as the script's error reply.
macro_rules! owned_fn {
    () => {
        r#"local function owned(k)
    local v = redis.pcall("get", k)
    if type(v) == "table" and v.err then
        if string.find(v.err, "WRONGTYPE", 1, true) then
            return false
        end
        error(v)
    end
    return v == ARGV[1]
end
"#
    };
}
pub(crate) use owned_fn;

/// The prefix of every channel a release is announced on (see [`channel`]).
const CHANNEL_PREFIX: &str = "redlock:released:";

/// The hash tag of a key as Redis Cluster reads it: what lies between its first `{` and the
/// first `}` after it, when that is not empty.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let len = key[open + 1..].find('}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key
/// when it has none, modulo 16384.
pub(crate) fn slot(key: &str) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The channel a release of `key` is announced on (see `notify/`), in the same hash slot as
/// the key, so that a script may declare it among its keys and a cluster's sharded pub/sub can
/// carry it: `redlock:released:{<tag>}:<key>`, where the tag is the key's own hash tag, or the
/// whole key when it has none. A key with no tag of its own and a `}` in it cannot share its
/// slot with any other name: its channel is `redlock:released:<key>`. One key, one channel,
/// and [`released_key`] reads it back.
pub(crate) fn channel(key: &str) -> String {
    let mut out = String::with_capacity(CHANNEL_PREFIX.len() + 2 * key.len() + 3);
    for part in channel_parts(key) {
        out.push_str(part);
    }
    out
}

/// [`channel`] in pieces, to write without allocating.
fn channel_parts(key: &str) -> [&str; 6] {
    named_parts(CHANNEL_PREFIX, key)
}

/// `prefix` and `key` as [`channel`] joins them: another name in `key`'s hash slot (a queue's,
/// see `queue.rs`).
pub(crate) fn named(prefix: &str, key: &str) -> String {
    named_parts(prefix, key).concat()
}

fn named_parts<'a>(prefix: &'a str, key: &'a str) -> [&'a str; 6] {
    match hash_tag(key).or((!key.contains('}')).then_some(key)) {
        Some(tag) => [prefix, "{", tag, "}", ":", key],
        None => [prefix, key, "", "", "", ""],
    }
}

/// The key whose release was announced on `channel`, if it is one of ours.
pub(crate) fn released_key(channel: &str) -> Option<&str> {
    let rest = channel.strip_prefix(CHANNEL_PREFIX)?;
    // `{tag}:key`: the tag has no `}`, so its end is the first one.
    if let Some(tagged) = rest.strip_prefix('{')
        && let Some(end) = tagged.find('}')
        && end > 0
        && let Some(key) = tagged[end + 1..].strip_prefix(':')
    {
        return Some(key);
    }
    Some(rest)
}

/// Appends `WAIT k ms` in RESP to `buf`: wait until `k` replicas acknowledge every write of the
/// connection so far, for at most `ms` milliseconds (never 0, which would wait forever).
pub(crate) fn write_wait(k: u32, ms: u64, buf: &mut Vec<u8>) {
    use std::io::Write;
    let (k, ms) = (k.to_string(), ms.max(1).to_string());
    // Writing to a Vec cannot fail.
    let _ = write!(
        buf,
        "*3\r\n$4\r\nWAIT\r\n${}\r\n{k}\r\n${}\r\n{ms}\r\n",
        k.len(),
        ms.len()
    );
}

/// A Lua script and its SHA1, which `EVALSHA` names it by.
pub(crate) struct Script {
    pub source: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    pub(crate) const fn new(source: &'static str) -> Self {
        Script {
            source,
            sha: OnceLock::new(),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.source).get_hash().to_owned())
    }
}

/// What a node is asked to do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// `SET key token NX PX number`
    SetNx,
    /// `EVALSHA` of the script.
    Eval(&'static Script),
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.sha())
    }
}

/// The keys of a command.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    /// The request's key.
    Key,
    /// The request's key, then another (a fence counter).
    KeyAnd(Arc<str>),
    /// These keys instead of the request's (which then only names the set).
    List(Arc<[Arc<str>]>),
}

/// How a reply reads as a vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `OK` yes, nil no.
    Okay,
    /// 1 yes, 0 no.
    Flag,
    /// A number ≥ 0 is a yes that carries it (a count of 0 stays a yes); nil is a no.
    Count,
    /// Any reply but an error is a yes that carries it as it came ([`Vote::Raw`]).
    Raw,
}

/// One command for a node, built by a lock kind.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub op: Op,
    pub keys: Keys,
    pub number: Option<u64>,
    pub text: Option<Arc<str>>,
    pub reply: Reply,
    /// A success takes a lock, so it must not count from a node that may have forgotten keys
    /// (restart grace).
    pub acquire: bool,
    /// The batch carrying it also reads the node's `TIME` for the clock guard: acquisitions and
    /// extensions, whose validity rests on the node's clock, and which must notice when every
    /// node's clock moved on while ours stood still (see `clock.rs`).
    pub samples_clock: bool,
    /// Sending it twice is as good as once, so it can be resent when the connection turns out
    /// to be gone and the first send may or may not have run.
    pub resendable: bool,
    /// It may announce releases: each of its keys' [`channel`]s follows its keys, in the same
    /// order, so that the script declares every name it touches.
    pub announces: bool,
}

impl Command {
    /// A compare-and-* script over the request's key that may be resent.
    pub(crate) fn script(script: &'static Script, reply: Reply) -> Command {
        Command {
            op: Op::Eval(script),
            keys: Keys::Key,
            number: None,
            text: None,
            reply,
            acquire: false,
            samples_clock: false,
            resendable: true,
            announces: false,
        }
    }

    pub(crate) fn keys(mut self, keys: Keys) -> Command {
        self.keys = keys;
        self
    }

    pub(crate) fn number(mut self, n: u64) -> Command {
        self.number = Some(n);
        self
    }

    pub(crate) fn text(mut self, t: Arc<str>) -> Command {
        self.text = Some(t);
        self
    }

    pub(crate) fn acquiring(mut self) -> Command {
        self.acquire = true;
        self.samples_clock = true;
        self
    }

    /// A release: its keys' channels are declared after them.
    pub(crate) fn announcing(mut self) -> Command {
        self.announces = true;
        self
    }

    /// An extension: its batch samples the node's clock.
    pub(crate) fn extending(mut self) -> Command {
        self.samples_clock = true;
        self
    }

    /// Counts something on the node (a reentrant hold), so a repeat would count twice.
    pub(crate) fn not_resendable(mut self) -> Command {
        self.resendable = false;
        self
    }

    /// `SET key token NX PX ttl_ms`: a repeat after a first one that ran answers "not
    /// acquired", never a false yes, and the failed attempt's undo cleans up.
    pub(crate) fn set_nx(ttl_ms: u64) -> Command {
        Command {
            op: Op::SetNx,
            keys: Keys::Key,
            number: Some(ttl_ms),
            text: None,
            reply: Reply::Okay,
            acquire: true,
            samples_clock: true,
            resendable: true,
            announces: false,
        }
    }

    /// The key a cluster routes the command by: its first (all of a script's keys are in one
    /// slot, which [`keys_of`](Command::keys_of) lets a caller check).
    pub(crate) fn first_key<'a>(&'a self, key: &'a str) -> &'a str {
        match &self.keys {
            Keys::List(keys) => keys.first().map_or(key, |k| k),
            Keys::Key | Keys::KeyAnd(_) => key,
        }
    }

    /// Every name the command declares as a key for the request's `key`, channels included.
    pub(crate) fn keys_of(&self, key: &str) -> Vec<String> {
        let lock_keys: Vec<String> = match &self.keys {
            Keys::Key | Keys::KeyAnd(_) => vec![key.to_owned()],
            Keys::List(keys) => keys.iter().map(|k| k.to_string()).collect(),
        };
        let mut all = lock_keys.clone();
        if let Keys::KeyAnd(other) = &self.keys {
            all.push(other.to_string());
        }
        if self.announces && matches!(self.op, Op::Eval(_)) {
            all.extend(lock_keys.iter().map(|k| channel(k)));
        }
        all
    }

    /// Appends the command for the request's `key` and `token` to `buf` in RESP, the way
    /// redis-rs would pack it, without allocating (the worker reuses `buf` for every batch).
    /// `inline`: send a script whole with `EVAL` (on a connection whose user may not run
    /// `SCRIPT LOAD`) rather than by its hash with `EVALSHA`.
    pub(crate) fn write_resp(&self, key: &str, token: &str, inline: bool, buf: &mut Vec<u8>) {
        match self.op {
            Op::SetNx => {
                resp::header(buf, b'*', 6);
                for arg in [
                    b"SET".as_slice(),
                    key.as_bytes(),
                    token.as_bytes(),
                    b"NX",
                    b"PX",
                ] {
                    resp::bulk(buf, arg);
                }
                resp::bulk_number(buf, self.number.unwrap_or(0));
            }
            Op::Eval(script) => self.write_eval(script, key, token, inline, buf),
        }
    }

    fn write_eval(&self, script: &Script, key: &str, token: &str, inline: bool, buf: &mut Vec<u8>) {
        let (keys, announced) = match &self.keys {
            Keys::Key => (1, 1),
            Keys::KeyAnd(_) => (2, 1),
            Keys::List(keys) => (keys.len(), keys.len()),
        };
        let keys = keys + if self.announces { announced } else { 0 };
        let args =
            3 + keys + 1 + usize::from(self.number.is_some()) + usize::from(self.text.is_some());
        resp::header(buf, b'*', args);
        if inline {
            resp::bulk(buf, b"EVAL");
            resp::bulk(buf, script.source.as_bytes());
        } else {
            resp::bulk(buf, b"EVALSHA");
            resp::bulk(buf, script.sha().as_bytes());
        }
        resp::bulk_number(buf, keys as u64);
        match &self.keys {
            Keys::Key => resp::bulk(buf, key.as_bytes()),
            Keys::KeyAnd(other) => {
                resp::bulk(buf, key.as_bytes());
                resp::bulk(buf, other.as_bytes());
            }
            Keys::List(keys) => keys.iter().for_each(|k| resp::bulk(buf, k.as_bytes())),
        }
        if self.announces {
            match &self.keys {
                Keys::Key | Keys::KeyAnd(_) => resp::channel(buf, key),
                Keys::List(keys) => keys.iter().for_each(|k| resp::channel(buf, k)),
            }
        }
        resp::bulk(buf, token.as_bytes());
        if let Some(n) = self.number {
            resp::bulk_number(buf, n);
        }
        if let Some(t) = &self.text {
            resp::bulk(buf, t.as_bytes());
        }
    }

    /// The redis-rs command for the request's `key` and `token`.
    #[cfg(test)]
    pub(crate) fn encode(&self, key: &str, token: &str, inline: bool) -> redis::Cmd {
        let mut c = match self.op {
            Op::SetNx => {
                let mut c = redis::cmd("SET");
                c.arg(key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(self.number.unwrap_or(0));
                return c;
            }
            Op::Eval(script) if inline => {
                let mut c = redis::cmd("EVAL");
                c.arg(script.source);
                c
            }
            Op::Eval(script) => {
                let mut c = redis::cmd("EVALSHA");
                c.arg(script.sha());
                c
            }
        };
        let (mut keys, lock_keys): (Vec<String>, Vec<String>) = match &self.keys {
            Keys::Key => (vec![key.into()], vec![key.into()]),
            Keys::KeyAnd(other) => (vec![key.into(), other.to_string()], vec![key.into()]),
            Keys::List(list) => {
                let list: Vec<String> = list.iter().map(|k| k.to_string()).collect();
                (list.clone(), list)
            }
        };
        if self.announces {
            keys.extend(lock_keys.iter().map(|k| channel(k)));
        }
        c.arg(keys.len()).arg(keys);
        c.arg(token);
        if let Some(n) = self.number {
            c.arg(n);
        }
        if let Some(t) = &self.text {
            c.arg(&**t);
        }
        c
    }

    /// Reads a node's reply.
    pub(crate) fn interpret(&self, value: Value) -> Vote {
        match (self.reply, value) {
            (Reply::Okay, Value::Okay) => Vote::Yes,
            (Reply::Okay | Reply::Count, Value::Nil) => Vote::No,
            (Reply::Count, Value::Int(n)) if n >= 0 => Vote::Value(n as u64),
            (Reply::Flag, Value::Int(1)) => Vote::Yes,
            (Reply::Flag, Value::Int(0)) => Vote::No,
            (_, Value::ServerError(e)) => Vote::Failed(server_problem(&e)),
            (Reply::Raw, value) => Vote::Raw(value),
            (_, other) => Vote::Failed(NodeProblem::Server(format!("unexpected reply {other:?}"))),
        }
    }
}

/// `SCRIPT EXISTS` for `scripts`, in chunks of 8: Redis closes a connection not yet
/// authenticated that sends a command of more than 10 arguments, and the error that names the
/// missing password must reach the user.
pub(crate) fn script_exists(scripts: &[&Script]) -> Vec<redis::Cmd> {
    scripts
        .chunks(8)
        .map(|chunk| {
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("EXISTS");
            for script in chunk {
                cmd.arg(script.sha());
            }
            cmd
        })
        .collect()
}

/// Which scripts the replies to [`script_exists`] say the server has, in order; none if a reply
/// is not an answer (an error: an ACL refusal, say), so that every script is loaded without
/// asking again.
pub(crate) fn scripts_present(replies: Vec<Value>) -> Vec<bool> {
    let mut present = Vec::new();
    for reply in replies {
        let Value::Array(flags) = reply else {
            return Vec::new();
        };
        for flag in flags {
            present.push(matches!(flag, Value::Int(1)));
        }
    }
    present
}

/// Loads the scripts of `sets` the server does not have: those `present` says it lacks (from
/// the probe at connect), or, without it, those one round trip of [`script_exists`] finds
/// missing. A server's scripts are shared by every connection to it, so a connection to a node
/// that this or another client loaded them on loads none (a process that locked once and
/// exited sent 25 `SCRIPT LOAD`s to each node). A server that refuses `SCRIPT EXISTS` (an ACL)
/// gets every script loaded.
pub(crate) fn load_scripts(
    conn: &mut redis::Connection,
    sets: &[&[&Script]],
    present: Option<&[bool]>,
) -> redis::RedisResult<()> {
    let scripts: Vec<&Script> = sets.iter().flat_map(|set| set.iter().copied()).collect();
    if scripts.is_empty() {
        return Ok(());
    }
    let asked;
    let present = match present {
        Some(present) => present,
        None => {
            let mut pipe = redis::pipe();
            for cmd in script_exists(&scripts) {
                pipe.add_command(cmd);
            }
            asked = match pipe.query::<Vec<Value>>(conn) {
                Ok(replies) => scripts_present(replies),
                Err(e) if command_refused(&e) => Vec::new(),
                Err(e) => return Err(e),
            };
            &asked
        }
    };
    let missing: Vec<&Script> = scripts
        .iter()
        .enumerate()
        .filter(|&(i, _)| present.get(i) != Some(&true))
        .map(|(_, script)| *script)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for script in &missing {
        pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
    }
    let shas: Vec<String> = pipe.query(conn)?;
    for (script, sha) in missing.iter().zip(shas) {
        if sha != script.sha() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "SCRIPT LOAD returned an unexpected hash",
                sha,
            )));
        }
    }
    Ok(())
}

/// Whether a server error says the command is not for this user or not on this server (an
/// ACL denial, a renamed or disabled command), rather than that something went wrong.
pub(crate) fn command_refused(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    is_denied(&text)
        || text.contains("NoPerm")
        || text.contains("unknown command")
        || text.contains("unknown subcommand")
}

/// What an error reply means, the same on every server: a permission denial (each server and
/// version words it its own way, inside a script and out), or another error reply.
pub(crate) fn server_problem(e: &redis::ServerError) -> NodeProblem {
    let text = match e.details() {
        Some(details) => format!("{} {details}", e.code()),
        None => e.code().to_owned(),
    };
    if is_denied(&text) {
        NodeProblem::Denied(text)
    } else {
        NodeProblem::Server(text)
    }
}

/// Whether an error reply's text says the ACL denied a command: `NOPERM …` (Redis 7.2+, and
/// Redis 7.0 outside scripts), `ERR The user executing the script can't run this command …`
/// (Redis 7.0 inside scripts), `ERR ACL failure in script: User … has no permissions to run …`
/// (Valkey).
pub(crate) fn is_denied(text: &str) -> bool {
    text.starts_with("NOPERM")
        || text.contains("can't run this command")
        || text.contains("ACL failure in script")
        || text.contains("has no permissions to")
}

/// Whether `e` is a read or write cut short by a signal (`EINTR`). Linux never restarts a
/// socket call that has a timeout (`SO_RCVTIMEO`, which every connection here has) once the
/// process was stopped and continued (SIGSTOP or SIGTSTP, then SIGCONT; a debugger's attach,
/// a frozen cgroup): the call that was blocked fails with `EINTR`, though the node did nothing
/// wrong. redis-rs 1.8 keeps an I/O error as the `Arc` its `source` gives; a test below pins
/// that, so that a change of it fails there rather than here in silence. An error that merely
/// quotes another (several sentinels' failures in one) is not one.
pub(crate) fn interrupted(e: &redis::RedisError) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<Arc<dyn std::error::Error + Send + Sync>>())
        .and_then(|inner| inner.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
}

/// The first wait before connecting again to a node that failed a connect.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(10);

/// The wait before the next connect to a node after one that failed with `e`, the wait before
/// it having been `backoff`: doubled, up to 1 s, or up to 100 ms when the node refused the
/// connection (its host answers and nothing listens: the server is down or restarting, and a
/// try costs a round trip), so that a restarted node is back within 100 ms of listening.
pub(crate) fn next_backoff(backoff: Duration, e: &redis::RedisError) -> Duration {
    let cap = if e.is_connection_refusal() {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    (backoff * 2).min(cap)
}

/// RESP written straight into a buffer, without allocating.
mod resp {
    pub(super) fn bulk(buf: &mut Vec<u8>, arg: &[u8]) {
        header(buf, b'$', arg.len());
        buf.extend_from_slice(arg);
        buf.extend_from_slice(b"\r\n");
    }

    pub(super) fn header(buf: &mut Vec<u8>, kind: u8, n: usize) {
        buf.push(kind);
        let (digits, from) = decimal(n as u64);
        buf.extend_from_slice(&digits[from..]);
        buf.extend_from_slice(b"\r\n");
    }

    pub(super) fn bulk_number(buf: &mut Vec<u8>, n: u64) {
        let (digits, from) = decimal(n);
        bulk(buf, &digits[from..]);
    }

    /// The release channel of `key` (`super::channel`) as one bulk string.
    pub(super) fn channel(buf: &mut Vec<u8>, key: &str) {
        let parts = super::channel_parts(key);
        header(buf, b'$', parts.iter().map(|p| p.len()).sum());
        for part in parts {
            buf.extend_from_slice(part.as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
    }

    fn decimal(mut n: u64) -> ([u8; 20], usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                return (digits, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_read_cut_short_by_a_signal() {
        let eintr = std::io::Error::from_raw_os_error(libc::EINTR);
        assert!(interrupted(&redis::RedisError::from(eintr)));
        let timeout = std::io::Error::from(std::io::ErrorKind::WouldBlock);
        assert!(!interrupted(&redis::RedisError::from(timeout)));
        // One error that quotes several (every sentinel failed, one of them on EINTR).
        let quoting = redis::RedisError::from((
            redis::ErrorKind::Io,
            "no sentinel answered",
            "127.0.0.1:26379: Interrupted system call (os error 4)".to_owned(),
        ));
        assert!(!interrupted(&quoting));
    }

    #[test]
    fn writes_wait_as_redis_rs_would_pack_it() {
        let mut buf = Vec::new();
        write_wait(1, 25, &mut buf);
        assert_eq!(buf, redis::cmd("WAIT").arg(1).arg(25).get_packed_command());
        // 0 would wait forever.
        buf.clear();
        write_wait(3, 0, &mut buf);
        assert_eq!(buf, redis::cmd("WAIT").arg(3).arg(1).get_packed_command());
    }

    #[test]
    fn computes_cluster_slots() {
        // Redis Cluster's specification: CRC16 of "123456789" is 0x31C3.
        assert_eq!(slot("123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("foo{}{bar}"), slot("foo{}{bar}"));
        assert_ne!(slot("foo{}{bar}"), slot("bar"));
        // A release's channel is in its key's slot.
        for key in ["orders:42", "{u}:a", "a{b}c"] {
            assert_eq!(slot(&channel(key)), slot(key), "{key}");
        }
    }

    static ECHO: Script = Script::new("return ARGV[1]");

    #[test]
    fn permission_denials_read_the_same_on_every_server() {
        let denied = [
            "NOPERM User locker has no permissions to run the 'get' command",
            "ERR The user executing the script can't run this command or subcommand script: \
             0123abcd, on @user_script:1.",
            "ERR ACL failure in script: User locker has no permissions to run the 'get' command \
             script: 0123abcd, on @user_script:1.",
        ];
        for text in denied {
            assert!(is_denied(text), "{text}");
        }
        for text in [
            "WRONGTYPE Operation against a key",
            "ERR unknown command 'EVALSHA'",
            "OOM",
        ] {
            assert!(!is_denied(text), "{text}");
        }
    }

    #[test]
    fn arguments_go_in_a_fixed_order() {
        let cmd = Command::script(&ECHO, Reply::Flag)
            .keys(Keys::KeyAnd("other".into()))
            .number(7)
            .text("n".into());
        let packed = cmd.encode("k", "tok", false).get_packed_command();
        let text = String::from_utf8_lossy(&packed);
        let args: Vec<&str> = text
            .split("\r\n")
            .filter(|s| !s.is_empty() && !s.starts_with('*') && !s.starts_with('$'))
            .collect();
        assert_eq!(
            args,
            ["EVALSHA", ECHO.sha(), "2", "k", "other", "tok", "7", "n"]
        );
    }

    #[test]
    fn hand_written_resp_equals_what_redis_rs_packs() {
        let many: Arc<[Arc<str>]> = vec![Arc::from("a"), Arc::from("bb")].into();
        let commands = [
            Command::set_nx(10_000),
            Command::set_nx(0),
            Command::script(&ECHO, Reply::Flag),
            Command::script(&ECHO, Reply::Count)
                .keys(Keys::KeyAnd("other".into()))
                .number(u64::MAX),
            Command::script(&ECHO, Reply::Flag)
                .keys(Keys::List(many))
                .number(7)
                .text("nonce".into()),
            Command::script(&ECHO, Reply::Flag).text("".into()),
            Command::script(&ECHO, Reply::Flag)
                .text("nonce".into())
                .announcing(),
            Command::script(&ECHO, Reply::Flag)
                .keys(Keys::List(vec![Arc::from("{t}:a"), Arc::from("b}")].into()))
                .announcing(),
        ];
        for cmd in commands {
            for inline in [false, true] {
                let mut buf = Vec::new();
                cmd.write_resp("k:é", "tok", inline, &mut buf);
                assert_eq!(
                    buf,
                    cmd.encode("k:é", "tok", inline).get_packed_command(),
                    "{cmd:?}"
                );
            }
        }
    }

    #[test]
    fn a_release_channel_shares_its_keys_slot_and_reads_back() {
        assert_eq!(slot("123456789"), 0x31c3, "CRC16/XMODEM check value");
        assert_eq!(
            channel("orders:42"),
            "redlock:released:{orders:42}:orders:42"
        );
        assert_eq!(channel("{user}:1"), "redlock:released:{user}:{user}:1");
        let names = [
            "orders:42",
            "{user}:1",
            "a{b}c",
            "{}x",
            "{x",
            "x}",
            "a}b{c}",
            "redlock:sem:{pool}:3",
            "é{ü}",
            "{x}",
            "x",
        ];
        for name in names {
            let ch = channel(name);
            assert_eq!(released_key(&ch), Some(name), "{ch}");
            // A key with a `}` and no tag of its own cannot share a slot with any other name.
            if hash_tag(name).is_some() || !name.contains('}') {
                assert_eq!(slot(&ch), slot(name), "{name} -> {ch}");
            }
        }
        // One key, one channel: {x} and x differ.
        assert_ne!(channel("{x}"), channel("x"));
        assert_eq!(released_key("other:channel"), None);
    }

    #[test]
    fn replies_read_as_votes() {
        let flag = Command::script(&ECHO, Reply::Flag);
        assert_eq!(flag.interpret(Value::Int(1)), Vote::Yes);
        assert_eq!(flag.interpret(Value::Int(0)), Vote::No);
        assert!(matches!(flag.interpret(Value::Int(2)), Vote::Failed(_)));
        let count = Command::script(&ECHO, Reply::Count);
        assert_eq!(count.interpret(Value::Int(0)), Vote::Value(0));
        assert_eq!(count.interpret(Value::Nil), Vote::No);
        let set = Command::set_nx(10);
        assert_eq!(set.interpret(Value::Okay), Vote::Yes);
        assert_eq!(set.interpret(Value::Nil), Vote::No);
    }
}
