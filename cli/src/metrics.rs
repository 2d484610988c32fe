//! `--metrics-addr`: the client's counters in the Prometheus text format, served over HTTP while
//! `run` or `elect` runs its command.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use redlock::Redlock;

use crate::{EXIT_SOFTWARE, Failure};

/// Where to listen: `PORT` (on localhost), `HOST:PORT` or `[V6]:PORT`.
pub fn address(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("--metrics-addr is empty: give PORT or HOST:PORT".into());
    }
    if text.parse::<u16>().is_ok() {
        return Ok(format!("127.0.0.1:{text}"));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(text.into()),
        _ => Err(format!(
            "--metrics-addr {text}: give PORT (served on localhost) or HOST:PORT"
        )),
    }
}

/// Binds `addr` and serves `GET /metrics` from a thread of its own for as long as the process
/// runs.
pub fn serve(addr: &str, client: &Redlock) -> Result<(), Failure> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        Failure::new(
            EXIT_SOFTWARE,
            format!("cannot serve metrics on {addr}: {e}"),
        )
    })?;
    let bound = listener
        .local_addr()
        .map_or_else(|_| addr.to_owned(), |a| a.to_string());
    let client = client.clone();
    std::thread::Builder::new()
        .name("redlock-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, &client);
            }
        })
        .map_err(|e| Failure::new(EXIT_SOFTWARE, format!("cannot start a thread: {e}")))?;
    eprintln!("redlock: serving metrics on http://{bound}/metrics");
    Ok(())
}

fn answer(stream: TcpStream, client: &Redlock) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers, up to the blank line.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let path = request.split(' ').nth(1).unwrap_or("");
    let (status, kind, body) = if request.starts_with("GET ") && (path == "/metrics" || path == "/")
    {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            client.stats().prometheus(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: GET /metrics\n".to_owned(),
        )
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_localhost() {
        assert_eq!(address("9464").unwrap(), "127.0.0.1:9464");
        assert_eq!(address("0.0.0.0:9464").unwrap(), "0.0.0.0:9464");
        assert_eq!(address("[::1]:9464").unwrap(), "[::1]:9464");
        assert!(address("").is_err());
        assert!(address("host").is_err());
        assert!(address(":9464").is_err());
        assert!(address("host:99999").is_err());
    }
}
