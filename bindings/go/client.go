package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Client is a connection to the Redlock nodes. Its methods are safe for concurrent use
// by multiple goroutines. Close it when done; a finalizer closes it as a backstop. The
// methods of a nil *Client return ErrInvalidArgument.
type Client struct {
	mu       sync.Mutex // guards the fields below; never held during a blocking C call
	ptr      *C.redlock_client
	cancel   *C.redlock_cancel // fired by Close; shared by acquisitions without a context
	closed   bool
	closing  chan struct{}            // closed by Close: wakes goroutines that serve the client (Observe)
	inflight int                      // calls between enter and leave
	pending  map[*callCancel]struct{} // the own cancel handles of calls in flight
	// freeOnIdle: Close came while calls were in flight; the last of them frees the client.
	freeOnIdle bool
	events     *eventLog // WithLogger's listener; nil without a logger
}

var errNilClient = &Error{Status: StatusInvalidArgument, Message: "nil *Client"}

// MaxNodeURL is the longest node URL New takes, in bytes.
const MaxNodeURL = 4096

// New connects to the Redis nodes at urls ("redis://[user:password@]host:port", or
// "rediss://..." for TLS; one per independent master; a lock needs a majority of them), with
// the libredlock defaults but for what opts set (WithNodeTimeout, WithRetryCount, ...). A
// Sentinel-managed master ("redis+sentinel://host:port/NAME") or a whole Redis Cluster
// ("redis+cluster://host:port?seed=host:port") is one node. Its errors never show a
// password, whatever it holds.
func New(urls []string, opts ...ClientOption) (*Client, error) {
	if err := checkLibraryVersion(); err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, invalidArgument("no node URLs")
	}
	for i, u := range urls {
		if strings.IndexByte(u, 0) >= 0 {
			// Not quoted: a URL may carry a password.
			return nil, invalidArgument("node URL %d contains a NUL byte", i)
		}
	}
	config := newClientConfig(opts)
	copts, err := config.toC()
	if err != nil {
		return nil, err
	}
	defer C.redlock_options_free(copts)
	curls, freeURLs := cStrings(urls)
	defer freeURLs()
	var ptr *C.redlock_client
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_client_new(&curls[0], C.size_t(len(curls)), copts, &ptr, cerr)
	}); err != nil {
		return nil, err
	}
	c := &Client{ptr: ptr, closing: make(chan struct{})}
	if config.logger != nil {
		if c.events, err = startEventLog(ptr, config.logger); err != nil {
			C.redlock_client_free(ptr)
			return nil, err
		}
	}
	runtime.SetFinalizer(c, (*Client).free)
	return c, nil
}

// Acquire takes the lock req describes, with the patience it says, or until ctx is done:
// then it returns at once an error that wraps ErrCancelled and ctx.Err() (so
// errors.Is(err, context.Canceled) or errors.Is(err, context.DeadlineExceeded) holds), after
// undoing what it had taken on the nodes. Close ends it the same way with ErrClosed. A ctx
// done after the lock was taken does not release it: the caller holds it and unlocks it.
// Other errors: ErrNotAcquired when another owner holds the resource, ErrNoQuorum when too
// few nodes answered, ErrInvalidArgument for a bad request, ErrClosed after Close.
func (c *Client) Acquire(ctx context.Context, req *Request) (*Lock, error) {
	if c == nil {
		return nil, errNilClient
	}
	if ctx == nil {
		return nil, invalidArgument("nil context.Context")
	}
	switch {
	case req == nil:
		return nil, invalidArgument("nil *Request")
	case req.err != nil:
		return nil, req.err
	case req.h == nil:
		return nil, invalidArgument("a Request not made by NewRequest")
	}
	h := req.h
	var lp *C.redlock_lock
	if err := c.cancellable(ctx, h.name, func(client *C.redlock_client, cancel *C.redlock_cancel) (err error) {
		lp, err = h.acquire(client, cancel)
		return err
	}); err != nil {
		return nil, err
	}
	return newLock(lp, c, h.resources), nil
}

// cancellable runs call, a blocking C call that a cancel handle ends, on the live client:
// with a cancel handle of its own when ctx can be done (fired by ctx or Close), else with the
// client's shared one (fired by Close). A cancelled call's error says why; name is what was
// being acquired.
func (c *Client) cancellable(ctx context.Context, name string, call func(client *C.redlock_client, cancel *C.redlock_cancel) error) error {
	if ctx.Err() != nil {
		return cancelledByContext(ctx, name, "")
	}
	var own *callCancel
	if ctx.Done() != nil {
		var err error
		if own, err = newCallCancel(); err != nil {
			return err
		}
	}
	ptr, cancel, err := c.enter(own)
	if err != nil {
		own.release(false)
		return err
	}
	stop := func() bool { return false }
	if own != nil {
		cancel = own.ptr
		stop = context.AfterFunc(ctx, func() { own.fire(reasonContext) })
	}
	defer func() {
		// In this order: once stopped and deregistered, nothing can fire the handle.
		stopped := stop()
		c.leave(own)
		own.release(stopped)
	}()
	err = call(ptr, cancel)
	runtime.KeepAlive(c)
	return whyCancelled(ctx, err, own, name)
}

