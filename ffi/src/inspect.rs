//! The C ABI of the operator's tools: `redlock_client_inspect` (every node's view of a lock) and
//! `redlock_client_force_release` (delete a stuck lock). Both results are opaque snapshots read
//! with accessors by node index, so a later version can report more (a new kind of key, say)
//! without changing anything a caller allocates.

use std::ffi::{CString, c_char};

use redquorum::{ForcedRelease, Inspection, KeyState, NodeProblem, NodeState, Released};

use crate::boundary::{
    Nothing, arg, arg_opt_str, arg_str, c_ptr, c_string, fallible, free_box, out, read,
    redlock_error, redlock_status, to_ms, write_opt,
};
use crate::client::redlock_client;

/// What a node's lock key holds, from `redlock_inspection_node_key_kind`. The numbers are part
/// of the ABI; later versions append kinds (for new lock kinds), so a `switch` needs a
/// `default:` that treats an unknown kind as `REDLOCK_KEY_OTHER` (the key exists and blocks the
/// resource; `redlock_inspection_node_key_type` names its Redis type).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_key_kind {
    /// The node did not answer (see `redlock_inspection_node_error`), or NULL / an index out of
    /// range was passed.
    REDLOCK_KEY_UNKNOWN = 0,
    /// No key: the resource is free on this node.
    REDLOCK_KEY_ABSENT = 1,
    /// A string: the token of a plain, fenced or multi-resource lock
    /// (`redlock_inspection_node_token`).
    REDLOCK_KEY_TOKEN = 2,
    /// A hash of a reentrant lock: owners and their hold counts
    /// (`redlock_inspection_node_owner_count`, `redlock_inspection_node_owner`).
    REDLOCK_KEY_OWNERS = 3,
    /// A key of a type no lock uses (`list`, `set`, …), which blocks the resource all the same.
    REDLOCK_KEY_OTHER = 4,
    /// A sorted set of a read-write lock's readers: each reader's token and the ms it has left
    /// come through `redlock_inspection_node_owner_count` and `redlock_inspection_node_owner`
    /// (the `holds` out-value is the ms left).
    REDLOCK_KEY_READERS = 5,
}

/// What a forced release did on one node, from `redlock_forced_release_node_outcome`. The
/// numbers are part of the ABI and never reused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_release_outcome {
    /// The node could not tell (down, timed out, an error reply): see
    /// `redlock_forced_release_node_error`. Also for NULL or an index out of range.
    REDLOCK_RELEASE_ERROR = 0,
    /// The key was deleted and its release announced to waiters.
    REDLOCK_RELEASE_DELETED = 1,
    /// There was no key.
    REDLOCK_RELEASE_ABSENT = 2,
    /// The key holds another token than the one given, so it was kept.
    REDLOCK_RELEASE_HELD_BY_OTHER = 3,
}

use redlock_key_kind::*;
use redlock_release_outcome::*;

impl Nothing for redlock_key_kind {
    fn nothing() -> Self {
        REDLOCK_KEY_UNKNOWN
    }
}

impl Nothing for redlock_release_outcome {
    fn nothing() -> Self {
        REDLOCK_RELEASE_ERROR
    }
}

/// One node of a `redlock_inspection`, converted for C once when it is made.
struct InspectedNode {
    address: CString,
    /// The node's problem when it did not answer.
    error: Option<CString>,
    kind: redlock_key_kind,
    /// The Redis type of the key (`none`, `string`, `hash`, …); `None` when the node did not
    /// answer.
    key_type: Option<CString>,
    token: Option<CString>,
    owners: Vec<(CString, u64)>,
    ttl_ms: Option<u64>,
    persistent: bool,
    fence: Option<u64>,
}

