package redquorum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Contexts, Close with waiters pending, nil receivers: all against the shared real nodes.

// cancelBound is how soon a cancelled acquisition must return: the goal is 50 ms, the bound
// generous for a loaded machine under -race.
const cancelBound = time.Second

// assertNoKey waits until no shared node has a key for resource (a cancelled or released
// acquisition sends its undo to every node, a slow one may apply it a moment later).
func assertNoKey(t *testing.T, resource string) {
	t.Helper()
	waitForKeys(t, resource, func(kind, _ string) bool { return kind == "none" }, "no key")
}

// assertOnlyToken waits until no node has a key for resource other than token's: a
// cancelled or refused waiter must leave nothing behind. (A node that was slow to apply the
// holder's SET may briefly hold the waiter's key until its undo arrives.)
func assertOnlyToken(t *testing.T, resource, token string) {
	t.Helper()
	waitForKeys(t, resource, func(kind, value string) bool {
		return kind == "none" || (kind == "string" && value == token)
	}, "the holder's token "+token+" or nothing")
}

// waitForKeys waits up to 3 s until ok holds for resource's key on every shared node.
func waitForKeys(t *testing.T, resource string, ok func(kind, value string) bool, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		bad := ""
		for _, nd := range shared.nodes {
			kind, err := redisCommand(nd.addr(), "TYPE", resource)
			if err != nil {
				t.Fatal(err)
			}
			value := ""
			if kind == "string" {
				value, _ = nd.get(t, resource)
			}
			if !ok(kind, value) {
				bad = fmt.Sprintf("node %s has a %s %q", nd.addr(), kind, value)
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s for %q, want %s", bad, resource, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func assertCancelled(t *testing.T, what string, err error, reason error) {
	t.Helper()
	if !errors.Is(err, redquorum.ErrCancelled) || !errors.Is(err, reason) {
		t.Fatalf("%s = %v, want ErrCancelled and %v", what, err, reason)
	}
	var e *redquorum.Error
	if !errors.As(err, &e) || e.Status != redquorum.StatusCancelled || e.Message == "" {
		t.Fatalf("%s = %#v, want an *Error with StatusCancelled and a message", what, err)
	}
	for _, other := range []error{context.Canceled, context.DeadlineExceeded, redquorum.ErrClosed} {
		if other != reason && errors.Is(err, other) {
			t.Fatalf("%s = %v is also %v", what, err, other)
		}
	}
}

func TestLockWaitEndsWithItsContext(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:ctx"
	holder := mustLock(t, observer, resource, 30*time.Second)
	defer holder.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now() // before the timer starts: the cancel comes at least 200 ms later
	time.AfterFunc(200*time.Millisecond, cancel)
	l, err := c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	if l != nil {
		t.Fatal("Lock with WithWait returned a lock for a held resource")
	}
	assertCancelled(t, "Lock with WithWait cancelled", err, context.Canceled)
	if d := time.Since(start); d < 200*time.Millisecond || d > 200*time.Millisecond+cancelBound {
		t.Errorf("Lock with WithWait cancelled after 200 ms returned after %v", d)
	}

	start = time.Now() // before the deadline is set: it passes at least 300 ms later
	ctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	_, err = c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	assertCancelled(t, "Lock with WithWait past its deadline", err, context.DeadlineExceeded)
	if d := time.Since(start); d < 300*time.Millisecond || d > 300*time.Millisecond+cancelBound {
		t.Errorf("Lock with WithWait with a 300 ms deadline returned after %v", d)
	}

	// A cause set with WithCancelCause is wrapped too.
	errWhy := errors.New("shutting down")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancelCause(errWhy) })
	_, err = c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	assertCancelled(t, "Lock with WithWait with a cause", err, context.Canceled)
	if !errors.Is(err, errWhy) {
		t.Errorf("Lock with WithWait = %v, want it to wrap the context's cause", err)
	}

	assertOnlyToken(t, resource, holder.Token())
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertNoKey(t, resource)

	// A context already done: nothing is tried, even on a free resource.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	_, err = c.Lock(done, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	assertCancelled(t, "Lock with WithWait with a done context", err, context.Canceled)
	assertNoKey(t, resource)
}

