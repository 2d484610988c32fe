//! What a sentinel answers about the master (`SENTINEL get-master-addr-by-name` and `SENTINEL
//! MASTER`), and what one connect's answers bound of the reached master's time as the master
//! ([`Tenure`]; see the parent module, "A change of master is a restart").
//!
//! May use: nothing of the crate (it reads `redis` values).

use std::time::Duration;

use redis::Value;

/// What one sentinel said: its answer (none when it knows no such master) and whether it
/// answered `SENTINEL MASTER`, or why it said nothing usable.
pub(super) type Reply = redis::RedisResult<(Option<Answer>, bool)>;

/// A sentinel's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    /// The master's host and port (`get-master-addr-by-name`).
    pub(super) at: (String, u16),
    /// The sentinel's `config-epoch` for the master: the epoch of the failover that made it the
    /// master (0 before any). A newer configuration has a higher epoch.
    pub(super) epoch: Option<u64>,
    /// A lower bound on how long `at` has been the master, when the sentinel's `SENTINEL MASTER`
    /// record is evidence about that very server (see [`Bound`]).
    bound: Option<Bound>,
}

/// A sentinel's `role-reported-time` for the master, kept only when the `SENTINEL MASTER` record
/// it comes from describes the address `get-master-addr-by-name` gave in the same reply (its
/// `ip` and `port`), with no failover under way (`flags` without `failover_in_progress`, no
/// `failover-state` other than `none`). During a failover the leader sentinel names the promoted
/// replica while its record still describes the old master, whose age it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    /// Time since the sentinel saw the server report the master role.
    master_for: Duration,
    /// The record's `runid` of the master (empty for a while after a switch: then `None`).
    runid: Option<String>,
}

impl Answer {
    /// The answer in a reply to [`Sentinel::question`](super::Sentinel::question): the address, and
    /// the `SENTINEL MASTER` record (an error reply there, from an ACL that denies it, gives no
    /// epoch and no bound).
    pub(super) fn from_replies(addr: Value, master: &Value) -> Option<Answer> {
        let at: (String, u16) = redis::from_redis_value::<Option<(String, u16)>>(addr).ok()??;
        let field = |name: &str| master_text(master, name);
        let describes_at = field("ip").as_deref() == Some(at.0.as_str())
            && field("port").and_then(|p| p.parse::<u16>().ok()) == Some(at.1);
        let quiet = field("flags")
            .is_some_and(|f| !f.split(',').any(|f| f == "failover_in_progress"))
            && field("failover-state").is_none_or(|s| s == "none");
        let bound = match master_field(master, "role-reported-time") {
            Some(ms) if describes_at && quiet => Some(Bound {
                master_for: Duration::from_millis(ms),
                runid: field("runid").filter(|r| !r.is_empty()),
            }),
            _ => None,
        };
        Some(Answer {
            at,
            epoch: master_field(master, "config-epoch"),
            bound,
        })
    }
}

/// What the sentinels said, at a connect, of how long the master reached has been the master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tenure {
    /// The bounds of the sentinels that named that master from the newest configuration heard
    /// in the same round (the highest `config-epoch`), with the epoch.
    bounds: Vec<Bound>,
    /// That epoch.
    epoch: Option<u64>,
    /// Whether any sentinel answered `SENTINEL MASTER` at all (not so where an ACL denies it).
    pub records: bool,
}

impl Tenure {
    /// Of one round's answers, what bounds the tenure of the master at `at`: the bounds of the
    /// answers that name `at` from the highest epoch of the round. An answer of an older epoch
    /// (a sentinel that has not switched), or without one, bounds nothing.
    pub(super) fn of(answers: &[Answer], at: &(String, u16), records: bool) -> Tenure {
        let top = answers.iter().map(|a| a.epoch).max().flatten();
        let bounds = answers
            .iter()
            .filter(|a| a.at == *at && top.is_some() && a.epoch == top)
            .filter_map(|a| a.bound.clone())
            .collect();
        Tenure {
            bounds,
            epoch: top,
            records,
        }
    }

