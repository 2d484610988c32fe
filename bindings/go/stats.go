package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import "unsafe"

// Outcomes are how acquisitions end, as Stats.Acquisitions counts them.
var Outcomes = []string{"acquired", "refused", "no_quorum", "cancelled", "error"}

// LostReasons are why held locks were lost, as Stats.Lost counts them.
var LostReasons = []string{"refused", "expired", "suspended"}

// Stats is a snapshot of a client's counters, counted since New whether or not a Logger
// is set. Resource names are never part of it.
type Stats struct {
	// Acquisitions counts acquisitions by outcome (Outcomes), every kind of lock.
	Acquisitions map[string]uint64
	// Lost counts held locks found lost, by reason (LostReasons).
	Lost map[string]uint64
	// LocksHeld and Waiters are the locks held and the acquisitions waiting now.
	LocksHeld, Waiters uint64
	// Extensions succeeded; ExtensionsFailed failed without losing the lock (retried).
	Extensions, ExtensionsFailed uint64
	// EventsDropped counts events dropped because the library's queue or the Logger's
	// buffer was full.
	EventsDropped uint64
	// Prometheus is the snapshot in the Prometheus text format (0.0.4), histograms and
	// per-node metrics included: serve it on /metrics as it is.
	Prometheus string
}

// Stats takes a snapshot of the client's counters: atomic reads, it never waits for the
// nodes. ErrClosed after Close.
func (c *Client) Stats() (Stats, error) {
	var s Stats
	err := c.call(func(ptr *C.redlock_client) error {
		var raw *C.redlock_stats
		if err := cCall(func(cerr cErr) cStatus {
			return C.redlock_client_stats(ptr, &raw, cerr)
		}); err != nil {
			return err
		}
		defer C.redlock_stats_free(raw)
		count := func(f func(*C.redlock_stats, *C.char) C.uint64_t, names []string) map[string]uint64 {
			m := make(map[string]uint64, len(names))
			for _, name := range names {
				cname := C.CString(name)
				m[name] = uint64(f(raw, cname))
				C.free(unsafe.Pointer(cname))
			}
			return m
		}
		s = Stats{
			Acquisitions: count(func(r *C.redlock_stats, n *C.char) C.uint64_t {
				return C.redlock_stats_acquisitions(r, n)
			}, Outcomes),
			Lost: count(func(r *C.redlock_stats, n *C.char) C.uint64_t {
				return C.redlock_stats_lost(r, n)
			}, LostReasons),
			LocksHeld:        uint64(C.redlock_stats_locks_held(raw)),
			Waiters:          uint64(C.redlock_stats_waiters(raw)),
			Extensions:       uint64(C.redlock_stats_extensions(raw)),
			ExtensionsFailed: uint64(C.redlock_stats_extensions_failed(raw)),
			EventsDropped:    uint64(C.redlock_stats_events_dropped(raw)),
			Prometheus:       goString(C.redlock_stats_prometheus(raw)),
		}
		return nil
	})
	if err == nil && c.events != nil {
		s.EventsDropped += c.events.dropped.Load()
	}
	return s, err
}
