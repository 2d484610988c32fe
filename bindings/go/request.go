package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MaxResources is the most resources one request (WithResources) takes.
const MaxResources = 64

// MaxResourceName is the longest resource name, in bytes; a longer one is ErrInvalidArgument.
const MaxResourceName = 4096

// MaxPermits is the most permits a semaphore can have.
const MaxPermits = 1024

// Request describes one acquisition: its kind (plain, WithFenced, WithReentrant, WithRead,
// WithWrite, WithSemaphore, or several resources WithResources), its patience (the client's
// retries, WithRetries, WithOnce or WithWait), auto-extension (WithAutoExtend) and, for the
// read-write lock, who it is for (WithOwner). The context given to Acquire cancels one
// acquisition.
//
// NewRequest builds the libredlock request once; every Acquire of it is then one C call. A
// Request does not change: acquire it as often as you like, from any number of goroutines
// at once, each with its own context. Problems with it (an empty owner, say) are reported by
// Acquire as ErrInvalidArgument before anything is sent.
//
// Close frees the libredlock request at once; otherwise a finalizer frees it once the
// Request is unreachable. Copies of a Request value share the one libredlock request (and
// its owner): closing either closes both, and neither can free it under the other.
type Request struct {
	spec requestSpec    // what the options set; read only while NewRequest builds
	h    *requestHandle // the built request; nil when err says why there is none
	err  error
}

