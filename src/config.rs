//! Client configuration: the builder, its defaults and its validation.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};
use crate::rules::clock::Limits;
pub use crate::rules::clock::{DEFAULT_CLOCK_JUMP, DEFAULT_CLOCK_QUARANTINE};
use crate::rules::quorum::drift_allowance;
use crate::topology::{AddressMap, Target};

/// Default retries after the first attempt of [`Redlock::lock`](crate::Redlock::lock): with
/// the default delay, a busy resource is tried for about 10 s before `lock` gives up.
pub const DEFAULT_RETRY_COUNT: u32 = 50;
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
/// Longest node URL accepted, in bytes.
pub const MAX_NODE_URL: usize = 4096;

/// Builds a [`Redlock`](crate::Redlock) client; get one with [`Redlock::builder`](crate::Redlock::builder).
///
/// ```no_run
/// # use std::time::Duration;
/// let rl = redquorum::Redlock::builder()
///     .nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])
///     .retry_count(3)
///     .retry_delay(Duration::from_millis(200))
///     .build()?;
/// # Ok::<(), redquorum::Error>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) urls: Vec<String>,
    pub(crate) config: Config,
    pub(crate) tls: Tls,
    /// Test-only: addresses a cluster or the sentinels name, and where to connect instead
    /// ([`address_map_for_tests`](Builder::address_map_for_tests)).
    pub(crate) address_map: AddressMap,
}

/// TLS settings for `rediss://` nodes. Certificates are read when the client is built.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    ca: Option<Pem>,
    client_cert: Option<(Pem, Pem)>,
}

/// PEM text, or the file to read it from.
#[derive(Clone)]
enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

/// A client's settings, as [`Builder::settings`] and [`Redlock::settings`](crate::Redlock::settings)
/// show them; each is set with the [`Builder`] method of the same name, which documents it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Retries after the first attempt of [`Redlock::lock`](crate::Redlock::lock)(crate::Redlock::lock).
    pub retry_count: u32,
    /// Base delay between attempts.
    pub retry_delay: Duration,
    /// Random part of the delay between attempts.
    pub retry_jitter: Duration,
    /// Clock drift as a fraction of the TTL.
    pub drift_factor: f64,
    /// How long a call waits for any one node.
    pub node_timeout: Duration,
    /// Cap on extensions per lock, if any.
    pub max_extensions: Option<u32>,
    /// How young a node's process may be before it counts toward acquire quorums, if set.
    pub restart_grace: Option<Duration>,
    /// The clock guard's jump threshold; `None`: the guard is off.
    pub clock_jump: Option<Duration>,
    /// How long a node whose clock jumped forward stays out of acquire quorums.
    pub clock_quarantine: Duration,
    /// Whether server-probe warnings refuse a node.
    pub strict_servers: bool,
    /// Replicas that must acknowledge an acquisition's or an extension's write (`WAIT`)
    /// before a node's vote counts, if set.
    pub min_replicas: Option<u32>,
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
                clock_jump: Some(DEFAULT_CLOCK_JUMP),
                clock_quarantine: DEFAULT_CLOCK_QUARANTINE,
                strict_servers: false,
                min_replicas: None,
            },
            tls: Tls::default(),
            address_map: AddressMap::default(),
        }
    }
}

impl Builder {
    /// Adds nodes: URLs as redis-rs takes them, `redis://[user:pass@]host:port[/db]`, or
    /// `rediss://...` for TLS (see [`tls_ca_file`](Builder::tls_ca_file)); or a
    /// Sentinel-managed master as one node,
    /// `redis[s]+sentinel://[user:pass@]host:port/MASTERNAME[/db][?sentinel=host:port&…]`, where
    /// `host:port` and each `sentinel=` are sentinels, the credentials are the master's, and
    /// `sentinel_user=`/`sentinel_password=` give the sentinels' own; or a whole Redis Cluster
    /// as one node, `redis[s]+cluster://[user:pass@]host:port[?seed=host:port&…]`, where
    /// `host:port` and each `seed=` are any nodes of the cluster. A change of master counts
    /// as a restart for [`restart_grace`](Builder::restart_grace): see docs/topologies.md. A URL has at
    /// most [`MAX_NODE_URL`] bytes; a user or password percent-encodes `/ ? # & @ %` and spaces.
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

    /// Retries after the first attempt in [`Redlock::lock`](crate::Redlock::lock) (default
    /// [`DEFAULT_RETRY_COUNT`]).
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

