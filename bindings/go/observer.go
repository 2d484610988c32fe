package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"unsafe"
)

// Observe follows the election name from any process, candidate or not: the channel receives
// who leads (nil: nobody) when it starts and then at each change, woken by the nodes'
// announcements of takeovers and resignations, and otherwise reading them every second and
// when the leader's TTL runs out (an expiry is announced by no one). It is closed once ctx is
// done or the Client is closed; until then a goroutine blocked in libredlock (so an OS
// thread) serves it: cancel ctx when done. The nodes are read again only once a state was
// received, so a reader that falls behind gets the state it kept waiting and then the
// current one: it sees states, not every transition (a term that came and went meanwhile is
// not reported). A read that finds too few nodes answering reports nothing: the last state
// stands until they tell.
func (c *Client) Observe(ctx context.Context, name string) (<-chan *Leader, error) {
	if c == nil {
		return nil, errNilClient
	}
	if ctx == nil {
		return nil, invalidArgument("nil context.Context")
	}
	if err := cName("election name", name); err != nil {
		return nil, err
	}
	// A cancel handle of its own even for a ctx that is never done: it is how Close ends it.
	own, err := newCallCancel()
	if err != nil {
		return nil, err
	}
	ptr, _, err := c.enter(own)
	if err != nil {
		own.release(false)
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { own.fire(reasonContext) })
	end := func() {
		stopped := stop()
		c.leave(own)
		own.release(stopped)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var o *C.redlock_observer
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_client_observe(ptr, cname, own.ptr, 0, &o, cerr)
	}); err != nil {
		end()
		return nil, err
	}
	changes := make(chan *Leader)
	go func() {
		defer end()
		defer close(changes)
		defer C.redlock_observer_free(o)
		for {
			var p *C.redlock_leader
			// REDLOCK_CANCELLED once ctx or Close fired the handle; the observer reports no
			// other failure, but any would end the channel all the same.
			if err := cCall(func(cerr cErr) cStatus {
				return C.redlock_observer_next(o, &p, cerr)
			}); err != nil {
				return
			}
			select {
			case changes <- takeLeader(p):
			case <-ctx.Done():
				return
			case <-c.closing:
				return
			}
		}
	}()
	return changes, nil
}
