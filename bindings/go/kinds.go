package redlock

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// MaxResources is the most resources one LockMany takes.
const MaxResources = 64

// LockFenced acquires resource like Lock, with a fencing token: see Lock.Fence. The token
// is strictly greater than that of every fenced lock of the same resource whose holder
// came before, also when nodes restart without their data, provided they stay out a restart
// delay or RestartGrace (see the README). Send it with every write to the protected
// resource, which rejects writes with a lower token than it has seen. The counter lives in
// the key "redlock:fence:{resource}" on each node (no TTL); acquiring costs one more round to
// the nodes than Lock. A fenced lock is a plain lock on resource: the two exclude each other.
func (c *Client) LockFenced(resource string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, WithFenced()))
}

// TryLockFenced is LockFenced with a single attempt and no retries.
func (c *Client) TryLockFenced(resource string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, WithFenced(), WithOnce()))
}

// ReentrantLock acquires one hold of a reentrant lock on resource for owner, retrying as
// configured. owner names the holder: any non-empty string of at most 1024 bytes, one per
// logical owner (NewOwner makes a random one). It is not a goroutine or a thread: whoever
// passes the same owner shares its holds. While owner holds the resource it can acquire it
// again at once; every hold is a Lock to Unlock, and the resource is free for others after
// the last Unlock (or when the key expires). Reentrant and plain locks on one resource
// exclude each other. Extending a hold keeps the resource at least ttl from now; no hold
// shortens it.
func (c *Client) ReentrantLock(resource, owner string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, WithReentrant(owner)))
}

// TryReentrantLock is ReentrantLock with a single attempt and no retries.
func (c *Client) TryReentrantLock(resource, owner string, ttl time.Duration) (*Lock, error) {
	return c.Acquire(NewRequest(resource, ttl, WithReentrant(owner), WithOnce()))
}

// LockMany acquires all resources at once or none of them, retrying as configured. Each
// node sets all keys in one script, in sorted order, or none, so clients locking
// overlapping sets never deadlock. Extend and Unlock act on all of them. An empty list, an
// empty name, a name given twice or more than MaxResources names is ErrInvalidArgument.
func (c *Client) LockMany(resources []string, ttl time.Duration) (*Lock, error) {
	return c.acquireMany(resources, ttl)
}

// TryLockMany is LockMany with a single attempt and no retries.
func (c *Client) TryLockMany(resources []string, ttl time.Duration) (*Lock, error) {
	return c.acquireMany(resources, ttl, WithOnce())
}

// NewOwner returns a fresh random owner name for ReentrantLock (40 hex characters).
func NewOwner() string {
	var b [20]byte
	// crypto/rand.Read never fails on supported platforms (it panics if it cannot read).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Fence returns the fencing token of a lock from LockFenced or TryLockFenced, and false
// for other locks.
func (l *Lock) Fence() (uint64, bool) {
	if l == nil {
		return 0, false
	}
	return l.fence, l.hasFence
}

// HoldCount returns, for a reentrant lock, how many holds its owner had once this one was
// counted (1 for the outermost), and false for other locks.
func (l *Lock) HoldCount() (uint64, bool) {
	if l == nil {
		return 0, false
	}
	return l.holds, l.hasHolds
}

// Resources returns the locked resources: one, or for LockMany all of them, sorted.
func (l *Lock) Resources() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.resources...)
}

func checkName(what, name string) error {
	if name == "" {
		return invalidArgument("empty %s", what)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return invalidArgument("%s %q contains a NUL byte", what, name)
	}
	return nil
}

func (c *Client) acquireMany(resources []string, ttl time.Duration, opts ...RequestOption) (*Lock, error) {
	if len(resources) == 0 {
		return nil, invalidArgument("no resources")
	}
	return c.Acquire(NewRequest(resources[0], ttl, append([]RequestOption{WithResources(resources[1:]...)}, opts...)...))
}