    /// Turns the clock guard on or off (default: on). See
    /// [`clock_jump_threshold`](Builder::clock_jump_threshold) for what it does.
    pub fn clock_guard(mut self, on: bool) -> Self {
        self.config.clock_jump = if on {
            Some(self.config.clock_jump.unwrap_or(DEFAULT_CLOCK_JUMP))
        } else {
            None
        };
        self
    }

    /// The clock guard's threshold (default 50 ms; this also turns the guard on): the largest
    /// step of a node's wall clock tolerated between two samples, beyond the rate difference
    /// that `drift_factor` allows.
    ///
    /// A lock key expires on the node's own clock, so a node whose clock jumps forward (an NTP
    /// step, a VM resume, `date -s`) frees locks early. With the guard on, `TIME` rides in the
    /// pipeline of every acquire (no extra round trip) and the worker compares the node's clock
    /// with our monotonic clock, the round trips being the error bar. A forward jump puts the
    /// node in [`clock_quarantine`](Builder::clock_quarantine); a backward one is reported.
    /// At connect, a node whose clock is ahead of the other nodes' and ours by more than the
    /// threshold is quarantined too (it may have jumped before this client started). Needs the
    /// `TIME` command (without it the guard is off for that node, with a warning). What it
    /// cannot catch: see docs/operations.md, "Clock guard".
    pub fn clock_jump_threshold(mut self, threshold: Duration) -> Self {
        self.config.clock_jump = Some(threshold);
        self
    }

    /// How long a node whose clock jumped forward is kept out of acquire quorums (default
    /// 60 s). Make it at least your largest TTL: every key the jump shortened has then reached
    /// its original expiry. It still takes part in extend and release, like a node in its
    /// [`restart_grace`](Builder::restart_grace).
    pub fn clock_quarantine(mut self, quarantine: Duration) -> Self {
        self.config.clock_quarantine = quarantine;
        self
    }

    /// Refuses nodes the server probe warns about (default: off, they are only logged and shown
    /// in `node_status().warnings`): a master with connected replicas, a `maxmemory-policy`
    /// that can evict lock keys, a server whose `INFO` or `TIME` is denied. Replicas, Redis
    /// Cluster nodes and too-old servers are always refused.
    pub fn strict_servers(mut self, strict: bool) -> Self {
        self.config.strict_servers = strict;
        self
    }

    /// Counts a node's vote for an acquisition or an extension only once `WAIT k` confirms that
    /// `k` of its replicas have the write (default: off; zero turns it off). For Sentinel-managed
    /// masters, standalone masters with replicas, and Redis Cluster nodes, where every master
    /// needs `k` replicas and each vote counts once the `WAIT` on its own key's master does.
    ///
    /// A node whose replicas do not acknowledge in time votes no, with
    /// [`NodeProblem::NotReplicated`](crate::NodeProblem::NotReplicated), and the attempt's undo
    /// runs there as for any failed vote (the key was written on the master). A node with fewer
    /// connected replicas than `k` (`connected_slaves` of `INFO replication`, re-read every
    /// second while short) votes no at once with
    /// [`NodeProblem::TooFewReplicas`](crate::NodeProblem::TooFewReplicas), and says so in
    /// `node_status().warnings` (on a cluster node: any master short of `k`, named).
    ///
    /// `WAIT` blocks its connection, so these commands go over a second connection per node,
    /// with a worker of its own: releases, inspections and the client's other commands keep the
    /// first one and never wait behind a lagging replica, except a release or an undo of a key
    /// whose acquisition or extension the second has not answered yet, which follows it there
    /// so as not to overtake it. The `WAIT` timeout is half of what is
    /// left of the earliest `node_timeout` in its pipeline, and the lane stops reading for its
    /// answer at three quarters (an idle Redis ends a timed-out `WAIT` up to `1000 / hz` ms
    /// late), so the vote and its reason still come within `node_timeout`. What it protects
    /// against, and what not (asynchronous replication, Sentinel's choice of replica):
    /// `docs/guarantees.md`.
    pub fn min_replicas(mut self, k: u32) -> Self {
        self.config.min_replicas = Some(k).filter(|k| *k > 0);
        self
    }

