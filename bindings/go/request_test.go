package redquorum_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// The request API: kind × patience × auto-extension × cancel, scaled down, plus the
// interplay of Lost, contexts and Close.

type matrixKind struct {
	name string
	opts func(base string) (resources []string, opts []redquorum.RequestOption)
	// check inspects a granted lock.
	check func(t *testing.T, l *redquorum.Lock, resources []string)
}

var matrixKinds = []matrixKind{
	{"plain", func(base string) ([]string, []redquorum.RequestOption) { return []string{base}, nil },
		func(t *testing.T, l *redquorum.Lock, _ []string) {
			if _, ok := l.Fence(); ok {
				t.Error("a plain lock has a fence")
			}
		}},
	{"fenced", func(base string) ([]string, []redquorum.RequestOption) {
		return []string{base}, []redquorum.RequestOption{redquorum.WithFenced()}
	}, func(t *testing.T, l *redquorum.Lock, _ []string) {
		if f, ok := l.Fence(); !ok || f == 0 {
			t.Errorf("Fence() = %d, %v, want a token", f, ok)
		}
	}},
	{"reentrant", func(base string) ([]string, []redquorum.RequestOption) {
		return []string{base}, []redquorum.RequestOption{redquorum.WithReentrant("owner-" + base)}
	}, func(t *testing.T, l *redquorum.Lock, _ []string) {
		if n, ok := l.HoldCount(); !ok || n != 1 {
			t.Errorf("HoldCount() = %d, %v, want 1", n, ok)
		}
	}},
	{"many", func(base string) ([]string, []redquorum.RequestOption) {
		return []string{base + ":b", base + ":a"}, []redquorum.RequestOption{redquorum.WithResources(base + ":a")}
	}, func(t *testing.T, l *redquorum.Lock, resources []string) {
		want := append([]string(nil), resources...)
		sort.Strings(want)
		if got := l.Resources(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Resources() = %q, want %q", got, want)
		}
	}},
}

type matrixPatience struct {
	name string
	opts []redquorum.RequestOption
	// waits: on a held resource it keeps trying until cancelled (else it gives up at once).
	waits bool
}

var matrixPatiences = []matrixPatience{
	{"client's retries", nil, true}, // the matrix client retries 1000 times
	{"retries", []redquorum.RequestOption{redquorum.WithRetries(500, 10*time.Millisecond, 5*time.Millisecond)}, true},
	{"once", []redquorum.RequestOption{redquorum.WithOnce()}, false},
	{"wait", []redquorum.RequestOption{redquorum.WithWait(time.Minute)}, true},
}

func TestRequestMatrix(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.WithRetryCount(1000), redquorum.WithRetryDelay(20*time.Millisecond), redquorum.WithRetryJitter(10*time.Millisecond), redquorum.WithNodeTimeout(300*time.Millisecond))
	for _, kind := range matrixKinds {
		for _, pat := range matrixPatiences {
			for _, auto := range []bool{false, true} {
				for _, cancel := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/auto=%v/cancel=%v", kind.name, pat.name, auto, cancel)
					base := "go:matrix:" + strings.NewReplacer("/", ":", " ", "-", "'", "").Replace(name)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						resources, opts := kind.opts(base)
						opts = append(opts, pat.opts...)
						if auto {
							opts = append(opts, redquorum.WithAutoExtend(redquorum.AutoExtend{}))
						}
						req := redquorum.NewRequest(resources[0], autoTTL, opts...)
						if cancel {
							matrixCancel(t, c, req, resources, pat)
						} else {
							matrixGrant(t, c, req, resources, kind, auto)
						}
					})
				}
			}
		}
	}
}

