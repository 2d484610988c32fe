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
//!
//! `tests/election.rs` uses it too, with [`Relay::cut_on`]: a cut that starts at a given
//! command of the client's (a partition right after, or right before, a write reaches the node).

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

/// A cut to start when the client sends a command (see [`Relay::cut_on`]).
struct Trigger {
    pattern: Vec<u8>,
    skip: usize,
    mode: CutMode,
    pass: bool,
}

#[derive(Default)]
struct State {
    cut: Option<CutMode>,
    trigger: Option<Trigger>,
    /// How long what the client sends is held before it goes on (a slow link).
    delay: Duration,
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
        cut(&mut lock.lock().unwrap(), wake, mode);
    }

    /// Cuts the relay when the client sends data that contains `pattern`, after `skip` such
    /// sends have gone through: that data reaches the node before the cut when `pass` (a
    /// partition right after the command; with a blackhole, the node's reply is held), else it
    /// is held or dropped with the cut (right before it).
    #[allow(dead_code)] // used by tests/election.rs
    pub fn cut_on(&self, pattern: &str, skip: usize, mode: CutMode, pass: bool) {
        self.state.0.lock().unwrap().trigger = Some(Trigger {
            pattern: pattern.as_bytes().to_vec(),
            skip,
            mode,
            pass,
        });
    }

    /// Holds what the client sends for `delay` before passing it on, from now on.
    #[allow(dead_code)] // used by tests/election.rs
    pub fn delay(&self, delay: Duration) {
        self.state.0.lock().unwrap().delay = delay;
    }

    /// Connections it relays now (a closed one leaves once both of its pumps ended).
    pub fn connections(&self) -> usize {
        self.state.0.lock().unwrap().conns.len()
    }

    pub fn heal(&self) {
        let (lock, wake) = &*self.state;
        lock.lock().unwrap().cut = None;
        wake.notify_all();
    }
}

fn cut(state: &mut State, wake: &Condvar, mode: CutMode) {
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

/// Whether `data` from the client fires the armed trigger: then the cut is made, and the
/// answer is whether `data` still goes through.
fn fire(state: &mut State, wake: &Condvar, data: &[u8]) -> Option<bool> {
    let t = state.trigger.as_mut()?;
    if !data.windows(t.pattern.len()).any(|w| w == t.pattern) {
        return None;
    }
    if t.skip > 0 {
        t.skip -= 1;
        return None;
    }
    let t = state.trigger.take()?;
    cut(state, wake, t.mode);
    Some(t.pass)
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
    std::thread::spawn(move || pump(&s1, id, down, up, true));
    std::thread::spawn(move || pump(&s2, id, up2, down2, false));
}

/// Copies `from` to `to` until either side closes or a refusing cut closes both, holding what
/// it read while a blackhole lasts. `from_client`: `from` is the client's side, whose data may
/// fire a trigger.
fn pump(
    shared: &(Mutex<State>, Condvar),
    id: u64,
    mut from: TcpStream,
    mut to: TcpStream,
    from_client: bool,
) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let (lock, wake) = shared;
        let mut state = lock.lock().unwrap();
        if from_client && state.cut.is_none() && fire(&mut state, wake, &buf[..n]) == Some(true) {
            // Through before the cut; the node's reply meets it.
            drop(state);
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
            continue;
        }
        while state.cut == Some(CutMode::Blackhole) {
            state = wake.wait(state).unwrap();
        }
        let refused = state.cut == Some(CutMode::Refuse) || !state.conns.iter().any(|c| c.0 == id);
        let delay = if from_client {
            state.delay
        } else {
            Duration::ZERO
        };
        drop(state);
        std::thread::sleep(delay);
        if refused || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    shared.0.lock().unwrap().conns.retain(|c| c.0 != id);
}