func TestLockWaitWakesOnRelease(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.WithRetryDelay(3*time.Second), redquorum.WithNodeTimeout(time.Second))
	const resource = "go:ctx-wake"
	holder := mustLock(t, observer, resource, 30*time.Second)
	released := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		holder.Unlock()
		released <- time.Now()
	})
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	l, err := c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	if err != nil {
		t.Fatalf("Lock with WithWait: %v", err)
	}
	// The fallback backoff starts at RetryDelay (3 s): only a notification is sooner.
	if d := time.Since(<-released); d > 1400*time.Millisecond {
		t.Errorf("Lock with WithWait took the lock %v after the release", d)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	// The lock outlives its context.
	ctx, cancel := context.WithCancel(context.Background())
	l, err = c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	if !l.Held() {
		t.Error("cancelling the context of a granted Lock with WithWait lost the lock")
	}
	assertHeld(t, resource)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// Cancels and deadlines at random offsets racing a release: each round ends with the lock
// (then released) or a cancel error, and never with a key left behind.
func TestContextRacesRelease(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	got, cancelled := 0, 0
	var slowest time.Duration // from the cancel or deadline to the return
	for round := range rounds {
		resource := fmt.Sprintf("go:ctx-race-%d", round)
		holder := mustLock(t, observer, resource, 30*time.Second)
		offset := time.Duration(rand.IntN(30_000)) * time.Microsecond
		deadline := round%2 == 1
		var ctx context.Context
		var cancel context.CancelFunc
		if deadline {
			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond+offset)
		} else {
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond+offset, cancel)
		}
		release := time.AfterFunc(20*time.Millisecond+time.Duration(rand.IntN(30_000))*time.Microsecond, func() { holder.Unlock() })
		req := redquorum.NewRequest(resource, 10*time.Second, redquorum.WithWait(10*time.Second))
		if round%3 == 2 {
			req = redquorum.NewRequest(resource, 10*time.Second, redquorum.WithRetries(1000, 2*time.Millisecond, time.Millisecond), redquorum.WithFenced())
		}
		start := time.Now()
		l, err := c.Acquire(ctx, req)
		elapsed := time.Since(start)
		switch {
		case err == nil:
			got++
			if err := l.Unlock(); err != nil {
				t.Fatalf("round %d: Unlock: %v", round, err)
			}
		case errors.Is(err, redquorum.ErrCancelled):
			cancelled++
			reason := context.Canceled
			if deadline {
				reason = context.DeadlineExceeded
			}
			assertCancelled(t, fmt.Sprintf("round %d", round), err, reason)
			if elapsed > 50*time.Millisecond+cancelBound {
				t.Errorf("round %d: cancelled acquisition returned after %v", round, elapsed)
			}
			slowest = max(slowest, elapsed-20*time.Millisecond-offset)
		default:
			t.Fatalf("round %d: Acquire = %v", round, err)
		}
		cancel()
		if !release.Stop() {
			// The release ran or runs: wait for it through the holder's state.
			for holder.Validity() > 0 {
				time.Sleep(time.Millisecond)
			}
		} else {
			holder.Unlock()
		}
		assertNoKey(t, resource)
	}
	t.Logf("%d rounds: %d got the lock, %d cancelled, returning at most %v after the cancel", rounds, got, cancelled, slowest)
}

func TestCloseCancelsWaiters(t *testing.T) {
	c, err := redquorum.New(shared.urls(), redquorum.WithRetryCount(1000), redquorum.WithRetryDelay(3*time.Second), redquorum.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const resource = "go:close-waiters"
	holder := mustLock(t, observer, resource, 30*time.Second)
	defer holder.Unlock()

	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	waiters := map[string]func() (*redquorum.Lock, error){
		"Acquire(WithWait 15 s)": func() (*redquorum.Lock, error) {
			return c.Acquire(context.Background(), redquorum.NewRequest(resource, 10*time.Second, redquorum.WithWait(15*time.Second)))
		},
		"Lock (retries 3 s apart)": func() (*redquorum.Lock, error) { return c.Lock(context.Background(), resource, 10*time.Second) },
		"Lock(Background, WithWait)": func() (*redquorum.Lock, error) {
			return c.Lock(context.Background(), resource, 10*time.Second, redquorum.WithWait(time.Hour))
		},
		"Lock(deadline, WithWait)": func() (*redquorum.Lock, error) {
			return c.Lock(ctx, resource, 10*time.Second, redquorum.WithWait(time.Hour))
		},
		"Acquire(fenced, auto-extended, polling)": func() (*redquorum.Lock, error) {
			return c.Acquire(context.Background(), redquorum.NewRequest(resource, 10*time.Second, redquorum.WithFenced(),
				redquorum.WithWait(time.Minute), redquorum.WithPolling(), redquorum.WithAutoExtend(redquorum.AutoExtend{})))
		},
		"WithResources": func() (*redquorum.Lock, error) {
			return acquire(c, "go:close-waiters-other", 10*time.Second, redquorum.WithResources(resource))
		},
	}
	type result struct {
		name string
		err  error
		at   time.Time
	}
	results := make(chan result, len(waiters))
	for name, wait := range waiters {
		go func() {
			l, err := wait()
			if l != nil {
				l.Unlock()
				err = fmt.Errorf("got a lock on a held resource")
			}
			results <- result{name, err, time.Now()}
		}()
	}
	// Let every waiter reach its wait (they cannot succeed, so nothing is lost by waiting).
	time.Sleep(500 * time.Millisecond)
	select {
	case r := <-results:
		t.Fatalf("%s returned before Close: %v", r.name, r.err)
	default:
	}

	// Other goroutines keep working while Close runs.
	closed := make(chan time.Duration)
	start := time.Now()
	go func() {
		c.Close()
		closed <- time.Since(start)
	}()
	var slowest time.Duration
	for range waiters {
		r := <-results
		assertCancelled(t, r.name, r.err, redquorum.ErrClosed)
		d := r.at.Sub(start)
		if d > cancelBound {
			t.Errorf("%s returned %v after Close", r.name, d)
		}
		slowest = max(slowest, d)
	}
	d := <-closed
	if d > cancelBound {
		t.Errorf("Close took %v with waiters pending", d)
	}
	t.Logf("Close took %v; the last of %d waiters returned %v after it began", d, len(waiters), slowest)
	if _, err := c.Lock(ctx, resource, time.Second, redquorum.WithWait(time.Hour)); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Lock with WithWait after Close = %v, want ErrClosed", err)
	}
	if _, err := c.NodeStatus(); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("NodeStatus after Close = %v, want ErrClosed", err)
	}
	assertOnlyToken(t, resource, holder.Token())
	assertNoKey(t, "go:close-waiters-other")
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertNoKey(t, resource)
}

