package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"math"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Options configures a Client. The zero value of every field means the libredlock
// default (see redlock_options_new in redlock.h). Because zero means "default", a
// negative RetryCount, RetryDelay, RetryJitter or DriftFactor means zero: RetryCount: -1
// is "one attempt, no retries". Durations are rounded up to whole milliseconds.
type Options struct {
	// RetryCount is the number of retries after the first attempt of Lock.
	RetryCount int
	// RetryDelay is the pause before each retry, ± a random part of RetryJitter.
	RetryDelay  time.Duration
	RetryJitter time.Duration
	// DriftFactor is the share of the TTL set aside for clock drift; in [0, 1).
	DriftFactor float64
	// NodeTimeout is how long a call waits for one node. It must not be negative.
	NodeTimeout time.Duration
	// MaxExtensions caps the number of Extend calls per lock; zero is the default (no
	// cap). It must not be negative.
	MaxExtensions int
	// RestartGrace keeps a node whose Redis process is younger than this out of acquire
	// quorums; zero is the default (off). Set it to at least the largest TTL in use when
	// nodes run without persistence: a restarted node has forgotten the locks it held.
	// The nodes must allow the INFO command. It must not be negative.
	RestartGrace time.Duration
	// TLSCAFile is a PEM file of CA certificates to trust for "rediss://" nodes instead
	// of the system's roots; empty means the system's roots. Certificates are always
	// verified; only a URL ending in "#insecure" skips that (for tests only).
	TLSCAFile string
	// TLSClientCertFile and TLSClientKeyFile (both or neither) are the PEM client
	// certificate and its key, for nodes that require one (tls-auth-clients yes).
	TLSClientCertFile string
	TLSClientKeyFile  string
	// DisableClockGuard turns the clock guard off; the zero value leaves it on (the
	// default). With it on, TIME rides in every acquire's pipeline, a node whose clock
	// jumps forward by more than ClockJumpThreshold is kept out of acquire quorums for
	// ClockQuarantine, and a suspension of this host marks the locks held across it lost.
	DisableClockGuard bool
	// ClockJumpThreshold is the largest step of a node's clock tolerated between two
	// samples beyond the drift; zero is the default (50ms). It must not be negative, nor
	// set together with DisableClockGuard.
	ClockJumpThreshold time.Duration
	// ClockQuarantine is how long a node whose clock jumped forward is kept out of acquire
	// quorums; zero is the default (60s). Make it at least your largest TTL. It must not be
	// negative.
	ClockQuarantine time.Duration
	// StrictServers refuses the nodes the server probe only warns about (a master with
	// replicas, a maxmemory-policy that can evict lock keys, INFO or TIME denied) instead of
	// logging them and listing them in NodeStatus.Warnings.
	StrictServers bool
}

// toC builds libredlock options from o (the caller frees them with redlock_options_free).
// The library checks each value as it is set.
func (o Options) toC() (*C.redlock_options, error) {
	var opts *C.redlock_options
	var cerr *C.redlock_error
	if err := statusError(C.redlock_options_new(&opts, &cerr), cerr); err != nil {
		return nil, err
	}
	if err := o.setC(opts); err != nil {
		C.redlock_options_free(opts)
		return nil, err
	}
	return opts, nil
}

// set runs one redlock_*_set_* call and turns its status into an error.
func set(call func(**C.redlock_error) C.enum_redlock_status) error {
	var cerr *C.redlock_error
	return statusError(call(&cerr), cerr)
}