// whyCancelled adds to a cancelled acquisition's error what cancelled it: its context or
// Close. Other errors are returned as they are.
func whyCancelled(ctx context.Context, err error, own *callCancel, name string) error {
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusCancelled {
		return err
	}
	if own != nil && own.reason() == reasonContext {
		return cancelledByContext(ctx, name, e.Message)
	}
	return &Error{Status: StatusCancelled, Message: orDefault(e.Message, "acquiring "+name+" was cancelled") + ": the client was closed", causes: []error{ErrClosed}}
}

// acquireNew acquires with a Request made for this one call by the shorthand named
// shorthand: own is the shorthand's own option (its kind), and opts may not change the kind.
func (c *Client) acquireNew(ctx context.Context, shorthand string, resource string, ttl time.Duration, own RequestOption, opts []RequestOption) (*Lock, error) {
	if c == nil {
		return nil, errNilClient
	}
	all := make([]RequestOption, 0, len(opts)+2)
	all = append(all, own, func(r *Request) { r.spec.shorthand = shorthand })
	req := NewRequest(resource, ttl, append(all, opts...)...)
	defer req.Close()
	return c.Acquire(ctx, req)
}

// plain is the kind option of the plain-lock shorthands: none.
func plain(*Request) {}

// The shorthands. Each is Acquire of a Request made for the one call, and closed when it
// returns; opts are the Request's options of patience (WithRetries, WithOnce, WithWait,
// WithPolling, WithUnfair), auto-extension (WithAutoExtend) and owner (WithOwner). A kind
// option (WithFenced, WithRead, ...) or WithResources among them is ErrInvalidArgument: the
// kinds without a shorthand of their own (reentrant locks, several resources) go through
// NewRequest and Acquire.

// Lock acquires resource for ttl, with the client's retries unless opts say otherwise, or
// until ctx is done (see Acquire for what that returns). On failure the error wraps
// ErrNotAcquired, ErrNoQuorum, ErrCancelled, ErrInvalidArgument or ErrClosed. The TTL is
// rounded down to whole milliseconds and must be in libredlock's range (see NewRequest). To
// wait for a busy resource, woken by the release notifications the nodes publish, give
// WithWait.
func (c *Client) Lock(ctx context.Context, resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.acquireNew(ctx, "Lock", resource, ttl, plain, opts)
}

// TryLock makes a single attempt at resource for ttl: the Lock, or ErrNotAcquired while
// another owner holds it (ErrNoQuorum when too few nodes answered). It is bounded by the
// node timeout, so it takes no context.
func (c *Client) TryLock(resource string, ttl time.Duration) (*Lock, error) {
	return c.acquireNew(context.Background(), "TryLock", resource, ttl, WithOnce(), nil)
}

// LockFenced acquires resource like Lock, with a fencing token: see Lock.Fence. The token
// is strictly greater than that of every fenced lock of the same resource whose holder
// came before, also when nodes restart without their data, provided they stay out a restart
// delay or WithRestartGrace (see docs/operations.md). Send it with every write to the protected
// resource, which rejects writes with a lower token than it has seen. The counter lives in
// the key "redlock:fence:{resource}" on each node (no TTL); acquiring costs one more round to
// the nodes than Lock. A fenced lock is a plain lock on resource: the two exclude each other.
func (c *Client) LockFenced(ctx context.Context, resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.acquireNew(ctx, "LockFenced", resource, ttl, WithFenced(), opts)
}

// ReadLock acquires the read lock of resource (see WithRead) like Lock. Without WithOwner,
// each call acquires for an owner of its own.
func (c *Client) ReadLock(ctx context.Context, resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.acquireNew(ctx, "ReadLock", resource, ttl, WithRead(), opts)
}

// WriteLock acquires the write lock of resource (see WithWrite) like Lock. Without WithOwner,
// each call acquires for an owner of its own.
func (c *Client) WriteLock(ctx context.Context, resource string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.acquireNew(ctx, "WriteLock", resource, ttl, WithWrite(), opts)
}

// Semaphore acquires one of permits permits of the semaphore resource (see WithSemaphore)
// like Lock; Lock.Permit says which.
func (c *Client) Semaphore(ctx context.Context, resource string, permits int, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	return c.acquireNew(ctx, "Semaphore", resource, ttl, WithSemaphore(permits), opts)
}