// requestSpec is what the options of NewRequest set.
type requestSpec struct {
	resources []string
	many      bool // WithResources was given: all or none, even of one name
	ttl       time.Duration
	kind      requestKind
	owner     string // of a reentrant lock
	caller    string // WithOwner's name
	hasCaller bool
	permits   int // of a semaphore
	patience  patience
	retries   int
	delay     time.Duration
	jitter    time.Duration
	hasDelay  bool
	wait      time.Duration
	polling   bool
	unfair    bool
	auto      *AutoExtend
	shorthand string // the Client method that makes the request, which fixes its kind
	err       error  // the first bad option
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

var kindNames = map[requestKind]string{
	kindFenced:    "WithFenced",
	kindReentrant: "WithReentrant",
	kindRead:      "WithRead",
	kindWrite:     "WithWrite",
	kindSemaphore: "WithSemaphore",
}

type patience int

const (
	patienceClient  patience = iota // the client's retries (WithRetryCount)
	patienceRetries                 // spec.retries retries
	patienceWait                    // wait up to spec.wait
)

// RequestOption sets one part of a Request. Options take effect in NewRequest; applied to a
// Request NewRequest returned, they change nothing.
type RequestOption func(*Request)

// AutoExtend says how WithAutoExtend keeps a lock alive. The zero value is the default:
// extend every third of the TTL for as long as the lock is held, up to the client's
// WithMaxExtensions.
type AutoExtend struct {
	// Fraction is the share of the TTL after which the lock is extended, in (0, 1); zero
	// means 1/3.
	Fraction float64
	// MaxHold stops extending this long after acquisition; zero means never.
	MaxHold time.Duration
	// MaxExtensions caps the extensions of this lock (automatic and Extend alike); zero
	// means the client's WithMaxExtensions.
	MaxExtensions int
}

// NewRequest describes a lock on resource for ttl (rounded down to whole milliseconds; at
// least 3 ms with the default drift factor, at most 10 years): a plain lock with the client's retries unless opts say otherwise. It builds
// the libredlock request; a problem with it is kept for Acquire to report.
func NewRequest(resource string, ttl time.Duration, opts ...RequestOption) *Request {
	r := &Request{spec: requestSpec{resources: []string{resource}, ttl: ttl}}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	r.h, r.err = r.spec.build()
	r.spec = requestSpec{} // the built request is all that counts from here on
	return r
}

// Close frees the libredlock request; acquisitions in progress with it finish first, and
// later ones fail with an error wrapping ErrClosed and ErrInvalidArgument. Safe to call more
// than once, and on any copy of the Request; returns nil.
func (r *Request) Close() error {
	if r != nil && r.h != nil {
		r.h.close()
	}
	return nil
}

func (s *requestSpec) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// setKind records the request's kind; two different kinds are an error (at Acquire), and so
// is any kind given to a shorthand, which has its own.
func (s *requestSpec) setKind(k requestKind) {
	if s.shorthand != "" {
		s.fail(invalidArgument("%s takes no kind option (%s): use the shorthand of the kind, or NewRequest and Acquire", s.shorthand, kindNames[k]))
	}
	if s.kind != kindPlain && s.kind != k {
		s.fail(invalidArgument("%s and %s exclude each other: a request has one kind", kindNames[s.kind], kindNames[k]))
	}
	s.kind = k
}

// WithFenced makes it a fenced lock: Lock.Fence is a token strictly greater than that of
// every fenced lock of the resource whose holder came before (see Client.LockFenced).
func WithFenced() RequestOption {
	return func(r *Request) { r.spec.setKind(kindFenced) }
}

// WithReentrant makes it one hold of a reentrant lock on the resource for owner. owner names
// the holder: any non-empty string of at most 1024 bytes, one per logical owner (NewOwner
// makes a random one). It is not a goroutine or a thread: whoever passes the same owner
// shares its holds. While owner holds the resource it can acquire it again at once; every
// hold is a Lock to Unlock (Lock.HoldCount counts them), and the resource is free for others
// after the last Unlock (or when the key expires). Reentrant and plain locks on one resource
// exclude each other. Extending a hold keeps the resource at least its TTL from now; no hold
// shortens it.
func WithReentrant(owner string) RequestOption {
	return func(r *Request) {
		r.spec.setKind(kindReentrant)
		r.spec.owner = owner
	}
}

// WithResources adds more resources: the lock takes the request's resource and these, all at
// once or none, at most MaxResources in all. Each node sets all keys in one script, in sorted
// order, or none, so clients locking overlapping sets never deadlock. Extend and Unlock act
// on all of them; Lock.Resources lists them. An empty name or a name given twice is
// ErrInvalidArgument.
func WithResources(more ...string) RequestOption {
	return func(r *Request) {
		if r.spec.shorthand != "" {
			r.spec.fail(invalidArgument("%s takes no WithResources: use NewRequest and Acquire", r.spec.shorthand))
		}
		r.spec.many = true
		r.spec.resources = append(r.spec.resources, more...)
	}
}

// WithRead makes it the read side of a read-write lock: any number of readers hold the
// resource at once while no writer does. A writer is a WithWrite lock, and also any plain
// or fenced lock of the resource (of this or any other Redlock client): readers and they
// exclude each other. The readers live in a sorted set at the resource's key, each with
// its own expiry; Extend and Unlock touch only this reader. Waiting readers all wake when a
// writer releases. Writers can starve under a steady stream of overlapping readers. No
// fencing token. One resource only.
//
// There is no upgrade from read to write. The owner of a write lock (see WithOwner) who asks
// for a read lock of the same resource gets ErrInvalidArgument at once instead of waiting
// for itself.
func WithRead() RequestOption {
	return func(r *Request) { r.spec.setKind(kindRead) }
}

// WithWrite makes it the write side of a read-write lock: it excludes readers and other
// writers. On the nodes it is a plain lock, so plain and fenced locks exclude it and it
// excludes them. It adds a check: an owner (see WithOwner) that holds a read or write lock
// of the resource and asks for its write lock gets ErrInvalidArgument at once instead of
// waiting for itself forever. For a fenced writer use WithFenced (which has no such check).
// One resource only.
func WithWrite() RequestOption {
	return func(r *Request) { r.spec.setKind(kindWrite) }
}

// WithOwner names who the acquisition is for, for the self-wait check of WithRead and
// WithWrite (other kinds ignore it): read and write locks of one resource taken for the same
// owner, from any goroutine, count as one caller's, which cannot wait for itself. name is
// any non-empty UTF-8 string without NUL bytes (NewOwner makes a random one); it is not a
// goroutine, and two owners of one process wait for each other like any two holders.
//
// Without WithOwner the owner is the Request itself (and its copies): every goroutine that
// acquires through one Request acts for that one owner. So while one goroutine holds the
// write lock of a shared WithWrite Request, another asking through the same Request gets
// ErrInvalidArgument instead of waiting; give each goroutine its own Request (or its own
// WithOwner) to have them queue. The shorthands ReadLock and WriteLock build a Request, and
// so an owner, per call, unless opts give WithOwner.
func WithOwner(name string) RequestOption {
	return func(r *Request) { r.spec.caller, r.spec.hasCaller = name, true }
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
			r.spec.fail(invalidArgument("WithSemaphore(%d): permits must be 1 to %d", permits, MaxPermits))
		}
		r.spec.setKind(kindSemaphore)
		r.spec.permits = permits
	}
}

// WithRetries makes up to n retries after the first attempt, each after delay ± a random
// part of jitter, instead of the client's retries. n, delay and jitter must not be
// negative; delay and jitter are rounded up to whole milliseconds. The patience is the last
// of WithRetries, WithOnce and WithWait given; the delay and jitter of WithRetries also set
// the backoff of a wait.
func WithRetries(n int, delay, jitter time.Duration) RequestOption {
	return func(r *Request) {
		if n < 0 || n > math.MaxUint32 || delay < 0 || jitter < 0 {
			r.spec.fail(invalidArgument("WithRetries(%d, %v, %v): a negative or too large value", n, delay, jitter))
		}
		r.spec.patience, r.spec.retries = patienceRetries, n
		r.spec.delay, r.spec.jitter, r.spec.hasDelay = delay, jitter, true
	}
}

