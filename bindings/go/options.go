package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"log/slog"
	"math"
	"strings"
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
	// MinReplicas counts a node's vote for an acquisition or an extension only once WAIT
	// confirms that this many of its replicas have the write; zero is the default (off).
	// The commands that need it go over a second connection per node, so releases and
	// inspections never wait behind a lagging replica (but for the release of an acquisition
	// still on its way there, which follows it). A node with fewer replicas fails its
	// vote saying so (on a Redis Cluster node every master needs them, and each vote waits
	// for its own master's WAIT). It must not be negative.
	MinReplicas int
	// Logger, when not nil, receives the client's events as records: acquired, refused,
	// released, extended (slog.LevelInfo), lost, node_disconnected, node_restarted,
	// node_quarantined, server_warning (slog.LevelWarn), with the attributes event,
	// resource, kind, node, duration, reason (those that apply) and at (when it happened).
	// They are logged by a goroutine of the client's own, never on the goroutine that
	// locked; when the logger cannot keep up, events are dropped and counted
	// (Stats.EventsDropped). Nil: no events, and they cost nothing.
	Logger *slog.Logger
}

// check refuses what libredlock cannot see: values Go must convert (negative or too large
// numbers, NUL bytes in paths) and settings that contradict each other.
func (o Options) check() error {
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"NodeTimeout", o.NodeTimeout},
		{"RestartGrace", o.RestartGrace},
		{"ClockJumpThreshold", o.ClockJumpThreshold},
		{"ClockQuarantine", o.ClockQuarantine},
	} {
		if d.value < 0 {
			return invalidArgument("%s %v is negative", d.name, d.value)
		}
	}
	if o.MaxExtensions < 0 {
		return invalidArgument("MaxExtensions %d is negative", o.MaxExtensions)
	}
	if o.MinReplicas < 0 {
		return invalidArgument("MinReplicas %d is negative", o.MinReplicas)
	}
	for _, n := range []struct {
		name  string
		value int
	}{{"RetryCount", o.RetryCount}, {"MaxExtensions", o.MaxExtensions}, {"MinReplicas", o.MinReplicas}} {
		if n.value > math.MaxUint32 {
			return invalidArgument("%s %d does not fit in 32 bits", n.name, n.value)
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
	if (o.TLSClientCertFile == "") != (o.TLSClientKeyFile == "") {
		return invalidArgument("TLSClientCertFile and TLSClientKeyFile go together: set both or neither")
	}
	if o.DisableClockGuard && o.ClockJumpThreshold != 0 {
		return invalidArgument("ClockJumpThreshold has no effect with DisableClockGuard")
	}
	return nil
}

// toC builds libredlock options from o; the caller frees them with redlock_options_free.
// Only the fields that are set reach libredlock, which checks each value as it is set.
func (o Options) toC() (*C.redlock_options, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	var opts *C.redlock_options
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_options_new(&opts, cerr)
	}); err != nil {
		return nil, err
	}
	ca, cert, key := C.CString(o.TLSCAFile), C.CString(o.TLSClientCertFile), C.CString(o.TLSClientKeyFile)
	defer C.free(unsafe.Pointer(ca))
	defer C.free(unsafe.Pointer(cert))
	defer C.free(unsafe.Pointer(key))
	err := cSteps(
		cStep{o.RetryCount != 0, func(e cErr) cStatus {
			return C.redlock_options_set_retry_count(opts, C.uint32_t(max(o.RetryCount, 0)), e)
		}},
		cStep{o.RetryDelay != 0, func(e cErr) cStatus { return C.redlock_options_set_retry_delay_ms(opts, millis(o.RetryDelay), e) }},
		cStep{o.RetryJitter != 0, func(e cErr) cStatus { return C.redlock_options_set_retry_jitter_ms(opts, millis(o.RetryJitter), e) }},
		cStep{o.DriftFactor != 0, func(e cErr) cStatus {
			return C.redlock_options_set_drift_factor(opts, C.double(max(o.DriftFactor, 0)), e)
		}},
		cStep{o.NodeTimeout != 0, func(e cErr) cStatus { return C.redlock_options_set_node_timeout_ms(opts, millis(o.NodeTimeout), e) }},
		cStep{o.MaxExtensions != 0, func(e cErr) cStatus {
			return C.redlock_options_set_max_extensions(opts, C.uint32_t(o.MaxExtensions), e)
		}},
		cStep{o.RestartGrace != 0, func(e cErr) cStatus { return C.redlock_options_set_restart_grace_ms(opts, millis(o.RestartGrace), e) }},
		cStep{o.TLSCAFile != "", func(e cErr) cStatus { return C.redlock_options_set_tls_ca_file(opts, ca, e) }},
		cStep{o.TLSClientCertFile != "", func(e cErr) cStatus { return C.redlock_options_set_tls_client_cert_file(opts, cert, key, e) }},
		cStep{o.DisableClockGuard, func(e cErr) cStatus { return C.redlock_options_set_clock_guard(opts, false, e) }},
		cStep{o.ClockJumpThreshold != 0, func(e cErr) cStatus {
			return C.redlock_options_set_clock_jump_threshold_ms(opts, millis(o.ClockJumpThreshold), e)
		}},
		cStep{o.ClockQuarantine != 0, func(e cErr) cStatus {
			return C.redlock_options_set_clock_quarantine_ms(opts, millis(o.ClockQuarantine), e)
		}},
		cStep{o.StrictServers, func(e cErr) cStatus { return C.redlock_options_set_strict_servers(opts, true, e) }},
		cStep{o.MinReplicas != 0, func(e cErr) cStatus {
			return C.redlock_options_set_min_replicas(opts, C.uint32_t(o.MinReplicas), e)
		}},
	)
	if err != nil {
		C.redlock_options_free(opts)
		return nil, err
	}
	return opts, nil
}
