//! Per-client partitions: a TCP relay per (client process, lock node), run by the parent. Each
//! client process connects to its own relays instead of the nodes, so the driver can cut one
//! client off from some nodes while the others still reach them: clients that see different
//! subsets of nodes. A cut either refuses (every connection through the relay is closed, and
//! new ones are closed as soon as they are accepted: a reset, a refused connect) or blackholes
//! (connections stay open and silent; what was sent is held, as TCP's retransmissions would
//! hold it, and delivered after the heal, late). A heal lets everything through again.
//!
//! The key probes and the parent's own checks connect to the nodes directly: they observe the
//! nodes, they are not clients under test.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutMode {
    Refuse,
    Blackhole,
}

impl CutMode {
    pub fn name(self) -> &'static str {
        match self {
            CutMode::Refuse => "refuse",
            CutMode::Blackhole => "blackhole",
        }
    }
}

#[derive(Default)]
struct State {
    cut: Option<CutMode>,
    /// Both sockets of every relayed connection, by id, so that a refusing cut can close them.
    conns: Vec<(u64, TcpStream, TcpStream)>,
    next_id: u64,
}

/// One relay: a listening port that forwards to one node.
pub struct Relay {
    pub port: u16,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Relay {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `node_port`.
    pub fn start(node_port: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay: bind");
        let port = listener.local_addr().expect("relay: local addr").port();
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for down in listener.incoming() {
                let Ok(down) = down else { continue };
                accept(&shared, down, node_port);
            }
        });
        Relay { port, state }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn cut(&self, mode: CutMode) {
        let (lock, wake) = &*self.state;
        let mut state = lock.lock().unwrap();
        state.cut = Some(mode);
        if mode == CutMode::Refuse {
            for (_, down, up) in state.conns.drain(..) {
                let _ = down.shutdown(Shutdown::Both);
                let _ = up.shutdown(Shutdown::Both);
            }
            // Pumps holding data from a blackhole before this wake up and drop it.
            wake.notify_all();
        }
    }

    pub fn heal(&self) {
        let (lock, wake) = &*self.state;
        lock.lock().unwrap().cut = None;
        wake.notify_all();
    }
}

fn accept(shared: &Arc<(Mutex<State>, Condvar)>, down: TcpStream, node_port: u16) {
    if shared.0.lock().unwrap().cut == Some(CutMode::Refuse) {
        return; // dropped: closed at once
    }
    // A node that is down refuses here, and the client sees its connection closed.
    let Ok(up) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], node_port).into(), Duration::from_secs(1))
    else {
        return;
    };
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (Ok(down2), Ok(up2)) = (down.try_clone(), up.try_clone()) else {
        return;
    };
    let id = {
        let mut state = shared.0.lock().unwrap();
        let id = state.next_id;
        state.next_id += 1;
        let (Ok(d), Ok(u)) = (down.try_clone(), up.try_clone()) else {
            return;
        };
        state.conns.push((id, d, u));
        id
    };
    let (s1, s2) = (Arc::clone(shared), Arc::clone(shared));
    std::thread::spawn(move || pump(&s1, id, down, up));
    std::thread::spawn(move || pump(&s2, id, up2, down2));
}

/// Copies `from` to `to` until either side closes or a refusing cut closes both, holding what
/// it read while a blackhole lasts.
fn pump(shared: &(Mutex<State>, Condvar), id: u64, mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let (lock, wake) = shared;
        let mut state = lock.lock().unwrap();
        while state.cut == Some(CutMode::Blackhole) {
            state = wake.wait(state).unwrap();
        }
        let refused = state.cut == Some(CutMode::Refuse) || !state.conns.iter().any(|c| c.0 == id);
        drop(state);
        if refused || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    shared.0.lock().unwrap().conns.retain(|c| c.0 != id);
}
