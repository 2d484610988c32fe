//! What the URLs of the grouped node kinds share (`redis[s]+sentinel://`, `redis[s]+cluster://`):
//! the scheme and its TLS fragment, the first host and port, the credentials before it, and the
//! extra `host:port` values of the query string. Each kind parses the rest (its path and its own
//! query parameters) and keeps its own error wording, passed in here.
//!
//! It imports nothing of the crate: `cluster` and `sentinel` both build on it, and on its
//! test-only [`AddressMap`], and on [`Reach`]: how either reaches the servers it names.

use std::time::Duration;

use redis::RedisConnectionInfo;

/// The parts of a URL read so far, and the URL itself for the kind's path and query.
pub(crate) struct Head {
    pub url: url::Url,
    /// TLS (`rediss+KIND://`): `Some(insecure)`, where `#insecure` skips certificate checks.
    pub tls: Option<bool>,
    pub host: String,
    pub port: u16,
}

/// Parses `url` as `redis+KIND://` or `rediss+KIND://` (`kind` is `"sentinel"` or
/// `"cluster"`), with `default_port` when it gives none. `no_host` is the error when there is no
/// host. The errors never carry the password.
pub(crate) fn head(
    url: &str,
    kind: &str,
    default_port: u16,
    no_host: &str,
) -> Result<Head, String> {
    let parsed = url::Url::parse(url.trim()).map_err(|e| {
        if at_after_host(url) {
            format!("an @ after the host: {ENCODE}")
        } else {
            format!("{e}")
        }
    })?;
    // The rest of a user or password cut at a `/` or `#` would be read as the path or the
    // fragment (an `@` in the query may be a `sentinel_password`'s).
    if parsed.path().contains('@') || parsed.fragment().is_some_and(|f| f.contains('@')) {
        return Err(format!("an @ after the host: {ENCODE}"));
    }
    let scheme = parsed.scheme();
    let tls = if scheme.strip_prefix("redis+") == Some(kind) {
        None
    } else if scheme.strip_prefix("rediss+") == Some(kind) {
        Some(match parsed.fragment() {
            None => false,
            Some("insecure") => true,
            Some(_) => return Err("only #insecure is supported as URL fragment".into()),
        })
    } else {
        return Err(format!("unknown scheme {scheme:?}"));
    };
    if tls.is_none() && parsed.fragment().is_some() {
        return Err(format!(
            "a URL fragment (#…) is only for rediss+{kind}://…#insecure"
        ));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) if !d.is_empty() => d.to_owned(),
        Some(url::Host::Ipv4(v4)) => v4.to_string(),
        Some(url::Host::Ipv6(v6)) => v6.to_string(),
        _ => return Err(no_host.into()),
    };
    let port = parsed.port().unwrap_or(default_port);
    Ok(Head {
        url: parsed,
        tls,
        host,
        port,
    })
}

/// How to write a user or a password that holds characters a URL reserves.
pub(crate) const ENCODE: &str = "a user or password must percent-encode / ? # & @ % and spaces \
     (%2F %3F %23 %26 %40 %25 %20)";

/// Whether an `@` follows the first `/`, `?` or `#` after the scheme: a URL parser ends the
/// user part there, so the user or password holds one of them.
pub(crate) fn at_after_host(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.find(['/', '?', '#'])
        .is_some_and(|end| rest[end..].contains('@'))
}

/// `redis` with the URL's user and password, percent-decoded.
pub(crate) fn with_credentials(
    url: &url::Url,
    mut redis: RedisConnectionInfo,
) -> Result<RedisConnectionInfo, String> {
    if !url.username().is_empty() {
        redis = redis.set_username(decode(url.username(), "the user")?);
    }
    if let Some(password) = url.password() {
        redis = redis.set_password(decode(password, "the password")?);
    }
    Ok(redis)
}

/// Percent-decodes `s` (a path segment, a user, a password, a query parameter's name or value:
/// `what`, for the error, which never quotes it); a `+` stays a `+`.
pub(crate) fn decode(s: &str, what: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{what} is not valid UTF-8 once percent-decoded"))
}

/// A URL's query: its `name=value` pairs, percent-decoded as a user or a password is, and
/// whether their text may be quoted in an error.
pub(crate) struct Query {
    pub pairs: Vec<(String, String)>,
    /// False when the query holds an `@` (a user or password with a `?` in it, the rest of which
    /// landed here) or a `sentinel_password` (a `&` in its value would cut it there, and its
    /// rest would look like more parameters).
    pub quotable: bool,
}

pub(crate) fn query(url: &url::Url) -> Result<Query, String> {
    let raw = url.query().unwrap_or("");
    let mut pairs = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        pairs.push((
            decode(name, "a query parameter's name")?,
            decode(value, "a query parameter's value")?,
        ));
    }
    let quotable = !raw.contains('@') && !pairs.iter().any(|(name, _)| name == "sentinel_password");
    Ok(Query { pairs, quotable })
}

/// `unknown query parameter "name"`, or without the name when the query is not quotable.
pub(crate) fn unknown(name: &str, quotable: bool, known: &str) -> String {
    if quotable {
        format!("unknown query parameter {name:?} (known: {known})")
    } else {
        format!(
            "an unknown query parameter, not quoted as it may be part of a password ({ENCODE}); \
             known: {known}"
        )
    }
}

