package redquorum

// #include <stdint.h>
// #include "redlock.h"
// extern void redlockGoLost(uintptr_t id);
// static void redlock_go_lost(void *user, const char *resource) {
//     (void)resource;
//     redlockGoLost((uintptr_t)user);
// }
// static redlock_status redlock_go_on_lost(redlock_lock *lock, uintptr_t id) {
//     return redlock_lock_on_lost(lock, redlock_go_lost, (void *)id, NULL);
// }
import "C"

import (
	"time"
)

// Lock is a held Redlock lock. Its methods are safe from any goroutine: Held, Validity
// and the accessors never wait behind an Extend or Unlock in flight. A Lock that is dropped
// without Unlock is released by a finalizer as a backstop; until then it holds the resource
// for its TTL. A nil *Lock (what a failed acquisition returns) holds nothing: Extend and
// Unlock return ErrInvalidArgument, Held is false, Validity 0, Lost a closed channel; no
// method panics.
type Lock struct {
	h        *held[*C.redlock_lock]
	client   *Client // keeps the Client reachable, and so not finalized, while the Lock is
	resource string
	token    string
	// Set once by newLock from the C lock; see Fence, HoldCount, Permit and Resources.
	fence     uint64
	hasFence  bool
	holds     uint64
	hasHolds  bool
	permit    int
	hasPermit bool
	resources []string
}

var lockOps = &heldOps[*C.redlock_lock]{
	onLost:  func(p *C.redlock_lock, id C.uintptr_t) bool { return C.redlock_go_on_lost(p, id) == C.REDLOCK_OK },
	release: func(p *C.redlock_lock, e cErr) cStatus { return C.redlock_lock_release(p, e) },
	isLost:  func(p *C.redlock_lock) bool { return bool(C.redlock_lock_is_lost(p)) },
	free:    func(p *C.redlock_lock) { C.redlock_lock_free(p) },
}

var (
	errLockLost       = &Error{Status: StatusLost, Message: "the lock was lost"}
	errLockLostBefore = &Error{Status: StatusLost, Message: "the lock was lost before Unlock: the work it protected may have overlapped another owner's"}
)

// newLock takes ownership of a C lock; resources are the sorted names of a lock of several
// resources (nil for one).
func newLock(ptr *C.redlock_lock, client *Client, resources []string) *Lock {
	l := &Lock{
		client:    client,
		resource:  C.GoString(C.redlock_lock_resource(ptr)),
		token:     C.GoString(C.redlock_lock_token(ptr)),
		resources: resources,
	}
	if l.resources == nil {
		l.resources = []string{l.resource}
	}
	var n C.uint64_t
	if C.redlock_lock_fence(ptr, &n, nil) == C.REDLOCK_OK {
		l.fence, l.hasFence = uint64(n), true
	}
	if C.redlock_lock_hold_count(ptr, &n, nil) == C.REDLOCK_OK {
		l.holds, l.hasHolds = uint64(n), true
	}
	var slot C.uint32_t
	if C.redlock_lock_permit(ptr, &slot, nil) == C.REDLOCK_OK {
		l.permit, l.hasPermit = int(slot), true
	}
	l.h = newHeld(ptr, lockOps, errLockLost, errLockLostBefore)
	return l
}

// Held reports whether the lock is still ours: not unlocked, not found lost, validity
// left. For a lock taken WithAutoExtend the library's extender thread keeps it true while
// the lock is being extended. Cheap: poll it during long work.
func (l *Lock) Held() bool {
	if l == nil {
		return false
	}
	var held bool
	l.h.use(func(p *C.redlock_lock) { held = bool(C.redlock_lock_is_held(p)) })
	return held
}

// Lost returns a channel that is closed when the lock is found lost, like ctx.Done():
// an extension (by the extender thread of an auto-extended lock, or Extend) found it no
// longer ours on a quorum, or an auto-extended lock ran out of validity; or the Lock was
// garbage-collected without Unlock (its finalizer released it). It is not closed by Unlock.
// Select on it next to your work to stop when the lock is gone.
// For a nil *Lock it is a closed channel: there is no lock to hold.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.h.ctx.Done()
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

var errNilLock = &Error{Status: StatusInvalidArgument, Message: "nil *Lock: the acquisition failed (check its error before using the lock)"}

// Resource returns the name of the locked resource (the Redis key).
func (l *Lock) Resource() string {
	if l == nil {
		return ""
	}
	return l.resource
}

// Token returns the random value stored under the key on each node; it is unique per
// acquisition.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Validity returns how long the lock is still guaranteed to be held: zero once it has
// expired or been unlocked.
func (l *Lock) Validity() time.Duration {
	if l == nil {
		return 0
	}
	var ms C.uint64_t
	l.h.use(func(p *C.redlock_lock) { ms = C.redlock_lock_validity_ms(p) })
	return time.Duration(ms) * time.Millisecond
}

// Extend sets the lock's TTL to ttl from now on a quorum of nodes. It fails with ErrLost
// when the lock is no longer ours (or was unlocked), and with ErrExtensionLimit after
// WithMaxExtensions extensions, in which case the lock is still held. A failed Extend
// never releases the lock.
func (l *Lock) Extend(ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	if !l.h.use(func(p *C.redlock_lock) {
		err = cCall(func(cerr cErr) cStatus { return C.redlock_lock_extend(p, ms, cerr) })
	}) {
		return &Error{Status: StatusLost, Message: "the lock was unlocked"}
	}
	return err
}

// Unlock releases the lock on all nodes and frees it. It returns ErrLost when the lock
// had already expired or been taken over, or ErrNoQuorum when too few nodes answered (the
// keys then expire with their TTL); either way the Lock is finished. Unlock is safe to
// call more than once: later calls return nil.
func (l *Lock) Unlock() error {
	if l == nil {
		return errNilLock
	}
	// Freed now rather than by the finalizer: a C lock keeps its client's node workers
	// running. Calls in flight on it (an Extend) finish first.
	return l.h.finish()
}

// Fence returns the fencing token of a fenced lock (LockFenced, WithFenced), and false for
// other locks. It stays readable after Unlock.
func (l *Lock) Fence() (uint64, bool) {
	if l == nil {
		return 0, false
	}
	return l.fence, l.hasFence
}

// HoldCount returns, for a reentrant lock, how many holds its owner had once this one was
// counted (1 for the outermost), and false for other locks.
func (l *Lock) HoldCount() (uint64, bool) {
	if l == nil {
		return 0, false
	}
	return l.holds, l.hasHolds
}

// Permit returns the slot (0 to permits-1) a semaphore lock holds, and false for other
// locks. It stays readable after Unlock.
func (l *Lock) Permit() (int, bool) {
	if l == nil {
		return 0, false
	}
	return l.permit, l.hasPermit
}

// Resources returns the locked resources: one, or for WithResources all of them, sorted.
func (l *Lock) Resources() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.resources...)
}