// WithOnce makes a single attempt.
func WithOnce() RequestOption {
	return func(r *Request) { r.spec.patience, r.spec.retries = patienceRetries, 0 }
}

// WithWait waits up to d (at most ten years) for a busy resource, woken by the release
// notifications the nodes publish, with a jittered backoff as the fallback. d must be
// positive. The context given to Acquire ends the wait sooner.
func WithWait(d time.Duration) RequestOption {
	return func(r *Request) {
		if d <= 0 {
			r.spec.fail(invalidArgument("WithWait(%v): the wait must be positive", d))
		}
		r.spec.patience, r.spec.wait = patienceWait, d
	}
}

// WithPolling makes a waiter poll (with the backoff) instead of waking on release
// notifications.
func WithPolling() RequestOption {
	return func(r *Request) { r.spec.polling = true }
}

// WithUnfair takes a waiter out of the queue that, by default, the waiters of every process
// for a plain, fenced or write lock on one resource stand in, so that a release wakes only
// the one that came first: with it, one waiter per client tries on each release, as every
// earlier version did. The queue only orders the tries; exclusion does not depend on it.
func WithUnfair() RequestOption {
	return func(r *Request) { r.spec.unfair = true }
}

// WithAutoExtend keeps the lock alive while it is held: the client's extender thread
// extends it every a.Fraction of the TTL, each time on a quorum; Lock.Held and Lock.Lost
// tell whether it still is. Extension stops for good on Unlock, when the Lock is
// garbage-collected, after a.MaxHold or a.MaxExtensions. The TTL must exceed
// Fraction × TTL + the client's node timeout (WithNodeTimeout).
func WithAutoExtend(a AutoExtend) RequestOption {
	return func(r *Request) {
		if a.MaxHold < 0 || a.MaxExtensions < 0 || a.MaxExtensions > math.MaxUint32 {
			r.spec.fail(invalidArgument("AutoExtend MaxHold %v or MaxExtensions %d is negative or too large", a.MaxHold, a.MaxExtensions))
		}
		r.spec.auto = &a
	}
}

