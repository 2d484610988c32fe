//! What the URLs of the grouped node kinds share (`redis[s]+sentinel://`, `redis[s]+cluster://`):
//! the scheme and its TLS fragment, the first host and port, the credentials before it, and the
//! extra `host:port` values of the query string. Each kind parses the rest (its path and its own
//! query parameters) and keeps its own error wording, passed in here.
//!
//! It imports nothing of the crate: `cluster.rs` and `sentinel.rs` both build on it.

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
    let parsed = url::Url::parse(url.trim()).map_err(|e| format!("{e}"))?;
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

/// `redis` with the URL's user and password, percent-decoded.
pub(crate) fn with_credentials(
    url: &url::Url,
    mut redis: RedisConnectionInfo,
) -> Result<RedisConnectionInfo, String> {
    if !url.username().is_empty() {
        redis = redis.set_username(decode(url.username())?);
    }
    if let Some(password) = url.password() {
        redis = redis.set_password(decode(password)?);
    }
    Ok(redis)
}

/// Percent-decodes a path segment, a user or a password.
pub(crate) fn decode(s: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| "the user or password is not valid UTF-8 once percent-decoded".to_owned())
}

/// `host:port` (or `[v6]:port`), the value of the query parameter `param` (an extra seed or
/// sentinel). Never echoed when it could carry credentials (`user:password@host:port`): the
/// error then says `where_credentials_go` instead.
pub(crate) fn host_port(
    value: &str,
    param: &str,
    where_credentials_go: &str,
) -> Result<(String, u16), String> {
    let bad = || {
        if value.contains('@') {
            format!(
                "a {param}= value is not host:port (no credentials there: {where_credentials_go})"
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

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            let err = head(url, "cluster", 6379, "no host").err().expect(url);
            assert!(err.contains(why), "{url}: {err}");
        }
        assert_eq!(host_port("[::1]:5", "seed", "x"), Ok(("::1".to_owned(), 5)));
        let err = host_port("u:s3cret@h:1", "seed", "before the host").unwrap_err();
        assert!(
            err.contains("before the host") && !err.contains("s3cret"),
            "{err}"
        );
        assert_eq!(address("::1", 5), "[::1]:5");
    }
}