    /// Connects to `to` wherever a Redis Cluster node's cluster names `from` (a seed, `CLUSTER
    /// SLOTS`, a `MOVED` or an `ASK`) or a Sentinel node's sentinels name `from` as the master,
    /// each `host:port`; an address not mapped is reached as named (and the sentinels
    /// themselves, at the URL's addresses, always are). Only the connection's target changes:
    /// the node keeps the named addresses for everything else (routing, the watch's verdicts,
    /// `NodeStatus`, failovers). Only for tests, which put a relay of their own between one
    /// client and one server of a group (a per-client cut); not part of the API.
    #[doc(hidden)]
    pub fn address_map_for_tests<I, A, B>(mut self, map: I) -> Self
    where
        I: IntoIterator<Item = ((A, u16), (B, u16))>,
        A: Into<String>,
        B: Into<String>,
    {
        self.address_map.0.extend(
            map.into_iter()
                .map(|((h, p), (th, tp))| ((h.into(), p), (th.into(), tp))),
        );
        self
    }

    /// Trusts the CA certificate(s) in this PEM file for `rediss://` nodes, *instead of* the
    /// system's trusted roots (which are used when no CA is given). Use it for servers whose
    /// certificates come from a private CA. Read by [`build`](Builder::build), which fails when
    /// the file is unreadable or holds no certificate.
    ///
    /// Certificates are always verified, host name included. The only way around that is
    /// redis-rs's `#insecure` URL fragment (`rediss://host:port/#insecure`), which accepts any
    /// certificate: for tests only, since anyone on the path can then impersonate the node.
    pub fn tls_ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.tls.ca = Some(Pem::File(path.as_ref().to_owned()));
        self
    }

    /// Like [`tls_ca_file`](Builder::tls_ca_file), with the PEM text itself.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Presents this client certificate (PEM file, with its chain) and private key (PEM file)
    /// to `rediss://` nodes that require clients to authenticate (`tls-auth-clients yes`).
    pub fn tls_client_cert_file(
        mut self,
        cert_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> Self {
        self.tls.client_cert = Some((
            Pem::File(cert_path.as_ref().to_owned()),
            Pem::File(key_path.as_ref().to_owned()),
        ));
        self
    }

    /// Like [`tls_client_cert_file`](Builder::tls_client_cert_file), with the PEM texts.
    pub fn tls_client_cert_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_cert = Some((Pem::Bytes(cert_pem.into()), Pem::Bytes(key_pem.into())));
        self
    }

    /// The settings so far (not yet checked: see [`check`](Builder::check)).
    pub fn settings(&self) -> &Config {
        &self.config
    }

    /// Replaces every setting with `settings`' (read with [`settings`](Builder::settings), or
    /// from a running client), keeping the nodes and the TLS settings. Checked like the others,
    /// by [`check`](Builder::check) and [`build`](Builder::build).
    pub fn with_settings(mut self, settings: Config) -> Self {
        self.config = settings;
        self
    }

    /// Checks the settings (not the nodes, which [`build`](Builder::build) checks when it
    /// parses their URLs): [`Error::InvalidArgument`] naming the first bad one. `build` runs
    /// the same checks.
    pub fn check(&self) -> Result<()> {
        let c = &self.config;
        if !(c.drift_factor.is_finite() && (0.0..1.0).contains(&c.drift_factor)) {
            return Err(Error::invalid(format!(
                "drift_factor must be at least 0 and below 1, got {}",
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
            || c.clock_jump.is_some_and(|j| j > MAX_TTL)
            || c.clock_quarantine > MAX_TTL
        {
            return Err(Error::invalid(
                "node_timeout, retry_delay, retry_jitter, restart_grace, clock_jump_threshold and \
                 clock_quarantine must each be at most 10 years",
            ));
        }
        if c.clock_jump.is_some() && c.clock_quarantine.is_zero() {
            return Err(Error::invalid(
                "clock_quarantine must be greater than zero while the clock guard is on (make it \
                 at least your largest TTL), or turn the guard off with clock_guard(false)",
            ));
        }
        Ok(())
    }

    /// Validates the settings and the URLs; [`build`](Builder::build) starts the client.
    pub(crate) fn finish(self) -> Result<(Vec<Target>, Config)> {
        if self.urls.is_empty() {
            return Err(Error::invalid(
                "no nodes: give at least one redis:// URL (Redlock wants an odd number of \
                 independent masters, e.g. 3 or 5)",
            ));
        }
        self.check()?;
        let mut targets: Vec<Target> = Vec::with_capacity(self.urls.len());
        for (i, url) in self.urls.iter().enumerate() {
            if url.len() > MAX_NODE_URL {
                return Err(Error::invalid(format!(
                    "node {i}: the URL is {} bytes long; at most {MAX_NODE_URL} are allowed",
                    url.len()
                )));
            }
            let target = Target::parse(url)
                .map_err(|why| Error::invalid(format!("node {i} ({}): {why}", redact(url))))?;
            let address = target.address();
            if let Some(j) = targets.iter().position(|t| t.address() == address) {
                return Err(Error::invalid(format!(
                    "nodes {j} and {i} are the same node ({address}): it would count twice toward \
                     the quorum"
                )));
            }
            targets.push(target);
        }
        if self.tls.is_set() && !targets.iter().any(Target::is_tls) {
            return Err(Error::invalid(
                "TLS certificates were given, but no node uses TLS: write its URL as \
                 rediss://host:port (or rediss+sentinel://host:port/MASTERNAME, \
                 rediss+cluster://host:port)",
            ));
        }
        if let Some(certificates) = self.tls.certificates()? {
            for (i, target) in targets.iter_mut().enumerate().filter(|(_, t)| t.is_tls()) {
                target
                    .set_certificates(&certificates)
                    .map_err(|e| Error::invalid(format!("node {i}: TLS settings rejected: {e}")))?;
            }
        }
        if !self.address_map.0.is_empty() {
            for target in &mut targets {
                target.set_address_map(&self.address_map);
            }
        }
        if targets.iter().any(Target::is_tls) {
            use_ring_unless_chosen();
        }
        Ok((targets, self.config))
    }
}

impl Config {
    /// Checks a TTL for a lock or an extension and returns it in whole milliseconds.
    pub(crate) fn ttl_ms(&self, ttl: Duration) -> Result<u64> {
        let ms = ttl.as_millis();
        let min = self.min_ttl_ms();
        if ms < u128::from(min) || ttl > MAX_TTL {
            let got = match ttl.subsec_nanos() % 1_000_000 {
                0 => format!("{ms} ms"),
                _ => format!("{ttl:?}"),
            };
            let why = if ttl > MAX_TTL {
                ""
            } else {
                ": below the minimum, the clock-drift allowance (ttl × drift_factor + 2 ms) \
                 leaves no validity"
            };
            return Err(Error::invalid(format!(
                "ttl must be at least {min} ms (with drift_factor {}) and at most 10 years, got \
                 {got}{why}",
                self.drift_factor
            )));
        }
        Ok(ms as u64)
    }

    /// The shortest TTL, in whole milliseconds, that leaves some validity after the drift
    /// allowance.
    pub(crate) fn min_ttl_ms(&self) -> u64 {
        // ttl > ttl × f + 2 ms from about 2 / (1 - f) ms; the allowance rounds up to a
        // microsecond, so step from just below.
        let mut ms = ((2.0 / (1.0 - self.drift_factor)).floor() as u64).max(1);
        while Duration::from_millis(ms)
            <= drift_allowance(Duration::from_millis(ms), self.drift_factor)
        {
            ms += 1;
        }
        ms
    }

    /// How long a worker waits on its socket before it calls the connection broken. Longer than
    /// `node_timeout`, so a node that is merely slow for a moment keeps its connection; callers
    /// never wait on it beyond their own `node_timeout` anyway.
    pub(crate) fn io_timeout(&self) -> Duration {
        (self.node_timeout * 2).max(Duration::from_millis(100))
    }

    /// The clock guard's limits, when it is on.
    pub(crate) fn clock_limits(&self) -> Option<Limits> {
        self.clock_jump.map(|threshold| Limits {
            threshold,
            rate: self.drift_factor,
            quarantine: self.clock_quarantine,
        })
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        self.io_timeout().max(Duration::from_millis(500))
    }
}

impl Pem {
    fn read(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(bytes) => Ok(bytes.clone()),
            Pem::File(path) => std::fs::read(path).map_err(|e| {
                Error::invalid(format!(
                    "cannot read the {what} file {}: {e}",
                    path.display()
                ))
            }),
        }
    }

    fn describe(&self, what: &str) -> String {
        match self {
            Pem::Bytes(_) => format!("the {what} PEM"),
            Pem::File(path) => format!("the {what} file {}", path.display()),
        }
    }
}

impl Tls {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.client_cert.is_some()
    }

    /// Reads and checks the certificates; `None` when no TLS option was set.
    fn certificates(&self) -> Result<Option<TlsCertificates>> {
        if !self.is_set() {
            return Ok(None);
        }
        let root_cert = match &self.ca {
            None => None,
            Some(ca) => {
                let pem = ca.read("CA certificate")?;
                let mut count = 0;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    cert.map_err(|e| {
                        Error::invalid(format!("{} is not valid PEM: {e}", ca.describe("CA")))
                    })?;
                    count += 1;
                }
                if count == 0 {
                    return Err(Error::invalid(format!(
                        "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                        ca.describe("CA")
                    )));
                }
                Some(pem)
            }
        };
        let client_tls = match &self.client_cert {
            None => None,
            Some((cert, key)) => {
                let client_cert = cert.read("client certificate")?;
                if CertificateDer::pem_slice_iter(&client_cert)
                    .next()
                    .is_none()
                {
                    return Err(Error::invalid(format!(
                        "{} holds no PEM certificate",
                        cert.describe("client certificate")
                    )));
                }
                let client_key = key.read("client key")?;
                // The parser's error could quote the key's text: say only where it was.
                if PrivateKeyDer::from_pem_slice(&client_key).is_err() {
                    return Err(Error::invalid(format!(
                        "{} holds no PEM private key",
                        key.describe("client key")
                    )));
                }
                Some(ClientTlsConfig {
                    client_cert,
                    client_key,
                })
            }
        };
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.as_ref().map(|ca| ca.describe("CA")))
            .field(
                "client_cert",
                &self
                    .client_cert
                    .as_ref()
                    .map(|(cert, _)| cert.describe("certificate")),
            )
            .finish()
    }
}