func (o Options) setC(opts *C.redlock_options) error {
	if o.RetryCount != 0 {
		n, err := uint32Option("RetryCount", max(o.RetryCount, 0))
		if err != nil {
			return err
		}
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_retry_count(opts, n, e)
		}); err != nil {
			return err
		}
	}
	if o.RetryDelay != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_retry_delay_ms(opts, optionMillis(o.RetryDelay), e)
		}); err != nil {
			return err
		}
	}
	if o.RetryJitter != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_retry_jitter_ms(opts, optionMillis(o.RetryJitter), e)
		}); err != nil {
			return err
		}
	}
	if o.DriftFactor != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_drift_factor(opts, C.double(max(o.DriftFactor, 0)), e)
		}); err != nil {
			return err
		}
	}
	if o.NodeTimeout < 0 {
		return invalidArgument("NodeTimeout %v is negative", o.NodeTimeout)
	}
	if o.NodeTimeout != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_node_timeout_ms(opts, optionMillis(o.NodeTimeout), e)
		}); err != nil {
			return err
		}
	}
	if o.MaxExtensions < 0 {
		return invalidArgument("MaxExtensions %d is negative", o.MaxExtensions)
	}
	if o.MaxExtensions != 0 {
		n, err := uint32Option("MaxExtensions", o.MaxExtensions)
		if err != nil {
			return err
		}
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_max_extensions(opts, n, e)
		}); err != nil {
			return err
		}
	}
	if o.RestartGrace < 0 {
		return invalidArgument("RestartGrace %v is negative", o.RestartGrace)
	}
	if o.RestartGrace != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_restart_grace_ms(opts, optionMillis(o.RestartGrace), e)
		}); err != nil {
			return err
		}
	}
	for _, file := range []struct{ name, path string }{
		{"TLSCAFile", o.TLSCAFile},
		{"TLSClientCertFile", o.TLSClientCertFile},
		{"TLSClientKeyFile", o.TLSClientKeyFile},
	} {
		if strings.IndexByte(file.path, 0) >= 0 {
			return invalidArgument("%s %q contains a NUL byte", file.name, file.path)
		}
	}
	if o.TLSCAFile != "" {
		path := C.CString(o.TLSCAFile)
		defer C.free(unsafe.Pointer(path))
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_tls_ca_file(opts, path, e)
		}); err != nil {
			return err
		}
	}
	if (o.TLSClientCertFile == "") != (o.TLSClientKeyFile == "") {
		return invalidArgument("TLSClientCertFile and TLSClientKeyFile go together: set both or neither")
	}
	if o.TLSClientCertFile != "" {
		cert := C.CString(o.TLSClientCertFile)
		defer C.free(unsafe.Pointer(cert))
		key := C.CString(o.TLSClientKeyFile)
		defer C.free(unsafe.Pointer(key))
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_tls_client_cert_file(opts, cert, key, e)
		}); err != nil {
			return err
		}
	}
	return o.setGuardC(opts)
}

func uint32Option(name string, n int) (C.uint32_t, error) {
	if uint64(n) > math.MaxUint32 {
		return 0, invalidArgument("%s %d does not fit in 32 bits", name, n)
	}
	return C.uint32_t(n), nil
}

// optionMillis converts d to whole milliseconds, rounding up so that a positive duration
// never becomes zero; negative durations become zero.
func optionMillis(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0
	}
	return C.uint64_t((d + time.Millisecond - 1) / time.Millisecond)
}

// ttlMillis converts a TTL to whole milliseconds, rounding down so that a lock never
// lives longer than asked.
func ttlMillis(ttl time.Duration) (C.uint64_t, error) {
	if ttl < time.Millisecond {
		return 0, invalidArgument("TTL %v is less than a millisecond", ttl)
	}
	return C.uint64_t(ttl / time.Millisecond), nil
}

// Client is a connection to the Redlock nodes. Its methods are safe for concurrent use
// by multiple goroutines. Close it when done; a finalizer closes it as a backstop. The
// methods of a nil *Client return ErrInvalidArgument.
type Client struct {
	mu       sync.Mutex // guards the fields below; never held during a blocking C call
	ptr      *C.redlock_client
	cancel   *C.redlock_cancel // fired by Close; shared by acquisitions without a context
	closed   bool
	inflight int                      // calls between enter and leave
	pending  map[*callCancel]struct{} // the own cancel handles of calls in flight
	// freeOnIdle: Close came while calls were in flight; the last of them frees the client.
	freeOnIdle bool
}

