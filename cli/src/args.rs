//! Reading arguments: nodes, durations, signals.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The options every command takes.
#[derive(Debug, Default)]
pub struct Common {
    pub nodes: Option<String>,
    pub nodes_file: Option<PathBuf>,
    pub node_timeout: Option<Duration>,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_client_cert_file: Option<PathBuf>,
    pub tls_client_key_file: Option<PathBuf>,
}

impl Common {
    /// The node URLs: `--nodes`, else `--nodes-file`, else `REDLOCK_NODES`.
    pub fn urls(&self) -> Result<Vec<String>, String> {
        let (text, from) = if let Some(n) = &self.nodes {
            (n.clone(), "--nodes".to_owned())
        } else if let Some(path) = &self.nodes_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --nodes-file {}: {e}", path.display()))?;
            // Only whole lines are comments: a `#` in a URL (`#insecure`, a password) stays.
            let text = text
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join(",");
            warn_if_exposed(path, &text);
            (text, format!("--nodes-file {}", path.display()))
        } else {
            match std::env::var("REDLOCK_NODES") {
                Ok(v) => (v, "REDLOCK_NODES".to_owned()),
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err("REDLOCK_NODES is not valid UTF-8".to_owned());
                }
                Err(std::env::VarError::NotPresent) => {
                    return Err(
                        "no nodes given: pass --nodes URL,URL,... or set REDLOCK_NODES \
                                (or use --nodes-file)"
                            .to_owned(),
                    );
                }
            }
        };
        let urls = split_urls(&text);
        if urls.is_empty() {
            return Err(format!("{from} lists no node URLs"));
        }
        // A piece without a scheme is most likely the rest of a URL cut at a space or a comma
        // in its password: refused before any URL goes to the library, and not quoted.
        if let Some(i) = urls.iter().position(|u| !u.contains("://")) {
            let comments = if self.nodes.is_none() && self.nodes_file.is_some() {
                "; comments are whole lines starting with #"
            } else {
                ""
            };
            return Err(format!(
                "{from}: item {} is not a URL (no scheme://; not quoted, as it may be part of a \
                 password). URLs are separated by commas or white space, so write a space in a \
                 password as %20 and a comma as %2C{comments}",
                i + 1
            ));
        }
        Ok(urls)
    }
}

/// Warns when the nodes file at `path`, whose URLs are `text`, holds a password and other users
/// may read or change it.
fn warn_if_exposed(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(mode) = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777) else {
        return;
    };
    if mode & 0o077 != 0 && split_urls(text).iter().any(|url| has_password(url)) {
        errln!(
            "redlock: warning: --nodes-file {0} holds a password and is open to other users \
             (mode {mode:03o}): chmod 600 {0}",
            path.display()
        );
    }
}

/// Whether a node URL carries a password: `scheme://[user]:password@…`, or a `password=`
/// parameter (`sentinel_password=`).
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let userinfo_has_password = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'));
    let query = url.split_once('?').map_or("", |(_, q)| q);
    userinfo_has_password
        || query
            .split('&')
            .any(|p| p.split('=').next().is_some_and(|k| k.ends_with("password")))
}

/// URLs separated by commas or white space; empty entries are skipped.
pub fn split_urls(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Longest duration accepted: the library's 10-year cap.
const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// `500ms`, `30s`, `1.5s`, `5m`, `1h`; a bare number is seconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "'{text}' is not a duration (use a number with ms, s, m or h: 500ms, 30s)"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("'{text}' is not a duration (use e.g. 500ms, 30s, 5m)"))?;
    let secs = value * scale;
    if secs > MAX.as_secs_f64() {
        return Err(format!("'{text}' is too long (at most 10 years)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A signal by name (`TERM`, `SIGTERM`, case-insensitive) or number.
pub fn signal(text: &str) -> Result<i32, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let known = [
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
    ];
    if let Some((_, n)) = known.iter().find(|(k, _)| *k == name) {
        return Ok(*n);
    }
    match name.parse::<i32>() {
        Ok(n) if (1..=64).contains(&n) && n != libc::SIGSTOP => Ok(n),
        _ => Err(format!(
            "'{text}' is not a signal to end a command with (use TERM, INT, HUP, QUIT, KILL, \
             USR1, USR2, ALRM or a number)"
        )),
    }
}

/// The name of signal `n` for messages.
pub fn signal_name(n: i32) -> String {
    signal_hook::low_level::signal_name(n)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("signal {n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in [
            "",
            "s",
            "-1s",
            "1d",
            "1.2.3s",
            "abc",
            "1e3s",
            "99999999999h",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(signal("9"), Ok(9));
        assert!(signal("STOP").is_err());
        assert!(signal("0").is_err());
        assert!(signal("nope").is_err());
    }

    #[test]
    fn passwords_in_urls_are_found() {
        for url in [
            "redis://:pw@h:1",
            "redis://user:pw@h:1/0",
            "rediss://u:p%40ss@[::1]:7000#insecure",
            "redis+sentinel://h:1/m?sentinel=h:2&sentinel_password=pw",
        ] {
            assert!(has_password(url), "{url}");
        }
        for url in [
            "redis://h:1",
            "redis://user@h:1",
            "redis+sentinel://h:1/m?sentinel=h:2",
            "redis+cluster://h:1?seed=h:2",
        ] {
            assert!(!has_password(url), "{url}");
        }
    }

    #[test]
    fn a_nodes_file_keeps_a_hash_inside_a_url() {
        let path = std::env::temp_dir().join(format!("redlock-args-{}", std::process::id()));
        std::fs::write(
            &path,
            "# nodes\n  # more\nrediss://h:1/#insecure, redis://:p#w@h:2\n",
        )
        .unwrap();
        let common = Common {
            nodes_file: Some(path.clone()),
            ..Common::default()
        };
        let urls = common.urls();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            urls.unwrap(),
            ["rediss://h:1/#insecure", "redis://:p#w@h:2"]
        );
    }

    #[test]
    fn urls_split_on_commas_and_space() {
        assert_eq!(
            split_urls("redis://a:1, redis://b:2,,\nredis://c:3"),
            ["redis://a:1", "redis://b:2", "redis://c:3"]
        );
    }
}
