package redquorum_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Auto-extension, the Lost channel and waiting on release notifications, scaled down.

// An auto-extended lock is lost when its extensions (every TTL/3, each waiting up to
// NodeTimeout) fail until its validity runs out: with 1.5 s and 300 ms that takes two 300 ms
// stalls in a row on a majority, which a loaded machine produced at 900 ms and 200 ms. Three
// quick retries end a refused Lock at once.
var fast = []redquorum.ClientOption{redquorum.WithRetryCount(3), redquorum.WithRetryDelay(20 * time.Millisecond), redquorum.WithRetryJitter(10 * time.Millisecond), redquorum.WithNodeTimeout(300 * time.Millisecond)}

const autoTTL = 1500 * time.Millisecond

// deleteOnMajority deletes resource's key on 3 of the 5 shared nodes, whichever have it: a
// lock call returns on a quorum, so a slow node may apply its SET a moment after a DEL sent at
// once, or never (its worker drops a SET past its deadline). The lock is then held on 2 at
// most.
func deleteOnMajority(t *testing.T, resource string) {
	t.Helper()
	deleted := make([]bool, len(shared.nodes))
	count := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for i, nd := range shared.nodes {
			if deleted[i] || count == 3 {
				continue
			}
			n, err := redisCommand(nd.addr(), "DEL", resource)
			if err != nil {
				t.Fatal(err)
			}
			if n != "0" {
				deleted[i] = true
				count++
			}
		}
		if count == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: found and deleted on %d nodes only in 10 s", resource, count)
		}
	}
}

func TestAutoExtendOutlivesTTL(t *testing.T) {
	c := newClient(t, shared.urls(), fast...)
	const resource = "go:auto"
	l, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, autoTTL, redquorum.WithAutoExtend(redquorum.AutoExtend{})))
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * autoTTL); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !l.Held() {
			t.Fatal("auto-extended lock no longer held")
		}
		assertHeld(t, resource)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed for a lock still held")
	default:
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if l.Held() {
		t.Error("Held() after Unlock")
	}
	// No extension revives it after Unlock.
	time.Sleep(autoTTL)
	for _, nd := range shared.nodes {
		if _, ok := nd.get(t, resource); ok {
			t.Errorf("key still on %s after Unlock", nd.addr())
		}
	}
	assertFree(t, resource)
}

// holding returns the nodes among nds that hold token under resource once the lock call's
// SETs have landed: a lock call returns on a quorum, and a slow node applies its SET a moment
// later, or never when its worker dropped the request at the call's deadline.
func holding(t *testing.T, nds []*node, resource, token string) []*node {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		var have []*node
		for _, nd := range nds {
			if v, ok := nd.get(t, resource); ok && v == token {
				have = append(have, nd)
			}
		}
		if len(have) == len(nds) || time.Now().After(deadline) {
			return have
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLostClosesWhenKeysVanish(t *testing.T) {
	c := newClient(t, shared.urls(), fast...)
	const resource = "go:vanish"
	l, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, autoTTL, redquorum.WithAutoExtend(redquorum.AutoExtend{})))
	if err != nil {
		t.Fatal(err)
	}
	untouched := holding(t, shared.nodes[3:], resource, l.Token())
	deleteOnMajority(t, resource)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed after the keys vanished on a majority")
	}
	if l.Held() || l.Validity() != 0 {
		t.Error("a lost lock reports itself held")
	}
	// A failed extension never deletes keys: the other nodes that had ours keep it until Unlock.
	for _, nd := range untouched {
		if v, _ := nd.get(t, resource); v != l.Token() {
			t.Errorf("%s lost our key: %q", nd.addr(), v)
		}
	}
	if err := l.Unlock(); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Unlock of a lost lock = %v, want ErrLost", err)
	}
}

func TestMaxHoldEndsInLost(t *testing.T) {
	c := newClient(t, shared.urls(), fast...)
	l, err := c.Acquire(context.Background(), redquorum.NewRequest("go:max-hold", autoTTL, redquorum.WithAutoExtend(redquorum.AutoExtend{MaxHold: autoTTL})))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	select {
	case <-l.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("Lost() not closed after MaxHold and the TTL ran out")
	}
}