// New connects to the Redis nodes at urls ("redis://[user:password@]host:port", or
// "rediss://..." for TLS; one per independent master; a lock needs a majority of them).
func New(urls []string, opts Options) (*Client, error) {
	if err := checkLibraryVersion(); err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, invalidArgument("no node URLs")
	}
	copts, err := opts.toC()
	if err != nil {
		return nil, err
	}
	defer C.redlock_options_free(copts)
	curls := make([]*C.char, len(urls))
	for i, u := range urls {
		if strings.IndexByte(u, 0) >= 0 {
			// Not quoted: a URL may carry a password.
			return nil, invalidArgument("node URL %d contains a NUL byte", i)
		}
		curls[i] = C.CString(u)
		defer C.free(unsafe.Pointer(curls[i]))
	}
	var ptr *C.redlock_client
	var cerr *C.redlock_error
	status := C.redlock_client_new(&curls[0], C.size_t(len(curls)), copts, &ptr, &cerr)
	if err := statusError(status, cerr); err != nil {
		return nil, err
	}
	c := &Client{ptr: ptr}
	runtime.SetFinalizer(c, (*Client).free)
	return c, nil
}

// Lock acquires resource for ttl, retrying as configured by Options. On failure the
// error wraps ErrNotAcquired, ErrNoQuorum, ErrInvalidArgument or ErrClosed.
// The TTL is rounded down to whole milliseconds and must be at least one millisecond.
func (c *Client) Lock(resource string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl))
}

// TryLock is Lock with a single attempt and no retries.
func (c *Client) TryLock(resource string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, WithOnce()))
}

// LockOptions says how LockWith takes and keeps one lock. The zero value is what Lock
// does: no auto-extension, Options.RetryCount retries. (It predates Request, which says
// all of this and more.)
type LockOptions struct {
	// AutoExtend keeps the lock alive while it is held: the library's extender thread (one
	// per Client) extends it every ExtendFraction of the TTL, each time on a quorum. Held
	// and Lost tell whether it still is. Extension stops for good on Unlock, when the Lock
	// is garbage-collected, or after MaxHold.
	AutoExtend bool
	// ExtendFraction is the share of the TTL after which the lock is extended, in (0, 1);
	// zero means the default, 1/3.
	ExtendFraction float64
	// MaxHold stops auto-extending this long after acquisition; zero means never.
	MaxHold time.Duration
	// WaitTimeout waits up to this long for a busy resource instead of RetryCount retries,
	// woken by the release notifications the nodes publish; zero means no waiting.
	WaitTimeout time.Duration
	// PollWhileWaiting makes a waiter poll at RetryDelay instead of waiting for release
	// notifications.
	PollWhileWaiting bool
}

// LockWith acquires resource for ttl as opts says: auto-extended while held, and/or
// waiting up to a timeout for a busy resource. Errors as for Lock.
func (c *Client) LockWith(resource string, ttl time.Duration, opts LockOptions) (*Lock, error) {
	if opts.MaxHold < 0 || opts.WaitTimeout < 0 {
		return nil, invalidArgument("MaxHold %v or WaitTimeout %v is negative", opts.MaxHold, opts.WaitTimeout)
	}
	req := NewRequest(resource, ttl)
	if opts.AutoExtend {
		WithAutoExtend(AutoExtend{Fraction: opts.ExtendFraction, MaxHold: opts.MaxHold})(req)
	}
	if opts.WaitTimeout > 0 {
		WithWait(opts.WaitTimeout)(req)
	}
	if opts.PollWhileWaiting {
		WithPolling()(req)
	}
	return c.Acquire(req)
}

