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
	"strconv"
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
	h *held[*C.redlock_leadership]
	// Set once by newLeadership; never changed.
	name, identity string
	term           uint64
}

var leadershipOps = &heldOps[*C.redlock_leadership]{
	onLost: func(p *C.redlock_leadership, id C.uintptr_t) bool {
		return C.redlock_go_on_leadership_lost(p, id) == C.REDLOCK_OK
	},
	release: func(p *C.redlock_leadership, e cErr) cStatus { return C.redlock_leadership_resign(p, e) },
	isLost:  func(p *C.redlock_leadership) bool { return bool(C.redlock_leadership_is_lost(p)) },
	free:    func(p *C.redlock_leadership) { C.redlock_leadership_free(p) },
}

// newLeadership takes ownership of a C leadership.
func newLeadership(ptr *C.redlock_leadership) *Leadership {
	l := &Leadership{
		name:     goString(C.redlock_leadership_name(ptr)),
		identity: goString(C.redlock_leadership_identity(ptr)),
		term:     uint64(C.redlock_leadership_term(ptr)),
	}
	what := "the leadership of election " + l.name + " in term " + strconv.FormatUint(l.term, 10)
	l.h = newHeld(ptr, leadershipOps,
		&Error{Status: StatusLost, Message: what + " was lost"},
		&Error{Status: StatusLost, Message: what + " was lost before Resign: work done under it may have overlapped the next leader's"})
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
	return l.h.ctx
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
	var leading bool
	l.h.use(func(p *C.redlock_leadership) { leading = bool(C.redlock_leadership_is_leader(p)) })
	return leading
}

// Validity returns the time left before another candidate could be granted the leadership:
// zero once it is resigned or lost. Extensions push it forward while it is held.
func (l *Leadership) Validity() time.Duration {
	if l == nil {
		return 0
	}
	var ms C.uint64_t
	l.h.use(func(p *C.redlock_leadership) { ms = C.redlock_leadership_validity_ms(p) })
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
	l.h.end(context.Canceled) // a no-op when lost: the cause stays ErrLost
	return l.h.finish()
}
