package redquorum_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

func TestFencedTokensStrictlyIncrease(t *testing.T) {
	c := newClient(t, shared.urls(), patient)
	const resource = "go:fenced"
	var last uint64
	for i := 0; i < 4; i++ {
		l, err := c.LockFenced(resource, 5*time.Second)
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
	if _, err := c.TryLockFenced(resource, time.Second); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Fatalf("TryLockFenced over a plain lock: %v", err)
	}
	plain.Unlock()
}

func TestFencedTokensIncreaseAcrossGoroutines(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.Options{RetryCount: 500, RetryDelay: 2 * time.Millisecond, RetryJitter: 2 * time.Millisecond, NodeTimeout: time.Second})
	const resource = "go:fenced-contention"
	var mu sync.Mutex
	var seen []uint64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				l, err := c.LockFenced(resource, 5*time.Second)
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
	c := newClient(t, shared.urls(), patient)
	const resource = "go:reentrant"
	owner := redquorum.NewOwner()
	if len(owner) != 40 || owner == redquorum.NewOwner() {
		t.Fatalf("NewOwner() = %q", owner)
	}
	outer, err := c.ReentrantLock(resource, owner, 5*time.Second)
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
		inner, err := c.TryReentrantLock(resource, owner, 5*time.Second)
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
	if _, err := c.TryReentrantLock(resource, "someone else", time.Second); !errors.Is(err, redquorum.ErrNotAcquired) {
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

func TestLockManyIsAllOrNothing(t *testing.T) {
	c := newClient(t, shared.urls(), patient)
	l, err := c.LockMany([]string{"go:many-b", "go:many-a"}, 5*time.Second)
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
	if _, err := c.TryLockMany([]string{"go:many-b", "go:many-c"}, time.Second); !errors.Is(err, redquorum.ErrNotAcquired) {
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
	c := newClient(t, shared.urls(), patient)
	_, err := c.LockFenced("", time.Second)
	assertInvalid(t, "empty fenced resource", err)
	_, err = c.TryLockFenced("go:x", 0)
	assertInvalid(t, "zero TTL", err)
	_, err = c.ReentrantLock("go:x", "", time.Second)
	assertInvalid(t, "empty owner", err)
	_, err = c.ReentrantLock("go:x", "a\x00b", time.Second)
	assertInvalid(t, "owner with NUL", err)
	_, err = c.TryReentrantLock("go:x", strings.Repeat("o", 1025), time.Second)
	assertInvalid(t, "owner too long", err)
	_, err = c.LockMany(nil, time.Second)
	assertInvalid(t, "no resources", err)
	_, err = c.LockMany([]string{"go:x", "go:x"}, time.Second)
	assertInvalid(t, "duplicate resources", err)
	_, err = c.TryLockMany([]string{"go:x", ""}, time.Second)
	assertInvalid(t, "empty name in the list", err)
	many := make([]string, redquorum.MaxResources+1)
	for i := range many {
		many[i] = fmt.Sprintf("go:x%d", i)
	}
	_, err = c.LockMany(many, time.Second)
	assertInvalid(t, "too many resources", err)
	assertFree(t, "go:x")
}
