package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Election is one candidate in a leader election, made by Client.Election: Campaign blocks
// until it leads and returns its Leadership. A leadership is a fenced lock that is extended
// while held; its term is the lock's fencing token, so it is greater than every earlier
// leader's and never handed out twice. At most one candidate leads with validity left at any
// instant, under the lock's assumptions (see docs/election.md).
//
// Its methods are safe from any goroutine; campaigns may run on several at once. Close it
// when done (a finalizer frees it as a backstop); leaderships it granted live on.
type Election struct {
	// mu guards ptr, users and closed; never held during a campaign.
	mu     sync.Mutex
	ptr    *C.redlock_election // nil once freed
	users  int                 // campaigns in flight, which keep ptr alive past Close
	closed bool
	client *Client
	// Set by Client.Election; never changed.
	name, identity string
	ttl            time.Duration
	started        func(*Leadership)
	stopped        func(term uint64)
	newLeader      func(*Leader)
	// watcher runs OnNewLeader's f (nil without one).
	watcher *watcher
}

// ElectionOption sets one part of an Election: the client-go style callbacks.
type ElectionOption func(*Election)

// OnStartedLeading calls f each time this candidate becomes leader, on the goroutine that
// campaigned, before Campaign returns the Leadership (whose Context is done when it ends). If
// f panics, the leadership is resigned and the panic goes on to Campaign's caller.
func OnStartedLeading(f func(l *Leadership)) ElectionOption {
	return func(e *Election) { e.started = f }
}

// OnStoppedLeading calls f with the term once each leadership of this candidate ends, on a
// goroutine of its own: resigned, found lost, or garbage-collected without Resign. It runs
// after OnStartedLeading's f for that leadership has returned, also after Close.
func OnStoppedLeading(f func(term uint64)) ElectionOption {
	return func(e *Election) { e.stopped = f }
}

// OnNewLeader calls f each time the election's leader changes, as Observe reports it (nil:
// nobody leads), first with who leads when its goroutine first reads the nodes, after
// Client.Election returned (a leader that campaigned meanwhile can be that first state: wait
// for the first call before campaigning to know the state before): one call at a time, in
// order, on a goroutine of its own, until Close. Once Close has returned f is not called
// again: Close waits for a call in progress, unless f itself calls Close, which then returns at
// once and that call is the last. So f must not wait for what a Close caller holds or waits
// for: a lock held around Close, a sync.Once around it, a Close on another goroutine, another
// election's Close from its own OnNewLeader. The Client's Close ends the calls too, without
// waiting: one may still be running as it returns.
func OnNewLeader(f func(l *Leader)) ElectionOption {
	return func(e *Election) { e.newLeader = f }
}

// Election makes a candidate named identity in the election name; its leaderships last ttl
// (whole milliseconds) and are extended every third of it while held, whatever
// WithMaxExtensions says. Nothing is sent to the nodes yet (but for OnNewLeader, which
// starts observing): Campaign does that.
//
// ErrInvalidArgument for an empty name or one over 1024 bytes, an empty identity or one over
// 256 bytes, NUL bytes or invalid UTF-8 in either, or a ttl too short to leave validity or to
// be extended in time (it must exceed a third of itself plus the node timeout). identity
// is what observers see: give each candidate its own (a host or pod name); two candidates
// with one identity still exclude each other, but observers cannot tell them apart.
func (c *Client) Election(name, identity string, ttl time.Duration, opts ...ElectionOption) (*Election, error) {
	if c == nil {
		return nil, errNilClient
	}
	if err := cName("election name", name); err != nil {
		return nil, err
	}
	if err := cName("identity", identity); err != nil {
		return nil, err
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return nil, err
	}
	cname, cidentity := C.CString(name), C.CString(identity)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cidentity))
	var ptr *C.redlock_election
	if err := c.call(func(client *C.redlock_client) error {
		return cCall(func(cerr cErr) cStatus {
			return C.redlock_client_election(client, cname, cidentity, ms, &ptr, cerr)
		})
	}); err != nil {
		return nil, err
	}
	e := &Election{
		ptr:      ptr,
		client:   c,
		name:     name,
		identity: identity,
		ttl:      time.Duration(ms) * time.Millisecond,
	}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	runtime.SetFinalizer(e, (*Election).free)
	if e.newLeader != nil {
		if err := e.watch(); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// watch calls OnNewLeader's f for each leader change until Close.
func (e *Election) watch() error {
	ctx, stop := context.WithCancel(context.Background())
	changes, err := e.client.Observe(ctx, e.name)
	if err != nil {
		stop()
		return err
	}
	w := &watcher{cancel: stop}
	e.watcher = w
	go w.run(changes, e.newLeader, e.client.closing)
	return nil
}

// watcher calls OnNewLeader's f with each change until stop. The observer can still hand over a
// change after its context is done, so stopping it is not enough: mu, held while f runs, and
// stopped say whether a call may begin.
type watcher struct {
	cancel  context.CancelFunc
	mu      sync.Mutex
	stopped bool
	gid     atomic.Uint64 // the goroutine that calls f
}

func (w *watcher) run(changes <-chan *Leader, f func(*Leader), clientClosing <-chan struct{}) {
	w.gid.Store(goroutineID())
	for l := range changes {
		func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			select {
			case <-clientClosing:
				w.stopped = true
			default:
			}
			if !w.stopped {
				f(l)
			}
		}()
	}
}

