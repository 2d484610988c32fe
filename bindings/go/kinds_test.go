package redquorum_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

func TestFencedTokensStrictlyIncrease(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:fenced"
	var last uint64
	for i := 0; i < 4; i++ {
		l, err := c.LockFenced(context.Background(), resource, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fence, ok := l.Fence()
		if !ok || fence <= last {
			t.Fatalf("fence %d (ok %v) after %d", fence, ok, last)
		}
		last = fence
		if _, ok := l.HoldCount(); ok {
			t.Error("a fenced lock has no hold count")
		}
		assertHeld(t, resource) // a plain lock on the same resource is refused
		if n := tokenHolders(t, resource, l.Token()); n < 3 {
			t.Errorf("plain key and value on %d nodes, want a quorum", n)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if fence2, _ := l.Fence(); fence2 != fence {
			t.Error("the token stays readable after Unlock")
		}
	}
	plain := mustLock(t, c, resource, time.Second)
	if _, ok := plain.Fence(); ok {
		t.Error("a plain lock has no fence")
	}
	if _, err := acquire(c, resource, time.Second, redquorum.WithFenced(), redquorum.WithOnce()); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Fatalf("a fenced single attempt over a plain lock: %v", err)
	}
	plain.Unlock()
}

func TestFencedTokensIncreaseAcrossGoroutines(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.WithRetryCount(500), redquorum.WithRetryDelay(2*time.Millisecond), redquorum.WithRetryJitter(2*time.Millisecond), redquorum.WithNodeTimeout(time.Second))
	const resource = "go:fenced-contention"
	var mu sync.Mutex
	var seen []uint64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				l, err := c.LockFenced(context.Background(), resource, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				fence, _ := l.Fence()
				mu.Lock() // in holder order: the lock excludes the other goroutines
				seen = append(seen, fence)
				mu.Unlock()
				if err := l.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("%d acquisitions, want 40", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("token %d after %d: %v", seen[i], seen[i-1], seen)
		}
	}
}

func TestReentrantLockNestsAcrossGoroutines(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:reentrant"
	owner := redquorum.NewOwner()
	if len(owner) != 40 || owner == redquorum.NewOwner() {
		t.Fatalf("NewOwner() = %q", owner)
	}
	outer, err := acquire(c, resource, 5*time.Second, redquorum.WithReentrant(owner))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := outer.HoldCount(); !ok || n != 1 {
		t.Fatalf("outer HoldCount = %d, %v", n, ok)
	}
	if outer.Token() != owner {
		t.Errorf("Token() = %q, want the owner", outer.Token())
	}
	// Another goroutine acting for the same owner nests at once.
	done := make(chan *redquorum.Lock)
	go func() {
		inner, err := acquire(c, resource, 5*time.Second, redquorum.WithReentrant(owner), redquorum.WithOnce())
		if err != nil {
			t.Error(err)
		}
		done <- inner
	}()
	inner := <-done
	if inner == nil {
		t.FailNow()
	}
	if n, _ := inner.HoldCount(); n != 2 {
		t.Fatalf("inner HoldCount = %d", n)
	}
	if _, err := acquire(c, resource, time.Second, redquorum.WithReentrant("someone else"), redquorum.WithOnce()); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Fatalf("another owner: %v", err)
	}
	assertHeld(t, resource)
	if err := inner.Extend(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertHeld(t, resource) // the outer hold remains
	if err := outer.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertFree(t, resource)
}

func TestManyResourcesAreAllOrNothing(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	l, err := acquire(c, "go:many-b", 5*time.Second, redquorum.WithResources("go:many-a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Resources(); fmt.Sprint(got) != "[go:many-a go:many-b]" {
		t.Errorf("Resources() = %v", got)
	}
	if l.Resource() != "go:many-a,go:many-b" {
		t.Errorf("Resource() = %q", l.Resource())
	}
	assertHeld(t, "go:many-a")
	assertHeld(t, "go:many-b")
	if _, err := acquire(c, "go:many-b", time.Second, redquorum.WithResources("go:many-c"), redquorum.WithOnce()); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Fatalf("overlapping set: %v", err)
	}
	if err := l.Extend(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertFree(t, "go:many-c") // the refused attempt left nothing behind
	assertFree(t, "go:many-a")
}

func TestKindsInvalidArguments(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	_, err := c.LockFenced(context.Background(), "", time.Second)
	assertInvalid(t, "empty fenced resource", err)
	_, err = acquire(c, "go:x", 0, redquorum.WithFenced(), redquorum.WithOnce())
	assertInvalid(t, "zero TTL", err)
	_, err = acquire(c, "go:x", time.Second, redquorum.WithReentrant(""))
	assertInvalid(t, "empty owner", err)
	_, err = acquire(c, "go:x", time.Second, redquorum.WithReentrant("a\x00b"))
	assertInvalid(t, "owner with NUL", err)
	_, err = acquire(c, "go:x", time.Second, redquorum.WithReentrant(strings.Repeat("o", 1025)), redquorum.WithOnce())
	assertInvalid(t, "owner too long", err)
	_, err = acquire(c, "go:x", time.Second, redquorum.WithResources("go:x"))
	assertInvalid(t, "duplicate resources", err)
	_, err = acquire(c, "go:x", time.Second, redquorum.WithResources(""), redquorum.WithOnce())
	assertInvalid(t, "empty name in the list", err)
	many := make([]string, redquorum.MaxResources+1)
	for i := range many {
		many[i] = fmt.Sprintf("go:x%d", i)
	}
	_, err = acquire(c, many[0], time.Second, redquorum.WithResources(many[1:]...))
	assertInvalid(t, "too many resources", err)
	assertFree(t, "go:x")
}
