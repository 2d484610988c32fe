package redquorum_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// A new client connects to its nodes in the background, and its first call must get the
// connections made within NodeTimeout: the default 50 ms is tight for a single attempt on a
// loaded machine under -race, so clients that make one attempt wait longer. Three retries
// (not the default 50) end a refused Lock within about a second.
var (
	patient = []redquorum.ClientOption{redquorum.WithNodeTimeout(time.Second), redquorum.WithRetryCount(3)}
	// quick retries keep tests that expect contention fast.
	quick = []redquorum.ClientOption{redquorum.WithRetryCount(3), redquorum.WithRetryDelay(5 * time.Millisecond), redquorum.WithRetryJitter(5 * time.Millisecond), redquorum.WithNodeTimeout(time.Second)}
)

func newClient(t *testing.T, urls []string, opts ...redquorum.ClientOption) *redquorum.Client {
	t.Helper()
	c, err := redquorum.New(urls, opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", urls, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acquire takes the lock a Request made for this one call describes, and closes the Request.
func acquire(c *redquorum.Client, resource string, ttl time.Duration, opts ...redquorum.RequestOption) (*redquorum.Lock, error) {
	req := redquorum.NewRequest(resource, ttl, opts...)
	defer req.Close()
	return c.Acquire(context.Background(), req)
}

func mustLock(t *testing.T, c *redquorum.Client, resource string, ttl time.Duration) *redquorum.Lock {
	t.Helper()
	l, err := c.Lock(context.Background(), resource, ttl)
	if err != nil {
		t.Fatalf("Lock(%q, %v): %v", resource, ttl, err)
	}
	return l
}

// assertFree checks that another client can take resource now, and releases it again.
func assertFree(t *testing.T, resource string) {
	t.Helper()
	l, err := observer.TryLock(resource, time.Second)
	if err != nil {
		t.Fatalf("%q should be free: %v", resource, err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// assertHeld checks that another client cannot take resource now.
func assertHeld(t *testing.T, resource string) {
	t.Helper()
	l, err := observer.TryLock(resource, time.Second)
	if !errors.Is(err, redquorum.ErrNotAcquired) {
		if l != nil {
			l.Unlock()
		}
		t.Fatalf("%q should be held by another owner: TryLock = %v", resource, err)
	}
}

func TestVersion(t *testing.T) {
	if redquorum.Version() == "" {
		t.Fatal("Version() is empty")
	}
}

func TestRoundTrip(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:round-trip"
	const ttl = 5 * time.Second

	l := mustLock(t, c, resource, ttl)
	if l.Resource() != resource {
		t.Errorf("Resource() = %q, want %q", l.Resource(), resource)
	}
	if l.Token() == "" {
		t.Error("Token() is empty")
	}
	if v := l.Validity(); v <= 0 || v > ttl {
		t.Errorf("Validity() = %v, want in (0, %v]", v, ttl)
	}
	if holders := tokenHolders(t, resource, l.Token()); holders < 3 {
		t.Errorf("%d of 5 nodes hold the token, want a quorum", holders)
	}
	assertHeld(t, resource)

	if err := l.Extend(30 * time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if v := l.Validity(); v <= ttl || v > 30*time.Second {
		t.Errorf("Validity() after Extend(30s) = %v, want in (%v, 30s]", v, ttl)
	}

	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if v := l.Validity(); v != 0 {
		t.Errorf("Validity() after Unlock = %v, want 0", v)
	}
	if l.Resource() != resource || l.Token() == "" {
		t.Error("Resource() or Token() changed after Unlock")
	}
	if err := l.Extend(ttl); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Extend after Unlock = %v, want ErrLost", err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock = %v, want nil", err)
	}
	// Unlock returns once a quorum has deleted the key; the other nodes follow shortly.
	if n := tokenHolders(t, resource, l.Token()); n > 2 {
		t.Errorf("%d of 5 nodes still hold the token after Unlock, want at most 2", n)
	}
	for deadline := time.Now().Add(5 * time.Second); tokenHolders(t, resource, l.Token()) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("a node still holds the token 5s after Unlock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	l2 := mustLock(t, c, resource, ttl)
	defer l2.Unlock()
	if l2.Token() == l.Token() {
		t.Errorf("two acquisitions share the token %q", l.Token())
	}
}

// tokenHolders counts the shared nodes where resource holds token.
func tokenHolders(t *testing.T, resource, token string) int {
	t.Helper()
	n := 0
	for _, nd := range shared.nodes {
		if value, ok := nd.get(t, resource); ok && value == token {
			n++
		}
	}
	return n
}

func TestTryLockWhileHeld(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:held"
	l := mustLock(t, c, resource, 10*time.Second)
	defer l.Unlock()

	// The second client would take seconds if TryLock retried.
	slowRetries := newClient(t, shared.urls(), redquorum.WithRetryDelay(3*time.Second), redquorum.WithRetryJitter(0), redquorum.WithNodeTimeout(time.Second))
	for _, client := range []*redquorum.Client{c, slowRetries} {
		start := time.Now()
		l2, err := client.TryLock(resource, 10*time.Second)
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Errorf("TryLock took %v: it retried", elapsed)
		}
		if l2 != nil {
			t.Fatal("TryLock returned a lock for a held resource")
		}
		if !errors.Is(err, redquorum.ErrNotAcquired) || errors.Is(err, redquorum.ErrNoQuorum) {
			t.Fatalf("TryLock = %v, want ErrNotAcquired only", err)
		}
		var e *redquorum.Error
		if !errors.As(err, &e) {
			t.Fatalf("TryLock error %T is not *redquorum.Error", err)
		}
		if e.Status != redquorum.StatusNotAcquired || e.Message == "" {
			t.Errorf("Error = %#v, want StatusNotAcquired with the C message", e)
		}
		if !strings.Contains(err.Error(), e.Message) {
			t.Errorf("Error() = %q does not show the C message %q", err.Error(), e.Message)
		}
	}
	if l.Validity() <= 0 {
		t.Error("the holder lost its lock to a refused TryLock")
	}
}

func TestLockRetriesUntilReleased(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.WithRetryCount(50), redquorum.WithRetryDelay(20*time.Millisecond), redquorum.WithNodeTimeout(time.Second))
	const resource = "go:retry"
	l := mustLock(t, c, resource, 10*time.Second)
	time.AfterFunc(100*time.Millisecond, func() { l.Unlock() })
	l2, err := c.Lock(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatalf("Lock did not get the resource once it was released: %v", err)
	}
	l2.Unlock()
}

func TestHungMinority(t *testing.T) {
	cl := newCluster(t, 5)
	// Patient: Extend and Unlock are single attempts that need all three healthy nodes in time.
	c := newClient(t, cl.urls(), patient...)
	cl.nodes[0].stop(t)
	cl.nodes[1].stop(t)

	// Three of five nodes suffice to lock, extend and unlock.
	l := mustLock(t, c, "go:hung", 10*time.Second)
	if err := l.Extend(10 * time.Second); err != nil {
		t.Errorf("Extend with 2 of 5 nodes hung: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("Unlock with 2 of 5 nodes hung: %v", err)
	}

	// With a third node hung, the answer waits for NodeTimeout and is ErrNoQuorum.
	cl.nodes[2].stop(t)
	start := time.Now()
	l, err := c.TryLock("go:hung", 10*time.Second)
	elapsed := time.Since(start)
	if !errors.Is(err, redquorum.ErrNoQuorum) {
		t.Fatalf("TryLock with 3 of 5 nodes hung = %v, want ErrNoQuorum", err)
	}
	if elapsed < 950*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("TryLock with 3 of 5 nodes hung took %v, want about NodeTimeout (1s)", elapsed)
	}
}

func TestNoQuorum(t *testing.T) {
	cl := newCluster(t, 5)
	c := newClient(t, cl.urls(), redquorum.WithRetryCount(1), redquorum.WithRetryDelay(10*time.Millisecond), redquorum.WithNodeTimeout(time.Second))
	for _, nd := range cl.nodes[:3] {
		nd.kill()
	}
	l, err := c.Lock(context.Background(), "go:no-quorum", 10*time.Second)
	if l != nil || !errors.Is(err, redquorum.ErrNoQuorum) {
		t.Fatalf("Lock with 3 of 5 nodes down = %v, want ErrNoQuorum", err)
	}
	var e *redquorum.Error
	if !errors.As(err, &e) || e.Message == "" || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("Error() = %q lacks the C message", err)
	}

	// Once the nodes are back, the same client locks again.
	for _, nd := range cl.nodes[:3] {
		nd.restart(t)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		l, err = c.Lock(context.Background(), "go:no-quorum", 10*time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lock after the nodes restarted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := l.Unlock(); err != nil {
		t.Error(err)
	}
}

func TestContention(t *testing.T) {
	const goroutines, iterations = 8, 25
	c := newClient(t, shared.urls(), redquorum.WithRetryCount(20), redquorum.WithRetryDelay(5*time.Millisecond), redquorum.WithRetryJitter(5*time.Millisecond), redquorum.WithNodeTimeout(time.Second))
	var (
		// Guarded by the Redlock only. Atomic loads and stores keep the race detector,
		// which cannot see the lock, quiet; the read-sleep-write is still not atomic.
		counter  atomic.Int64
		mu       sync.Mutex
		acquired int
		errs     []error
	)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iterations {
				l, err := c.Lock(context.Background(), "go:contention", 5*time.Second)
				if errors.Is(err, redquorum.ErrNotAcquired) {
					continue
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				// Deliberately not atomic: only the lock keeps increments from being lost.
				v := counter.Load()
				time.Sleep(time.Millisecond)
				counter.Store(v + 1)
				err = l.Unlock()
				mu.Lock()
				acquired++
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if acquired == 0 {
		t.Fatal("no goroutine ever acquired the lock")
	}
	if got := counter.Load(); got != int64(acquired) {
		t.Errorf("counter = %d after %d acquisitions: two goroutines held the lock at once", got, acquired)
	}
	t.Logf("%d of %d attempts acquired", acquired, goroutines*iterations)
}

func TestInvalidArguments(t *testing.T) {
	urls := shared.urls()
	type newCase struct {
		name string
		urls []string
		opts []redquorum.ClientOption
	}
	newCases := []newCase{
		{"nil URLs", nil, nil},
		{"no URLs", []string{}, nil},
		{"not a URL", []string{"not a url"}, nil},
		{"empty URL", []string{""}, nil},
		{"URL without host", []string{"redis://"}, nil},
		{"one bad URL among good ones", append(urls[:2:2], "not a url"), nil},
		{"URL with NUL", []string{urls[0] + "\x00"}, nil},
		{"node listed twice", []string{urls[0], urls[1], urls[0]}, nil},
		{"negative NodeTimeout", urls, []redquorum.ClientOption{redquorum.WithNodeTimeout(-time.Second)}},
		{"zero NodeTimeout", urls, []redquorum.ClientOption{redquorum.WithNodeTimeout(0)}},
		{"negative RetryCount", urls, []redquorum.ClientOption{redquorum.WithRetryCount(-1)}},
		{"negative RetryDelay", urls, []redquorum.ClientOption{redquorum.WithRetryDelay(-time.Second)}},
		{"negative RetryJitter", urls, []redquorum.ClientOption{redquorum.WithRetryJitter(-time.Second)}},
		{"negative MaxExtensions", urls, []redquorum.ClientOption{redquorum.WithMaxExtensions(-1)}},
		{"DriftFactor 1", urls, []redquorum.ClientOption{redquorum.WithDriftFactor(1)}},
		{"DriftFactor 1.5", urls, []redquorum.ClientOption{redquorum.WithDriftFactor(1.5)}},
		{"DriftFactor NaN", urls, []redquorum.ClientOption{redquorum.WithDriftFactor(math.NaN())}},
		{"DriftFactor +Inf", urls, []redquorum.ClientOption{redquorum.WithDriftFactor(math.Inf(1))}},
	}
	if math.MaxInt > math.MaxUint32 {
		newCases = append(newCases,
			newCase{"RetryCount over 32 bits", urls, []redquorum.ClientOption{redquorum.WithRetryCount(math.MaxUint32 + 1)}},
			newCase{"MaxExtensions over 32 bits", urls, []redquorum.ClientOption{redquorum.WithMaxExtensions(math.MaxUint32 + 1)}},
		)
	}
	for _, tc := range newCases {
		c, err := redquorum.New(tc.urls, tc.opts...)
		if c != nil {
			c.Close()
		}
		assertInvalid(t, "New: "+tc.name, err)
	}
	// An option's error names the option, also when libredlock refuses its value.
	for _, tc := range []struct {
		opt  redquorum.ClientOption
		want string
	}{
		{redquorum.WithNodeTimeout(-time.Second), "WithNodeTimeout(-1s)"},
		{redquorum.WithRetryCount(-1), "WithRetryCount(-1)"},
		{redquorum.WithDriftFactor(1.5), "WithDriftFactor(1.5): "},
	} {
		c, err := redquorum.New(urls, tc.opt)
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, redquorum.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %s = %v, want ErrInvalidArgument naming the option", tc.want, err)
		}
	}

	c := newClient(t, urls, patient...)
	acquireCases := []struct {
		name     string
		resource string
		ttl      time.Duration
	}{
		{"empty resource", "", time.Second},
		{"resource with NUL", "go:a\x00b", time.Second},
		{"zero TTL", "go:bad-ttl", 0},
		{"negative TTL", "go:bad-ttl", -time.Second},
		{"sub-millisecond TTL", "go:bad-ttl", 999 * time.Microsecond},
		{"TTL too short to leave validity", "go:bad-ttl", 2 * time.Millisecond},
		{"TTL over ten years", "go:bad-ttl", 11 * 365 * 24 * time.Hour},
		{"largest Duration TTL", "go:bad-ttl", math.MaxInt64},
	}
	for _, tc := range acquireCases {
		for name, acquire := range map[string]func(string, time.Duration) (*redquorum.Lock, error){
			"Lock": func(r string, ttl time.Duration) (*redquorum.Lock, error) {
				return c.Lock(context.Background(), r, ttl)
			},
			"TryLock": c.TryLock,
		} {
			l, err := acquire(tc.resource, tc.ttl)
			if l != nil {
				l.Unlock()
			}
			assertInvalid(t, name+": "+tc.name, err)
		}
		called := false
		err := c.WithLock(context.Background(), tc.resource, tc.ttl, func(*redquorum.Lock) error { called = true; return nil })
		assertInvalid(t, "WithLock: "+tc.name, err)
		if called {
			t.Errorf("WithLock: %s: fn was called", tc.name)
		}
	}

	l := mustLock(t, c, "go:bad-extend", 10*time.Second)
	defer l.Unlock()
	for _, tc := range acquireCases[2:] {
		assertInvalid(t, "Extend: "+tc.name, l.Extend(tc.ttl))
	}
	if l.Validity() <= 0 {
		t.Error("a rejected Extend lost the lock")
	}
	assertHeld(t, "go:bad-extend")
}

func assertInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		return
	}
	var e *redquorum.Error
	if !errors.As(err, &e) || e.Status != redquorum.StatusInvalidArgument || e.Message == "" {
		t.Errorf("%s = %#v, want an *Error with StatusInvalidArgument and a message", what, err)
	}
}

// A client with the default options keeps trying for about 10 s (the README): its Lock gets a
// resource whose holder releases after 2 s.
func TestDefaultLockWaitsOutAHolderThatReleasesWithinSeconds(t *testing.T) {
	const resource = "go:default-patience"
	holder := mustLock(t, observer, resource, 10*time.Second)
	released := make(chan error, 1)
	time.AfterFunc(2*time.Second, func() { released <- holder.Unlock() })
	// Every retry option the library's default; the node timeout is the suite's, since a loaded
	// machine misses the default 50 ms.
	c := newClient(t, shared.urls(), redquorum.WithNodeTimeout(time.Second))
	l, err := c.Lock(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatalf("Lock with the default options, over a 2 s hold: %v", err)
	}
	if err := <-released; err != nil {
		t.Errorf("the holder's Unlock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Error(err)
	}
}

func TestOptions(t *testing.T) {
	urls := shared.urls()
	holder := newClient(t, urls, patient...)
	const resource = "go:options"
	held := mustLock(t, holder, resource, 30*time.Second)
	defer held.Unlock()

	t.Run("RetryCount 0 means one attempt", func(t *testing.T) {
		c := newClient(t, urls, redquorum.WithRetryCount(0), redquorum.WithRetryDelay(5*time.Second), redquorum.WithNodeTimeout(time.Second))
		start := time.Now()
		_, err := c.Lock(context.Background(), resource, time.Second)
		if !errors.Is(err, redquorum.ErrNotAcquired) {
			t.Fatalf("Lock = %v, want ErrNotAcquired", err)
		}
		if elapsed := time.Since(start); elapsed >= 5*time.Second {
			t.Errorf("Lock took %v: it retried although WithRetryCount(0)", elapsed)
		}
	})
	t.Run("RetryCount and RetryDelay", func(t *testing.T) {
		c := newClient(t, urls, redquorum.WithRetryCount(2), redquorum.WithRetryDelay(150*time.Millisecond), redquorum.WithRetryJitter(0), redquorum.WithNodeTimeout(time.Second))
		start := time.Now()
		_, err := c.Lock(context.Background(), resource, time.Second)
		if !errors.Is(err, redquorum.ErrNotAcquired) {
			t.Fatalf("Lock = %v, want ErrNotAcquired", err)
		}
		if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
			t.Errorf("Lock took %v, want at least 2 retries x 150ms", elapsed)
		}
	})
	t.Run("DriftFactor", func(t *testing.T) {
		// Validity is the TTL less the drift allowance (TTL x factor + 2 ms) and the time the
		// acquiring call took, which is measured rather than assumed small.
		for _, tc := range []struct {
			name    string
			opts    []redquorum.ClientOption
			allowed time.Duration
		}{
			{"the default, 0.01", nil, 102 * time.Millisecond},
			{"0", []redquorum.ClientOption{redquorum.WithDriftFactor(0)}, 2 * time.Millisecond},
			{"0.5", []redquorum.ClientOption{redquorum.WithDriftFactor(0.5)}, 5002 * time.Millisecond},
		} {
			c := newClient(t, urls, append(tc.opts, redquorum.WithNodeTimeout(time.Second))...)
			start := time.Now()
			l := mustLock(t, c, "go:drift", 10*time.Second)
			v := l.Validity()
			elapsed := time.Since(start)
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			// Whole milliseconds, and the allowance is rounded up to a microsecond: allow 2 ms.
			most := 10*time.Second - tc.allowed
			least := most - elapsed - 2*time.Millisecond
			if v > most || v < least {
				t.Errorf("DriftFactor %s: Validity() = %v, want in [%v, %v] (the call took %v)", tc.name, v, least, most, elapsed)
			}
		}
	})
	t.Run("MaxExtensions", func(t *testing.T) {
		c := newClient(t, urls, redquorum.WithMaxExtensions(2), redquorum.WithNodeTimeout(time.Second))
		l := mustLock(t, c, "go:max-extensions", 10*time.Second)
		defer l.Unlock()
		for i := range 2 {
			if err := l.Extend(10 * time.Second); err != nil {
				t.Fatalf("Extend %d: %v", i+1, err)
			}
		}
		if err := l.Extend(10 * time.Second); !errors.Is(err, redquorum.ErrExtensionLimit) {
			t.Fatalf("third Extend with MaxExtensions 2 = %v, want ErrExtensionLimit", err)
		}
		if l.Validity() <= 0 {
			t.Error("the lock was lost at the extension limit")
		}
		assertHeld(t, "go:max-extensions")
		if err := l.Unlock(); err != nil {
			t.Errorf("Unlock after the extension limit: %v", err)
		}
	})
	t.Run("no extension cap by default", func(t *testing.T) {
		c := newClient(t, urls, patient...)
		l := mustLock(t, c, "go:unlimited", 10*time.Second)
		defer l.Unlock()
		for i := range 20 {
			if err := l.Extend(10 * time.Second); err != nil {
				t.Fatalf("Extend %d: %v", i+1, err)
			}
		}
	})
}

func TestClose(t *testing.T) {
	c, err := redquorum.New(shared.urls(), patient...)
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, c, "go:close", 10*time.Second)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Lock(context.Background(), "go:close-2", time.Second); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Lock after Close = %v, want ErrClosed", err)
	}
	if _, err := c.TryLock("go:close-2", time.Second); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("TryLock after Close = %v, want ErrClosed", err)
	}
	called := false
	err = c.WithLock(context.Background(), "go:close-2", time.Second, func(*redquorum.Lock) error { called = true; return nil })
	if !errors.Is(err, redquorum.ErrClosed) || called {
		t.Errorf("WithLock after Close = %v (fn called: %v), want ErrClosed", err, called)
	}

	// A lock outlives its closed client: it still extends and unlocks.
	if err := l.Extend(10 * time.Second); err != nil {
		t.Errorf("Extend after the client closed: %v", err)
	}
	assertHeld(t, "go:close")
	if err := l.Unlock(); err != nil {
		t.Errorf("Unlock after the client closed: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock: %v", err)
	}
	assertFree(t, "go:close")
}