// stop returns once no call of f can begin, and none is running but the caller's own.
func (w *watcher) stop() {
	w.cancel()
	if w.gid.Load() == goroutineID() {
		w.stopped = true // inside f, which holds mu
		return
	}
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// goroutineID is the number the runtime gives the calling goroutine, read from its stack
// header ("goroutine 18 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// Campaign blocks until this candidate leads, woken by the nodes' announcements when the
// leader resigns or is taken over (and by the leader's TTL running out), and returns the
// Leadership, extended from then on until Resign. When ctx is done first it returns at once an
// error that wraps ErrCancelled and ctx.Err() (so errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds), leaving nothing on the nodes; the Client's
// Close ends it the same way with ErrClosed. A ctx done after the leadership was granted does
// not end it. Other errors: ErrNoQuorum when too few nodes answer, ErrInvalidArgument wrapping
// ErrClosed after Close.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	return e.campaign(ctx, false)
}

// TryCampaign makes one attempt: the Leadership if nobody leads, else ErrNotAcquired (or
// ErrNoQuorum when too few nodes answered).
func (e *Election) TryCampaign() (*Leadership, error) {
	return e.campaign(context.Background(), true)
}

func (e *Election) campaign(ctx context.Context, once bool) (*Leadership, error) {
	if e == nil {
		return nil, errNilElection
	}
	if ctx == nil {
		return nil, invalidArgument("nil context.Context")
	}
	ptr, err := e.enter()
	if err != nil {
		return nil, err
	}
	defer e.leave()
	var lp *C.redlock_leadership
	err = e.client.cancellable(ctx, "election "+e.name, func(_ *C.redlock_client, cancel *C.redlock_cancel) error {
		return cCall(func(cerr cErr) cStatus {
			if once {
				return C.redlock_election_campaign_for(ptr, 0, cancel, &lp, cerr)
			}
			return C.redlock_election_campaign(ptr, cancel, &lp, cerr)
		})
	})
	runtime.KeepAlive(e)
	if err != nil {
		return nil, err
	}
	l := newLeadership(lp)
	if e.started != nil {
		e.runStarted(l)
	}
	if e.stopped != nil {
		stopped, term := e.stopped, l.term
		context.AfterFunc(l.h.ctx, func() { stopped(term) })
	}
	return l, nil
}

// runStarted runs OnStartedLeading's f; a panic resigns the leadership on its way out.
func (e *Election) runStarted(l *Leadership) {
	defer func() {
		if r := recover(); r != nil {
			l.Resign()
			panic(r)
		}
	}()
	e.started(l)
}

var errNilElection = &Error{Status: StatusInvalidArgument, Message: "nil *Election: Client.Election failed (check its error before using the election)"}

// Observe follows this election's leader changes, as Client.Observe does. The channel is
// closed once ctx is done or the Client is closed (at once when the Client already is).
func (e *Election) Observe(ctx context.Context) <-chan *Leader {
	var changes <-chan *Leader
	if e != nil {
		changes, _ = e.client.Observe(ctx, e.name)
	}
	if changes == nil {
		closed := make(chan *Leader)
		close(closed)
		changes = closed
	}
	return changes
}

// Leader returns who leads this election now (see Client.Leader).
func (e *Election) Leader() (*Leader, error) {
	if e == nil {
		return nil, errNilElection
	}
	return e.client.Leader(e.name)
}

// Name returns the election's name.
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// Identity returns this candidate's identity.
func (e *Election) Identity() string {
	if e == nil {
		return ""
	}
	return e.identity
}

// TTL returns the TTL of its leaderships, in whole milliseconds.
func (e *Election) TTL() time.Duration {
	if e == nil {
		return 0
	}
	return e.ttl
}

// Close stops OnNewLeader's calls (waiting for one in progress, see OnNewLeader) and frees the
// election, once the campaigns in flight have returned (it does not end them: their contexts,
// or the Client's Close, do). Later campaigns fail with an error wrapping ErrClosed and
// ErrInvalidArgument. Leaderships it granted are not touched. Safe to call more than once;
// returns nil.
func (e *Election) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		runtime.SetFinalizer(e, nil)
		if e.users == 0 {
			e.freeLocked()
		}
	}
	e.mu.Unlock()
	// Outside mu, which f may need (its own Close, a Campaign that fails), and on every Close:
	// each returns only once f is done.
	if e.watcher != nil {
		e.watcher.stop()
	}
	return nil
}

// enter starts a campaign on the live election; every successful enter is paired with leave.
func (e *Election) enter() (*C.redlock_election, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "campaigning in election " + e.name + ": the Election was closed", causes: []error{ErrClosed}}
	}
	e.users++
	return e.ptr, nil
}

// leave ends a campaign; the last one out after Close frees the election.
func (e *Election) leave() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.users--
	if e.closed && e.users == 0 {
		e.freeLocked()
	}
}

// free is the finalizer: no campaign can be in flight on an unreachable election.
func (e *Election) free() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watcher != nil {
		e.watcher.cancel() // nobody can wait for f any more
	}
	e.freeLocked()
}

func (e *Election) freeLocked() {
	C.redlock_election_free(e.ptr) // NULL is ignored
	e.ptr = nil
}
