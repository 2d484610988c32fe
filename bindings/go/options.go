package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unsafe"
)

// ClientOption sets one part of a Client's configuration, for New. A setting no option gives
// is the libredlock default (see redlock_options_new in redlock.h); of two options that set
// the same thing, the later wins. A bad value is reported by New as ErrInvalidArgument.
// Durations are rounded up to whole milliseconds.
//
// ClientOption, RequestOption and ElectionOption are distinct types: an option of one is a
// compile error where another is expected.
type ClientOption func(*clientConfig)

// clientConfig is what the options of New set: the libredlock setters to run, in order, and
// what stays on the Go side.
type clientConfig struct {
	steps     []clientStep
	logger    *slog.Logger
	noGuard   bool // WithoutClockGuard was given
	clockJump bool // WithClockJumpThreshold was given
	err       error
}

// clientStep is one libredlock setter; what names the option in its error.
type clientStep struct {
	what string
	call func(o *C.redlock_options, e cErr) cStatus
}

func (c *clientConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *clientConfig) set(what string, call func(o *C.redlock_options, e cErr) cStatus) {
	c.steps = append(c.steps, clientStep{what, call})
}

// count records a setter of a count that must fit in 32 bits and not be negative.
func (c *clientConfig) count(name string, n int, setter func(o *C.redlock_options, n C.uint32_t, e cErr) cStatus) {
	if n < 0 || n > math.MaxUint32 {
		c.fail(invalidArgument("%s(%d): the count must be 0 to %d", name, n, uint32(math.MaxUint32)))
		return
	}
	c.set(fmt.Sprintf("%s(%d)", name, n), func(o *C.redlock_options, e cErr) cStatus { return setter(o, C.uint32_t(n), e) })
}

// duration records a setter of a duration that must not be negative.
func (c *clientConfig) duration(name string, d time.Duration, setter func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus) {
	if d < 0 {
		c.fail(invalidArgument("%s(%v): the duration is negative", name, d))
		return
	}
	c.set(fmt.Sprintf("%s(%v)", name, d), func(o *C.redlock_options, e cErr) cStatus { return setter(o, millis(d), e) })
}

// path checks a file name that becomes a C string.
func (c *clientConfig) path(name, path string) bool {
	if strings.IndexByte(path, 0) >= 0 {
		c.fail(invalidArgument("%s(%q): the path contains a NUL byte", name, path))
		return false
	}
	return true
}

// WithRetryCount sets how many times an acquisition with the client's patience retries after
// its first attempt (default 50, about 10 s with the default delay; 0 is one attempt). A Request's WithRetries, WithOnce or
// WithWait overrides it for that request.
func WithRetryCount(n int) ClientOption {
	return func(c *clientConfig) {
		c.count("WithRetryCount", n, func(o *C.redlock_options, n C.uint32_t, e cErr) cStatus {
			return C.redlock_options_set_retry_count(o, n, e)
		})
	}
}

// WithRetryDelay sets the pause before each retry (default 200ms), ± a random part of the
// jitter (WithRetryJitter).
func WithRetryDelay(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		c.duration("WithRetryDelay", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_retry_delay_ms(o, ms, e)
		})
	}
}

// WithRetryJitter sets the random part of each retry's pause (default 100ms): the pause is
// the delay ± a random part of this.
func WithRetryJitter(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		c.duration("WithRetryJitter", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_retry_jitter_ms(o, ms, e)
		})
	}
}

// WithDriftFactor sets the share of the TTL set aside for clock drift, in [0, 1) (default
// 0.01).
func WithDriftFactor(f float64) ClientOption {
	return func(c *clientConfig) {
		c.set(fmt.Sprintf("WithDriftFactor(%v)", f), func(o *C.redlock_options, e cErr) cStatus {
			return C.redlock_options_set_drift_factor(o, C.double(f), e)
		})
	}
}

// WithNodeTimeout sets how long a call waits for any one node (default 50ms); it must be
// positive.
func WithNodeTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		if d <= 0 {
			c.fail(invalidArgument("WithNodeTimeout(%v): the timeout must be positive", d))
			return
		}
		c.duration("WithNodeTimeout", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_node_timeout_ms(o, ms, e)
		})
	}
}

// WithMaxExtensions caps the number of extensions per lock, Extend and auto-extension alike
// (default 0: no cap). AutoExtend.MaxExtensions overrides it for one request; leaderships
// ignore it.
func WithMaxExtensions(n int) ClientOption {
	return func(c *clientConfig) {
		c.count("WithMaxExtensions", n, func(o *C.redlock_options, n C.uint32_t, e cErr) cStatus {
			return C.redlock_options_set_max_extensions(o, n, e)
		})
	}
}

// WithRestartGrace keeps a node whose Redis process is younger than d out of acquire quorums
// (default 0: off). Set it to at least the largest TTL in use when nodes run without
// persistence: a restarted node has forgotten the locks it held. The nodes must allow the
// INFO command.
func WithRestartGrace(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		c.duration("WithRestartGrace", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_restart_grace_ms(o, ms, e)
		})
	}
}

// WithTLSCAFile trusts the CA certificates in the PEM file at path for "rediss://" nodes
// instead of the system's roots. Certificates are always verified; only a URL ending in
// "#insecure" skips that (for tests only). New reads the file.
func WithTLSCAFile(path string) ClientOption {
	return func(c *clientConfig) {
		if !c.path("WithTLSCAFile", path) {
			return
		}
		c.set(fmt.Sprintf("WithTLSCAFile(%q)", path), func(o *C.redlock_options, e cErr) cStatus {
			p := C.CString(path)
			defer C.free(unsafe.Pointer(p))
			return C.redlock_options_set_tls_ca_file(o, p, e)
		})
	}
}

