package redlock

// #include "redlock.h"
import "C"

import (
	"time"
)

// MaxPermits is the most permits a semaphore can have.
const MaxPermits = 1024

var kindNames = map[requestKind]string{
	kindFenced:    "WithFenced",
	kindReentrant: "WithReentrant",
	kindRead:      "WithRead",
	kindWrite:     "WithWrite",
	kindSemaphore: "WithSemaphore",
}

// setKind records the request's kind; two different kinds are an error (at Acquire).
func (r *Request) setKind(k requestKind) {
	if r.kind != kindPlain && r.kind != k {
		r.fail(invalidArgument("%s and %s exclude each other: a request has one kind", kindNames[r.kind], kindNames[k]))
	}
	r.kind = k
}

// kindSteps are the C setters of the read, write and semaphore kinds (none for the others,
// which toC sets itself).
func (r *Request) kindSteps(req *C.redlock_request) []func(**C.redlock_error) C.enum_redlock_status {
	switch r.kind {
	case kindRead:
		return []func(**C.redlock_error) C.enum_redlock_status{func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_read(req, cerr)
		}}
	case kindSemaphore:
		return []func(**C.redlock_error) C.enum_redlock_status{func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_semaphore(req, C.uint32_t(r.permits), cerr)
		}}
	case kindWrite:
		// On the nodes a writer is exactly a plain lock. libredlock's write kind adds one
		// thing, a check that the calling OS thread holds no read or write lock of the
		// resource itself; a goroutine is not an OS thread (cgo calls of one goroutine run on
		// whichever thread it is on, and many goroutines share one), so that check would
		// refuse a goroutine because of another goroutine's lock. Go asks for the plain lock,
		// and has no such check (like sync.RWMutex).
		if len(r.resources) != 1 || r.many {
			return []func(**C.redlock_error) C.enum_redlock_status{func(cerr **C.redlock_error) C.enum_redlock_status {
				return C.redlock_request_set_write(req, cerr) // refuses several resources
			}}
		}
	}
	return nil
}

// WithRead makes it the read side of a read-write lock: any number of readers hold the
// resource at once while no writer does. A writer is a WithWrite lock, and also any plain
// or fenced lock of the resource (of this or any other Redlock client): readers and they
// exclude each other. The readers live in a sorted set at the resource's key, each with
// its own expiry; Extend and Unlock touch only this reader. Waiting readers all wake when a
// writer releases. Writers can starve under a steady stream of overlapping readers. No
// fencing token. One resource only.
//
// Unlike sync.RWMutex there is no upgrade, and no check that the goroutine asking for the
// write lock holds a read lock itself: such a goroutine waits for itself until its patience
// (WithWait, its context) ends.
func WithRead() RequestOption {
	return func(r *Request) { r.setKind(kindRead) }
}

// WithWrite makes it the write side of a read-write lock: it excludes readers and other
// writers. On the nodes it is exactly a plain lock (Lock, NewRequest without a kind), so
// plain and write locks are interchangeable; WithWrite says what the code means. For a
// fenced writer use WithFenced. One resource only.
func WithWrite() RequestOption {
	return func(r *Request) { r.setKind(kindWrite) }
}

// WithSemaphore makes it one of permits permits (1 to MaxPermits) of a counting semaphore
// on the resource: at most permits holders at once. Each permit is a slot, an ordinary
// Redlock mutex on its own key ("redlock:sem:{resource}:i", next to the stored number at
// "redlock:sem:{resource}"); an attempt tries the slots in random order, and a waiter wakes
// when any slot is released. Lock.Permit says which slot is held. Every caller of one
// semaphore must pass the same permits: the nodes store it and another number is
// ErrInvalidArgument (it can change once every permit is released and its TTL has run
// out). No fencing token. One resource only.
func WithSemaphore(permits int) RequestOption {
	return func(r *Request) {
		if permits < 1 || permits > MaxPermits {
			r.fail(invalidArgument("WithSemaphore(%d): permits must be 1 to %d", permits, MaxPermits))
		}
		r.setKind(kindSemaphore)
		r.permits = permits
	}
}

// RLock acquires the read lock of resource (see WithRead) with the client's retries,
// or the patience and auto-extension opts give.
func (c *Client) RLock(resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, append([]RequestOption{WithRead()}, opts...)...))
}

// WLock acquires the write lock of resource (see WithWrite) with the client's retries, or
// the patience and auto-extension opts give.
func (c *Client) WLock(resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, append([]RequestOption{WithWrite()}, opts...)...))
}

// Semaphore acquires one of permits permits of the semaphore resource (see WithSemaphore)
// with the client's retries, or the patience and auto-extension opts give.
func (c *Client) Semaphore(resource string, permits int, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, append([]RequestOption{WithSemaphore(permits)}, opts...)...))
}

// Permit returns the slot (0 to permits-1) a semaphore lock holds, and false for other
// locks. It stays readable after Unlock.
func (l *Lock) Permit() (int, bool) {
	if l == nil {
		return 0, false
	}
	return l.permit, l.hasPermit
}

// readPermit reads the permit of a new lock.
func (l *Lock) readPermit(ptr *C.redlock_lock) {
	var n C.uint32_t
	if C.redlock_lock_permit(ptr, &n, nil) == C.REDLOCK_OK {
		l.permit, l.hasPermit = int(n), true
	}
}