impl InspectedNode {
    fn new(address: &str, state: &Result<NodeState, NodeProblem>) -> Self {
        let mut node = InspectedNode {
            address: c_string(address),
            error: None,
            kind: REDLOCK_KEY_UNKNOWN,
            key_type: None,
            token: None,
            owners: Vec::new(),
            ttl_ms: None,
            persistent: false,
            fence: None,
        };
        match state {
            Err(problem) => node.error = Some(c_string(&problem.to_string())),
            Ok(state) => {
                // The one place that maps a kind of key to C: a new `KeyState` variant gets its
                // `redlock_key_kind` (appended) here.
                let (kind, key_type) = match &state.key {
                    KeyState::Absent => (REDLOCK_KEY_ABSENT, "none"),
                    KeyState::Token(token) => {
                        node.token = Some(c_string(token));
                        (REDLOCK_KEY_TOKEN, "string")
                    }
                    KeyState::Owners(owners) => {
                        node.owners = owners.iter().map(|(o, n)| (c_string(o), *n)).collect();
                        (REDLOCK_KEY_OWNERS, "hash")
                    }
                    KeyState::Readers(readers) => {
                        node.owners = readers
                            .iter()
                            .map(|(token, left)| (c_string(token), to_ms(*left)))
                            .collect();
                        (REDLOCK_KEY_READERS, "zset")
                    }
                    KeyState::Other(redis_type) => (REDLOCK_KEY_OTHER, redis_type.as_str()),
                    // A kind of key the library learned after this ABI: it blocks the resource.
                    _ => (REDLOCK_KEY_OTHER, "unknown"),
                };
                node.kind = kind;
                node.key_type = Some(c_string(key_type));
                node.ttl_ms = state.ttl.map(to_ms);
                node.persistent = state.persistent;
                node.fence = state.fence;
            }
        }
        node
    }
}

/// Every node's view of one resource, from `redlock_client_inspect`; read it with the
/// `redlock_inspection_*` accessors and free it with `redlock_inspection_free`. It does not
/// change after it was taken.
pub struct redlock_inspection {
    resource: CString,
    held: bool,
    holder: Option<CString>,
    fence: Option<u64>,
    quorum: usize,
    nodes: Vec<InspectedNode>,
}

impl From<&Inspection> for redlock_inspection {
    fn from(i: &Inspection) -> Self {
        redlock_inspection {
            resource: c_string(&i.resource),
            held: i.held,
            holder: i.holder.as_deref().map(c_string),
            fence: i.fence,
            quorum: i.quorum,
            nodes: i
                .nodes
                .iter()
                .map(|n| InspectedNode::new(&n.node, &n.state))
                .collect(),
        }
    }
}

/// One node of a `redlock_forced_release`.
struct ReleasedNode {
    address: CString,
    outcome: redlock_release_outcome,
    error: Option<CString>,
}

/// What `redlock_client_force_release` did, node by node; read it with the
/// `redlock_forced_release_*` accessors and free it with `redlock_forced_release_free`.
pub struct redlock_forced_release {
    resource: CString,
    token: Option<CString>,
    confirmed: usize,
    on_quorum: bool,
    quorum: usize,
    nodes: Vec<ReleasedNode>,
}

impl From<&ForcedRelease> for redlock_forced_release {
    fn from(r: &ForcedRelease) -> Self {
        redlock_forced_release {
            resource: c_string(&r.resource),
            token: r.token.as_deref().map(c_string),
            confirmed: r.confirmed(),
            on_quorum: r.on_quorum(),
            quorum: r.quorum,
            nodes: r
                .nodes
                .iter()
                .map(|n| {
                    let (outcome, error) = match &n.outcome {
                        Ok(Released::Deleted) => (REDLOCK_RELEASE_DELETED, None),
                        Ok(Released::Absent) => (REDLOCK_RELEASE_ABSENT, None),
                        Ok(Released::HeldByOther) => (REDLOCK_RELEASE_HELD_BY_OTHER, None),
                        Err(problem) => {
                            (REDLOCK_RELEASE_ERROR, Some(c_string(&problem.to_string())))
                        }
                        Ok(other) => (
                            REDLOCK_RELEASE_ERROR,
                            Some(c_string(&format!(
                                "an outcome this ABI does not name: {other:?}"
                            ))),
                        ),
                    };
                    ReleasedNode {
                        address: c_string(&n.node),
                        outcome,
                        error,
                    }
                })
                .collect(),
        }
    }
}