// WithLock acquires resource like Lock, keeps it auto-extended while fn runs, and always
// unlocks, even when fn panics. fn can watch l.Lost() or poll l.Held() during long work; ctx
// ends only the acquisition. It returns fn's error if fn failed, else ErrLost if the lock was
// lost while fn ran (the work may have overlapped another owner's), else Unlock's error.
func (c *Client) WithLock(ctx context.Context, resource string, ttl time.Duration, fn func(l *Lock) error) (err error) {
	l, err := c.acquireNew(ctx, "WithLock", resource, ttl, WithAutoExtend(AutoExtend{}), nil)
	if err != nil {
		return err
	}
	defer func() {
		if unlockErr := l.Unlock(); err == nil {
			err = unlockErr
		}
	}()
	return fn(l)
}

// Close cancels the acquisitions in progress on other goroutines (they return at once an
// error wrapping ErrClosed and ErrCancelled, leaving nothing on the nodes) and frees the
// client, or leaves that to the last call still in flight (a release finishing, say) without
// waiting for it; later calls return ErrClosed. Locks taken from it stay
// usable (Extend, Unlock, auto-extension) until they are unlocked. Close never makes other
// goroutines wait, is safe to call more than once and returns nil (ErrInvalidArgument for
// a nil *Client).
func (c *Client) Close() error {
	if c == nil {
		return errNilClient
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.events.stop()                    // quick: waits at most for one event being copied
	C.redlock_cancel_trigger(c.cancel) // NULL is ignored
	for k := range c.pending {
		k.fire(reasonClosed)
	}
	runtime.SetFinalizer(c, nil)
	if c.inflight > 0 {
		c.freeOnIdle = true
		c.mu.Unlock()
		return nil
	}
	ptr, cancel := c.take()
	c.mu.Unlock()
	freeHandles(ptr, cancel)
	return nil
}

// enter starts a call on the live client: it returns the client and the client's shared
// cancel handle, and registers own (if not nil) so that Close fires it. ErrClosed once
// Close has begun. Every successful enter is paired with leave.
func (c *Client) enter(own *callCancel) (*C.redlock_client, *C.redlock_cancel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.ptr == nil {
		return nil, nil, ErrClosed
	}
	if c.cancel == nil {
		if err := cCall(func(cerr cErr) cStatus {
			return C.redlock_cancel_new(&c.cancel, cerr)
		}); err != nil {
			return nil, nil, err
		}
	}
	if own != nil {
		if c.pending == nil {
			c.pending = map[*callCancel]struct{}{}
		}
		c.pending[own] = struct{}{}
	}
	c.inflight++
	return c.ptr, c.cancel, nil
}

// leave ends a call begun by enter; after a Close, the last call out frees the client.
func (c *Client) leave(own *callCancel) {
	c.mu.Lock()
	delete(c.pending, own)
	c.inflight--
	if c.inflight > 0 || !c.freeOnIdle {
		c.mu.Unlock()
		return
	}
	c.freeOnIdle = false
	ptr, cancel := c.take()
	c.mu.Unlock()
	freeHandles(ptr, cancel)
}

// call runs f on the live client, for the calls that no cancel handle ends (they are
// bounded by the node timeout): ErrClosed after Close, and the C client stays allocated until f
// returns.
func (c *Client) call(f func(ptr *C.redlock_client) error) error {
	if c == nil {
		return errNilClient
	}
	ptr, _, err := c.enter(nil)
	if err != nil {
		return err
	}
	defer c.leave(nil)
	err = f(ptr)
	runtime.KeepAlive(c)
	return err
}

// free frees the C client and the shared cancel handle; the finalizer calls it once the
// Client is unreachable (no call can be in flight then).
func (c *Client) free() {
	c.events.stop()
	c.mu.Lock()
	ptr, cancel := c.take()
	c.mu.Unlock()
	freeHandles(ptr, cancel)
}

// take hands over the C handles for freeing; c.mu is held.
func (c *Client) take() (*C.redlock_client, *C.redlock_cancel) {
	ptr, cancel := c.ptr, c.cancel
	c.ptr, c.cancel = nil, nil
	return ptr, cancel
}

// freeHandles frees what take handed over, outside c.mu: freeing the client waits (boundedly)
// for its node workers, and other goroutines must not wait behind that.
func freeHandles(ptr *C.redlock_client, cancel *C.redlock_cancel) {
	C.redlock_client_free(ptr)    // NULL is ignored
	C.redlock_cancel_free(cancel) // NULL is ignored
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cancelledByContext(ctx context.Context, name, msg string) error {
	causes := []error{ctx.Err()}
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		causes = append(causes, cause)
	}
	return &Error{
		Status:  StatusCancelled,
		Message: orDefault(msg, "acquiring "+name+" was cancelled") + ": " + context.Cause(ctx).Error(),
		causes:  causes,
	}
}
