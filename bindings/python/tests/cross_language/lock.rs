//! Takes or probes a lock from Rust, for the cross-language tests
//! (`bindings/python/tests/test_cross_language.py`):
//!
//! ```text
//! cross_language_lock try  RESOURCE URL...   exit 0 if acquired (then released), 3 if held elsewhere
//! cross_language_lock hold RESOURCE URL...   acquire, print "HELD <token>", release when stdin closes
//! ```

use std::io::Read;
use std::time::Duration;

use redquorum::{Error, Redlock};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, resource, urls) = match args.as_slice() {
        [mode, resource, urls @ ..] if !urls.is_empty() && (mode == "try" || mode == "hold") => {
            (mode.as_str(), resource.as_str(), urls)
        }
        _ => {
            eprintln!("usage: cross_language_lock try|hold RESOURCE URL...");
            std::process::exit(2);
        }
    };
    // One attempt whose answer the tests rely on: give each node a second to answer, so a
    // briefly stalled node (a loaded machine) does not turn "held elsewhere" or "acquired"
    // into a NoQuorum failure.
    let rl = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
    let lock = match rl.try_lock(resource, Duration::from_secs(30)) {
        Ok(lock) => lock,
        Err(Error::NotAcquired { .. }) => {
            println!("NOT_ACQUIRED");
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if mode == "hold" {
        println!("HELD {}", lock.token());
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    } else {
        println!("ACQUIRED");
    }
    if let Err(e) = lock.release() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