/// Reads `resource` on every node and writes to `*out` a new inspection: per node, whether it
/// answered, what the lock key holds (a token, reentrant owners, another type, nothing), its
/// remaining TTL and the fence counter; overall, whether a quorum holds it and by which token.
/// Free it with `redlock_inspection_free`.
///
/// Read-only. Waits for every node up to node_timeout. A node that is down, times out or
/// answers with an error (a `NOPERM` of a tight ACL) does not fail the call: its entry carries
/// the error (`redlock_inspection_node_error`). `REDLOCK_INVALID_ARGUMENT` for a NULL client,
/// resource or out, and an empty, non-UTF-8 or too long (over 4096 bytes) resource. Each node is
/// read at a slightly different moment: a lock acquired or released meanwhile may show on some
/// nodes only.
///
/// # Safety
/// `client` is NULL or a live client; `resource` is NULL or a NUL-terminated string; `out` and
/// `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_inspect(
    client: *const redlock_client,
    resource: *const c_char,
    out: *mut *mut redlock_inspection,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let resource = unsafe { arg_str(resource, "resource") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        out.write(redlock_inspection::from(&client.client.inspect(resource)?));
        Ok(())
    })
}

/// Frees an inspection. NULL is a no-op.
///
/// # Safety
/// `inspection` is NULL or a pointer from `redlock_client_inspect`, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_free(inspection: *mut redlock_inspection) {
    // SAFETY: per the contract.
    unsafe { free_box(inspection) }
}

/// Reads node `index` of an inspection that may be NULL, for a getter: `f` of it, or `R`'s
/// "nothing" value for NULL, an index out of range and after a panic.
///
/// # Safety
/// `p` is NULL or a live inspection.
unsafe fn read_node<R: Nothing>(
    p: *const redlock_inspection,
    index: usize,
    f: impl FnOnce(&InspectedNode) -> R,
) -> R {
    // SAFETY: per the function's contract.
    unsafe { read(p, |x| x.nodes.get(index).map_or_else(R::nothing, f)) }
}

/// The inspected resource, owned by the inspection (valid until `redlock_inspection_free`);
/// NULL for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_resource(
    inspection: *const redlock_inspection,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| x.resource.as_ptr()) }
}

/// Whether a quorum of nodes hold a live key for the resource (whatever it holds): then no one
/// can acquire it now. False for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_held(inspection: *const redlock_inspection) -> bool {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| x.held) }
}

/// The token (plain and fenced locks) or owner (reentrant locks) found on a quorum of nodes,
/// owned by the inspection; NULL when no single value is on a quorum, and for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_holder(
    inspection: *const redlock_inspection,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| c_ptr(x.holder.as_ref())) }
}

/// The largest fence counter among the nodes that answered: true and `*fence` (when not NULL)
/// set when any node has one; false when none has, and for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection; `fence` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_fence(
    inspection: *const redlock_inspection,
    fence: *mut u64,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| write_opt(x.fence, fence)) }
}

/// Nodes needed for a quorum (N/2 + 1); 0 for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_quorum(inspection: *const redlock_inspection) -> usize {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| x.quorum) }
}

/// The number of nodes (one entry each, in the client's node order); 0 for NULL.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_count(
    inspection: *const redlock_inspection,
) -> usize {
    // SAFETY: per the contract.
    unsafe { read(inspection, |x| x.nodes.len()) }
}

/// Node `index`'s `host:port` (never with credentials), owned by the inspection; NULL for NULL
/// or an index out of range.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_address(
    inspection: *const redlock_inspection,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| n.address.as_ptr()) }
}

/// Why node `index` could not tell (down, timed out, an error reply such as `NOPERM`), owned by
/// the inspection; NULL when the node answered, and for NULL or an index out of range.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_error(
    inspection: *const redlock_inspection,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| c_ptr(n.error.as_ref())) }
}

/// What node `index`'s lock key holds; `REDLOCK_KEY_UNKNOWN` when the node did not answer, and
/// for NULL or an index out of range. Treat a value this header does not name (a later
/// version's kind) like `REDLOCK_KEY_OTHER`.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_key_kind(
    inspection: *const redlock_inspection,
    index: usize,
) -> redlock_key_kind {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| n.kind) }
}

