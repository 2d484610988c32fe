package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"time"
	"unsafe"
)

// KeyKind says what a node's lock key holds. Later versions add kinds (for new kinds of
// lock); a kind this binding does not know reads as KeyOther.
type KeyKind int

const (
	// KeyUnknown: the node did not answer (see NodeInspection.Error).
	KeyUnknown KeyKind = iota
	// KeyAbsent: no key; the resource is free on this node.
	KeyAbsent
	// KeyToken: a string, the token of a plain, fenced or multi-resource lock.
	KeyToken
	// KeyOwners: a hash of a reentrant lock, its owners and their hold counts.
	KeyOwners
	// KeyOther: a key of a type no lock uses (list, set, ...), which blocks the resource
	// all the same; NodeInspection.KeyType names the Redis type.
	KeyOther
)

func (k KeyKind) String() string {
	switch k {
	case KeyUnknown:
		return "unknown"
	case KeyAbsent:
		return "absent"
	case KeyToken:
		return "token"
	case KeyOwners:
		return "owners"
	default:
		return "other"
	}
}

func keyKind(k C.enum_redlock_key_kind) KeyKind {
	switch k {
	case C.REDLOCK_KEY_UNKNOWN:
		return KeyUnknown
	case C.REDLOCK_KEY_ABSENT:
		return KeyAbsent
	case C.REDLOCK_KEY_TOKEN:
		return KeyToken
	case C.REDLOCK_KEY_OWNERS:
		return KeyOwners
	default:
		return KeyOther
	}
}

// Owner is one owner of a reentrant lock and its number of holds.
type Owner struct {
	Name  string
	Holds uint64
}

// NodeInspection is one node's view of a resource, in Inspection.Nodes.
type NodeInspection struct {
	// Node is host:port, never with credentials.
	Node string
	// Error says why the node could not tell (down, timed out, an error reply such as
	// NOPERM); empty when it answered.
	Error string
	// Kind is what the lock key holds; KeyUnknown when the node did not answer.
	Kind KeyKind
	// KeyType is the key's Redis type ("none", "string", "hash", "list", ...); empty when
	// the node did not answer.
	KeyType string
	// Token is the token for KeyToken; empty for every other kind.
	Token string
	// Owners lists a reentrant lock's owners for KeyOwners; nil for every other kind.
	Owners []Owner
	// TTL is the key's remaining time to live; negative when the key is absent, never
	// expires (see Persistent) or the node did not answer.
	TTL time.Duration
	// Persistent: the key exists but has no TTL, so nothing frees it but a deletion
	// (Redlock never sets such a key; another program did).
	Persistent bool
	// Fence is the resource's fence counter ("redlock:fence:{resource}") on this node,
	// when HasFence.
	Fence    uint64
	HasFence bool
}

// Answered reports whether the node answered (Error is empty).
func (n NodeInspection) Answered() bool { return n.Error == "" }

// Live reports whether the node holds a key for the resource that has not expired.
func (n NodeInspection) Live() bool {
	return n.Kind != KeyUnknown && n.Kind != KeyAbsent && (n.Persistent || n.TTL >= 0)
}

// Inspection is what Client.Inspect found: every node's view of a resource, and the sum.
type Inspection struct {
	Resource string
	// Nodes has one entry per node, in the order of the URLs given to New.
	Nodes []NodeInspection
	// Quorum is the number of nodes needed for a quorum (N/2 + 1).
	Quorum int
	// Held: a quorum of nodes hold a live key for the resource, so no one can acquire it
	// now.
	Held bool
	// Holder is the token (plain, fenced) or owner (reentrant) found on a quorum of nodes;
	// empty when no single value is.
	Holder string
	// Fence is the largest fence counter among the nodes that answered, when HasFence.
	Fence    uint64
	HasFence bool
}

// Inspect reads resource on every node: what its key holds (a token, reentrant owners,
// another type, nothing), its remaining TTL and the fence counter, plus whether a quorum
// holds it and by which token.
//
// Read-only. It waits for every node up to the node timeout (WithNodeTimeout), so it needs
// no context; a node that is down, times out or answers with an error (a NOPERM of a tight
// ACL) is reported in its entry (NodeInspection.Error) instead of failing the call. Each node is
// read at a slightly different moment. The error wraps ErrInvalidArgument for an empty
// resource or one with a NUL byte, ErrClosed after Close.
func (c *Client) Inspect(resource string) (*Inspection, error) {
	if err := cName("resource name", resource); err != nil {
		return nil, err
	}
	cres := C.CString(resource)
	defer C.free(unsafe.Pointer(cres))
	var raw *C.redlock_inspection
	if err := c.call(func(ptr *C.redlock_client) error {
		return cCall(func(cerr cErr) cStatus {
			return C.redlock_client_inspect(ptr, cres, &raw, cerr)
		})
	}); err != nil {
		return nil, err
	}
	defer C.redlock_inspection_free(raw)

	n := int(C.redlock_inspection_node_count(raw))
	result := &Inspection{
		Resource: C.GoString(C.redlock_inspection_resource(raw)),
		Nodes:    make([]NodeInspection, 0, n),
		Quorum:   int(C.redlock_inspection_quorum(raw)),
		Held:     bool(C.redlock_inspection_held(raw)),
		Holder:   goString(C.redlock_inspection_holder(raw)),
	}
	var fence C.uint64_t
	if C.redlock_inspection_fence(raw, &fence) {
		result.Fence, result.HasFence = uint64(fence), true
	}
	for i := 0; i < n; i++ {
		idx := C.size_t(i)
		node := NodeInspection{
			Node:       C.GoString(C.redlock_inspection_node_address(raw, idx)),
			Error:      goString(C.redlock_inspection_node_error(raw, idx)),
			Kind:       keyKind(C.redlock_inspection_node_key_kind(raw, idx)),
			KeyType:    goString(C.redlock_inspection_node_key_type(raw, idx)),
			Token:      goString(C.redlock_inspection_node_token(raw, idx)),
			TTL:        -1,
			Persistent: bool(C.redlock_inspection_node_persistent(raw, idx)),
		}
		var ttl C.uint64_t
		if C.redlock_inspection_node_ttl_ms(raw, idx, &ttl) {
			node.TTL = time.Duration(ttl) * time.Millisecond
		}
		if C.redlock_inspection_node_fence(raw, idx, &fence) {
			node.Fence, node.HasFence = uint64(fence), true
		}
		if owners := int(C.redlock_inspection_node_owner_count(raw, idx)); owners > 0 {
			node.Owners = make([]Owner, 0, owners)
			for j := 0; j < owners; j++ {
				var holds C.uint64_t
				name := C.redlock_inspection_node_owner(raw, idx, C.size_t(j), &holds)
				node.Owners = append(node.Owners, Owner{Name: goString(name), Holds: uint64(holds)})
			}
		}
		result.Nodes = append(result.Nodes, node)
	}
	return result, nil
}
