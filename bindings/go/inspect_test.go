package redquorum_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

const inspectTTL = 20 * time.Second

func mustInspect(t *testing.T, c *redquorum.Client, resource string) *redquorum.Inspection {
	t.Helper()
	insp, err := c.Inspect(resource)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", resource, err)
	}
	return insp
}

func mustForce(t *testing.T, c *redquorum.Client, resource, token string) *redquorum.ForcedRelease {
	t.Helper()
	r, err := c.ForceRelease(resource, token)
	if err != nil {
		t.Fatalf("ForceRelease(%q, %q): %v", resource, token, err)
	}
	return r
}

// withToken counts the nodes that answered with token under a live key whose TTL is no
// longer than set.
func withToken(insp *redquorum.Inspection, token string) int {
	n := 0
	for _, nd := range insp.Nodes {
		if nd.Answered() && nd.Kind == redquorum.KeyToken && nd.Token == token && nd.KeyType == "string" &&
			nd.TTL > 0 && nd.TTL <= inspectTTL && !nd.Persistent && nd.Live() {
			n++
		}
	}
	return n
}

func outcomes(r *redquorum.ForcedRelease, o redquorum.ReleaseOutcome) int {
	n := 0
	for _, nd := range r.Nodes {
		if nd.Outcome == o {
			n++
		}
	}
	return n
}

func TestInspectFreePlainAndFenced(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	insp := mustInspect(t, c, "go:insp-free")
	if insp.Resource != "go:insp-free" || insp.Held || insp.Holder != "" || insp.HasFence || insp.Quorum != 3 {
		t.Errorf("free resource: %+v", insp)
	}
	if len(insp.Nodes) != len(shared.nodes) {
		t.Fatalf("%d nodes, want %d", len(insp.Nodes), len(shared.nodes))
	}
	for i, nd := range insp.Nodes {
		if nd.Node != shared.nodes[i].addr() {
			t.Errorf("node %d is %q, want %q", i, nd.Node, shared.nodes[i].addr())
		}
		if !nd.Answered() || nd.Kind != redquorum.KeyAbsent || nd.KeyType != "none" || nd.Token != "" ||
			nd.Owners != nil || nd.TTL >= 0 || nd.Persistent || nd.HasFence || nd.Live() {
			t.Errorf("free resource, node %d: %+v", i, nd)
		}
	}

	l := mustLock(t, c, "go:insp", inspectTTL)
	insp = mustInspect(t, c, "go:insp")
	if !insp.Held || insp.Holder != l.Token() || insp.HasFence {
		t.Errorf("plain lock: held %v holder %q fence %v", insp.Held, insp.Holder, insp.HasFence)
	}
	if n := withToken(insp, l.Token()); n < 3 {
		t.Errorf("token with a TTL on %d nodes, want a quorum", n)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}

	f, err := acquire(c, "go:insp-fenced", inspectTTL, redquorum.WithFenced(), redquorum.WithOnce())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unlock()
	issued, _ := f.Fence()
	insp = mustInspect(t, c, "go:insp-fenced")
	if !insp.Held || insp.Holder != f.Token() || !insp.HasFence || insp.Fence < issued {
		t.Errorf("fenced lock %d: %+v", issued, insp)
	}
	fenced := 0
	for _, nd := range insp.Nodes {
		if nd.HasFence && nd.Fence >= issued {
			fenced++
		}
	}
	if fenced < 3 {
		t.Errorf("fence counter on %d nodes, want a quorum", fenced)
	}
}

func TestInspectReentrantOwners(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	owner := redquorum.NewOwner()
	outer, err := acquire(c, "go:insp-re", inspectTTL, redquorum.WithReentrant(owner), redquorum.WithOnce())
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock()
	inner, err := acquire(c, "go:insp-re", inspectTTL, redquorum.WithReentrant(owner), redquorum.WithOnce())
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Unlock()
	insp := mustInspect(t, c, "go:insp-re")
	if !insp.Held || insp.Holder != owner {
		t.Errorf("held %v holder %q, want %q", insp.Held, insp.Holder, owner)
	}
	twice := 0
	for _, nd := range insp.Nodes {
		if nd.Kind != redquorum.KeyOwners {
			continue
		}
		if nd.Token != "" || nd.KeyType != "hash" {
			t.Errorf("owners node: %+v", nd)
		}
		if len(nd.Owners) == 1 && nd.Owners[0] == (redquorum.Owner{Name: owner, Holds: 2}) && nd.TTL > 0 && nd.TTL <= inspectTTL {
			twice++
		}
	}
	if twice < 3 {
		t.Errorf("%s with 2 holds on %d nodes, want a quorum", owner, twice)
	}
}

