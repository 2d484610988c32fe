//! How the node words what went wrong on a connection: a [`NodeProblem`] for a caller's vote,
//! the text of a failed connect with a hint at its likely cause, and whether a server error is
//! a refusal of the command (an ACL, a renamed command) rather than a failure.
//!
//! Owns no state; uses only the crate's error types and the wire's test for a read cut short
//! by a signal.

use crate::error::NodeProblem;

/// The text of a connection error; a socket timeout reads "timed out", not as the OS's EAGAIN.
pub(super) fn describe_connect_error(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        format!("timed out: {e}")
    } else if crate::wire::interrupted(e) {
        STOPPED.to_owned()
    } else {
        plain(e)
    }
}

/// A redis-rs error in the user's words: a reply that is not the Redis protocol says so,
/// instead of the parser's position and byte.
fn plain(e: &redis::RedisError) -> String {
    if e.kind() == redis::ErrorKind::Parse {
        NOT_REDIS.to_owned()
    } else {
        e.to_string()
    }
}

const STOPPED: &str = "a read was cut short by a signal: this process was stopped and continued \
                       (SIGSTOP or SIGTSTP, then SIGCONT; a debugger, a frozen cgroup) while it \
                       waited for the node; a command in flight may have run, and the connection \
                       is replaced";

const NOT_REDIS: &str = "did not answer as a Redis server (its reply is not the Redis protocol): \
                         check the host and port";

/// What to try when a connection fails in a way typical of a TLS mismatch.
pub(super) fn tls_hint(e: &redis::RedisError, tls: bool) -> &'static str {
    let text = e.to_string();
    if tls && text.contains("CertificateRequired") {
        " (the node requires a client certificate: give one with tls_client_cert_file; \
         TLSClientCertFile in Go, --tls-client-cert-file for the redlock command)"
    } else if tls && text.contains("certificate") {
        " (the node's TLS certificate was not accepted: give its CA with tls_ca_file \
         (TLSCAFile in Go, --tls-ca-file or SSL_CERT_FILE for the redlock command), and connect \
         by a host name or IP address the certificate names)"
    } else if !tls && e.is_connection_dropped() && !e.is_connection_refusal() {
        " (if the node serves TLS on this port, use a rediss:// URL)"
    } else {
        ""
    }
}

/// A failed read or write as a caller's vote sees it.
pub(super) fn describe(e: &redis::RedisError) -> NodeProblem {
    if e.is_timeout() {
        NodeProblem::TimedOut
    } else if crate::wire::interrupted(e) {
        NodeProblem::Unavailable(STOPPED.to_owned())
    } else {
        NodeProblem::Unavailable(plain(e))
    }
}

pub(super) use crate::wire::command_refused;

/// An error of ours (not the server's): `what` failed, and `detail` says why and what to do.
pub(super) fn refusal(what: &'static str, detail: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, what, detail))
}
