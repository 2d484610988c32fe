package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"math"
	"runtime"
	"sort"
	"time"
	"unsafe"
)

// Request describes one acquisition: its kind (plain, WithFenced, WithReentrant or
// several resources WithResources), its patience (the client's retries, WithRetries,
// WithOnce or WithWait), auto-extension (WithAutoExtend) and, through AcquireContext, a
// context that cancels it. Every combination is valid, except that fenced and reentrant
// locks take one resource. A Request is a description: build it once and acquire with it
// as often as you like, from any number of goroutines. Problems with it (an empty owner,
// say) are reported by Acquire as ErrInvalidArgument before anything is sent.
type Request struct {
	resources []string
	many      bool // WithResources was given: all or none, even of one name
	ttl       time.Duration
	kind      requestKind
	owner     string
	permits   int // of a semaphore
	patience  patience
	retries   int
	delay     time.Duration
	jitter    time.Duration
	hasDelay  bool
	wait      time.Duration
	polling   bool
	auto      *AutoExtend
	err       error // the first bad option
}

type requestKind int

const (
	kindPlain requestKind = iota
	kindFenced
	kindReentrant
	kindRead
	kindWrite
	kindSemaphore
)

type patience int

const (
	patienceClient  patience = iota // Options.RetryCount retries
	patienceRetries                 // Request.retries retries
	patienceWait                    // wait up to Request.wait
)

// maxWait is the longest wait libredlock takes (ten years); LockContext waits that long,
// that is until its context is done.
const maxWait = 10 * 365 * 24 * time.Hour

// RequestOption sets one part of a Request.
type RequestOption func(*Request)

// AutoExtend says how WithAutoExtend keeps a lock alive. The zero value is the default:
// extend every third of the TTL for as long as the lock is held, up to the client's
// Options.MaxExtensions.
type AutoExtend struct {
	// Fraction is the share of the TTL after which the lock is extended, in (0, 1); zero
	// means 1/3.
	Fraction float64
	// MaxHold stops extending this long after acquisition; zero means never.
	MaxHold time.Duration
	// MaxExtensions caps the extensions of this lock (automatic and Extend alike); zero
	// means the client's Options.MaxExtensions.
	MaxExtensions int
}

// NewRequest describes a lock on resource for ttl (rounded down to whole milliseconds, at
// least 1 ms): a plain lock with the client's retries unless opts say otherwise.
func NewRequest(resource string, ttl time.Duration, opts ...RequestOption) *Request {
	r := &Request{resources: []string{resource}, ttl: ttl}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	return r
}

func (r *Request) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// WithFenced makes it a fenced lock: Lock.Fence is a token strictly greater than that of
// every fenced lock of the resource whose holder came before (see LockFenced).
func WithFenced() RequestOption {
	return func(r *Request) {
		r.setKind(kindFenced)
	}
}

// WithReentrant makes it one hold of a reentrant lock for owner (see ReentrantLock).
func WithReentrant(owner string) RequestOption {
	return func(r *Request) {
		r.setKind(kindReentrant)
		r.owner = owner
	}
}

// WithResources adds more resources: the lock takes the request's resource and these,
// all at once or none (see LockMany), at most MaxResources in all.
func WithResources(more ...string) RequestOption {
	return func(r *Request) {
		r.many = true
		r.resources = append(r.resources, more...)
	}
}

// WithRetries makes up to n retries after the first attempt, each after delay ± a random
// part of jitter, instead of the client's Options. n, delay and jitter must not be
// negative; delay and jitter are rounded up to whole milliseconds. The patience is the last
// of WithRetries, WithOnce and WithWait given; the delay and jitter of WithRetries also set
// the backoff of a wait.
func WithRetries(n int, delay, jitter time.Duration) RequestOption {
	return func(r *Request) {
		if n < 0 || n > math.MaxUint32 || delay < 0 || jitter < 0 {
			r.fail(invalidArgument("WithRetries(%d, %v, %v): a negative or too large value", n, delay, jitter))
		}
		r.patience, r.retries = patienceRetries, n
		r.delay, r.jitter, r.hasDelay = delay, jitter, true
	}
}

