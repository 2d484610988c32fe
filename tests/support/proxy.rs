//! A TCP proxy in front of a node, for tests that must cut a client's connections and send its
//! next ones elsewhere at a chosen moment (a node restarted empty within milliseconds), and see
//! when a client sent a command through it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct Proxy {
    pub port: u16,
    backend: Arc<AtomicU16>,
    /// Both ends of every connection made so far.
    conns: Arc<Mutex<Vec<TcpStream>>>,
    /// When a client sent a chunk with `SUBSCRIBE` in it.
    subscribes: Arc<Mutex<Vec<Instant>>>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards each connection to `backend`'s port.
    pub fn start(backend: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = Proxy {
            port: listener.local_addr().unwrap().port(),
            backend: Arc::new(AtomicU16::new(backend)),
            conns: Arc::default(),
            subscribes: Arc::default(),
        };
        let (backend, conns) = (Arc::clone(&proxy.backend), Arc::clone(&proxy.conns));
        let subscribes = Arc::clone(&proxy.subscribes);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let port = backend.load(Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let mut all = conns.lock().unwrap();
                all.push(client.try_clone().unwrap());
                all.push(server.try_clone().unwrap());
                drop(all);
                let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let subscribes = Arc::clone(&subscribes);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if buf[..n].windows(9).any(|w| w == b"SUBSCRIBE") {
                            subscribes.lock().unwrap().push(Instant::now());
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
                let (mut from, mut to) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Forgets the `SUBSCRIBE`s seen so far.
    pub fn forget_subscribes(&self) {
        self.subscribes.lock().unwrap().clear();
    }

    /// When the first `SUBSCRIBE` since [`forget_subscribes`](Proxy::forget_subscribes) went
    /// through, if one did.
    pub fn first_subscribe(&self) -> Option<Instant> {
        self.subscribes.lock().unwrap().first().copied()
    }

    /// Cuts every connection, and sends the next ones to `backend`'s port.
    pub fn switch(&self, backend: u16) {
        self.backend.store(backend, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}
