//! The nodes: the options every command but `stats` takes, the node URLs they name, and the
//! client built from them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::ValueHint;

use crate::args;
use crate::exit::{EXIT_UNAVAILABLE, Failure, one_line};

/// The options every command but `stats` takes.
#[derive(clap::Args, Debug, Default)]
#[command(next_help_heading = "Nodes")]
pub struct Nodes {
    /// The nodes: redis:// or rediss:// URLs, an odd number
    ///
    /// Independent masters, not replicas of each other. A Sentinel-managed master is one node:
    /// redis+sentinel://host:port/MASTERNAME?sentinel=host:port, and so is a whole Redis
    /// Cluster: redis+cluster://host:port?seed=host:port. A URL ending in #insecure skips the
    /// certificate check, with a warning: give the CA instead. Without this option or
    /// --nodes-file, the URLs come from REDLOCK_NODES. A password here shows in `ps`: for
    /// URLs with passwords use REDLOCK_NODES or --nodes-file.
    #[arg(long, value_name = "URL,URL,...", verbatim_doc_comment)]
    pub nodes: Option<String>,
    /// Read the node URLs from a file
    ///
    /// One per line or comma-separated; lines starting with # are comments. The file should be
    /// readable by you alone when it holds a password: redlock warns otherwise.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath, verbatim_doc_comment)]
    pub nodes_file: Option<PathBuf>,
    /// How long to wait for any one node [default: 50ms]
    #[arg(long, value_name = "DUR", value_parser = args::duration)]
    pub node_timeout: Option<Duration>,
    /// Trust the CA certificates of this PEM file for rediss://
    ///
    /// Instead of the system's roots (or SSL_CERT_FILE), for rediss:// nodes.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath, verbatim_doc_comment)]
    pub tls_ca_file: Option<PathBuf>,
    /// A client certificate (PEM) for nodes that require one
    ///
    /// With its chain, for nodes with tls-auth-clients yes; goes with --tls-client-key-file.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath, verbatim_doc_comment)]
    pub tls_client_cert_file: Option<PathBuf>,
    /// The key of --tls-client-cert-file (PEM)
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub tls_client_key_file: Option<PathBuf>,
}

impl Nodes {
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

    /// Builds the client for the command `command`, and shows each node's warnings (an
    /// `#insecure` URL, a master with replicas, an evicting maxmemory-policy) on stderr once
    /// connected.
    pub fn client(&self, command: &str) -> Result<redquorum::Redlock, Failure> {
        let urls = self.urls().map_err(|m| Failure::usage(command, m))?;
        let mut builder = redquorum::Redlock::builder().nodes(&urls);
        if let Some(t) = self.node_timeout {
            if t.is_zero() {
                return Err(Failure::usage(command, "--node-timeout must be above zero"));
            }
            builder = builder.node_timeout(t);
        }
        if let Some(ca) = &self.tls_ca_file {
            builder = builder.tls_ca_file(ca);
        }
        match (&self.tls_client_cert_file, &self.tls_client_key_file) {
            (Some(cert), Some(key)) => builder = builder.tls_client_cert_file(cert, key),
            (None, None) => {}
            _ => {
                return Err(Failure::usage(
                    command,
                    "--tls-client-cert-file and --tls-client-key-file go together",
                ));
            }
        }
        let client = builder.build().map_err(|e| match e {
            redquorum::Error::InvalidArgument { message } => Failure::usage(command, message),
            other => Failure::new(EXIT_UNAVAILABLE, other),
        })?;
        // The warnings of the nodes' first connect: nothing else shows them to a user of the
        // command line.
        for node in client.node_status() {
            for warning in &node.warnings {
                errln!(
                    "redlock: warning: node {}: {}",
                    node.address,
                    one_line(warning)
                );
            }
        }
        Ok(client)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let nodes = Nodes {
            nodes_file: Some(path.clone()),
            ..Nodes::default()
        };
        let urls = nodes.urls();
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