/// rustls wants one process-wide crypto provider; redis-rs leaves the choice to the
/// application. Pick ring, which this crate links, unless the host program installed one.
fn use_ring_unless_chosen() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another thread installing one is fine: any provider will do.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A node URL as errors and `Debug` output show it, with nothing of a password whatever it
/// holds. Everything between `://` (or the start, without one) and the last `@` is the user
/// part, shown as `***`, or as `user:***` when the user is plain (letters, digits, `-._~`): a
/// `/`, `?` or `#` in a user or password ends the part where a URL parser sees it, so the last
/// `@` is the only safe end. A `sentinel_password=` or `pass=` (redis-rs's Unix socket URLs)
/// value runs to the end of the URL, as a `&` or `#` in it would end it early, and shows as
/// `***`; when an `@` follows such a value, it may end a user part that holds it, and nothing
/// after the scheme shows.
pub(crate) fn redact(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let head = match secret_value(url, start) {
        Some(value) if url[value..].contains('@') => return format!("{}***", &url[..start]),
        Some(value) => &url[..value],
        None => url,
    };
    let mut shown = match head[start..].rfind('@') {
        None => head.to_owned(),
        Some(at) => {
            let (before, after) = (&head[..start], &head[start + at..]);
            match head[start..start + at].split_once(':') {
                Some((user, _)) if user.chars().all(plain) => format!("{before}{user}:***{after}"),
                _ => format!("{before}***{after}"),
            }
        }
    };
    if head.len() < url.len() {
        shown.push_str("***");
    }
    shown
}

