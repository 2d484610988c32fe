//! What the `redlock` binary exposes and how it fails around its edges: the nodes' passwords
//! in the command's environment and in a nodes file, TLS from the command line (a CA, a client
//! certificate, `#insecure`), and output to a closed pipe.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use support::tls::{TlsNode, pki};
use support::{Cluster, RedisNode};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-exposure-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `redlock ARGS…` with `nodes` in `REDLOCK_NODES` (none: unset).
fn redlock(nodes: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).stdin(Stdio::null());
    match nodes {
        Some(n) => c.env("REDLOCK_NODES", n),
        None => c.env_remove("REDLOCK_NODES"),
    };
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The writing end of a pipe whose reader is gone, as `redlock status x | head` leaves it once
/// `head` has exited.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors; the reading end is closed at once and the writing
    // end is owned by the Stdio from here on.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let cluster = Cluster::start(1);
    let nodes = cluster.urls().join(",");
    for args in [
        &["--help"][..],
        &["status", "piped"],
        &["status", "--json", "piped"],
        &["nodes"],
        &["leader", "--json", "piped"],
    ] {
        let o = redlock(Some(&nodes), args)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(err, "", "{args:?} said something on stderr");
        // As a tool killed by SIGPIPE: 128 + 13.
        assert_eq!(o.status.code(), Some(141), "{args:?}: {err}");
    }
}

/// A closed standard error (`redlock run … 2>&1 | head`, once `head` has gone) neither panics
/// nor changes the outcome: the command runs under the lock and its code comes back.
#[test]
fn a_closed_stderr_changes_nothing() {
    let cluster = Cluster::start(1);
    let nodes = cluster.urls().join(",");
    let o = redlock(
        Some(&nodes),
        &[
            "run",
            "--ttl",
            "5s",
            "stderr-closed",
            "--",
            "sh",
            "-c",
            "exit 7",
        ],
    )
    .stderr(closed_pipe())
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    // A usage error, whose message goes nowhere, keeps its exit code.
    let o = redlock(Some(&nodes), &["status", "--no-such-option"])
        .stderr(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(64), "{o:?}");
}

#[test]
fn the_command_does_not_inherit_the_nodes_unless_asked() {
    let cluster = Cluster::start(1);
    let nodes = cluster.urls().join(",");
    let show = ["sh", "-c", "echo \"${REDLOCK_NODES-unset}\""];
    for (sub, name) in [("run", "env-run"), ("elect", "env-elect")] {
        let mut args = vec![sub, "--node-timeout", "500ms"];
        if sub == "elect" {
            args.push("--once");
        }
        let o = redlock(
            Some(&nodes),
            &[&args[..], &[name, "--"][..], &show[..]].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(0), "{sub}: {}", stderr(&o));
        assert_eq!(stdout(&o).trim(), "unset", "{sub}");
        // Asked: the command sees them (a nested redlock finds its nodes).
        let o = redlock(
            Some(&nodes),
            &[&args[..], &["--pass-nodes", name, "--"][..], &show[..]].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(0), "{sub}: {}", stderr(&o));
        assert_eq!(stdout(&o).trim(), nodes, "{sub} --pass-nodes");
    }
}

#[test]
fn a_nodes_file_with_a_password_warns_when_others_can_read_it() {
    let node = RedisNode::start_with(&["--requirepass", "s3cret"]);
    let dir = tmp("nodes-file");
    let with_password = dir.join("nodes");
    std::fs::write(
        &with_password,
        format!(
            "# the lock nodes\nredis://:s3cret@127.0.0.1:{}\n",
            node.port
        ),
    )
    .unwrap();
    let plain = RedisNode::start();
    let without = dir.join("plain");
    std::fs::write(&without, plain.url()).unwrap();
    let nodes = |file: &PathBuf, mode: u32| {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).unwrap();
        let o = redlock(None, &["nodes", "--nodes-file", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stderr(&o)
    };
    for mode in [0o644, 0o640, 0o604] {
        let err = nodes(&with_password, mode);
        assert!(
            err.contains("warning")
                && err.contains(with_password.to_str().unwrap())
                && err.contains("chmod 600"),
            "mode {mode:o}: {err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }
    assert_eq!(nodes(&with_password, 0o600), "");
    assert_eq!(nodes(&without, 0o644), "");
}

#[test]
fn tls_from_the_command_line() {
    let Some(pki) = pki() else { return };
    let node = TlsNode::start(&pki, false, &[]);
    let ca = pki.arg("ca.crt");
    let run = |url: &str, extra: &[&str], env: Option<(&str, &str)>| {
        let mut args = vec!["run", "--node-timeout", "500ms", "--wait", "0"];
        args.extend(extra);
        args.extend(["tls", "--", "true"]);
        let mut c = redlock(Some(url), &args);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let url = node.url();
    // Without the CA: refused, saying what to give.
    let o = run(&url, &[], None);
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tls-ca-file"), "{}", stderr(&o));
    // With it, as an option or as SSL_CERT_FILE.
    let o = run(&url, &["--tls-ca-file", &ca], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let o = run(&url, &[], Some(("SSL_CERT_FILE", &ca)));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // #insecure works, and says it is insecure, naming the node.
    let o = run(&format!("{url}/#insecure"), &[], None);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning") && err.contains("#insecure") && err.contains(&node.address()),
        "{err}"
    );

    // Mutual TLS: the client certificate and its key.
    let node = TlsNode::start(&pki, true, &[]);
    let url = node.url();
    let o = run(&url, &["--tls-ca-file", &ca], None);
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--tls-client-cert-file"),
        "{}",
        stderr(&o)
    );
    let (cert, key) = (pki.arg("client.crt"), pki.arg("client.key"));
    let o = run(
        &url,
        &[
            "--tls-ca-file",
            &ca,
            "--tls-client-cert-file",
            &cert,
            "--tls-client-key-file",
            &key,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // One without the other is a usage error.
    let o = run(&url, &["--tls-client-cert-file", &cert], None);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--tls-client-key-file"),
        "{}",
        stderr(&o)
    );
}