// WithOnce makes a single attempt.
func WithOnce() RequestOption {
	return func(r *Request) { r.patience, r.retries = patienceRetries, 0 }
}

// WithWait waits up to d (at most ten years) for a busy resource, woken by the release
// notifications the nodes publish, with a jittered backoff as the fallback. d must be
// positive. A context given to AcquireContext ends the wait sooner.
func WithWait(d time.Duration) RequestOption {
	return func(r *Request) {
		if d <= 0 {
			r.fail(invalidArgument("WithWait(%v): the wait must be positive", d))
		}
		r.patience, r.wait = patienceWait, d
	}
}

// WithPolling makes a waiter poll (with the backoff) instead of waking on release
// notifications.
func WithPolling() RequestOption {
	return func(r *Request) { r.polling = true }
}

// WithAutoExtend keeps the lock alive while it is held: the client's extender thread
// extends it every a.Fraction of the TTL, each time on a quorum; Lock.Held and Lock.Lost
// tell whether it still is. Extension stops for good on Unlock, when the Lock is
// garbage-collected, after a.MaxHold or a.MaxExtensions. The TTL must exceed
// Fraction × TTL + Options.NodeTimeout.
func WithAutoExtend(a AutoExtend) RequestOption {
	return func(r *Request) {
		if a.MaxHold < 0 || a.MaxExtensions < 0 || a.MaxExtensions > math.MaxUint32 {
			r.fail(invalidArgument("AutoExtend MaxHold %v or MaxExtensions %d is negative or too large", a.MaxHold, a.MaxExtensions))
		}
		r.auto = &a
	}
}

// check validates what the C side cannot see (NUL bytes) or what Go must convert.
func (r *Request) check() error {
	if r == nil {
		return invalidArgument("nil *Request")
	}
	if r.err != nil {
		return r.err
	}
	if len(r.resources) > MaxResources {
		return invalidArgument("%d resources; at most %d are allowed", len(r.resources), MaxResources)
	}
	for _, name := range r.resources {
		if err := checkName("resource name", name); err != nil {
			return err
		}
	}
	if r.kind == kindReentrant {
		if err := checkName("owner", r.owner); err != nil {
			return err
		}
	}
	_, err := ttlMillis(r.ttl)
	return err
}

// name is how errors name the request's resources.
func (r *Request) name() string {
	if len(r.resources) == 1 {
		return r.resources[0]
	}
	s := append([]string(nil), r.resources...)
	sort.Strings(s)
	out := ""
	for i, n := range s {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}

// millis converts d to whole milliseconds, rounding up, without overflow.
func millis(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return C.uint64_t(ms)
}

// cCall runs one fallible C call that only reports an error.
func cCall(f func(**C.redlock_error) C.enum_redlock_status) error {
	var cerr *C.redlock_error
	return statusError(f(&cerr), cerr)
}

// toC builds the C request, with cancel (may be nil) as its cancel handle. The caller frees
// it with redlock_request_free.
func (r *Request) toC(cancel *C.redlock_cancel) (*C.redlock_request, error) {
	ms, err := ttlMillis(r.ttl)
	if err != nil {
		return nil, err
	}
	names := make([]*C.char, len(r.resources))
	for i, name := range r.resources {
		names[i] = C.CString(name)
		defer C.free(unsafe.Pointer(names[i]))
	}
	var req *C.redlock_request
	err = cCall(func(cerr **C.redlock_error) C.enum_redlock_status {
		if !r.many {
			return C.redlock_request_new(names[0], ms, &req, cerr)
		}
		return C.redlock_request_new_many(&names[0], C.size_t(len(names)), ms, &req, cerr)
	})
	if err != nil {
		return nil, err
	}
	steps := r.kindSteps(req)
	switch r.kind {
	case kindFenced:
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_fenced(req, cerr)
		})
	case kindReentrant:
		owner := C.CString(r.owner)
		defer C.free(unsafe.Pointer(owner))
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_reentrant(req, owner, cerr)
		})
	}
	if r.hasDelay {
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_retry_delay(req, millis(r.delay), millis(r.jitter), cerr)
		})
	}
	switch r.patience {
	case patienceRetries:
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_retries(req, C.uint32_t(r.retries), cerr)
		})
	case patienceWait:
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_wait(req, millis(r.wait), cerr)
		})
	}
	if r.polling {
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_notifications(req, false, cerr)
		})
	}
	if a := r.auto; a != nil {
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_auto_extend(req, C.double(a.Fraction), millis(a.MaxHold), C.uint32_t(a.MaxExtensions), cerr)
		})
	}
	if cancel != nil {
		steps = append(steps, func(cerr **C.redlock_error) C.enum_redlock_status {
			return C.redlock_request_set_cancel(req, cancel, cerr)
		})
	}
	for _, step := range steps {
		if err := cCall(step); err != nil {
			C.redlock_request_free(req)
			return nil, err
		}
	}
	return req, nil
}

