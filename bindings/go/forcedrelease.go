package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import "unsafe"

// ReleaseOutcome is what Client.ForceRelease did on one node.
type ReleaseOutcome int

const (
	// ReleaseError: the node could not tell (see NodeRelease.Error).
	ReleaseError ReleaseOutcome = iota
	// ReleaseDeleted: the key was deleted and its release announced to waiters.
	ReleaseDeleted
	// ReleaseAbsent: there was no key.
	ReleaseAbsent
	// ReleaseHeldByOther: the key holds another token than the one given, so it was kept.
	ReleaseHeldByOther
)

func (o ReleaseOutcome) String() string {
	switch o {
	case ReleaseDeleted:
		return "deleted"
	case ReleaseAbsent:
		return "absent"
	case ReleaseHeldByOther:
		return "held by another token"
	default:
		return "error"
	}
}

// NodeRelease is one node's part of a ForcedRelease.
type NodeRelease struct {
	// Node is host:port, never with credentials.
	Node    string
	Outcome ReleaseOutcome
	// Error says why the node could not tell, for ReleaseError; empty otherwise.
	Error string
}

// ForcedRelease is what Client.ForceRelease did, node by node.
type ForcedRelease struct {
	Resource string
	// Token is the token the release was limited to; empty when none was given.
	Token string
	// Nodes has one entry per node, in the order of the URLs given to New.
	Nodes []NodeRelease
	// Quorum is the number of nodes needed for a quorum (N/2 + 1).
	Quorum int
	// Confirmed counts the nodes that confirmed the key is gone (deleted, or absent).
	Confirmed int
	// OnQuorum: a quorum confirmed the key is gone, so nobody holds the lock until a new
	// acquisition. False when too few nodes could tell, or another token holds it.
	OnQuorum bool
}

// ForceRelease is an operator's tool: it deletes the lock on resource on every node, only
// where its key still holds token (a lock's token or a reentrant owner, as Inspect shows
// it), or whatever it holds when token is "". Each deletion is announced, so waiters try
// at once; the fence counter is never touched.
//
// The danger: a live holder is not told. Its lock is gone while it may still be working,
// the next acquirer overlaps it, and its auto-extension reports it lost only at its next
// extension. Use it for a lock whose holder is known dead, with the token read by Inspect,
// so that a holder that took the lock after you looked is left alone.
//
// It waits for every node up to the node timeout (WithNodeTimeout); node failures are
// reported per node, not as the error. Check ForcedRelease.OnQuorum. The error wraps ErrInvalidArgument for an
// empty resource, or a resource or token with a NUL byte, ErrClosed after Close.
func (c *Client) ForceRelease(resource, token string) (*ForcedRelease, error) {
	if err := cName("resource name", resource); err != nil {
		return nil, err
	}
	var ctoken *C.char
	if token != "" {
		if err := cName("token", token); err != nil {
			return nil, err
		}
		ctoken = C.CString(token)
		defer C.free(unsafe.Pointer(ctoken))
	}
	cres := C.CString(resource)
	defer C.free(unsafe.Pointer(cres))
	var raw *C.redlock_forced_release
	if err := c.call(func(ptr *C.redlock_client) error {
		return cCall(func(cerr cErr) cStatus {
			return C.redlock_client_force_release(ptr, cres, ctoken, &raw, cerr)
		})
	}); err != nil {
		return nil, err
	}
	defer C.redlock_forced_release_free(raw)

	n := int(C.redlock_forced_release_node_count(raw))
	result := &ForcedRelease{
		Resource:  C.GoString(C.redlock_forced_release_resource(raw)),
		Token:     goString(C.redlock_forced_release_token(raw)),
		Nodes:     make([]NodeRelease, 0, n),
		Quorum:    int(C.redlock_forced_release_quorum(raw)),
		Confirmed: int(C.redlock_forced_release_confirmed(raw)),
		OnQuorum:  bool(C.redlock_forced_release_on_quorum(raw)),
	}
	for i := 0; i < n; i++ {
		idx := C.size_t(i)
		node := NodeRelease{
			Node:  C.GoString(C.redlock_forced_release_node_address(raw, idx)),
			Error: goString(C.redlock_forced_release_node_error(raw, idx)),
		}
		switch C.redlock_forced_release_node_outcome(raw, idx) {
		case C.REDLOCK_RELEASE_DELETED:
			node.Outcome = ReleaseDeleted
		case C.REDLOCK_RELEASE_ABSENT:
			node.Outcome = ReleaseAbsent
		case C.REDLOCK_RELEASE_HELD_BY_OTHER:
			node.Outcome = ReleaseHeldByOther
		default:
			node.Outcome = ReleaseError
			if node.Error == "" {
				node.Error = "an outcome unknown to this binding"
			}
		}
		result.Nodes = append(result.Nodes, node)
	}
	return result, nil
}