func TestConcurrentUnlockAndClose(t *testing.T) {
	c, err := redquorum.New(shared.urls(), quick...)
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, c, "go:concurrent-unlock", 10*time.Second)
	var wg sync.WaitGroup
	unlockErrs := make([]error, 8)
	for i := range unlockErrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Validity()
			unlockErrs[i] = l.Unlock()
			l.Extend(time.Second)
		}()
	}
	// Lock calls racing with Close get a lock or ErrClosed, never a crash.
	lockErrs := make([]error, 8)
	for i := range lockErrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l *redquorum.Lock
			if l, lockErrs[i] = c.TryLock("go:concurrent-close", time.Second); l != nil {
				l.Unlock()
			}
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.Close() }()
	go func() { defer wg.Done(); c.Close() }()
	wg.Wait()
	for _, err := range unlockErrs {
		if err != nil {
			t.Errorf("concurrent Unlock: %v", err)
		}
	}
	for _, err := range lockErrs {
		if err != nil && !errors.Is(err, redquorum.ErrClosed) && !errors.Is(err, redquorum.ErrNotAcquired) {
			t.Errorf("TryLock racing with Close: %v", err)
		}
	}
	assertFree(t, "go:concurrent-unlock")
}

// abandon takes a lock and drops it and its client without Unlock or Close.
//
//go:noinline
func abandon(t *testing.T, resource string) {
	c, err := redquorum.New(shared.urls(), patient...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(context.Background(), resource, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestFinalizers(t *testing.T) {
	const resource = "go:finalized"
	abandon(t, resource)
	assertHeld(t, resource)

	// The finalizers free the handles; freeing a held lock releases it long before its TTL.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		l, err := observer.TryLock(resource, time.Second)
		if err == nil {
			l.Unlock()
			break
		}
		if !errors.Is(err, redquorum.ErrNotAcquired) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned lock was not released by its finalizer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC() // and the client's finalizer, one cycle after the lock's
	runtime.GC()
}

func TestWithLock(t *testing.T) {
	c := newClient(t, shared.urls(), quick...)
	const resource = "go:with-lock"
	errFn := errors.New("fn failed")

	err := c.WithLock(context.Background(), resource, 10*time.Second, func(l *redquorum.Lock) error {
		if l.Resource() != resource || l.Validity() <= 0 {
			t.Errorf("fn got lock %q with validity %v", l.Resource(), l.Validity())
		}
		assertHeld(t, resource)
		return errFn
	})
	if err != errFn {
		t.Errorf("WithLock = %v, want fn's error", err)
	}
	assertFree(t, resource)

	var kept *redquorum.Lock
	if err := c.WithLock(context.Background(), resource, 10*time.Second, func(l *redquorum.Lock) error { kept = l; return nil }); err != nil {
		t.Errorf("WithLock = %v, want nil", err)
	}
	if kept.Validity() != 0 {
		t.Error("WithLock returned with the lock still held")
	}
	assertFree(t, resource)

	func() {
		defer func() {
			if recover() == nil {
				t.Error("WithLock swallowed fn's panic")
			}
		}()
		c.WithLock(context.Background(), resource, 10*time.Second, func(*redquorum.Lock) error { panic("boom") })
	}()
	assertFree(t, resource)

	// The lock is auto-extended: fn may outlive the TTL. (5 s: room for an extension that
	// fails on a stalled majority to be retried a NodeTimeout later.)
	err = c.WithLock(context.Background(), resource, 5*time.Second, func(l *redquorum.Lock) error {
		time.Sleep(7500 * time.Millisecond)
		if !l.Held() {
			t.Error("auto-extended lock not held after 1.5 times its TTL")
		}
		return nil
	})
	if err != nil {
		t.Errorf("WithLock outliving its TTL = %v, want nil", err)
	}

	// ErrLost comes back when fn succeeded but the lock was lost meanwhile.
	err = c.WithLock(context.Background(), resource, 3*time.Second, func(l *redquorum.Lock) error {
		deleteOnMajority(t, resource)
		select {
		case <-l.Lost():
		case <-time.After(10 * time.Second):
			t.Error("Lost() not closed after the keys vanished on a majority")
		}
		return nil
	})
	if !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("WithLock whose lock was lost during fn = %v, want ErrLost", err)
	}

	held := mustLock(t, c, resource, 10*time.Second)
	defer held.Unlock()
	called := false
	err = c.WithLock(context.Background(), resource, 10*time.Second, func(*redquorum.Lock) error { called = true; return nil })
	if !errors.Is(err, redquorum.ErrNotAcquired) || called {
		t.Errorf("WithLock on a held resource = %v (fn called: %v), want ErrNotAcquired", err, called)
	}
}

// TestRestartAwareness: a client notices a restarted node (a new run_id) in NodeStatus, and
// with RestartGrace a young node does not count toward acquires.
func TestRestartAwareness(t *testing.T) {
	cl := newCluster(t, 3)
	c := newClient(t, cl.urls(), patient...)
	before, err := c.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range before {
		if s.Address != cl.nodes[i].addr() || !s.Connected || s.Restarts != 0 || len(s.RunID) != 40 || s.Uptime < 0 || s.GraceRemaining != 0 {
			t.Fatalf("node %d: %+v", i, s)
		}
	}

	cl.nodes[0].kill()
	cl.nodes[0].restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, err := c.TryLock("go:restart", time.Second); err == nil {
			l.Unlock() // each call makes the worker reconnect and read the new run_id
		}
		now, err := c.NodeStatus()
		if err != nil {
			t.Fatal(err)
		}
		if now[0].Restarts == 1 {
			if now[0].RunID == before[0].RunID || now[1].Restarts != 0 {
				t.Fatalf("after the restart: %+v", now)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart not noticed: %+v", now[0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	// All three nodes started moments ago: with an hour's grace none counts.
	guarded := newClient(t, cl.urls(), redquorum.WithRetryCount(0), redquorum.WithNodeTimeout(time.Second), redquorum.WithRestartGrace(time.Hour))
	status, err := guarded.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range status {
		if s.GraceRemaining <= 0 || s.GraceRemaining > time.Hour {
			t.Fatalf("node %d should be in grace: %+v", i, s)
		}
	}
	_, err = guarded.TryLock("go:restart", time.Second)
	if !errors.Is(err, redquorum.ErrNoQuorum) || !strings.Contains(err.Error(), "restart_grace") {
		t.Fatalf("TryLock during the grace = %v, want ErrNoQuorum naming restart_grace", err)
	}
	l, err := c.Lock(context.Background(), "go:restart", time.Second) // nothing was left locked
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()

	if _, err := redquorum.New(cl.urls(), redquorum.WithRestartGrace(-time.Second)); !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Fatalf("negative RestartGrace: %v", err)
	}
	guarded.Close()
	if _, err := guarded.NodeStatus(); !errors.Is(err, redquorum.ErrClosed) {
		t.Fatalf("NodeStatus after Close = %v, want ErrClosed", err)
	}
}
