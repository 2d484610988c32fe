package redquorum

// #include <stdint.h>
// #include "redlock.h"
// extern void redlockGoLost(uintptr_t id);
// static void redlock_go_leadership_lost(void *user, const char *resource) {
//     (void)resource;
//     redlockGoLost((uintptr_t)user);
// }
// static redlock_status redlock_go_on_leadership_lost(redlock_leadership *l, uintptr_t id) {
//     return redlock_leadership_on_lost(l, redlock_go_leadership_lost, (void *)id, NULL);
// }
import "C"

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Leadership is this process's leadership of an election, from Election.Campaign. The
// library's extender thread extends it every third of its TTL for as long as it is held. Its
// methods are safe from any goroutine and never wait behind a Resign in flight.
//
// Work done as leader hangs off Context, which is done the moment the leadership is found lost
// or resigned; writes to a store that must never take an old leader's write carry Term, and
// the store refuses a lower term than it has seen (the leadership is a fenced lock: a leader
// paused past its validity learns it has lost only when it resumes).
//
// Keep the *Leadership reachable while you lead: one that is garbage-collected without Resign
// is resigned by a finalizer, as a backstop. A nil *Leadership (what a failed campaign
// returns) leads nothing: Resign returns ErrInvalidArgument, IsLeader is false, Context is
// done; no method panics.
type Leadership struct {
	// mu guards ptr: read-locked by every C call on it, write-locked to free it.
	mu     sync.RWMutex
	ptr    *C.redlock_leadership // nil after Resign
	lostID uintptr
	// Set once by newLeadership; never changed.
	name, identity string
	term           uint64
	ctx            context.Context
	cancel         context.CancelCauseFunc
}

// newLeadership takes ownership of a C leadership.
func newLeadership(ptr *C.redlock_leadership) *Leadership {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Leadership{
		ptr:      ptr,
		name:     goString(C.redlock_leadership_name(ptr)),
		identity: goString(C.redlock_leadership_identity(ptr)),
		term:     uint64(C.redlock_leadership_term(ptr)),
		ctx:      ctx,
		cancel:   cancel,
	}
	lost := &Error{Status: StatusLost, Message: "the leadership of election " + l.name + " in term " + strconv.FormatUint(l.term, 10) + " was lost"}
	// The callback holds the cancel function, not l: l stays collectable.
	l.lostID = registerLost(func() { cancel(lost) })
	if C.redlock_go_on_leadership_lost(ptr, C.uintptr_t(l.lostID)) != C.REDLOCK_OK {
		// Only a NULL leadership or callback fails, and neither is: the context then ends
		// with Resign only.
		forgetLost(l.lostID)
	}
	runtime.SetFinalizer(l, (*Leadership).free)
	return l
}

// Context returns a context that is done the moment the leadership ends: found lost (an
// extension failed on a quorum, its validity ran out, this host was suspended past it; then
// context.Cause wraps ErrLost) or resigned (context.Canceled). It does not descend from the
// context given to Campaign. For a nil *Leadership it is already done.
func (l *Leadership) Context() context.Context {
	if l == nil {
		return doneContext
	}
	return l.ctx
}

var doneContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNilLeadership)
	return ctx
}()

var errNilLeadership = &Error{Status: StatusInvalidArgument, Message: "nil *Leadership: the campaign failed (check its error before using the leadership)"}

// Term returns the leadership's term: its fencing token, greater than every earlier leader's
// and never reused. It stays readable after Resign.
func (l *Leadership) Term() uint64 {
	if l == nil {
		return 0
	}
	return l.term
}

// Name returns the election's name.
func (l *Leadership) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Identity returns this leader's identity.
func (l *Leadership) Identity() string {
	if l == nil {
		return ""
	}
	return l.identity
}

// IsLeader reports whether this process still leads: not resigned, not found lost, validity
// left. Cheap: poll it during long work, or watch Context.
func (l *Leadership) IsLeader() bool {
	if l == nil {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return false
	}
	leading := C.redlock_leadership_is_leader(l.ptr)
	runtime.KeepAlive(l)
	return bool(leading)
}

// Validity returns the time left before another candidate could be granted the leadership:
// zero once it is resigned or lost. Extensions push it forward while it is held.
func (l *Leadership) Validity() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return 0
	}
	ms := C.redlock_leadership_validity_ms(l.ptr)
	runtime.KeepAlive(l)
	return time.Duration(ms) * time.Millisecond
}

// Resign ends the leadership: Context is done first, so that work hanging off it is told
// before the nodes let the next candidate in; then the leadership is released on every node,
// which wakes the waiting candidates at once. It returns ErrLost when the leadership had been
// lost (work done under its term may have overlapped the next leader's), whatever the release
// found, else ErrNoQuorum when too few nodes answered (their keys then expire with the TTL);
// either way it is over. Safe to call
// more than once: later calls return nil.
func (l *Leadership) Resign() error {
	if l == nil {
		return errNilLeadership
	}
	l.cancel(context.Canceled) // a no-op when lost: the cause stays ErrLost
	live, lost, err := l.resign()
	if !live {
		return nil
	}
	l.mu.Lock()
	ptr := l.ptr
	l.ptr = nil
	l.mu.Unlock()
	if ptr == nil {
		return nil // a concurrent Resign freed it and reports
	}
	C.redlock_leadership_free(ptr)
	forgetLost(l.lostID)
	runtime.SetFinalizer(l, nil)
	if lost {
		// Whatever the release said: the loss is what the caller must act on.
		return &Error{Status: StatusLost, Message: "the leadership of election " + l.name + " in term " + strconv.FormatUint(l.term, 10) + " was lost before Resign: work done under it may have overlapped the next leader's"}
	}
	return err
}

// resign releases the leadership on the nodes, keeping the C handle (which then reads as
// resigned) so that IsLeader and Validity do not wait for the nodes; live is false after
// Resign.
func (l *Leadership) resign() (live, lost bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return false, false, nil
	}
	err = cCall(func(cerr cErr) cStatus {
		return C.redlock_leadership_resign(l.ptr, cerr)
	})
	lost = bool(C.redlock_leadership_is_lost(l.ptr))
	runtime.KeepAlive(l)
	return true, lost, err
}

// free is the finalizer: the library resigns a leadership it frees, without waiting for the
// nodes.
func (l *Leadership) free() {
	l.cancel(context.Canceled)
	C.redlock_leadership_free(l.ptr)
	forgetLost(l.lostID)
}