// Close racing with acquisitions and NodeStatus on many goroutines: each gets a lock, a
// closed or cancelled error, never a crash, and Close never waits long.
func TestCloseRacesAcquisitions(t *testing.T) {
	for round := range 5 {
		c, err := redquorum.New(shared.urls(), quick...)
		if err != nil {
			t.Fatal(err)
		}
		resource := fmt.Sprintf("go:close-race-%d", round)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(50))*time.Millisecond)
				defer cancel()
				var l *redquorum.Lock
				var err error
				switch i % 3 {
				case 0:
					l, err = c.Lock(ctx, resource, 5*time.Second, redquorum.WithWait(time.Hour))
				case 1:
					l, err = c.Lock(context.Background(), resource, 5*time.Second)
				default:
					_, err = c.NodeStatus()
				}
				if l != nil {
					time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
					err = l.Unlock()
				}
				if err != nil && !errors.Is(err, redquorum.ErrClosed) && !errors.Is(err, redquorum.ErrCancelled) &&
					!errors.Is(err, redquorum.ErrNotAcquired) {
					t.Errorf("call racing Close: %v", err)
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		start := time.Now()
		c.Close()
		if d := time.Since(start); d > cancelBound {
			t.Errorf("Close took %v", d)
		}
		wg.Wait()
		assertNoKey(t, resource)
	}
}

func TestNilReceivers(t *testing.T) {
	var l *redquorum.Lock
	if err := l.Unlock(); !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("nil Lock: Unlock = %v, want ErrInvalidArgument", err)
	}
	if err := l.Extend(time.Second); !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("nil Lock: Extend = %v, want ErrInvalidArgument", err)
	}
	if l.Held() || l.Validity() != 0 || l.Resource() != "" || l.Token() != "" || l.Resources() != nil {
		t.Error("nil Lock: Held, Validity, Resource, Token or Resources is not the zero value")
	}
	if _, ok := l.Fence(); ok {
		t.Error("nil Lock has a fence")
	}
	if _, ok := l.HoldCount(); ok {
		t.Error("nil Lock has a hold count")
	}
	select {
	case <-l.Lost():
	default:
		t.Error("nil Lock: Lost() is not closed")
	}

	var c *redquorum.Client
	ctx := context.Background()
	calls := map[string]func() error{
		"Lock":       func() error { _, err := c.Lock(ctx, "go:nil", time.Second); return err },
		"TryLock":    func() error { _, err := c.TryLock("go:nil", time.Second); return err },
		"LockFenced": func() error { _, err := c.LockFenced(ctx, "go:nil", time.Second); return err },
		"ReadLock":   func() error { _, err := c.ReadLock(ctx, "go:nil", time.Second); return err },
		"WriteLock":  func() error { _, err := c.WriteLock(ctx, "go:nil", time.Second); return err },
		"Semaphore":  func() error { _, err := c.Semaphore(ctx, "go:nil", 2, time.Second); return err },
		"Acquire": func() error {
			_, err := c.Acquire(ctx, redquorum.NewRequest("go:nil", time.Second))
			return err
		},
		"WithLock": func() error {
			return c.WithLock(ctx, "go:nil", time.Second, func(*redquorum.Lock) error { return nil })
		},
		"NodeStatus": func() error { _, err := c.NodeStatus(); return err },
		"Inspect":    func() error { _, err := c.Inspect("go:nil"); return err },
		"Close":      c.Close,
	}
	for name, call := range calls {
		assertInvalid(t, "nil Client: "+name, call())
	}

	live := newClient(t, shared.urls(), patient...)
	_, err := live.Acquire(context.Background(), nil)
	assertInvalid(t, "Acquire(nil)", err)
	_, err = live.Acquire(context.Background(), &redquorum.Request{})
	assertInvalid(t, "Acquire(a Request not made by NewRequest)", err)
	var nilRequest *redquorum.Request
	if err := nilRequest.Close(); err != nil {
		t.Errorf("Close of a nil *Request = %v, want nil", err)
	}
	// A nil context is what this checks.
	_, err = live.Acquire(nil, redquorum.NewRequest("go:nil", time.Second))
	assertInvalid(t, "Acquire(nil ctx)", err)
	assertNoKey(t, "go:nil")
}