// NewOwner returns a fresh random name (40 hex characters) for WithReentrant or WithOwner.
func NewOwner() string {
	var b [20]byte
	// crypto/rand.Read never fails on supported platforms (it panics if it cannot read).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestIDs numbers the Requests of this process: a Request's default owner.
var requestIDs atomic.Uint64

// check validates what libredlock cannot see (NUL bytes, Go values to convert).
func (s *requestSpec) check() error {
	if s.err != nil {
		return s.err
	}
	if len(s.resources) > MaxResources {
		return invalidArgument("%d resources; at most %d are allowed", len(s.resources), MaxResources)
	}
	for _, name := range s.resources {
		if err := cName("resource name", name); err != nil {
			return err
		}
	}
	if s.kind == kindReentrant {
		if err := cName("owner", s.owner); err != nil {
			return err
		}
	}
	if s.hasCaller {
		if err := cName("WithOwner name", s.caller); err != nil {
			return err
		}
	}
	_, err := ttlMillis(s.ttl)
	return err
}

// build makes the libredlock request s describes.
func (s *requestSpec) build() (*requestHandle, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ms, _ := ttlMillis(s.ttl)
	names, freeNames := cStrings(s.resources)
	defer freeNames()
	var ptr *C.redlock_request
	if err := cCall(func(cerr cErr) cStatus {
		if !s.many {
			return C.redlock_request_new(names[0], ms, &ptr, cerr)
		}
		return C.redlock_request_new_many(&names[0], C.size_t(len(names)), ms, &ptr, cerr)
	}); err != nil {
		return nil, err
	}
	if err := s.configure(ptr); err != nil {
		C.redlock_request_free(ptr)
		return nil, err
	}
	h := &requestHandle{_ptr: ptr, name: s.name()}
	if s.kind == kindRead || s.kind == kindWrite {
		// Only these kinds read the owner; the others get NULL and cost no string.
		caller := s.caller
		if !s.hasCaller {
			caller = fmt.Sprintf("Go Request %d", requestIDs.Add(1))
		}
		h.caller = C.CString(caller)
	}
	if s.many {
		h.resources = append([]string(nil), s.resources...)
		sort.Strings(h.resources)
	}
	runtime.SetFinalizer(h, (*requestHandle).free)
	return h, nil
}

// configure runs the setters of the kind, patience and auto-extension on a new request.
func (s *requestSpec) configure(req *C.redlock_request) error {
	var owner *C.char
	if s.kind == kindReentrant {
		owner = C.CString(s.owner)
		defer C.free(unsafe.Pointer(owner))
	}
	var auto AutoExtend
	if s.auto != nil {
		auto = *s.auto
	}
	fraction, maxHold, maxExtensions := C.double(auto.Fraction), millis(auto.MaxHold), C.uint32_t(auto.MaxExtensions)
	return cSteps(
		cStep{s.kind == kindFenced, func(e cErr) cStatus { return C.redlock_request_set_fenced(req, e) }},
		cStep{s.kind == kindReentrant, func(e cErr) cStatus { return C.redlock_request_set_reentrant(req, owner, e) }},
		cStep{s.kind == kindRead, func(e cErr) cStatus { return C.redlock_request_set_read(req, e) }},
		cStep{s.kind == kindWrite, func(e cErr) cStatus { return C.redlock_request_set_write(req, e) }},
		cStep{s.kind == kindSemaphore, func(e cErr) cStatus { return C.redlock_request_set_semaphore(req, C.uint32_t(s.permits), e) }},
		cStep{s.hasDelay, func(e cErr) cStatus {
			return C.redlock_request_set_retry_delay(req, millis(s.delay), millis(s.jitter), e)
		}},
		cStep{s.patience == patienceRetries, func(e cErr) cStatus { return C.redlock_request_set_retries(req, C.uint32_t(s.retries), e) }},
		cStep{s.patience == patienceWait, func(e cErr) cStatus { return C.redlock_request_set_wait(req, millis(s.wait), e) }},
		cStep{s.polling, func(e cErr) cStatus { return C.redlock_request_set_notifications(req, false, e) }},
		cStep{s.unfair, func(e cErr) cStatus { return C.redlock_request_set_fair(req, false, e) }},
		cStep{s.auto != nil, func(e cErr) cStatus {
			return C.redlock_request_set_auto_extend(req, fraction, maxHold, maxExtensions, e)
		}},
	)
}

// name is how errors name the request's resources: for several, sorted and joined with ','
// as libredlock names the lock.
func (s *requestSpec) name() string {
	if len(s.resources) == 1 {
		return s.resources[0]
	}
	sorted := append([]string(nil), s.resources...)
	sort.Strings(sorted)
	return strings.Join(sorted, ",")
}

// requestHandle owns a built libredlock request. Request values point to it, so that a copy
// of a Request shares it; the finalizer frees it once no Request (and no acquisition) refers
// to it any more.
type requestHandle struct {
	mu     sync.Mutex
	_ptr   *C.redlock_request // nil once freed
	caller *C.char            // the owner of a read or write lock (else NULL); freed with _ptr
	users  int                // acquisitions in flight, which keep _ptr alive past close
	closed bool
	// Read by Acquire for its messages and the Lock; never changed.
	name      string
	resources []string // sorted; only for a request of several resources
}

// acquire runs one acquisition: the single C call, with the cancel handle for this call.
// The handle stays allocated until the call returns, even if Close runs meanwhile.
func (h *requestHandle) acquire(client *C.redlock_client, cancel *C.redlock_cancel) (*C.redlock_lock, error) {
	h.mu.Lock()
	ptr, caller := h._ptr, h.caller
	if h.closed || ptr == nil {
		h.mu.Unlock()
		return nil, &Error{Status: StatusInvalidArgument, Message: "acquiring " + h.name + ": the Request was closed", causes: []error{ErrClosed}}
	}
	h.users++
	h.mu.Unlock()
	defer h.leave()
	var lock *C.redlock_lock
	err := cCall(func(cerr cErr) cStatus {
		return C.redlock_request_acquire(ptr, client, cancel, caller, &lock, cerr)
	})
	runtime.KeepAlive(h)
	return lock, err
}

// leave ends an acquisition; the last one out after close frees the request.
func (h *requestHandle) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users--
	if h.closed && h.users == 0 {
		h.freeLocked()
	}
}

func (h *requestHandle) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	runtime.SetFinalizer(h, nil)
	if h.users == 0 {
		h.freeLocked()
	}
}

// free is the finalizer: no acquisition can be in flight on an unreachable handle.
func (h *requestHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.freeLocked()
}

func (h *requestHandle) freeLocked() {
	C.redlock_request_free(h._ptr)   // NULL is ignored
	C.free(unsafe.Pointer(h.caller)) // NULL is ignored
	h._ptr, h.caller = nil, nil
}
