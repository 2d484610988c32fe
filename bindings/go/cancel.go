package redlock

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

var errNilClient = &Error{Status: StatusInvalidArgument, Message: "nil *Client"}

// callCancel is the cancel handle of one acquisition.
type callCancel struct {
	mu    sync.Mutex
	ptr   *C.redlock_cancel // nil once freed
	fired cancelReason
}

func newCallCancel() (*callCancel, error) {
	k := &callCancel{}
	if err := cCall(func(cerr **C.redlock_error) C.enum_redlock_status {
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

func (k *callCancel) free() {
	k.mu.Lock()
	defer k.mu.Unlock()
	C.redlock_cancel_free(k.ptr)
	k.ptr = nil
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
		if err := cCall(func(cerr **C.redlock_error) C.enum_redlock_status {
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

// leave ends a call begun by enter and lets a waiting Close go on after the last one.
func (c *Client) leave(own *callCancel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, own)
	c.inflight--
	if c.inflight == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}