// Acquire takes the lock req describes, with the patience it says; it is
// AcquireContext(context.Background(), req). Close ends it at once with ErrClosed.
func (c *Client) Acquire(req *Request) (*Lock, error) {
	return c.AcquireContext(context.Background(), req)
}

// AcquireContext takes the lock req describes, with the patience it says, or until ctx is
// done: then it returns at once an error that wraps ErrCancelled and ctx.Err() (so
// errors.Is(err, context.Canceled) or errors.Is(err, context.DeadlineExceeded) holds), after
// undoing what it had taken on the nodes. Close ends it the same way with ErrClosed. A ctx
// done after the lock was taken does not release it: the caller holds it and unlocks it.
// Other errors as for Lock.
func (c *Client) AcquireContext(ctx context.Context, req *Request) (*Lock, error) {
	if c == nil {
		return nil, errNilClient
	}
	if ctx == nil {
		return nil, invalidArgument("nil context.Context")
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, cancelledByContext(ctx, req.name(), "")
	}
	var own *callCancel
	if ctx.Done() != nil {
		var err error
		if own, err = newCallCancel(); err != nil {
			return nil, err
		}
	}
	ptr, cancel, err := c.enter(own)
	if err != nil {
		own.release(false)
		return nil, err
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
	creq, err := req.toC(cancel)
	if err != nil {
		return nil, err
	}
	defer C.redlock_request_free(creq)
	var lp *C.redlock_lock
	var cerr *C.redlock_error
	status := C.redlock_client_acquire(ptr, creq, &lp, &cerr)
	runtime.KeepAlive(c)
	if status == C.REDLOCK_CANCELLED {
		msg := ""
		if cerr != nil {
			msg = C.GoString(C.redlock_error_message(cerr))
			C.redlock_error_free(cerr)
		}
		if own != nil && own.reason() == reasonContext {
			return nil, cancelledByContext(ctx, req.name(), msg)
		}
		return nil, &Error{Status: StatusCancelled, Message: orDefault(msg, "acquiring "+req.name()+" was cancelled") + ": the client was closed", causes: []error{ErrClosed}}
	}
	if err := statusError(status, cerr); err != nil {
		return nil, err
	}
	l := newLock(lp, c)
	if r := req.resources; req.many {
		l.resources = append([]string(nil), r...)
		sort.Strings(l.resources)
	}
	return l, nil
}

// LockContext waits until it gets resource for ttl, woken by the release notifications
// the nodes publish (with a backoff as the fallback), or until ctx is done: then it returns
// at once an error for which errors.Is(err, context.Canceled) or errors.Is(err,
// context.DeadlineExceeded) holds, leaving nothing on the nodes. With a ctx that is never
// done it waits as long as it takes (up to ten years). Other errors as for Lock.
func (c *Client) LockContext(ctx context.Context, resource string, ttl time.Duration) (*Lock, error) {
	return c.AcquireContext(ctx, NewRequest(resource, ttl, WithWait(maxWait)))
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