func TestInspectReportsDownNodesAndNoperm(t *testing.T) {
	cl := newCluster(t, 5)
	// A user that may run scripts but not touch the resource's keys: NOPERM on node 4.
	if _, err := redisCommand(cl.nodes[4].addr(), "ACL", "SETUSER", "limited", "on", ">pw", "~elsewhere:*", "+@all"); err != nil {
		t.Fatal(err)
	}
	urls := cl.urls()
	urls[4] = "redis://limited:pw@" + cl.nodes[4].addr()
	c := newClient(t, urls, patient...)
	l := mustLock(t, c, "go:insp-down", inspectTTL)
	cl.nodes[0].kill()
	insp := mustInspect(t, c, "go:insp-down")
	for _, i := range []int{0, 4} {
		nd := insp.Nodes[i]
		if nd.Answered() || nd.Kind != redquorum.KeyUnknown || nd.KeyType != "" || nd.TTL >= 0 || nd.Live() {
			t.Errorf("node %d should be reported failed: %+v", i, nd)
		}
	}
	if !strings.Contains(insp.Nodes[4].Error, "NOPERM") {
		t.Errorf("node 4: %q, want a NOPERM", insp.Nodes[4].Error)
	}
	if insp.Nodes[4].Node != cl.nodes[4].addr() {
		t.Errorf("node 4 is %q: no credentials expected", insp.Nodes[4].Node)
	}
	// Nodes 1..3 hold it: still a quorum.
	if !insp.Held || insp.Holder != l.Token() {
		t.Errorf("held %v holder %q", insp.Held, insp.Holder)
	}
	r := mustForce(t, c, "go:insp-down", l.Token())
	for _, i := range []int{0, 4} {
		if r.Nodes[i].Outcome != redquorum.ReleaseError || r.Nodes[i].Error == "" {
			t.Errorf("force release node %d: %+v", i, r.Nodes[i])
		}
	}
	if !r.OnQuorum || r.Confirmed < 3 {
		t.Errorf("force release: %+v", r)
	}
	if err := l.Unlock(); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Unlock after a forced release = %v, want ErrLost", err)
	}
}

func TestForceRelease(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:insp-force"
	l, err := acquire(c, resource, inspectTTL, redquorum.WithFenced(), redquorum.WithOnce())
	if err != nil {
		t.Fatal(err)
	}
	issued, _ := l.Fence()

	r := mustForce(t, c, resource, "not-the-token")
	if r.Resource != resource || r.Token != "not-the-token" || r.Quorum != 3 || len(r.Nodes) != 5 {
		t.Errorf("wrong token: %+v", r)
	}
	if outcomes(r, redquorum.ReleaseHeldByOther) < 3 || r.OnQuorum || r.Confirmed >= 3 {
		t.Errorf("wrong token: %+v", r)
	}
	if insp := mustInspect(t, c, resource); !insp.Held || withToken(insp, l.Token()) < 3 {
		t.Errorf("the key should be kept: %+v", insp)
	}
	if !l.Held() {
		t.Error("the lock should still be held")
	}

	r = mustForce(t, c, resource, l.Token())
	if !r.OnQuorum || r.Confirmed < 3 || outcomes(r, redquorum.ReleaseDeleted) < 3 {
		t.Errorf("right token: %+v", r)
	}
	for i, nd := range r.Nodes {
		if nd.Error != "" || nd.Node != shared.nodes[i].addr() {
			t.Errorf("right token, node %d: %+v", i, nd)
		}
	}
	insp := mustInspect(t, c, resource)
	absent := 0
	for _, nd := range insp.Nodes {
		if nd.Kind == redquorum.KeyAbsent {
			absent++
		}
	}
	if insp.Held || absent < 3 || !insp.HasFence || insp.Fence < issued {
		t.Errorf("after the forced release (fence %d): %+v", issued, insp)
	}
	if err := l.Extend(inspectTTL); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Extend after a forced release = %v, want ErrLost", err)
	}

	bob, err := acquire(c, resource, inspectTTL, redquorum.WithReentrant("bob"), redquorum.WithOnce())
	if err != nil {
		t.Fatal(err)
	}
	r = mustForce(t, c, resource, "")
	if r.Token != "" || !r.OnQuorum || outcomes(r, redquorum.ReleaseDeleted) < 3 {
		t.Errorf("no token: %+v", r)
	}
	again, err := c.TryLock(resource, inspectTTL)
	if err != nil {
		t.Fatalf("free after the forced release: %v", err)
	}
	again.Unlock()
	if err := bob.Unlock(); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Unlock after a forced release = %v, want ErrLost", err)
	}

	r = mustForce(t, c, "go:insp-never", "")
	if !r.OnQuorum || outcomes(r, redquorum.ReleaseAbsent) < 3 {
		t.Errorf("nothing there: %+v", r)
	}
}

func TestInspectInvalidArguments(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	for what, err := range map[string]error{
		"Inspect empty":           second(c.Inspect("")),
		"Inspect NUL":             second(c.Inspect("a\x00b")),
		"ForceRelease empty":      second(c.ForceRelease("", "")),
		"ForceRelease NUL":        second(c.ForceRelease("a\x00b", "")),
		"ForceRelease NUL token":  second(c.ForceRelease("go:x", "t\x00k")),
		"ForceRelease bad UTF-8":  second(c.ForceRelease("\xc3\x28", "")),
		"Inspect bad UTF-8":       second(c.Inspect("\xc3\x28")),
		"ForceRelease bad token":  second(c.ForceRelease("go:x", "\xc3\x28")),
		"Inspect nil client":      second((*redquorum.Client)(nil).Inspect("go:x")),
		"ForceRelease nil client": second((*redquorum.Client)(nil).ForceRelease("go:x", "")),
	} {
		if !errors.Is(err, redquorum.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	c.Close()
	if _, err := c.Inspect("go:x"); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Inspect after Close = %v, want ErrClosed", err)
	}
	if _, err := c.ForceRelease("go:x", ""); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("ForceRelease after Close = %v, want ErrClosed", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestKindAndOutcomeNames(t *testing.T) {
	if redquorum.KeyOwners.String() != "owners" || redquorum.KeyKind(99).String() != "other" {
		t.Error("KeyKind names")
	}
	if redquorum.ReleaseHeldByOther.String() != "held by another token" || redquorum.ReleaseOutcome(99).String() != "error" {
		t.Error("ReleaseOutcome names")
	}
}
