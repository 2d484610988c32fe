//! A worker's job queue: a crossbeam channel whose worker does not yield the core on a busy
//! machine while it waits.
//!
//! A blocking receive on a crossbeam channel that finds it empty calls `sched_yield` four times
//! before it sleeps (its backoff), and a receive with a deadline does so even when the deadline
//! is microseconds away. On a machine with no idle core a yield may hand the core to other
//! runnable threads for a time slice (see `sync::yield_if_cheap`): a chaos client's workers were
//! runnable for 280 ms of 300 while running 2, and its callers, which wait for them, returned
//! seconds past `node_timeout`. So the worker never makes crossbeam's blocking receive: it polls
//! the channel (`try_recv`, which itself may yield briefly while a sender is halfway through a
//! write) and yields only while yields are cheap (a few times before it sleeps, as crossbeam
//! does, or until a deadline under [`SHORT_WAIT`]), and otherwise parks until a sender unparks
//! it or the deadline passes.
//!
//! No job is left waiting on a parked worker: the worker marks itself asleep and then looks at
//! the channel once more, and a sender queues its job and then looks at the mark, each with a
//! sequentially consistent fence between its write and its read, so at least one of them sees
//! the other's (the worker the job, or the sender the mark, and then unparks it; an unpark that
//! comes before the park makes the park return at once). The last sender going away unparks the
//! worker too, which then finds the channel disconnected.

use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::job::Job;

/// A wait for a job that ends sooner than this keeps looking (yielding while that is cheap)
/// rather than parking: a park's wake-up takes about as long, and timer slack stretches a short
/// sleep to about 50 µs.
const SHORT_WAIT: Duration = Duration::from_micros(100);
/// Looks (each after a cheap yield) before a longer wait parks, as crossbeam's backoff.
const YIELDS_BEFORE_SLEEP: u32 = 4;

/// The receiving thread (the worker, set on its first sleep) and whether it is parked (or about
/// to be). Set once and read without a lock: a sender preempted while holding a lock here would
/// keep the worker from sleeping until it runs again.
#[derive(Default)]
struct Wake {
    thread: OnceLock<Thread>,
    asleep: AtomicBool,
}

impl Wake {
    fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// Names the current thread as the one to wake: the first thread that sleeps on the queue,
    /// the only one that receives from it.
    fn register(&self) {
        let thread = self.thread.get_or_init(std::thread::current);
        debug_assert_eq!(
            thread.id(),
            std::thread::current().id(),
            "a worker's queue is received from by its worker alone"
        );
    }
}

/// A worker's queue: the callers' side ([`JobSender`]) and the worker's ([`JobReceiver`]).
pub(super) fn queue() -> (JobSender, JobReceiver) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let wake = Arc::new(Wake::default());
    (
        JobSender {
            tx: Some(tx),
            wake: Arc::clone(&wake),
        },
        JobReceiver { rx, wake },
    )
}

/// Where callers queue jobs for one worker; the only sender of its queue.
pub(super) struct JobSender {
    /// Always `Some` until dropped (taken in `Drop`, so that the worker wakes to a disconnected
    /// channel).
    tx: Option<Sender<Job>>,
    wake: Arc<Wake>,
}

impl JobSender {
    /// Queues `job`, waking the worker if it sleeps; gives the job back if the worker is gone.
    pub(super) fn send(&self, job: Job) -> Option<Job> {
        let Some(tx) = &self.tx else {
            return Some(job);
        };
        if let Err(e) = tx.send(job) {
            return Some(e.0);
        }
        fence(Ordering::SeqCst);
        if self.wake.asleep.load(Ordering::SeqCst) {
            self.wake.unpark();
        }
        None
    }
}

impl Drop for JobSender {
    fn drop(&mut self) {
        drop(self.tx.take());
        fence(Ordering::SeqCst);
        self.wake.unpark();
    }
}

/// The worker's end of its queue.
pub(super) struct JobReceiver {
    rx: Receiver<Job>,
    wake: Arc<Wake>,
}

impl JobReceiver {
    pub(super) fn try_recv(&self) -> Result<Job, TryRecvError> {
        self.rx.try_recv()
    }

    /// The next job, waiting for one until `deadline` (`None`: for as long as it takes).
    pub(super) fn recv_deadline(&self, deadline: Option<Instant>) -> Result<Job, RecvTimeoutError> {
        let mut yields = 0;
        loop {
            match self.rx.try_recv() {
                Ok(job) => return Ok(job),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => return Err(RecvTimeoutError::Timeout),
                Some(d) => Some(d - now),
                None => None,
            };
            let short = left.is_some_and(|left| left < SHORT_WAIT);
            if (short || yields < YIELDS_BEFORE_SLEEP) && crate::sync::yield_if_cheap() {
                yields += 1;
                continue;
            }
            self.wake.register();
            self.wake.asleep.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let looked = self.rx.try_recv();
            if let Err(TryRecvError::Empty) = looked {
                match left {
                    Some(left) => std::thread::park_timeout(left),
                    None => std::thread::park(),
                }
            }
            self.wake.asleep.store(false, Ordering::SeqCst);
            match looked {
                Ok(job) => return Ok(job),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// The next job, waiting for one as long as it takes; `Err` once every sender is gone.
    pub(super) fn recv(&self) -> Result<Job, ()> {
        self.recv_deadline(None).map_err(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            command: crate::wire::Command::set_nx(1000),
            key: "k".into(),
            token: "t".into(),
            queued_at: Instant::now(),
            deadline: None,
            reply: None,
            live_until: None,
            on_lane: None,
        }
    }

    #[test]
    fn a_job_sent_to_a_parked_worker_wakes_it() {
        let (tx, rx) = queue();
        let worker = std::thread::spawn(move || {
            let mut got = 0;
            while rx.recv().is_ok() {
                got += 1;
            }
            got
        });
        for i in 0..20_000 {
            if i % 64 == 0 {
                // Now and then give the worker time to park.
                std::thread::sleep(Duration::from_micros(200));
            }
            assert!(tx.send(job()).is_none());
        }
        drop(tx);
        assert_eq!(
            worker.join().unwrap(),
            20_000,
            "every job arrives, then the end"
        );
    }

    #[test]
    fn a_deadline_ends_the_wait_and_a_dropped_sender_ends_the_queue() {
        let (tx, rx) = queue();
        let (parked, asleep) = crossbeam_channel::bounded(1);
        let waiter = std::thread::spawn(move || {
            let start = Instant::now();
            let waited = rx.recv_deadline(Some(start + Duration::from_millis(30)));
            assert!(matches!(waited, Err(RecvTimeoutError::Timeout)));
            assert!(start.elapsed() >= Duration::from_millis(30));
            let short = rx.recv_deadline(Some(Instant::now() + Duration::from_micros(20)));
            assert!(matches!(short, Err(RecvTimeoutError::Timeout)));
            parked.send(()).unwrap();
            rx.recv_deadline(None).map(|_| ())
        });
        asleep.recv().unwrap();
        drop(tx);
        assert!(matches!(
            waiter.join().unwrap(),
            Err(RecvTimeoutError::Disconnected)
        ));
    }

    #[test]
    fn a_send_after_the_worker_is_gone_gives_the_job_back() {
        let (tx, rx) = queue();
        drop(rx);
        assert!(tx.send(job()).is_some());
    }
}
