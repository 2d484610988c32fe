//! TLS (`rediss://`) against real redis-server processes listening on a TLS port, with a test CA
//! and certificates made by the `openssl` CLI at test time (`support/tls.rs`). Each node also
//! keeps a plain port, which the tests use to look at keys behind the library's back.
//!
//! Without `openssl` or a redis-server built with TLS, the tests that need them say why and
//! pass without checking anything (`scripts/test` installs openssl).

mod support;

use std::time::Duration;

use redquorum::{Error, NodeProblem};
use support::tls::{TlsNode, pki};
use support::{builder, timed};

const TTL: Duration = Duration::from_secs(10);

/// The problem a failed single-node acquire reports for `address`.
fn failure_at(result: redquorum::Result<redquorum::Lock>, address: &str) -> (Error, String) {
    let err = match result {
        Err(e @ Error::NoQuorum { .. }) => e,
        Err(other) => panic!("expected NoQuorum, got {other:?}"),
        Ok(lock) => panic!("expected a failure, got a lock on {}", lock.resource()),
    };
    let Error::NoQuorum { report, .. } = &err else {
        unreachable!()
    };
    let problem = report
        .failures
        .iter()
        .find(|r| r.node == address)
        .unwrap_or_else(|| panic!("no report for {address}: {err}"));
    let why = match &problem.problem {
        NodeProblem::Unavailable(why) | NodeProblem::Server(why) => why.clone(),
        other => panic!("expected a connection problem at {address}, got {other:?}"),
    };
    assert!(err.to_string().contains(address), "names the node: {err}");
    (err, why)
}

#[test]
fn lock_extend_release_over_tls_with_the_ca_option() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let nodes: Vec<TlsNode> = (0..3).map(|_| TlsNode::start(pki, false, &[])).collect();
    let urls: Vec<String> = nodes.iter().map(TlsNode::url).collect();
    let rl = builder(&urls).tls_ca_file(pki.ca()).build().unwrap();

    let lock = rl.lock("tls:orders", TTL).expect("lock over TLS");
    let token = lock.token().to_owned();
    let holding = || {
        nodes
            .iter()
            .filter(|n| n.node.get("tls:orders").as_deref() == Some(token.as_str()))
            .count()
    };
    assert!(holding() >= 2, "a quorum holds the token");
    assert!(matches!(
        rl.try_lock("tls:orders", TTL),
        Err(Error::NotAcquired { .. })
    ));
    lock.extend(Duration::from_secs(30))
        .expect("extend over TLS");
    assert!(nodes.iter().any(|n| n.node.pttl("tls:orders") > 20_000));
    lock.release().expect("release over TLS");
    assert!(support::eventually(Duration::from_secs(5), || holding() == 0));
    for status in rl.node_status() {
        assert!(status.connected, "{status:?}");
    }

    // The PEM text itself works the same.
    let pem = std::fs::read(pki.ca()).unwrap();
    let rl = builder(&urls).tls_ca_pem(pem).build().unwrap();
    rl.lock("tls:orders", TTL).unwrap().release().unwrap();
}

/// A TLS node's release subscriptions are read on redis-rs's connection, by a thread of its
/// own: a waiter still wakes on the notification.
#[test]
fn a_waiter_on_tls_nodes_wakes_on_the_release_notification() {
    let Some(pki) = pki() else { return };
    let nodes: Vec<TlsNode> = (0..3).map(|_| TlsNode::start(&pki, false, &[])).collect();
    let urls: Vec<String> = nodes.iter().map(TlsNode::url).collect();
    let plain: Vec<&support::RedisNode> = nodes.iter().map(|n| &n.node).collect();
    support::wakes_on_the_release_notification(&plain, builder(&urls).tls_ca_file(pki.ca()));
}

#[test]
fn system_roots_reject_a_private_ca_with_a_clear_error() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let node = TlsNode::start(pki, false, &[]);
    for (what, builder) in [
        ("system roots", builder(&[node.url()])),
        (
            "an unrelated CA",
            builder(&[node.url()]).tls_ca_file(pki.path("other-ca.crt")),
        ),
    ] {
        let rl = timed("build", || builder.build().unwrap()).0;
        let result = timed("try_lock", || rl.try_lock("tls:unverified", TTL)).0;
        let (err, why) = failure_at(result, &node.address());
        assert!(
            why.to_lowercase().contains("certificate"),
            "with {what}, says the certificate was not trusted: {err}"
        );
        let status = &rl.node_status()[0];
        assert!(!status.connected);
        assert!(
            status
                .last_error
                .as_deref()
                .is_some_and(|e| e.to_lowercase().contains("certificate")),
            "{status:?}"
        );
    }
    assert_eq!(node.node.get("tls:unverified"), None, "nothing was set");
}

#[test]
fn plain_url_to_a_tls_port_fails_clearly() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let node = TlsNode::start(pki, false, &[]);
    let url = format!("redis://127.0.0.1:{}", node.tls_port);
    let rl = timed("build", || builder(&[url]).build().unwrap()).0;
    let result = timed("try_lock", || rl.try_lock("tls:plain", TTL)).0;
    let (err, why) = failure_at(result, &node.address());
    assert!(why.contains("rediss://"), "suggests TLS: {err}");
    assert_eq!(node.node.get("tls:plain"), None);
}

