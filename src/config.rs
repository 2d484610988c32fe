//! Client configuration: the builder, its defaults and its validation.

use std::fmt;
use std::time::Duration;

use crate::client::Redlock;
use crate::error::{Error, Result};
use crate::quorum::drift_allowance;

/// Default retries after the first attempt of [`Redlock::lock`].
pub const DEFAULT_RETRY_COUNT: u32 = 3;
/// Default base delay between attempts.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);
/// Default jitter: each delay is `retry_delay ± a random part of this`.
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);
/// Default clock-drift factor: validity loses `ttl * drift_factor + 2 ms`.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default time a call waits for any one node.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Largest TTL accepted: 10 years.
pub const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Builds a [`Redlock`] client; get one with [`Redlock::builder`].
///
/// ```no_run
/// # use std::time::Duration;
/// let rl = redlock::Redlock::builder()
///     .nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])
///     .retry_count(3)
///     .retry_delay(Duration::from_millis(200))
///     .build()?;
/// # Ok::<(), redlock::Error>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) urls: Vec<String>,
    pub(crate) config: Config,
}

/// The validated settings a client runs with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub retry_count: u32,
    pub retry_delay: Duration,
    pub retry_jitter: Duration,
    pub drift_factor: f64,
    pub node_timeout: Duration,
    pub max_extensions: Option<u32>,
    pub restart_grace: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            urls: Vec::new(),
            config: Config {
                retry_count: DEFAULT_RETRY_COUNT,
                retry_delay: DEFAULT_RETRY_DELAY,
                retry_jitter: DEFAULT_RETRY_JITTER,
                drift_factor: DEFAULT_DRIFT_FACTOR,
                node_timeout: DEFAULT_NODE_TIMEOUT,
                max_extensions: None,
                restart_grace: None,
            },
        }
    }
}

impl Builder {
    /// Adds nodes: URLs as redis-rs takes them, `redis://[user:pass@]host:port[/db]`.
    ///
    /// Use an odd number of independent masters (no replication between them). An even N is
    /// allowed, but tolerates no more failed nodes than N − 1 would: 4 nodes survive 1 failure,
    /// like 3.
    pub fn nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.urls
            .extend(urls.into_iter().map(|u| u.as_ref().to_owned()));
        self
    }

    /// Adds one node.
    pub fn node(mut self, url: impl AsRef<str>) -> Self {
        self.urls.push(url.as_ref().to_owned());
        self
    }

    /// Retries after the first attempt in [`Redlock::lock`] (default 3).
    pub fn retry_count(mut self, n: u32) -> Self {
        self.config.retry_count = n;
        self
    }

    /// Base delay between attempts (default 200 ms).
    pub fn retry_delay(mut self, d: Duration) -> Self {
        self.config.retry_delay = d;
        self
    }

    /// Random spread around the delay, `delay ± jitter`, so that competing clients fall out of
    /// step (default 100 ms).
    pub fn retry_jitter(mut self, d: Duration) -> Self {
        self.config.retry_jitter = d;
        self
    }

    /// Clock drift allowed between this process and the nodes, as a fraction of the TTL, in
    /// `[0, 1)` (default 0.01). Validity is `ttl − elapsed − (ttl × drift_factor + 2 ms)`.
    pub fn drift_factor(mut self, f: f64) -> Self {
        self.config.drift_factor = f;
        self
    }

    /// How long a call waits for any one node (default 50 ms). Keep it small next to the TTL:
    /// a node that does not answer in time counts as failed.
    pub fn node_timeout(mut self, d: Duration) -> Self {
        self.config.node_timeout = d;
        self
    }

    /// Caps how many times one lock may be extended (default: no cap). The seed asks for a cap
    /// so that a stuck holder cannot keep a resource forever.
    pub fn max_extensions(mut self, n: u32) -> Self {
        self.config.max_extensions = Some(n);
        self
    }

    /// Keeps a node out of acquire quorums while its Redis process is younger than `grace`
    /// (default: off; zero turns it off).
    ///
    /// A node restarted without persistence has forgotten the locks it held, so it could hand one
    /// to a second owner while the first still holds it on a bare majority (the Redlock page's
    /// restart scenario). With a grace of at least the largest TTL in use, every lock the node
    /// forgot has expired before the node counts again. The age comes from `INFO server`
    /// (`uptime_in_seconds`) at each connect, so the user needs the `INFO` command; a fresh
    /// node cannot be told apart from a restarted one, which is why this is opt-in.
    pub fn restart_grace(mut self, grace: Duration) -> Self {
        self.config.restart_grace = Some(grace).filter(|g| !g.is_zero());
        self
    }

    /// Validates the settings and starts one worker thread per node. Nodes that cannot be
    /// reached yet do not fail the build: their workers keep trying, and lock calls report them.
    pub fn build(self) -> Result<Redlock> {
        let c = &self.config;
        if self.urls.is_empty() {
            return Err(Error::invalid(
                "no nodes: give at least one redis:// URL (Redlock wants an odd number of \
                 independent masters, e.g. 3 or 5)",
            ));
        }
        if !(c.drift_factor.is_finite() && (0.0..1.0).contains(&c.drift_factor)) {
            return Err(Error::invalid(format!(
                "drift_factor must be in [0, 1), got {}",
                c.drift_factor
            )));
        }
        if c.node_timeout.is_zero() {
            return Err(Error::invalid("node_timeout must be greater than zero"));
        }
        if c.node_timeout > MAX_TTL
            || c.retry_delay > MAX_TTL
            || c.retry_jitter > MAX_TTL
            || c.restart_grace.is_some_and(|g| g > MAX_TTL)
        {
            return Err(Error::invalid(
                "node_timeout, retry_delay, retry_jitter and restart_grace must each be at most \
                 10 years",
            ));
        }
        let mut clients = Vec::with_capacity(self.urls.len());
        for (i, url) in self.urls.iter().enumerate() {
            let client = redis::Client::open(url.as_str()).map_err(|e| {
                Error::invalid(format!(
                    "node {i} ({}): not a usable Redis URL: {e}; expected \
                     redis://[user:password@]host:port[/db]",
                    redact(url)
                ))
            })?;
            let address = crate::node::address(client.get_connection_info());
            if let Some(j) = clients.iter().position(|c: &redis::Client| {
                crate::node::address(c.get_connection_info()) == address
            }) {
                return Err(Error::invalid(format!(
                    "nodes {j} and {i} are the same node ({address}): it would count twice toward \
                     the quorum"
                )));
            }
            clients.push(client);
        }
        Redlock::start(clients, self.config)
    }
}