// matrixGrant acquires a free resource with req and checks the lock; an auto-extended one
// must outlive its TTL.
func matrixGrant(t *testing.T, c *redquorum.Client, req *redquorum.Request, resources []string, kind matrixKind, auto bool) {
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	l, err := c.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer l.Unlock()
	kind.check(t, l, resources)
	if v := l.Validity(); v <= 0 || v > autoTTL {
		t.Errorf("Validity() = %v, want in (0, %v]", v, autoTTL)
	}
	for _, r := range resources {
		// Acquire returned on a quorum: the observer's try must not land where this lock's SET
		// has not yet, which would take that node from the lock for good (an extension never
		// re-creates a key) and leave an auto-extended lock on a bare quorum.
		settled(t, c, r)
		assertHeld(t, r)
	}
	if auto {
		time.Sleep(autoTTL + 500*time.Millisecond)
		if !l.Held() {
			t.Fatal("an auto-extended lock is no longer held after its TTL")
		}
		for _, r := range resources {
			assertHeld(t, r)
		}
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed for a held lock")
	default:
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for _, r := range resources {
		assertNoKey(t, r)
	}
}

// matrixCancel acquires a resource held elsewhere with req and a context cancelled after
// 150 ms: a patient request returns Canceled at once after that, a single attempt
// NotAcquired before it; neither leaves a key.
func matrixCancel(t *testing.T, c *redquorum.Client, req *redquorum.Request, resources []string, pat matrixPatience) {
	holder := mustLock(t, observer, resources[len(resources)-1], 30*time.Second)
	defer holder.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const after = 150 * time.Millisecond
	start := time.Now() // before the timer starts: the cancel comes at least `after` later
	time.AfterFunc(after, cancel)
	l, err := c.Acquire(ctx, req)
	elapsed := time.Since(start)
	if l != nil {
		l.Unlock()
		t.Fatal("acquired a held resource")
	}
	if pat.waits {
		assertCancelled(t, "Acquire", err, context.Canceled)
		if elapsed < after || elapsed > after+cancelBound {
			t.Errorf("cancelled after %v, returned after %v", after, elapsed)
		}
	} else if !errors.Is(err, redquorum.ErrNotAcquired) || errors.Is(err, redquorum.ErrCancelled) {
		t.Errorf("a single attempt = %v, want ErrNotAcquired", err)
	}
	assertOnlyToken(t, resources[len(resources)-1], holder.Token())
	for _, r := range resources[:len(resources)-1] {
		assertNoKey(t, r)
	}
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	assertNoKey(t, resources[len(resources)-1])
}

func TestRequestReuseAndInvalid(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	// One request serves many acquisitions, from many goroutines.
	req := redquorum.NewRequest("go:reuse", 5*time.Second, redquorum.WithFenced(), redquorum.WithWait(10*time.Second))
	errs := make(chan error, 4)
	fences := make(chan uint64, 4)
	for range 4 {
		go func() {
			l, err := c.Acquire(context.Background(), req)
			if err == nil {
				f, _ := l.Fence()
				fences <- f
				err = l.Unlock()
			}
			errs <- err
		}()
	}
	seen := map[uint64]bool{}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		f := <-fences
		if seen[f] {
			t.Errorf("fence %d given twice", f)
		}
		seen[f] = true
	}

	for name, r := range map[string]*redquorum.Request{
		"empty resource":          redquorum.NewRequest("", time.Second),
		"NUL in resource":         redquorum.NewRequest("go:a\x00", time.Second),
		"zero TTL":                redquorum.NewRequest("go:x", 0),
		"TTL over ten years":      redquorum.NewRequest("go:x", 11*365*24*time.Hour),
		"empty owner":             redquorum.NewRequest("go:x", time.Second, redquorum.WithReentrant("")),
		"NUL in owner":            redquorum.NewRequest("go:x", time.Second, redquorum.WithReentrant("o\x00")),
		"non-UTF-8 resource":      redquorum.NewRequest("go:\xff", time.Second),
		"empty WithOwner":         redquorum.NewRequest("go:x", time.Second, redquorum.WithWrite(), redquorum.WithOwner("")),
		"NUL in WithOwner":        redquorum.NewRequest("go:x", time.Second, redquorum.WithWrite(), redquorum.WithOwner("o\x00")),
		"non-UTF-8 WithOwner":     redquorum.NewRequest("go:x", time.Second, redquorum.WithRead(), redquorum.WithOwner("o\xff")),
		"fenced and reentrant":    redquorum.NewRequest("go:x", time.Second, redquorum.WithFenced(), redquorum.WithReentrant("o")),
		"fenced many":             redquorum.NewRequest("go:x", time.Second, redquorum.WithResources("go:y"), redquorum.WithFenced()),
		"reentrant many":          redquorum.NewRequest("go:x", time.Second, redquorum.WithResources("go:y"), redquorum.WithReentrant("o")),
		"duplicate resources":     redquorum.NewRequest("go:x", time.Second, redquorum.WithResources("go:x")),
		"empty name in the list":  redquorum.NewRequest("go:x", time.Second, redquorum.WithResources("")),
		"negative retries":        redquorum.NewRequest("go:x", time.Second, redquorum.WithRetries(-1, 0, 0)),
		"negative retry delay":    redquorum.NewRequest("go:x", time.Second, redquorum.WithRetries(1, -time.Second, 0)),
		"zero wait":               redquorum.NewRequest("go:x", time.Second, redquorum.WithWait(0)),
		"negative wait":           redquorum.NewRequest("go:x", time.Second, redquorum.WithWait(-time.Second)),
		"extend fraction 1":       redquorum.NewRequest("go:x", time.Second, redquorum.WithAutoExtend(redquorum.AutoExtend{Fraction: 1})),
		"negative MaxHold":        redquorum.NewRequest("go:x", time.Second, redquorum.WithAutoExtend(redquorum.AutoExtend{MaxHold: -1})),
		"negative MaxExtensions":  redquorum.NewRequest("go:x", time.Second, redquorum.WithAutoExtend(redquorum.AutoExtend{MaxExtensions: -1})),
		"TTL too short to extend": redquorum.NewRequest("go:x", 100*time.Millisecond, redquorum.WithAutoExtend(redquorum.AutoExtend{})),
		"over MaxResources":       redquorum.NewRequest("go:x", time.Second, redquorum.WithResources(manyNames(redquorum.MaxResources)...)),
		"delay over ten years":    redquorum.NewRequest("go:x", time.Second, redquorum.WithRetries(1, 11*365*24*time.Hour, 0)),
		"MaxHold over ten years":  redquorum.NewRequest("go:x", time.Second, redquorum.WithAutoExtend(redquorum.AutoExtend{MaxHold: 11 * 365 * 24 * time.Hour})),
	} {
		l, err := c.Acquire(context.Background(), r)
		if l != nil {
			l.Unlock()
		}
		assertInvalid(t, name, err)
	}
	assertNoKey(t, "go:x")
}

func manyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("go:n%d", i)
	}
	return names
}

// Lost, contexts and Close together: a granted lock does not depend on its context or its
// client; Lost still reports a loss after both are gone.
func TestLostContextCloseInterplay(t *testing.T) {
	c, err := redquorum.New(shared.urls(), fast...)
	if err != nil {
		t.Fatal(err)
	}
	const resource = "go:interplay"
	ctx, cancel := context.WithCancel(context.Background())
	l, err := c.Acquire(ctx, redquorum.NewRequest(resource, autoTTL, redquorum.WithAutoExtend(redquorum.AutoExtend{}), redquorum.WithWait(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	// A waiter on the same client, cancelled by Close below.
	waiterErr := make(chan error, 1)
	before := waiters(t, c)
	go func() {
		_, err := c.Lock(context.Background(), resource, autoTTL, redquorum.WithWait(time.Hour))
		waiterErr <- err
	}()
	cancel()
	untilWaiting(t, c, before)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > cancelBound {
		t.Errorf("Close took %v with a waiter pending", d)
	}
	select {
	case err := <-waiterErr:
		assertCancelled(t, "waiter when Close ran", err, redquorum.ErrClosed)
	case <-time.After(cancelBound):
		t.Fatal("the waiter did not return after Close")
	}
	// The lock keeps being extended with its context cancelled and its client closed.
	time.Sleep(autoTTL + 500*time.Millisecond)
	if !l.Held() {
		t.Fatal("the auto-extended lock was lost after its context was cancelled and its client closed")
	}
	assertHeld(t, resource)
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed for a held lock")
	default:
	}
	// Taking its keys away is still noticed.
	deleteOnMajority(t, resource)
	select {
	case <-l.Lost():
	case <-time.After(5 * autoTTL):
		t.Fatal("Lost() not closed after the keys vanished")
	}
	if l.Held() {
		t.Error("Held() after Lost()")
	}
	if err := l.Unlock(); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Unlock of a lost lock = %v, want ErrLost", err)
	}
	assertNoKey(t, resource)
}

// One Request serves goroutines with contexts of their own: each acquisition is cancelled by
// its own context only, and the others wait their turn through the same C request.
func TestRequestSharedAcrossContexts(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:shared-request"
	req := redquorum.NewRequest(resource, 5*time.Second, redquorum.WithWait(time.Minute))
	defer req.Close()
	holder := mustLock(t, observer, resource, 30*time.Second)

	type outcome struct {
		want error // nil: acquires once the holder is gone
		err  error
	}
	var mu sync.Mutex
	inside, overlaps := 0, 0
	results := make(chan outcome, 12)
	for i := range 12 {
		go func() {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			var want error
			switch i % 3 {
			case 0:
				ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				want = context.DeadlineExceeded
			case 1:
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(150*time.Millisecond, cancel)
				want = context.Canceled
			default:
				ctx, cancel = context.WithTimeout(ctx, time.Minute)
			}
			defer cancel()
			l, err := c.Acquire(ctx, req)
			if err == nil {
				mu.Lock()
				inside++
				if inside > 1 {
					overlaps++
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				err = l.Unlock()
			}
			results <- outcome{want, err}
		}()
	}
	// The cancelled ones end while the holder holds; then the resource is freed for the others.
	received := 0
	for cancelled := 0; cancelled < 8; received++ {
		r := <-results
		if r.want == nil {
			t.Errorf("an acquisition with a live context returned while the resource was held: %v", r.err)
			continue
		}
		assertCancelled(t, "an acquisition whose context ended", r.err, r.want)
		cancelled++
	}
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	for ; received < 12; received++ {
		if r := <-results; r.err != nil {
			t.Errorf("an acquisition with a live context: %v", r.err)
		}
	}
	if overlaps != 0 {
		t.Errorf("holders overlapped %d times", overlaps)
	}
	assertNoKey(t, resource)
}

// Close of a Request lets the acquisitions in flight with it finish, and refuses new ones.
func TestRequestCloseWhileAcquiring(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:close-request"
	holder := mustLock(t, observer, resource, 30*time.Second)
	req := redquorum.NewRequest(resource, 5*time.Second, redquorum.WithWait(time.Minute))
	got := make(chan error, 1)
	before := waiters(t, c)
	go func() {
		l, err := c.Acquire(context.Background(), req)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	untilWaiting(t, c, before)
	if err := req.Close(); err != nil {
		t.Fatal(err)
	}
	if err := req.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	_, err := c.Acquire(context.Background(), req)
	if !errors.Is(err, redquorum.ErrClosed) || !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("Acquire of a closed Request = %v, want ErrClosed and ErrInvalidArgument", err)
	}
	runtime.GC()
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("the acquisition in flight when its Request was closed: %v", err)
	}
	assertNoKey(t, resource)
}

// Copies of a Request share its C request: the garbage collector does not free it while a
// copy is reachable, and closing every copy frees it once (a double free would abort the
// process under glibc's checks).
func TestRequestCopies(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	copies := make([]redquorum.Request, 0, 50)
	for i := range 50 {
		req := redquorum.NewRequest(fmt.Sprintf("go:copy-%d", i), 5*time.Second, redquorum.WithFenced(), redquorum.WithOnce())
		copies = append(copies, *req)
	}
	// The originals are garbage now; collect them and reuse their memory.
	for range 3 {
		runtime.GC()
		_ = make([]byte, 1<<20)
	}
	for i := range copies {
		l, err := c.Acquire(context.Background(), &copies[i])
		if err != nil {
			t.Fatalf("copy %d after its original was collected: %v", i, err)
		}
		if want := fmt.Sprintf("go:copy-%d", i); l.Resource() != want {
			t.Errorf("copy %d locked %q, want %q", i, l.Resource(), want)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range copies {
		again := copies[i]
		if err := copies[i].Close(); err != nil {
			t.Fatal(err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(context.Background(), &again); !errors.Is(err, redquorum.ErrClosed) {
			t.Errorf("a copy of a closed Request: %v, want ErrClosed", err)
		}
	}
	copies = nil
	runtime.GC()
	runtime.GC()
}

// A waiter in the cross-process queue (the default) and one out of it (WithUnfair) both get
// the lock when the holder lets go; only the first stands in the queue, which shows that
// WithUnfair reaches libredlock. The queue's keys share the resource's hash slot:
// redlock:queue:{<resource>}:<resource> for a name without braces.
func TestRequestFairAndUnfairWaitersGetTheLock(t *testing.T) {
	holders := newClient(t, shared.urls(), patient...)
	c := newClient(t, shared.urls(), patient...)
	for _, unfair := range []bool{false, true} {
		resource := fmt.Sprintf("go:fair-unfair:%v", unfair)
		opts := []redquorum.RequestOption{redquorum.WithWait(30 * time.Second)}
		if unfair {
			opts = append(opts, redquorum.WithUnfair())
		}
		req := redquorum.NewRequest(resource, 10*time.Second, opts...)
		defer req.Close()
		holder := mustLock(t, holders, resource, 30*time.Second)
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(context.Background(), req)
			if err == nil {
				err = l.Unlock()
			}
			got <- err
		}()
		channel := "redlock:released:{" + resource + "}:" + resource
		queue := "redlock:queue:{" + resource + "}:" + resource
		if unfair {
			eventually(t, "the waiter listens", func() bool { return anyNode(func(nd *node) bool { return nd.subscribers(t, channel) > 0 }) })
			time.Sleep(300 * time.Millisecond) // a queued waiter would have joined by now
			if anyNode(func(nd *node) bool { return keyExists(t, nd, queue) }) {
				t.Errorf("WithUnfair: the waiter stands in the queue %s", queue)
			}
		} else {
			eventually(t, "the waiter queues", func() bool { return anyNode(func(nd *node) bool { return keyExists(t, nd, queue) }) })
		}
		if err := holder.Unlock(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("unfair %v: the waiter got %v, want the lock", unfair, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("unfair %v: the waiter did not get the lock after the release", unfair)
		}
		assertNoKey(t, resource)
	}
}

// settled waits until every node has answered c's read of resource. Each node runs c's
// commands in order, so every SET c sent it before has been answered there (or dropped at its
// deadline, unsent).
func settled(t *testing.T, c *redquorum.Client, resource string) {
	t.Helper()
	eventually(t, "every node answers a read of "+resource, func() bool {
		insp, err := c.Inspect(resource)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range insp.Nodes {
			if !n.Answered() {
				return false
			}
		}
		return true
	})
}

func anyNode(f func(nd *node) bool) bool {
	for _, nd := range shared.nodes {
		if f(nd) {
			return true
		}
	}
	return false
}

func keyExists(t *testing.T, nd *node, key string) bool {
	t.Helper()
	n, err := redisCommand(nd.addr(), "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	return n == "1"
}

// eventually waits up to 10 s for cond, failing the test with what if it never holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}