#[test]
fn insecure_fragment_skips_verification_only_when_asked() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let node = TlsNode::start(pki, false, &[]);
    // Without the CA, verification fails (see above); `#insecure` accepts the certificate.
    let url = format!("rediss://127.0.0.1:{}/#insecure", node.tls_port);
    let rl = builder(&[url]).build().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let _listening = rl
        .on_event(move |e| {
            if e.kind == redquorum::EventKind::ServerWarning {
                let _ = tx.send(e.reason.clone().unwrap_or_default());
            }
        })
        .unwrap();
    rl.lock("tls:insecure", TTL).unwrap().release().unwrap();
    // Never silent: a warning in the node's status, and as an event (what the Python and Go
    // bindings log).
    let warnings = &rl.node_status()[0].warnings;
    assert!(
        warnings.iter().any(|w| w.contains("#insecure")),
        "{warnings:?}"
    );
    let warned = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(warned.contains("not verified"), "{warned}");
}

#[test]
fn password_over_tls_works_and_is_never_shown() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let node = TlsNode::start(pki, false, &["--requirepass", "tls-secret-pw"]);
    let good = format!("rediss://:tls-secret-pw@127.0.0.1:{}", node.tls_port);
    let bad = format!("rediss://:wrong-secret-pw@127.0.0.1:{}", node.tls_port);

    let rl = builder(std::slice::from_ref(&good))
        .tls_ca_file(pki.ca())
        .build()
        .unwrap();
    let lock = rl.lock("tls:authed", TTL).unwrap();
    for shown in [
        format!("{rl:?}"),
        format!("{lock:?}"),
        format!("{:?}", rl.node_status()),
    ] {
        assert!(!shown.contains("tls-secret-pw"), "password shown: {shown}");
    }
    lock.release().unwrap();

    let b = builder(std::slice::from_ref(&bad)).tls_ca_file(pki.ca());
    assert!(!format!("{b:?}").contains("wrong-secret-pw"));
    let rl = b.build().unwrap();
    let (err, why) = failure_at(rl.try_lock("tls:authed", TTL), &node.address());
    assert!(
        why.to_lowercase().contains("auth") || why.contains("WRONGPASS"),
        "says authentication failed: {err}"
    );
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        format!("{rl:?}"),
        format!("{:?}", rl.node_status()),
    ] {
        assert!(
            !shown.contains("wrong-secret-pw"),
            "password shown: {shown}"
        );
    }
}

#[test]
fn mutual_tls_presents_the_client_certificate() {
    let Some(pki) = pki() else { return };
    let pki = &pki;
    let node = TlsNode::start(pki, true, &[]);

    let rl = builder(&[node.url()])
        .tls_ca_file(pki.ca())
        .build()
        .unwrap();
    let (err, why) = failure_at(
        timed("try_lock", || rl.try_lock("tls:mutual", TTL)).0,
        &node.address(),
    );
    assert!(why.contains("client certificate"), "{err}");
    drop(rl);

    let rl = builder(&[node.url()])
        .tls_ca_file(pki.ca())
        .tls_client_cert_file(pki.path("client.crt"), pki.path("client.key"))
        .build()
        .unwrap();
    let shown = format!("{rl:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    rl.lock("tls:mutual", TTL).unwrap().release().unwrap();

    let cert = std::fs::read(pki.path("client.crt")).unwrap();
    let key = std::fs::read(pki.path("client.key")).unwrap();
    let b = builder(&[node.url()])
        .tls_ca_file(pki.ca())
        .tls_client_cert_pem(cert, key);
    assert!(!format!("{b:?}").contains("PRIVATE KEY"));
    let rl = b.build().unwrap();
    rl.lock("tls:mutual", TTL).unwrap().release().unwrap();
}

/// These need neither openssl nor a TLS server: the options are checked when the client is
/// built, before any connection.
#[test]
fn bad_tls_options_are_invalid_arguments() {
    let dir = std::env::temp_dir().join(format!("redlock-tls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_pem = dir.join("not-pem.txt");
    std::fs::write(&not_pem, "just text\n").unwrap();
    let missing = dir.join("missing.crt");
    let url = "rediss://127.0.0.1:1".to_owned();
    let cases: Vec<(&str, redquorum::Builder, &str)> = vec![
        (
            "missing CA file",
            builder(&[url.as_str()]).tls_ca_file(&missing),
            "missing.crt",
        ),
        (
            "CA file without a certificate",
            builder(&[url.as_str()]).tls_ca_file(&not_pem),
            "not-pem.txt",
        ),
        (
            "empty CA PEM",
            builder(&[url.as_str()]).tls_ca_pem(Vec::new()),
            "CA",
        ),
        (
            "CA given but no rediss:// node",
            builder(&["redis://127.0.0.1:1"]).tls_ca_pem(Vec::new()),
            "rediss://",
        ),
        (
            "client key that is not a key",
            builder(&[url.as_str()]).tls_client_cert_pem(
                "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n",
                "c2VjcmV0LWtleS1ieXRlcw== not a pem key",
            ),
            "client key",
        ),
        (
            "missing client key file",
            builder(&[url.as_str()]).tls_client_cert_file(&not_pem, &missing),
            "not-pem.txt",
        ),
    ];
    for (what, b, mentions) in cases {
        match b.build() {
            Err(Error::InvalidArgument { message }) => {
                assert!(message.contains(mentions), "{what}: {message}");
                assert!(
                    !message.contains("c2VjcmV0"),
                    "{what}: key text shown: {message}"
                );
            }
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
