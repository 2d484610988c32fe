//! The extender: one thread per client that keeps its auto-extended locks alive.
//!
//! Why one thread per client and not one per lock: a service holding a thousand locks should not
//! hold a thousand sleeping threads, and one thread with a deadline-ordered queue serves them
//! all, since an extension is a short quorum call that the node workers pipeline.
//!
//! Lifetime rules, each of which a user relies on:
//! - The thread is spawned on the first auto-extended lock and holds only a `Weak` to the
//!   client's shared state, so it never keeps the client alive. It takes a strong reference just
//!   for the duration of one extension. When the client's state is dropped (the last `Redlock`
//!   clone and the last `Lock` are gone), its job channel disconnects and the thread ends;
//!   `Inner::drop` joins it, bounded like the node workers.
//! - A lock leaves the queue at its next due time once it is released, dropped (a panicking
//!   holder drops it while unwinding) or lost. Release and Drop take the lock's `op` mutex and
//!   mark it released; the extender checks that mark under the same mutex before each extension,
//!   so no extension can reach a node after a release or drop has begun.
//! - Each extension is an ordinary quorum extend with the validity rule, sent at a fraction of
//!   the TTL (default 1/3). `NoQuorum` is retried at the next tick while validity remains;
//!   a refusal (the keys are gone or belong to another owner) or validity running out marks the
//!   lock lost, which disconnects `Lock::lost()` receivers and runs the `on_lost` callbacks on
//!   this thread. A failed extension never deletes keys (the extend script only `PEXPIRE`s).
//! - `max_hold` and the client's `max_extensions` stop extending; the lock then runs out at its
//!   deadline, where it is reported lost if it was still held.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Weak};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::client::lock::Shared;
use crate::engine::Engine;
use crate::telemetry::{LOST_EXPIRED, LOST_SUSPENDED};

const STACK: usize = 256 * 1024;

/// One auto-extended lock, as the extender sees it.
pub(crate) struct Job {
    pub lock: Arc<Shared>,
    pub ttl: Duration,
    pub every: Duration,
    /// No extension is started after this.
    pub hold_until: Option<Instant>,
    /// Extending has ended (`max_hold` or `max_extensions` reached); only the deadline remains.
    pub capped: bool,
}

/// The client's handle on its extender thread.
pub(crate) struct Watchdog {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
    id: ThreadId,
    exited: Receiver<()>,
}

impl Watchdog {
    pub(crate) fn spawn(client: Weak<Engine>) -> std::io::Result<Watchdog> {
        let (jobs, rx) = crossbeam_channel::unbounded();
        let (exited_tx, exited) = crossbeam_channel::bounded(0);
        let thread = std::thread::Builder::new()
            .name("redlock-extender".into())
            .stack_size(STACK)
            .spawn(move || run(client, rx, exited_tx))?;
        Ok(Watchdog {
            jobs,
            id: thread.thread().id(),
            thread,
            exited,
        })
    }

    pub(crate) fn add(&self, job: Job) {
        // The thread ends only when this sender is dropped, so this cannot fail while we exist.
        let _ = self.jobs.send(job);
    }

    /// Stops the thread: waits up to `limit` for it unless called on the thread itself (the
    /// client's last reference can be dropped there, by the end of an extension).
    pub(crate) fn stop(self, limit: Duration) {
        let Watchdog {
            jobs,
            thread,
            id,
            exited,
        } = self;
        drop(jobs);
        if std::thread::current().id() == id {
            return;
        }
        if let Err(RecvTimeoutError::Disconnected) = exited.recv_timeout(limit) {
            let _ = thread.join();
        }
    }
}

fn run(client: Weak<Engine>, jobs: Receiver<Job>, _exited: Sender<()>) {
    // Due times with a sequence number, so that equal times never compare the jobs.
    let mut queue: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut pending: HashMap<u64, Job> = HashMap::new();
    let mut seq: u64 = 0;
    loop {
        let received = match queue.peek() {
            Some(Reverse((at, _))) => jobs.recv_deadline(*at),
            None => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(job) => {
                seq += 1;
                queue.push(Reverse((Instant::now() + job.every, seq)));
                pending.insert(seq, job);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Some(&Reverse((at, id))) = queue.peek() {
            if at > Instant::now() {
                break;
            }
            queue.pop();
            let Some(mut job) = pending.remove(&id) else {
                continue;
            };
            let Some(engine) = client.upgrade() else {
                return;
            };
            if let Some(at) = tick(&engine, &mut job) {
                queue.push(Reverse((at, id)));
                pending.insert(id, job);
            }
        }
    }
}

/// Extends one due lock, or finds it ended. Returns when it is due next, if ever.
fn tick(engine: &Engine, job: &mut Job) -> Option<Instant> {
    let lock = Arc::clone(&job.lock);
    let (next, lost) = {
        let _op = lock.op();
        if lock.is_over() {
            return None;
        }
        let now = Instant::now();
        let deadline = lock.deadline();
        job.capped |= job.hold_until.is_some_and(|t| now >= t)
            || lock
                .max_extensions()
                .is_some_and(|max| lock.extensions() >= max);
        if lock.host_was_suspended() {
            // Our host was suspended: the validity, kept on our monotonic clock, overstates
            // what is left on the nodes.
            (None, Some(LOST_SUSPENDED))
        } else if now >= deadline {
            // Validity ran out before an extension succeeded.
            (None, Some(LOST_EXPIRED))
        } else if job.capped {
            // Extending has ended; report the lock lost when it runs out, if still held then.
            return Some(deadline);
        } else {
            match lock.extend_locked(engine, job.ttl) {
                (Ok(()), _) => (Some(Instant::now() + job.every), None),
                (Err(_), Some(reason)) => (None, Some(reason)),
                (Err(_), None) => {
                    // NoQuorum or a node error: the old validity still stands (or a shorter
                    // one); retry while it does, sooner than the regular interval.
                    let retry = (job.every / 2).max(engine.config.node_timeout);
                    (Some((Instant::now() + retry).min(lock.deadline())), None)
                }
            }
        }
    };
    if let Some(reason) = lost {
        lock.mark_lost(reason);
    }
    next
}