/// The Redis type of node `index`'s lock key (`"none"`, `"string"`, `"hash"`, `"list"`, …),
/// owned by the inspection; NULL when the node did not answer, and for NULL or an index out of
/// range.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_key_type(
    inspection: *const redlock_inspection,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| c_ptr(n.key_type.as_ref())) }
}

/// The token in node `index`'s key when its kind is `REDLOCK_KEY_TOKEN`, owned by the
/// inspection; NULL for any other kind, and for NULL or an index out of range. A value that is
/// not UTF-8 (another client's) shows with replacement characters.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_token(
    inspection: *const redlock_inspection,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| c_ptr(n.token.as_ref())) }
}

/// How many reentrant owners node `index`'s key lists (kind `REDLOCK_KEY_OWNERS`); 0 for any
/// other kind, and for NULL or an index out of range.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_owner_count(
    inspection: *const redlock_inspection,
    index: usize,
) -> usize {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| n.owners.len()) }
}

/// Reentrant owner `owner` (0-based, below `redlock_inspection_node_owner_count`) of node
/// `index`: its name, owned by the inspection, and its hold count in `*holds` (when not NULL).
/// NULL (and `*holds` untouched) for NULL or an index out of range.
///
/// # Safety
/// `inspection` is NULL or a live inspection; `holds` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_owner(
    inspection: *const redlock_inspection,
    index: usize,
    owner: usize,
    holds: *mut u64,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe {
        read_node(inspection, index, |n| match n.owners.get(owner) {
            Some((name, count)) => {
                write_opt(Some(*count), holds);
                name.as_ptr()
            }
            None => std::ptr::null(),
        })
    }
}

/// Node `index`'s remaining TTL: true and `*ttl_ms` (when not NULL) set when its key exists and
/// expires; false when the key is absent, has no expiry (`redlock_inspection_node_persistent`),
/// the node did not answer, and for NULL or an index out of range.
///
/// # Safety
/// `inspection` is NULL or a live inspection; `ttl_ms` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_ttl_ms(
    inspection: *const redlock_inspection,
    index: usize,
    ttl_ms: *mut u64,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| write_opt(n.ttl_ms, ttl_ms)) }
}

/// Whether node `index`'s key exists but never expires (nothing frees it but a deletion;
/// Redlock never sets such a key, another program did). False for NULL or an index out of
/// range.
///
/// # Safety
/// `inspection` is NULL or a live inspection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_persistent(
    inspection: *const redlock_inspection,
    index: usize,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| n.persistent) }
}

/// Node `index`'s fence counter (`redlock:fence:{resource}`): true and `*fence` (when not NULL)
/// set when it has one that reads as a number; false otherwise, and for NULL or an index out of
/// range.
///
/// # Safety
/// `inspection` is NULL or a live inspection; `fence` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_inspection_node_fence(
    inspection: *const redlock_inspection,
    index: usize,
    fence: *mut u64,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read_node(inspection, index, |n| write_opt(n.fence, fence)) }
}

/// **An operator's tool**: deletes the lock on `resource` on every node, only where the key
/// still holds `token` (a plain or fenced lock's token, or a reentrant owner) when `token` is
/// not NULL, or whatever it holds when `token` is NULL. Each deletion is announced, so waiters
/// try at once. The fence counter is never touched (fencing tokens stay monotonic). Writes to
/// `*out` a new report, to free with `redlock_forced_release_free`.
///
/// The danger: a live holder is not told. Its lock is gone while it may still be working, and
/// the next acquirer overlaps it; its auto-extension reports it lost at its next extension.
/// Use it for a lock whose holder is known dead, with the token read by
/// `redlock_client_inspect`, so that a holder that took the lock after you looked is left
/// alone.
///
/// Waits for every node up to node_timeout; a node that fails is reported in its entry, not as
/// the call's status. Check `redlock_forced_release_on_quorum`: true when a quorum confirmed the
/// key is gone. `REDLOCK_INVALID_ARGUMENT` for a NULL client, resource or out, an empty,
/// non-UTF-8 or too long (over 4096 bytes) resource, and an empty or non-UTF-8 token.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `token` are NULL or NUL-terminated
/// strings; `out` and `err` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_client_force_release(
    client: *const redlock_client,
    resource: *const c_char,
    token: *const c_char,
    out: *mut *mut redlock_forced_release,
    err: *mut *mut redlock_error,
) -> redlock_status {
    fallible(err, || {
        // SAFETY: per the contract.
        let client = unsafe { arg(client, "client") }?;
        // SAFETY: per the contract.
        let resource = unsafe { arg_str(resource, "resource") }?;
        // SAFETY: per the contract.
        let token = unsafe { arg_opt_str(token, "token") }?;
        // SAFETY: per the contract.
        let out = unsafe { self::out(out) }?;
        let released = client.client.force_release(resource, token)?;
        out.write(redlock_forced_release::from(&released));
        Ok(())
    })
}