// WithTLSClientCertFile presents the PEM client certificate at certFile and its key at
// keyFile to nodes that require one (tls-auth-clients yes). New reads the files.
func WithTLSClientCertFile(certFile, keyFile string) ClientOption {
	return func(c *clientConfig) {
		if !c.path("WithTLSClientCertFile", certFile) || !c.path("WithTLSClientCertFile", keyFile) {
			return
		}
		c.set(fmt.Sprintf("WithTLSClientCertFile(%q, %q)", certFile, keyFile), func(o *C.redlock_options, e cErr) cStatus {
			cert, key := C.CString(certFile), C.CString(keyFile)
			defer C.free(unsafe.Pointer(cert))
			defer C.free(unsafe.Pointer(key))
			return C.redlock_options_set_tls_client_cert_file(o, cert, key, e)
		})
	}
}

// WithoutClockGuard turns the clock guard off. It is on by default: TIME rides in every
// acquire's pipeline, a node whose clock jumps forward by more than the threshold
// (WithClockJumpThreshold) is kept out of acquire quorums for the quarantine
// (WithClockQuarantine), and a suspension of this host marks the locks held across it lost.
func WithoutClockGuard() ClientOption {
	return func(c *clientConfig) {
		c.noGuard = true
		c.set("WithoutClockGuard()", func(o *C.redlock_options, e cErr) cStatus { return C.redlock_options_set_clock_guard(o, false, e) })
	}
}

// WithClockJumpThreshold sets the largest step of a node's clock the clock guard tolerates
// between two samples beyond the drift (default 50ms). It does not go with WithoutClockGuard.
func WithClockJumpThreshold(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		c.clockJump = true
		c.duration("WithClockJumpThreshold", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_clock_jump_threshold_ms(o, ms, e)
		})
	}
}

// WithClockQuarantine sets how long a node whose clock jumped forward is kept out of acquire
// quorums (default 60s). Make it at least your largest TTL.
func WithClockQuarantine(d time.Duration) ClientOption {
	return func(c *clientConfig) {
		c.duration("WithClockQuarantine", d, func(o *C.redlock_options, ms C.uint64_t, e cErr) cStatus {
			return C.redlock_options_set_clock_quarantine_ms(o, ms, e)
		})
	}
}

// WithStrictServers refuses the nodes the server probe only warns about (a master with
// replicas, a maxmemory-policy that can evict lock keys, INFO or TIME denied) instead of
// logging them and listing them in NodeStatus.Warnings.
func WithStrictServers() ClientOption {
	return func(c *clientConfig) {
		c.set("WithStrictServers()", func(o *C.redlock_options, e cErr) cStatus { return C.redlock_options_set_strict_servers(o, true, e) })
	}
}

// WithMinReplicas counts a node's vote for an acquisition or an extension only once WAIT
// confirms that k of its replicas have the write (default 0: off). The commands that need it
// go over a second connection per node, so releases and inspections never wait behind a
// lagging replica (but for the release of an acquisition still on its way there, which
// follows it). A node with fewer replicas fails its vote saying so (on a Redis Cluster node
// every master needs them, and each vote waits for its own master's WAIT).
func WithMinReplicas(k int) ClientOption {
	return func(c *clientConfig) {
		c.count("WithMinReplicas", k, func(o *C.redlock_options, n C.uint32_t, e cErr) cStatus {
			return C.redlock_options_set_min_replicas(o, n, e)
		})
	}
}

// WithLogger sends the client's events to logger as records: acquired, refused, released,
// extended (slog.LevelInfo), lost, node_disconnected, node_restarted, node_quarantined,
// server_warning (slog.LevelWarn), with the attributes event, resource, kind, node, duration,
// reason (those that apply) and at (when it happened). They are logged by a goroutine of the
// client's own, never on the goroutine that locked; when the logger cannot keep up, events
// are dropped and counted (Stats.EventsDropped). Without it (or with nil) there are no events,
// and they cost nothing.
func WithLogger(logger *slog.Logger) ClientOption {
	return func(c *clientConfig) { c.logger = logger }
}

// newClientConfig applies opts in order.
func newClientConfig(opts []ClientOption) *clientConfig {
	c := &clientConfig{}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.err == nil && c.noGuard && c.clockJump {
		c.fail(invalidArgument("WithClockJumpThreshold has no effect with WithoutClockGuard: give one or the other"))
	}
	return c
}

// toC builds the libredlock options c describes; the caller frees them with
// redlock_options_free. libredlock checks each value as it is set.
func (c *clientConfig) toC() (*C.redlock_options, error) {
	if c.err != nil {
		return nil, c.err
	}
	var opts *C.redlock_options
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_options_new(&opts, cerr)
	}); err != nil {
		return nil, err
	}
	for _, step := range c.steps {
		if err := cCall(func(cerr cErr) cStatus { return step.call(opts, cerr) }); err != nil {
			C.redlock_options_free(opts)
			if e, ok := err.(*Error); ok {
				e.Message = step.what + ": " + orDefault(e.Message, e.Status.String())
			}
			return nil, err
		}
	}
	return opts, nil
}