    /// How long the master has been the master, bounded from below by evidence about that very
    /// server: the smallest bound whose `runid`, when the sentinel gives one, is the server's
    /// (`run_id`), when the round's epoch is no older than `newest` (the watch's, when it has
    /// heard a newer one); zero when there is no such bound, so that `restart_grace` applies.
    pub(crate) fn lower_bound(&self, run_id: Option<&str>, newest: Option<u64>) -> Duration {
        if newest.is_some() && self.epoch < newest {
            return Duration::ZERO;
        }
        self.bounds
            .iter()
            .filter(|b| match (&b.runid, run_id) {
                (Some(theirs), Some(ours)) => theirs == ours,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .map(|b| b.master_for)
            .min()
            .unwrap_or(Duration::ZERO)
    }
}

pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A field of a `SENTINEL MASTER` reply (a flat array of field, value, or a map under RESP3).
fn master_text(reply: &Value, field: &str) -> Option<String> {
    let find = |k: &Value, v: &Value| {
        (text(k).as_deref() == Some(field))
            .then(|| text(v))
            .flatten()
    };
    match reply {
        Value::Array(items) => items.chunks(2).find_map(|pair| match pair {
            [k, v] => find(k, v),
            _ => None,
        }),
        Value::Map(pairs) => pairs.iter().find_map(|(k, v)| find(k, v)),
        _ => None,
    }
}

/// A numeric field (`role-reported-time`, ms; `config-epoch`) of a `SENTINEL MASTER` reply.
fn master_field(reply: &Value, field: &str) -> Option<u64> {
    master_text(reply, field)?.parse().ok()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::topology::sentinel) fn answer(port: u16, epoch: Option<u64>) -> Answer {
        Answer {
            at: ("10.0.0.1".to_owned(), port),
            epoch,
            bound: None,
        }
    }

    /// A `SENTINEL MASTER` record: `ip`, `port`, `flags`, `role-reported-time`, `config-epoch`,
    /// `runid`, and `failover-state` when given.
    fn record(
        port: u16,
        flags: &str,
        ms: u64,
        epoch: u64,
        runid: &str,
        state: Option<&str>,
    ) -> Value {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let mut fields = vec![
            b("name"),
            b("m"),
            b("ip"),
            b("10.0.0.1"),
            b("port"),
            b(&port.to_string()),
            b("runid"),
            b(runid),
            b("flags"),
            b(flags),
            b("role-reported-time"),
            b(&ms.to_string()),
            b("config-epoch"),
            b(&epoch.to_string()),
        ];
        if let Some(state) = state {
            fields.extend([b("failover-state"), b(state)]);
        }
        Value::Array(fields)
    }

    fn addr(port: u16) -> Value {
        Value::Array(vec![
            Value::BulkString(b"10.0.0.1".to_vec()),
            Value::BulkString(port.to_string().into_bytes()),
        ])
    }

    #[test]
    fn a_record_bounds_the_age_only_of_the_server_it_describes_with_no_failover_under_way() {
        let bound = |a: Option<Answer>| a.and_then(|a| a.bound).map(|b| b.master_for);
        // The leader sentinel in a failover's last steps: it names the promoted replica (port 2)
        // while its record still describes the old master, whose age it shows.
        let reply = record(
            1,
            "master,failover_in_progress",
            14_000,
            3,
            "old",
            Some("reconf_slaves"),
        );
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        // Its own address, but a failover under way (either sign alone).
        let reply = record(2, "master,failover_in_progress", 14_000, 4, "", None);
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        let reply = record(2, "master", 14_000, 4, "", Some("wait_promotion"));
        assert_eq!(bound(Answer::from_replies(addr(2), &reply)), None);
        // A settled record of the named server.
        let reply = record(2, "master", 1_500, 4, "", Some("none"));
        assert_eq!(
            bound(Answer::from_replies(addr(2), &reply)),
            Some(Duration::from_millis(1_500))
        );
        // An ACL that denies SENTINEL MASTER: the address, no epoch, no bound.
        let denied = redis::parse_redis_value(b"-NOPERM this user has no permissions\r\n")
            .expect("an error reply");
        assert!(matches!(denied, Value::ServerError(_)), "{denied:?}");
        let answer = Answer::from_replies(addr(2), &denied).expect("the address");
        assert_eq!((answer.epoch, answer.bound), (None, None));
        assert_eq!(Answer::from_replies(Value::Nil, &reply), None);
    }

    #[test]
    fn the_tenure_is_the_smallest_bound_from_the_newest_configuration_or_zero() {
        let at = ("10.0.0.1".to_owned(), 2);
        let with = |port: u16, epoch: u64, ms: u64, runid: &str| {
            Answer::from_replies(addr(port), &record(port, "master", ms, epoch, runid, None))
                .expect("answer")
        };
        let ms = Duration::from_millis;
        // The smallest of the bounds that name the reached master from the newest epoch.
        let round = [
            with(2, 4, 9_000, ""),
            with(2, 4, 3_000, ""),
            with(1, 3, 1_000, ""),
        ];
        let tenure = Tenure::of(&round, &at, true);
        assert_eq!(tenure.lower_bound(None, None), ms(3_000));
        // A newer configuration heard elsewhere (the watch): no bound.
        assert_eq!(tenure.lower_bound(None, Some(5)), Duration::ZERO);
        assert_eq!(tenure.lower_bound(None, Some(4)), ms(3_000));
        // The reached master named only from an older configuration: no bound.
        let round = [with(2, 3, 9_000, ""), with(1, 4, 1_000, "")];
        assert_eq!(
            Tenure::of(&round, &at, true).lower_bound(None, None),
            Duration::ZERO
        );
        // A runid that is not the server's bounds nothing; an empty one does not count against.
        let round = [with(2, 4, 9_000, "abc"), with(2, 4, 7_000, "xyz")];
        let tenure = Tenure::of(&round, &at, true);
        assert_eq!(tenure.lower_bound(Some("abc"), None), ms(9_000));
        assert_eq!(tenure.lower_bound(None, None), Duration::ZERO);
        // No answers, or no epochs at all (SENTINEL MASTER denied): zero.
        assert_eq!(
            Tenure::of(&[], &at, false).lower_bound(None, None),
            Duration::ZERO
        );
        let round = [answer(2, None)];
        assert_eq!(
            Tenure::of(&round, &at, false).lower_bound(None, None),
            Duration::ZERO
        );
    }

    #[test]
    fn reads_role_reported_time() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![b("name"), b("m"), b("role-reported-time"), b("1234")]);
        assert_eq!(master_field(&reply, "role-reported-time"), Some(1234));
        assert_eq!(master_field(&reply, "config-epoch"), None);
        assert_eq!(master_field(&Value::Nil, "role-reported-time"), None);
    }
}
