//! TLS test fixtures: a test CA and certificates made by the `openssl` CLI at test time, and
//! redis-server processes with a TLS port beside their plain one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{RedisNode, free_port, server_binary};

/// A CA, a server certificate for 127.0.0.1/localhost and a client certificate signed by it,
/// plus a second CA that signed nothing here.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    pub fn ca(&self) -> PathBuf {
        self.path("ca.crt")
    }
    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Makes the certificates (P-256 keys: quick to generate) in a fresh temp dir.
fn make_pki() -> Result<Pki, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "redlock-tls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // From here on, dropping the Pki removes the directory, also on failure.
    let pki = Pki { dir };
    let dir = &pki.dir;
    std::fs::write(
        pki.path("server.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n\
         subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .map_err(|e| e.to_string())?;
    std::fs::write(
        pki.path("client.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .map_err(|e| e.to_string())?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (ca, cn) in [("ca", "redlock test CA"), ("other-ca", "unrelated CA")] {
        let (key, crt, subj) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN={cn}"),
        );
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &crt, "-days", "2", "-subj", &subj]);
        openssl(dir, &args)?;
    }
    for (who, cn) in [("server", "localhost"), ("client", "locker")] {
        let (key, csr, crt, ext) = (
            format!("{who}.key"),
            format!("{who}.csr"),
            format!("{who}.crt"),
            format!("{who}.ext"),
        );
        let subj = format!("/CN={cn}");
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(dir, &args)?;
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        )?;
    }
    Ok(pki)
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_args(pki: &Pki, tls_port: u16, auth_clients: bool) -> Vec<String> {
    vec![
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        pki.arg("server.crt"),
        "--tls-key-file".into(),
        pki.arg("server.key"),
        "--tls-ca-cert-file".into(),
        pki.arg("ca.crt"),
        "--tls-auth-clients".into(),
        if auth_clients { "yes" } else { "no" }.into(),
    ]
}

/// Whether this redis-server serves TLS: starts one on a TLS port only and waits until it
/// listens (or exits, saying why).
fn probe_redis_tls(pki: &Pki) -> Result<(), String> {
    let port = free_port();
    let server = server_binary();
    let log = pki.path("probe.log");
    let mut child = Command::new(&server)
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--logfile", &log.display().to_string()])
        .args(tls_args(pki, port, false))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {server}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let result = loop {
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            break Err(format!(
                "{server} with --tls-port exited ({status}): {said}"
            ));
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err(format!(
                "{server} with --tls-port did not listen within 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Fresh certificates for one test; `None` (after saying why) when TLS cannot be tested.
pub fn pki() -> Option<Pki> {
    let made = make_pki().and_then(|pki| probe_redis_tls(&pki).map(|()| pki));
    match made {
        Ok(pki) => Some(pki),
        Err(why) => {
            eprintln!("SKIPPED: TLS cannot be tested here: {why}");
            None
        }
    }
}

/// A node with a plain port (for looking behind the library's back) and a TLS port.
pub struct TlsNode {
    pub node: RedisNode,
    pub tls_port: u16,
}

impl TlsNode {
    pub fn start(pki: &Pki, auth_clients: bool, extra: &[&str]) -> TlsNode {
        // Another test can take the free TLS port first (support retries only its plain
        // port): pick a new one and try again.
        for _ in 0..4 {
            let tls_port = free_port();
            let mut args = tls_args(pki, tls_port, auth_clients);
            args.extend(extra.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Ok(node) = std::panic::catch_unwind(|| RedisNode::start_with(&args)) {
                return TlsNode { node, tls_port };
            }
        }
        panic!("could not start a redis-server with TLS");
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.tls_port)
    }
}