/// Frees a forced-release report. NULL is a no-op.
///
/// # Safety
/// `release` is NULL or a pointer from `redlock_client_force_release`, not used again
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_free(release: *mut redlock_forced_release) {
    // SAFETY: per the contract.
    unsafe { free_box(release) }
}

/// Reads node `index` of a report that may be NULL, as [`read_node`].
///
/// # Safety
/// `p` is NULL or a live report.
unsafe fn read_released<R: Nothing>(
    p: *const redlock_forced_release,
    index: usize,
    f: impl FnOnce(&ReleasedNode) -> R,
) -> R {
    // SAFETY: per the function's contract.
    unsafe { read(p, |r| r.nodes.get(index).map_or_else(R::nothing, f)) }
}

/// The released resource, owned by the report; NULL for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_resource(
    release: *const redlock_forced_release,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(release, |r| r.resource.as_ptr()) }
}

/// The token the release was limited to, owned by the report; NULL when none was given, and
/// for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_token(
    release: *const redlock_forced_release,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(release, |r| c_ptr(r.token.as_ref())) }
}

/// Nodes that confirmed the key is gone (deleted, or absent already); a node where another
/// token holds it does not count. 0 for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_confirmed(
    release: *const redlock_forced_release,
) -> usize {
    // SAFETY: per the contract.
    unsafe { read(release, |r| r.confirmed) }
}

/// Whether a quorum of nodes confirmed the key is gone: nobody holds the lock until a new
/// acquisition. False when too few nodes could tell, when another token holds it (the holder
/// changed since the token was read), and for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_on_quorum(
    release: *const redlock_forced_release,
) -> bool {
    // SAFETY: per the contract.
    unsafe { read(release, |r| r.on_quorum) }
}

/// Nodes needed for a quorum (N/2 + 1); 0 for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_quorum(
    release: *const redlock_forced_release,
) -> usize {
    // SAFETY: per the contract.
    unsafe { read(release, |r| r.quorum) }
}

/// The number of nodes (one entry each, in the client's node order); 0 for NULL.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_node_count(
    release: *const redlock_forced_release,
) -> usize {
    // SAFETY: per the contract.
    unsafe { read(release, |r| r.nodes.len()) }
}

/// Node `index`'s `host:port` (never with credentials), owned by the report; NULL for NULL or
/// an index out of range.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_node_address(
    release: *const redlock_forced_release,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_released(release, index, |n| n.address.as_ptr()) }
}

/// What the release did on node `index`; `REDLOCK_RELEASE_ERROR` when the node could not tell,
/// and for NULL or an index out of range.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_node_outcome(
    release: *const redlock_forced_release,
    index: usize,
) -> redlock_release_outcome {
    // SAFETY: per the contract.
    unsafe { read_released(release, index, |n| n.outcome) }
}

/// Why node `index` could not tell (down, timed out, an error reply), owned by the report;
/// NULL when it answered, and for NULL or an index out of range.
///
/// # Safety
/// `release` is NULL or a live report.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_forced_release_node_error(
    release: *const redlock_forced_release,
    index: usize,
) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read_released(release, index, |n| c_ptr(n.error.as_ref())) }
}