func TestGarbageCollectedLockStopsExtending(t *testing.T) {
	c := newClient(t, shared.urls(), fast...)
	const resource = "go:gc"
	lost := func() <-chan struct{} {
		l, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, autoTTL, redquorum.WithAutoExtend(redquorum.AutoExtend{})))
		if err != nil {
			t.Fatal(err)
		}
		return l.Lost()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		free := true
		for _, nd := range shared.nodes {
			if _, ok := nd.get(t, resource); ok {
				free = false
			}
		}
		if free {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a dropped auto-extended lock is still held")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Whoever still watches the dropped lock learns that it is gone.
	select {
	case <-lost:
	default:
		t.Error("Lost() of a garbage-collected lock is not closed")
	}
}

func TestWaitersWakeOnRelease(t *testing.T) {
	// A slow fallback (1.5 s at least): only the release notification wakes them sooner.
	c := newClient(t, shared.urls(), redquorum.WithRetryDelay(3*time.Second), redquorum.WithNodeTimeout(time.Second))
	const resource = "go:wait"
	holder := mustLock(t, c, resource, 10*time.Second)
	var wg sync.WaitGroup
	got := make(chan time.Time, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, 10*time.Second, redquorum.WithWait(30*time.Second)))
			if err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			l.Unlock()
		}()
	}
	// Release once the waiters listen on every node (the client subscribes once per node): a
	// release before that would leave them to their fallback wait. The channel shares the
	// resource's hash slot: redlock:released:{<resource>}:<resource> for a name without braces.
	channel := "redlock:released:{" + resource + "}:" + resource
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		listening := 0
		for _, nd := range shared.nodes {
			if nd.subscribers(t, channel) == 1 {
				listening++
			}
		}
		if listening == len(shared.nodes) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the waiters listen on %d of %d nodes", listening, len(shared.nodes))
			break // release anyway, so that the waiters finish
		}
	}
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(got)
	first := time.Time{}
	n := 0
	for at := range got {
		n++
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	if n != 3 {
		t.Fatalf("%d of 3 waiters got the lock", n)
	}
	if d := first.Sub(released); d > 1400*time.Millisecond {
		t.Errorf("first waiter woke %v after the release", d)
	}

	held := mustLock(t, c, resource, 10*time.Second)
	defer held.Unlock()
	start := time.Now()
	_, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, time.Second, redquorum.WithWait(200*time.Millisecond), redquorum.WithPolling()))
	if !errors.Is(err, redquorum.ErrNotAcquired) || time.Since(start) < 200*time.Millisecond {
		t.Errorf("a polling wait on a held resource = %v after %v, want ErrNotAcquired after the wait", err, time.Since(start))
	}
}

func TestAutoExtendAndWaitInvalid(t *testing.T) {
	c := newClient(t, shared.urls(), fast...)
	for name, opt := range map[string]redquorum.RequestOption{
		"extend fraction 1":    redquorum.WithAutoExtend(redquorum.AutoExtend{Fraction: 1}),
		"negative fraction":    redquorum.WithAutoExtend(redquorum.AutoExtend{Fraction: -0.5}),
		"negative MaxHold":     redquorum.WithAutoExtend(redquorum.AutoExtend{MaxHold: -time.Second}),
		"negative wait":        redquorum.WithWait(-time.Second),
		"negative retry delay": redquorum.WithRetries(3, -time.Second, 0),
	} {
		_, err := c.Acquire(context.Background(), redquorum.NewRequest("go:bad-opts", autoTTL, opt))
		assertInvalid(t, name, err)
	}
	// Too short to extend in time.
	_, err := c.Acquire(context.Background(), redquorum.NewRequest("go:bad-opts", 100*time.Millisecond, redquorum.WithAutoExtend(redquorum.AutoExtend{})))
	assertInvalid(t, "auto-extended short TTL", err)
	assertNoKey(t, "go:bad-opts")
}
