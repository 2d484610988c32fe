package redquorum

// #include <stdint.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"runtime"
	"sync"
)

// What a Lock and a Leadership share: a held C handle that the library's extender thread may
// find lost. The library calls redlockGoLost on that thread when it does. The C side gets a
// plain id, not a Go pointer, and the id is looked up here, so a callback that races with
// Unlock or Resign (which forget the id) finds nothing and does nothing. What runs is quick
// and never blocks: the extender thread serves every auto-extended lock of the client.

var (
	lostMu    sync.Mutex
	lostNext  uintptr
	lostFuncs = map[uintptr]func(){}
)

// registerLost returns the id under which the library's lost callback runs f.
func registerLost(f func()) uintptr {
	lostMu.Lock()
	defer lostMu.Unlock()
	lostNext++
	lostFuncs[lostNext] = f
	return lostNext
}

func forgetLost(id uintptr) {
	lostMu.Lock()
	defer lostMu.Unlock()
	delete(lostFuncs, id)
}

//export redlockGoLost
func redlockGoLost(id C.uintptr_t) {
	lostMu.Lock()
	f := lostFuncs[uintptr(id)]
	lostMu.Unlock()
	if f != nil {
		f()
	}
}

// heldOps are the C functions of one kind of held handle.
type heldOps[P comparable] struct {
	onLost  func(p P, id C.uintptr_t) bool // registers redlockGoLost with id; false if it could not
	release func(p P, e cErr) cStatus      // releases on the nodes, keeping the handle
	isLost  func(p P) bool
	free    func(p P)
}

// held owns a held C handle (a lock or a leadership): calls on it never race with its free,
// and ctx is done with the cause lost the moment the library finds it lost (the owner may end
// it sooner with end). A held that becomes unreachable without finish is finalized: the
// library releases a handle it frees, without waiting for the nodes, and ctx ends.
type held[P comparable] struct {
	mu     sync.RWMutex // read-locked by every C call on ptr, write-locked to free it
	ptr    P            // a C pointer; nil (the zero P) once freed
	ops    *heldOps[P]
	lostID uintptr
	ctx    context.Context
	end    context.CancelCauseFunc // ends ctx; the first cause stays
	lost   error                   // what the end says when it was found lost before
}

// newHeld takes ownership of ptr. lost is ctx's cause when the handle is found lost;
// lostBefore is what finish returns when it was.
func newHeld[P comparable](ptr P, ops *heldOps[P], lost, lostBefore error) *held[P] {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &held[P]{ptr: ptr, ops: ops, ctx: ctx, end: cancel, lost: lostBefore}
	// The callback holds the cancel function, not h or its owner: they stay collectable.
	h.lostID = registerLost(func() { cancel(lost) })
	if !ops.onLost(ptr, C.uintptr_t(h.lostID)) {
		// Only a NULL handle or callback fails, and neither is: ctx then ends only with end
		// or the finalizer.
		forgetLost(h.lostID)
	}
	runtime.SetFinalizer(h, (*held[P]).finalize)
	return h
}

// use runs f on the live handle, never at the same time as its free; false after finish.
func (h *held[P]) use(f func(p P)) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var freed P
	if h.ptr == freed {
		return false
	}
	f(h.ptr)
	runtime.KeepAlive(h)
	return true
}

// finish releases the handle on the nodes and frees it. It returns the lost error given to newHeld when the handle had been
// found lost, whatever the release said (the loss is what the caller must act on), else the
// release's error; nil when another finish came first.
func (h *held[P]) finish() (err error) {
	var lost bool
	// The release keeps the C handle, which then reads as released, so that calls on it
	// (is_held, validity) do not wait for the nodes.
	live := h.use(func(p P) {
		err = cCall(func(cerr cErr) cStatus { return h.ops.release(p, cerr) })
		lost = h.ops.isLost(p)
	})
	if !live {
		return nil
	}
	var freed P
	h.mu.Lock()
	ptr := h.ptr
	h.ptr = freed
	h.mu.Unlock()
	if ptr == freed {
		return nil // a concurrent finish freed it and reports
	}
	h.ops.free(ptr)
	forgetLost(h.lostID)
	runtime.SetFinalizer(h, nil)
	if lost {
		return h.lost
	}
	return err
}

// finalize is the finalizer: nothing can be using the handle then.
func (h *held[P]) finalize() {
	h.end(context.Canceled)
	h.ops.free(h.ptr)
	forgetLost(h.lostID)
}
