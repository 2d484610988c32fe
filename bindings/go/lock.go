package redlock

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
	"runtime"
	"sync"
	"time"
)

// Lock is a held Redlock lock. Use it from one goroutine at a time; Unlock, and calls
// that race with it, are still safe from any goroutine, since the methods take a mutex.
// A Lock that is dropped without Unlock is released by a finalizer as a backstop; until
// then it holds the resource for its TTL. A nil *Lock (what a failed acquisition returns)
// holds nothing: Extend and Unlock return ErrInvalidArgument, Held is false, Validity 0,
// Lost a closed channel; no method panics.
type Lock struct {
	mu       sync.Mutex
	ptr      *C.redlock_lock // nil after Unlock
	client   *Client         // keeps the Client reachable, and so not finalized, while the Lock is
	resource string
	token    string
	// Set once by newLock from the C lock; see Fence, HoldCount and Resources.
	fence     uint64
	hasFence  bool
	holds     uint64
	hasHolds  bool
	permit    int
	hasPermit bool
	resources []string
	lost      *lostSignal
	lostID    uintptr
}

func newLock(ptr *C.redlock_lock, client *Client) *Lock {
	l := &Lock{
		ptr:      ptr,
		client:   client,
		resource: C.GoString(C.redlock_lock_resource(ptr)),
		token:    C.GoString(C.redlock_lock_token(ptr)),
		lost:     &lostSignal{ch: make(chan struct{})},
	}
	var n C.uint64_t
	if C.redlock_lock_fence(ptr, &n, nil) == C.REDLOCK_OK {
		l.fence, l.hasFence = uint64(n), true
	}
	if C.redlock_lock_hold_count(ptr, &n, nil) == C.REDLOCK_OK {
		l.holds, l.hasHolds = uint64(n), true
	}
	l.readPermit(ptr)
	l.resources = []string{l.resource}
	l.lostID = registerLost(l.lost)
	if C.redlock_go_on_lost(ptr, C.uintptr_t(l.lostID)) != C.REDLOCK_OK {
		// Only a NULL lock or callback fails, and neither is: the signal just never fires.
		forgetLost(l.lostID)
	}
	runtime.SetFinalizer(l, func(l *Lock) {
		C.redlock_lock_free(l.ptr)
		forgetLost(l.lostID)
	})
	return l
}

// Held reports whether the lock is still ours: not unlocked, not found lost, validity
// left. For a lock taken with LockOptions.AutoExtend the library's extender thread keeps
// it true while the lock is being extended. Cheap: poll it during long work.
func (l *Lock) Held() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr == nil {
		return false
	}
	held := C.redlock_lock_is_held(l.ptr)
	runtime.KeepAlive(l)
	return bool(held)
}

// Lost returns a channel that is closed when the lock is found lost, like ctx.Done():
// an extension (by the extender thread of an auto-extended lock, or Extend) found it no
// longer ours on a quorum, or an auto-extended lock ran out of validity. It is not closed
// by Unlock. Select on it next to your work to stop when the lock is gone.
// For a nil *Lock it is a closed channel: there is no lock to hold.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.lost.ch
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr == nil {
		return 0
	}
	ms := C.redlock_lock_validity_ms(l.ptr)
	runtime.KeepAlive(l)
	return time.Duration(ms) * time.Millisecond
}

// Extend sets the lock's TTL to ttl from now on a quorum of nodes. It fails with ErrLost
// when the lock is no longer ours (or was unlocked), and with ErrExtensionLimit after
// Options.MaxExtensions extensions, in which case the lock is still held. A failed Extend
// never releases the lock.
func (l *Lock) Extend(ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr == nil {
		return &Error{Status: StatusLost, Message: "the lock was unlocked"}
	}
	var cerr *C.redlock_error
	status := C.redlock_lock_extend(l.ptr, ms, &cerr)
	runtime.KeepAlive(l)
	return statusError(status, cerr)
}

// Unlock releases the lock on all nodes and frees it. It returns ErrLost when the lock
// had already expired or been taken over, or ErrNoQuorum when too few nodes answered (the
// keys then expire with their TTL); either way the Lock is finished. Unlock is safe to
// call more than once: later calls return nil.
func (l *Lock) Unlock() error {
	if l == nil {
		return errNilLock
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr == nil {
		return nil
	}
	var cerr *C.redlock_error
	status := C.redlock_lock_release(l.ptr, &cerr)
	lost := C.redlock_lock_is_lost(l.ptr)
	C.redlock_lock_free(l.ptr)
	l.ptr = nil
	forgetLost(l.lostID)
	runtime.SetFinalizer(l, nil)
	if err := statusError(status, cerr); err != nil {
		return err
	}
	if lost {
		return &Error{Status: StatusLost, Message: "the lock was lost before Unlock: the work it protected may have overlapped another owner's"}
	}
	return nil
}