// WithLock acquires resource with retries (as Lock does), keeps it auto-extended while fn
// runs, and always unlocks, even when fn panics. fn can watch l.Lost() or poll l.Held()
// during long work. It returns fn's error if fn failed, else ErrLost if the lock was lost
// while fn ran (the work may have overlapped another owner's), else Unlock's error.
func (c *Client) WithLock(resource string, ttl time.Duration, fn func(l *Lock) error) (err error) {
	l, err := c.LockWith(resource, ttl, LockOptions{AutoExtend: true})
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

// NodeStatus is what a client's worker last saw of one node.
type NodeStatus struct {
	// Address is host:port, never with credentials.
	Address   string
	Connected bool
	// Connects counts the connections established so far.
	Connects uint64
	// Restarts counts reconnects that found a different server run_id.
	Restarts uint64
	// RunID is the server's run_id; empty before the first connect or when INFO is denied.
	RunID string
	// Uptime is the server's uptime (whole seconds when reported, plus the time since);
	// negative when unknown.
	Uptime time.Duration
	// GraceRemaining is, with Options.RestartGrace, how much longer the node does not count
	// toward acquires.
	GraceRemaining time.Duration
	// ServerVersion is the server's redis_version at the last connect; empty when unknown.
	ServerVersion string
	// Persistence is the node's persistence as it reported it (e.g. "no AOF, no RDB
	// snapshots"); empty when unknown. Without persistence a restart forgets locks:
	// consider Options.RestartGrace.
	Persistence string
	// Warnings lists what the server probe and the clock guard found worth attention
	// (replicas of a master, an evicting maxmemory-policy, a clock that stepped back, a
	// command the ACL denies).
	Warnings []string
	// ClockOffset is the node's clock minus ours at the last TIME sample, valid when
	// ClockOffsetKnown (not when the guard is off, TIME is denied or nothing sampled yet).
	ClockOffset      time.Duration
	ClockOffsetKnown bool
	// QuarantineRemaining is how much longer the node is out of acquire quorums because
	// its clock jumped forward; QuarantineReason says why (empty when it is not).
	QuarantineRemaining time.Duration
	QuarantineReason    string
}

// NodeStatus reports what the client's workers last saw of each node, in the order of
// the URLs given to New.
func (c *Client) NodeStatus() ([]NodeStatus, error) {
	if c == nil {
		return nil, errNilClient
	}
	ptr, _, err := c.enter(nil)
	if err != nil {
		return nil, err
	}
	defer c.leave(nil)
	n := int(C.redlock_client_node_count(ptr))
	result := make([]NodeStatus, 0, n)
	for i := 0; i < n; i++ {
		var raw *C.redlock_node_status
		var cerr *C.redlock_error
		status := C.redlock_client_node_status(ptr, C.size_t(i), &raw, &cerr)
		if err := statusError(status, cerr); err != nil {
			return nil, err
		}
		uptime := time.Duration(-1)
		if ms := C.redlock_node_status_uptime_ms(raw); ms != C.uint64_t(math.MaxUint64) {
			uptime = time.Duration(ms) * time.Millisecond
		}
		result = append(result, NodeStatus{
			Address:        C.GoString(C.redlock_node_status_address(raw)),
			Connected:      bool(C.redlock_node_status_connected(raw)),
			Connects:       uint64(C.redlock_node_status_connects(raw)),
			Restarts:       uint64(C.redlock_node_status_restarts(raw)),
			RunID:          C.GoString(C.redlock_node_status_run_id(raw)),
			Uptime:         uptime,
			GraceRemaining: time.Duration(C.redlock_node_status_grace_remaining_ms(raw)) * time.Millisecond,
		})
		fillGuardStatus(&result[len(result)-1], raw)
		C.redlock_node_status_free(raw)
	}
	runtime.KeepAlive(c)
	return result, nil
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

// free frees the C client and the shared cancel handle; the finalizer calls it once the
// Client is unreachable (no call can be in flight then).
func (c *Client) free() {
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
