package redlock

// #include "redlock.h"
import "C"

import (
	"runtime"
	"sync"
	"time"
)

// Lock is a held Redlock lock. Use it from one goroutine at a time; Unlock, and calls
// that race with it, are still safe from any goroutine, since the methods take a mutex.
// A Lock that is dropped without Unlock is released by a finalizer as a backstop; until
// then it holds the resource for its TTL.
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
	resources []string
}

func newLock(ptr *C.redlock_lock, client *Client) *Lock {
	l := &Lock{
		ptr:      ptr,
		client:   client,
		resource: C.GoString(C.redlock_lock_resource(ptr)),
		token:    C.GoString(C.redlock_lock_token(ptr)),
	}
	var n C.uint64_t
	if C.redlock_lock_fence(ptr, &n, nil) == C.REDLOCK_OK {
		l.fence, l.hasFence = uint64(n), true
	}
	if C.redlock_lock_hold_count(ptr, &n, nil) == C.REDLOCK_OK {
		l.holds, l.hasHolds = uint64(n), true
	}
	l.resources = []string{l.resource}
	runtime.SetFinalizer(l, func(l *Lock) { C.redlock_lock_free(l.ptr) })
	return l
}

// Resource returns the name of the locked resource (the Redis key).
func (l *Lock) Resource() string { return l.resource }

// Token returns the random value stored under the key on each node; it is unique per
// acquisition.
func (l *Lock) Token() string { return l.token }

// Validity returns how long the lock is still guaranteed to be held: zero once it has
// expired or been unlocked.
func (l *Lock) Validity() time.Duration {
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr == nil {
		return nil
	}
	var cerr *C.redlock_error
	status := C.redlock_lock_release(l.ptr, &cerr)
	C.redlock_lock_free(l.ptr)
	l.ptr = nil
	runtime.SetFinalizer(l, nil)
	return statusError(status, cerr)
}