/// Where the value of the first `sentinel_password=` or `pass=` parameter starts, after `start`
/// (any `?` or `&` may begin one: a user or password holding a `?` shifts the query). The name
/// is read as the URL parser does (`sentinel%5Fpassword` is the same), whatever its case.
fn secret_value(url: &str, start: usize) -> Option<usize> {
    url[start..].match_indices(['?', '&']).find_map(|(i, _)| {
        let name_start = start + i + 1;
        let rest = &url[name_start..];
        let name_end = rest.find(['=', '&', '?', '#'])?;
        let name = percent_encoding::percent_decode_str(&rest[..name_end]).decode_utf8_lossy();
        let secret = ["sentinel_password", "pass"]
            .iter()
            .any(|s| name.eq_ignore_ascii_case(s));
        (secret && rest[name_end..].starts_with('=')).then_some(name_start + name_end + 1)
    })
}

/// A character of a user name shown beside a hidden password: RFC 3986's unreserved ones.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        f.debug_struct("Builder")
            .field("nodes", &urls)
            .field("config", &self.config)
            .field("tls", &self.tls)
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
        assert_eq!(
            redact("redis+sentinel://u:pw@h:1/m?sentinel_user=a&sentinel_password=s3&x=1"),
            "redis+sentinel://u:***@h:1/m?sentinel_user=a&sentinel_password=***"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel_password=s3#insecure"),
            "redis+sentinel://h:1/m?sentinel_password=***"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel%5Fpassword=s3&sentinel=h:2"),
            "redis+sentinel://h:1/m?sentinel%5Fpassword=***"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel=h:2&Sentinel_Password=s3"),
            "redis+sentinel://h:1/m?sentinel=h:2&Sentinel_Password=***"
        );
        let b = Builder::default().node("redis://u:hunter2@h:1");
        assert!(!format!("{b:?}").contains("hunter2"));
    }

    #[test]
    fn redacts_what_does_not_parse() {
        // A character that ends the authority early: everything up to the last @ goes.
        assert_eq!(
            redact("redis://:pa#ss@127.0.0.1:1"),
            "redis://:***@127.0.0.1:1"
        );
        assert_eq!(redact("redis://u:a/b?c#d@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://u#x:pw@h:1"), "redis://***@h:1");
        // No scheme: the same from the start.
        assert_eq!(redact("u:pw@h:1"), "u:***@h:1");
        assert_eq!(redact("pw@h:1"), "***@h:1");
        // A sentinel password runs to the end: `&` or `#` may be part of it.
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel_password=ab&cdSECRET"),
            "redis+sentinel://h:1/m?sentinel_password=***"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel_password=ab#cdSECRET"),
            "redis+sentinel://h:1/m?sentinel_password=***"
        );
        // An @ after it may end a user part that holds it: nothing after the scheme shows.
        assert_eq!(
            redact("redis+sentinel://u:x&sentinel_password=y@h:1/m"),
            "redis+sentinel://***"
        );
        assert_eq!(
            redact("redis+sentinel://h:1/m?sentinel_password=a@b"),
            "redis+sentinel://***"
        );
        // redis-rs's Unix socket URLs carry the password as pass=.
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=x&pass=s3&user=u"),
            "redis+unix:///tmp/r.sock?db=x&pass=***"
        );
    }

    #[test]
    fn a_huge_url_is_refused_without_being_quoted() {
        let url = format!("redis://{}:1", "h".repeat(50 << 20));
        let err = Builder::default()
            .node(&url)
            .finish()
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{} bytes", url.len()))
                && text.contains(&MAX_NODE_URL.to_string()),
            "{text}"
        );
        assert!(text.len() < 300, "{} bytes of error", text.len());
    }

    /// Node URLs with each character that ends a part of a URL or changes its meaning, and a
    /// space, in the user, the password and `sentinel_password`. The secrets are `L3FT` and
    /// `R1GHT`: no error, `Debug` output or node address may show either. The text before a
    /// character in the user names this machine, should a URL parse with it as the host.
    pub(crate) fn urls_with_secrets() -> Vec<String> {
        let mut urls = Vec::new();
        for c in ['#', '/', '?', '&', '@', ':', '%', '+', ' '] {
            for (scheme, path) in [
                ("redis", ""),
                ("redis+sentinel", "/m"),
                ("redis+cluster", ""),
            ] {
                urls.push(format!(
                    "{scheme}://localhost{c}x:L3FT-R1GHT@127.0.0.1:1{path}"
                ));
                urls.push(format!("{scheme}://u:L3FT{c}R1GHT@127.0.0.1:1{path}"));
            }
            urls.push(format!(
                "redis+sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=L3FT{c}R1GHT"
            ));
            urls.push(format!(
                "redis+sentinel://127.0.0.1:1/m?sentinel_password=L3FT{c}R1GHT&sentinel=127.0.0.1:2"
            ));
        }
        urls
    }

    #[test]
    fn no_secret_shows_whatever_characters_it_holds() {
        let shows = |text: &str| text.contains("L3FT") || text.contains("R1GHT");
        let (mut refused, mut leaks) = (0, Vec::new());
        let urls = urls_with_secrets();
        for url in &urls {
            let builder = Builder::default().node(url);
            let debug = format!("{builder:?}");
            if shows(&debug) {
                leaks.push(format!("{url}: Debug shows {debug}"));
            }
            let shown = match builder.finish() {
                Err(e) => {
                    refused += 1;
                    e.to_string()
                }
                Ok((targets, _)) => targets[0].address(),
            };
            if shows(&shown) {
                leaks.push(format!("{url}: shows {shown}"));
            }
        }
        assert!(
            leaks.is_empty(),
            "{} leaks from {} URLs:\n{}",
            leaks.len(),
            urls.len(),
            leaks.join("\n")
        );
        assert!(
            refused > 20,
            "only {refused} URLs refused: the table tests too little"
        );
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
