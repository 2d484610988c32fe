package redquorum

// #include "redlock.h"
import "C"

import "sync"

// Cancellation. Every acquisition runs with a libredlock cancel handle, so that Close can
// end it at once: an acquisition without a context of its own shares the client's handle,
// one with a context that can be done gets its own, fired by the context (through
// context.AfterFunc) or by Close, whichever comes first. The handle is freed only once the
// call is over and under its mutex, so a late firing never touches a freed handle.

type cancelReason int

const (
	reasonNone cancelReason = iota
	reasonContext
	reasonClosed
)

// callCancel is the cancel handle of one acquisition.
type callCancel struct {
	mu    sync.Mutex
	ptr   *C.redlock_cancel // nil once freed
	fired cancelReason
}

// idleCancels are cancel handles that never fired, for reuse: a handle costs an entry in
// libredlock's list of handles until one fires, so making one per call would grow that list
// with every acquisition under a context that is never cancelled.
var (
	idleMu      sync.Mutex
	idleCancels []*C.redlock_cancel
)

const maxIdleCancels = 256

func newCallCancel() (*callCancel, error) {
	k := &callCancel{}
	idleMu.Lock()
	if n := len(idleCancels); n > 0 {
		k.ptr = idleCancels[n-1]
		idleCancels = idleCancels[:n-1]
	}
	idleMu.Unlock()
	if k.ptr != nil {
		return k, nil
	}
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_cancel_new(&k.ptr, cerr)
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// fire triggers the handle, remembering the first reason; a no-op once freed.
func (k *callCancel) fire(reason cancelReason) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ptr == nil || k.fired != reasonNone {
		return
	}
	k.fired = reason
	C.redlock_cancel_trigger(k.ptr)
}

func (k *callCancel) reason() cancelReason {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fired
}

// release ends the handle's use by one call (nil is ignored). A handle that never fired is
// kept for reuse when reusable says nothing can fire it any more (its context.AfterFunc was
// stopped before running, and Close can no longer find it); any other is freed.
func (k *callCancel) release(reusable bool) {
	if k == nil {
		return
	}
	k.mu.Lock()
	ptr := k.ptr
	k.ptr = nil // a late fire is a no-op
	fired := k.fired != reasonNone
	k.mu.Unlock()
	if reusable && !fired && !bool(C.redlock_cancel_is_triggered(ptr)) {
		idleMu.Lock()
		if len(idleCancels) < maxIdleCancels {
			idleCancels = append(idleCancels, ptr)
			ptr = nil
		}
		idleMu.Unlock()
	}
	C.redlock_cancel_free(ptr) // NULL is ignored
}