/// `host:port` (or `[v6]:port`), the value of the query parameter `param` (an extra seed or
/// sentinel). Never echoed when it could carry credentials (`user:password@host:port`): the
/// error then says `where_credentials_go` instead; nor when the query is not `quotable`.
pub(crate) fn host_port(
    value: &str,
    param: &str,
    where_credentials_go: &str,
    quotable: bool,
) -> Result<(String, u16), String> {
    let bad = || {
        if value.contains('@') {
            format!(
                "a {param}= value is not host:port (no credentials there: {where_credentials_go})"
            )
        } else if !quotable {
            format!(
                "a {param}= value is not host:port (not quoted as it may be part of a password: \
                 {ENCODE})"
            )
        } else {
            format!("{param}={value:?} is not host:port")
        }
    };
    let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 || host.contains(['/', '@', '?', '#']) {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

/// `host:port`, with brackets around an IPv6 address.
pub(crate) fn address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Test-only: where to connect instead of an address that a cluster or the sentinels name,
/// each `host:port` ([`Builder::address_map_for_tests`](crate::Builder::address_map_for_tests)).
/// Empty unless a test set it.
#[derive(Clone, Default)]
pub(crate) struct AddressMap(pub Vec<((String, u16), (String, u16))>);

impl AddressMap {
    /// Where to connect for the server named `host:port`: itself, unless mapped elsewhere.
    pub(crate) fn route<'a>(&'a self, host: &'a str, port: u16) -> (&'a str, u16) {
        self.0
            .iter()
            .find(|((h, p), _)| h == host && *p == port)
            .map_or((host, port), |(_, (h, p))| (h.as_str(), *p))
    }
}

/// How a grouped node (a Sentinel group, a Cluster) reaches each server it names: over TLS or
/// not, with the client's certificates, and through a test's [`AddressMap`].
#[derive(Default)]
pub(crate) struct Reach {
    /// TLS: `Some(insecure)`.
    pub tls: Option<bool>,
    pub certificates: Option<redis::TlsCertificates>,
    pub address_map: AddressMap,
}

impl Reach {
    pub(crate) fn new(tls: Option<bool>) -> Reach {
        Reach {
            tls,
            ..Reach::default()
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether TLS certificates go unverified (`#insecure`).
    pub(crate) fn is_insecure(&self) -> bool {
        self.tls == Some(true)
    }

    /// A client for the server at `host:port` (not mapped: the caller routes) with `redis`'s
    /// credentials and database.
    pub(crate) fn client(
        &self,
        host: &str,
        port: u16,
        redis: &RedisConnectionInfo,
    ) -> redis::RedisResult<redis::Client> {
        use redis::{ConnectionAddr, IntoConnectionInfo};
        let addr = match self.tls {
            None => ConnectionAddr::Tcp(host.to_owned(), port),
            Some(insecure) => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure,
                tls_params: None,
            },
        };
        let info = addr
            .into_connection_info()?
            .set_redis_settings(redis.clone());
        match &self.certificates {
            Some(certificates) if self.tls.is_some() => {
                redis::Client::build_with_tls(info, certificates.clone())
            }
            _ => redis::Client::open(info),
        }
    }

    /// A connection to `host:port` with the client's timeouts on connect, reads and writes.
    pub(crate) fn open(
        &self,
        host: &str,
        port: u16,
        redis: &RedisConnectionInfo,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let conn = self
            .client(host, port, redis)?
            .get_connection_with_timeout(connect_timeout)?;
        conn.set_read_timeout(Some(io_timeout))?;
        conn.set_write_timeout(Some(io_timeout))?;
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_map_routes_mapped_addresses_only() {
        let map = AddressMap(vec![(
            ("127.0.0.1".to_owned(), 7000),
            ("127.0.0.1".to_owned(), 9000),
        )]);
        assert_eq!(map.route("127.0.0.1", 7000), ("127.0.0.1", 9000));
        assert_eq!(map.route("127.0.0.1", 7001), ("127.0.0.1", 7001));
        assert_eq!(map.route("10.0.0.1", 7000), ("10.0.0.1", 7000));
        assert_eq!(AddressMap::default().route("h", 1), ("h", 1));
    }

    #[test]
    fn reads_the_shared_parts() {
        let h = head(
            "rediss+cluster://u:p%40ss@[::1]:7000#insecure",
            "cluster",
            6379,
            "no host",
        )
        .expect("parses");
        assert_eq!((h.host.as_str(), h.port, h.tls), ("::1", 7000, Some(true)));
        let redis = with_credentials(&h.url, RedisConnectionInfo::default()).expect("decodes");
        assert_eq!(redis.username(), Some("u"));
        assert_eq!(redis.password(), Some("p@ss"));
        let h = head("redis+sentinel://h/m", "sentinel", 26379, "no host").expect("parses");
        assert_eq!((h.port, h.tls), (26379, None));
        for (url, why) in [
            ("redis+sentinel://h/m", "unknown scheme"),
            ("redis+cluster://h#insecure", "only for rediss+cluster://"),
            ("rediss+cluster://h#x", "only #insecure"),
            ("redis+cluster:///", "no host"),
            ("redis+cluster://h/u:p@h", "an @ after the host"),
            ("rediss+cluster://h#u:p@h", "an @ after the host"),
        ] {
            let err = head(url, "cluster", 6379, "no host").err().expect(url);
            assert!(err.contains(why), "{url}: {err}");
        }
        assert_eq!(
            host_port("[::1]:5", "seed", "x", true),
            Ok(("::1".to_owned(), 5))
        );
        let err = host_port("u:s3cret@h:1", "seed", "before the host", true).unwrap_err();
        assert!(
            err.contains("before the host") && !err.contains("s3cret"),
            "{err}"
        );
        assert_eq!(address("::1", 5), "[::1]:5");
    }
}
