package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"time"
	"unsafe"
)

// Leader is who leads an election, as a quorum of its nodes tells. Where this package reports
// a leader as a *Leader (Client.Leader, Observe), nil means that nobody leads.
type Leader struct {
	// Identity names the leader, as given to Client.Election.
	Identity string
	// Term is the fencing token of its leadership: never 0, greater than every earlier
	// leader's.
	Term uint64
	// Since is when its term began, by the clock of the nodes that recorded it (the zero
	// Time when they did not say).
	Since time.Time
	// Transitions counts the terms begun in the election so far, this one included. Best
	// effort: a node restarted without persistence starts counting again.
	Transitions uint64
	// TTL is how long until the leadership expires on a quorum of nodes, unless its leader
	// extends it (which it does while it leads).
	TTL time.Duration
}

// Leader returns who leads the election name now, read from the nodes: only a leader whose
// campaign returned its leadership, and nil only when no leadership can be held on a quorum of
// them. Any process can ask, candidate or not. ErrNoQuorum when the nodes cannot tell (too few
// answered, a node of a leader that holds a bare quorum hangs or restarted within
// RestartGrace, a new leader is being confirmed); bounded by NodeTimeout, so it takes no
// context.
func (c *Client) Leader(name string) (*Leader, error) {
	if err := cName("election name", name); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var leader *Leader
	err := c.call(func(ptr *C.redlock_client) error {
		var p *C.redlock_leader
		if err := cCall(func(cerr cErr) cStatus {
			return C.redlock_client_leader(ptr, cname, &p, cerr)
		}); err != nil {
			return err
		}
		leader = takeLeader(p)
		return nil
	})
	return leader, err
}

// takeLeader copies a leader the library handed over and frees it; NULL (nobody) is nil.
func takeLeader(p *C.redlock_leader) *Leader {
	if p == nil {
		return nil
	}
	defer C.redlock_leader_free(p)
	l := &Leader{
		Identity:    goString(C.redlock_leader_identity(p)),
		Term:        uint64(C.redlock_leader_term(p)),
		Transitions: uint64(C.redlock_leader_transitions(p)),
		TTL:         time.Duration(C.redlock_leader_ttl_ms(p)) * time.Millisecond,
	}
	if ms := int64(C.redlock_leader_since_unix_ms(p)); ms > 0 {
		l.Since = time.UnixMilli(ms)
	}
	return l
}
