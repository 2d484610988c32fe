//! Release notifications: how waiters learn that a busy resource was freed without polling.
//!
//! Every kind's release script publishes on the resource's channel
//! (`redlock:released:{…}:<resource>`, in the resource's hash slot: see `wire::channel`) on each
//! node where it let the key go (one message per resource for a multi-resource lock; a
//! reentrant lock only when its last hold goes), with a nonce unique to that release. A client
//! subscribes through one dedicated connection per node, created on the first wait and shared
//! by all of its waiters; each resource is subscribed once, however many threads wait on it (a
//! reference count), and unsubscribed a second ([`LINGER`](subscriber::LINGER)) after its last
//! waiter left, whether it got the lock or gave up, unless another waits on it by then.
//!
//! Which thread reads those connections: every node publishes each release to every client
//! that listens, so a thread per node would wake N threads in each client at each release. One
//! thread, the [`poller`], reads all the nodes it can reach on sockets of its own (standalone
//! nodes over plain TCP or a Unix socket) in one `poll(2)`. A TLS, Sentinel or Cluster node has
//! a thread of its own instead ([`subscriber`]), on redis-rs's connection: its synchronous
//! `PubSub` cannot be woken while it reads, so that thread reads with a short timeout and,
//! between reads, applies the (un)subscriptions its waiters asked for. While nothing is
//! subscribed either parks, so an idle client costs nothing.
//!
//! A notification only wakes waiters early: a message can be lost (a node down, a connection
//! rebuilt, a key that expired instead of being released), so every wait also has a timeout, the
//! jittered exponential backoff in `client/acquisition.rs`.
//!
//! Waiters of an exclusive kind on one key queue across processes by default (`queue.rs`): this
//! module carries that queue's news (`turn:` and `watch:` messages on the same channel) to the
//! waiters it names ([`News`]). With `fair(false)` they queue here instead, in this client's
//! arrival order: only the one at the front listens for releases and tries; the others wait
//! for their turn and send nothing.
//! When the front leaves, the next becomes the front: told that the resource is held until a
//! known time if the one before got the lock, else to try at once (it gave up, and may have taken
//! a release notification with it). A release then costs the nodes one attempt per client, not one
//! per waiting thread.
//!
//! The parts, each of which uses only those listed before it, but for the last two, which
//! use each other (a subscription keeps its notifier, through which it unregisters):
//! - `queue.rs`: the queue across processes (its scripts, and the news its messages carry);
//! - `registry.rs`: per resource, what waiters wait on (releases heard, this client's queue, the
//!   queue's news); per node, whether its subscriber is live;
//! - `subscriber.rs`: a thread for one node, which (un)subscribes and tells the registry what the
//!   node publishes;
//! - `poller.rs`: the one thread for every node it reaches itself, which does what a
//!   subscriber does for each of them;
//! - `subscription.rs`: a waiter's registration, and its waits;
//! - `notifier.rs`: the client's entry, which starts the subscribers and registers waiters.

mod notifier;
mod poller;
pub(crate) mod queue;
mod registry;
mod subscriber;
mod subscription;

pub(crate) use notifier::Notifier;
pub(crate) use registry::{News, Turn};
pub(crate) use subscription::{Subscription, Wake};