impl Config {
    /// Checks a TTL for a lock or an extension and returns it in whole milliseconds.
    pub(crate) fn ttl_ms(&self, ttl: Duration) -> Result<u64> {
        if ttl.is_zero() {
            return Err(Error::invalid("ttl must be greater than zero"));
        }
        if ttl > MAX_TTL {
            return Err(Error::invalid(format!(
                "ttl of {} ms is larger than the maximum of {} ms (10 years)",
                ttl.as_millis(),
                MAX_TTL.as_millis()
            )));
        }
        let ms = ttl.as_millis() as u64;
        let whole = Duration::from_millis(ms);
        if ms == 0 || whole <= drift_allowance(whole, self.drift_factor) {
            return Err(Error::invalid(format!(
                "ttl of {:?} leaves no validity after the clock-drift allowance of {:?} \
                 (ttl × {} + 2 ms); use a TTL well above the time a round trip to the nodes takes",
                ttl,
                drift_allowance(whole, self.drift_factor),
                self.drift_factor
            )));
        }
        Ok(ms)
    }

    /// How long a worker waits on its socket before it calls the connection broken. Longer than
    /// `node_timeout`, so a node that is merely slow for a moment keeps its connection; callers
    /// never wait on it beyond their own `node_timeout` anyway.
    pub(crate) fn io_timeout(&self) -> Duration {
        (self.node_timeout * 2).max(Duration::from_millis(100))
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        self.io_timeout().max(Duration::from_millis(500))
    }
}

/// A URL with its password (or its whole user part, when it has no `user:` prefix) hidden.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    let shown = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_owned(),
    };
    format!("{}{}{}", &url[..scheme_end], shown, &rest[at..])
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        f.debug_struct("Builder")
            .field("nodes", &urls)
            .field("config", &self.config)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://:hunter2@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://u:hunter2@h:1"), "redis://u:***@h:1");
        assert_eq!(redact("redis://hunter2@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis://h:1/2"), "redis://h:1/2");
        assert_eq!(redact("not a url"), "not a url");
        let b = Builder::default().node("redis://u:hunter2@h:1");
        assert!(!format!("{b:?}").contains("hunter2"));
    }

    #[test]
    fn ttl_validation() {
        let c = Builder::default().config;
        assert!(c.ttl_ms(Duration::ZERO).is_err());
        assert!(c.ttl_ms(Duration::from_micros(900)).is_err());
        assert!(c.ttl_ms(Duration::from_millis(2)).is_err());
        assert_eq!(c.ttl_ms(Duration::from_millis(3)).unwrap(), 3);
        assert_eq!(c.ttl_ms(MAX_TTL).unwrap(), MAX_TTL.as_millis() as u64);
        assert!(c.ttl_ms(MAX_TTL + Duration::from_millis(1)).is_err());
    }
}
