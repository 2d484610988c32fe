package redquorum_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Read-write locks and semaphores.

func once(resource string, opts ...redquorum.RequestOption) *redquorum.Request {
	return redquorum.NewRequest(resource, 10*time.Second, append(opts, redquorum.WithOnce())...)
}

// tryElsewhere acquires req once from another client and releases it: nil if it got in.
func tryElsewhere(t *testing.T, req *redquorum.Request) error {
	t.Helper()
	l, err := observer.Acquire(context.Background(), req)
	if err == nil {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	return err
}

func TestReadersShareWritersExclude(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw"
	r1, err := c.ReadLock(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.ReadLock(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r1.Permit(); ok {
		t.Error("a reader has no permit")
	}
	if _, ok := r1.Fence(); ok {
		t.Error("a reader has no fence")
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithRead())); err != nil {
		t.Errorf("a third reader: %v", err)
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithWrite())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a writer while readers hold it: %v, want ErrNotAcquired", err)
	}
	assertHeld(t, resource) // a plain lock is refused too
	if err := r1.Extend(10 * time.Second); err != nil {
		t.Errorf("a reader extends: %v", err)
	}
	r1.Unlock()
	if err := tryElsewhere(t, once(resource, redquorum.WithWrite())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a writer while one reader is left: %v", err)
	}
	r2.Unlock()
	w, err := c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOnce())
	if err != nil {
		t.Fatalf("a writer once the readers are gone: %v", err)
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithRead())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a reader while a writer holds it: %v", err)
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithWrite())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a second writer: %v", err)
	}
	w.Unlock()
	// A plain holder excludes readers.
	p := mustLock(t, c, resource, 10*time.Second)
	if err := tryElsewhere(t, once(resource, redquorum.WithRead())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a reader while a plain lock holds it: %v", err)
	}
	p.Unlock()
	if err := tryElsewhere(t, once(resource, redquorum.WithRead())); err != nil {
		t.Errorf("a reader once all are gone: %v", err)
	}
}

// Goroutines are not threads: a writer must not be refused because another goroutine,
// which may have run on the same OS thread, holds a read lock of another owner (here: its
// own Request); it waits for it.
func TestWriterWaitsForAnotherGoroutinesReader(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // goroutines then share few threads
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw-goroutines"
	for i := 0; i < 5; i++ {
		r, err := c.ReadLock(context.Background(), resource, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, func() { r.Unlock() })
		done := make(chan error, 1)
		go func() {
			w, err := c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithWait(20*time.Second))
			if err == nil {
				err = w.Unlock()
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatalf("round %d: the writer: %v", i, err)
		}
	}
}

func TestReadersOverlapWritersNeverOverlapAnyone(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw-load"
	var mu sync.Mutex
	readers, writers, maxReaders, bad := 0, 0, 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	work := func(write bool) {
		defer wg.Done()
		for i := 0; i < 3; i++ {
			opt := redquorum.WithRead()
			if write {
				opt = redquorum.WithWrite()
			}
			l, err := c.Acquire(context.Background(), redquorum.NewRequest(resource, 10*time.Second, opt, redquorum.WithWait(60*time.Second)))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			if write {
				writers++
			} else {
				readers++
			}
			if writers > 1 || (writers > 0 && readers > 0) {
				bad++
			}
			if readers > maxReaders {
				maxReaders = readers
			}
			mu.Unlock()
			if write {
				time.Sleep(30 * time.Millisecond)
			} else {
				time.Sleep(200 * time.Millisecond)
			}
			mu.Lock()
			if write {
				writers--
			} else {
				readers--
			}
			mu.Unlock()
			if err := l.Unlock(); err != nil {
				errs <- err
				return
			}
		}
	}
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go work(false)
	}
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go work(true)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bad != 0 {
		t.Errorf("a writer overlapped another holder %d times", bad)
	}
	if maxReaders < 2 {
		t.Errorf("readers never overlapped (at most %d at once)", maxReaders)
	}
}

func TestSemaphoreLimit(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:sem"
	a, err := c.Semaphore(context.Background(), resource, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Semaphore(context.Background(), resource, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pa, okA := a.Permit()
	pb, okB := b.Permit()
	if !okA || !okB || pa == pb || pa > 1 || pb > 1 {
		t.Fatalf("permits %d %v, %d %v: want 0 and 1", pa, okA, pb, okB)
	}
	if _, ok := a.Fence(); ok {
		t.Error("a permit has no fence")
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithSemaphore(2))); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a third permit of 2: %v, want ErrNotAcquired", err)
	}
	assertInvalid(t, "another number of permits", tryElsewhere(t, once(resource, redquorum.WithSemaphore(3))))
	a.Unlock()
	cl, err := c.Acquire(context.Background(), once(resource, redquorum.WithSemaphore(2)))
	if err != nil {
		t.Fatalf("a permit once one was released: %v", err)
	}
	if p, _ := cl.Permit(); p != pa {
		t.Errorf("got slot %d, want the freed %d", p, pa)
	}
	if p, ok := a.Permit(); !ok || p != pa {
		t.Error("the permit stays readable after Unlock")
	}
	cl.Unlock()
	b.Unlock()
	if _, ok := mustLock(t, c, "go:sem-plain", time.Second).Permit(); ok {
		t.Error("a plain lock has no permit")
	}
}

func TestSemaphoreReachesItsLimitAndNeverPassesIt(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:sem-load"
	var mu sync.Mutex
	in, most := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 7; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				l, err := c.Semaphore(context.Background(), resource, 3, 10*time.Second, redquorum.WithWait(60*time.Second))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				in++
				if in > most {
					most = in
				}
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				in--
				mu.Unlock()
				if err := l.Unlock(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most != 3 {
		t.Errorf("at most %d holders at once, want exactly 3", most)
	}
}

func TestReaderAndPermitAutoExtended(t *testing.T) {
	c := newClient(t, shared.urls(), redquorum.WithNodeTimeout(200*time.Millisecond))
	const resource = "go:rw-auto"
	ttl := 900 * time.Millisecond
	r, err := c.ReadLock(context.Background(), resource, ttl, redquorum.WithAutoExtend(redquorum.AutoExtend{}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Semaphore(context.Background(), resource+":sem", 1, ttl, redquorum.WithAutoExtend(redquorum.AutoExtend{}))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if !r.Held() || !s.Held() {
		t.Fatalf("held after 2.5 TTLs: reader %v, permit %v", r.Held(), s.Held())
	}
	if err := tryElsewhere(t, once(resource, redquorum.WithWrite())); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a writer over an auto-extended reader: %v", err)
	}
	if err := tryElsewhere(t, once(resource+":sem", redquorum.WithSemaphore(1))); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a permit over an auto-extended one: %v", err)
	}
	r.Unlock()
	s.Unlock()
	if err := tryElsewhere(t, once(resource, redquorum.WithWrite())); err != nil {
		t.Errorf("a writer once the reader is gone: %v", err)
	}
}

func TestContextCancelsAWaitingWriter(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw-ctx"
	r, err := c.ReadLock(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, redquorum.NewRequest(resource, 10*time.Second, redquorum.WithWrite(), redquorum.WithWait(time.Minute)))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a writer waiting past its context: %v", err)
	}
}

func TestReadWriteSemaphoreInvalidArguments(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	for _, n := range []int{0, -1, redquorum.MaxPermits + 1} {
		_, err := c.Semaphore(context.Background(), "go:sem-bad", n, time.Second)
		assertInvalid(t, "Semaphore with bad permits", err)
	}
	for name, opts := range map[string][]redquorum.RequestOption{
		"read+write":      {redquorum.WithRead(), redquorum.WithWrite()},
		"read+fenced":     {redquorum.WithRead(), redquorum.WithFenced()},
		"semaphore+read":  {redquorum.WithSemaphore(2), redquorum.WithRead()},
		"reentrant+write": {redquorum.WithReentrant("o"), redquorum.WithWrite()},
		"read+many":       {redquorum.WithResources("b"), redquorum.WithRead()},
		"write+many":      {redquorum.WithResources("b"), redquorum.WithWrite()},
		"semaphore+many":  {redquorum.WithResources("b"), redquorum.WithSemaphore(2)},
	} {
		_, err := c.Acquire(context.Background(), redquorum.NewRequest("go:rw-bad", time.Second, opts...))
		assertInvalid(t, name, err)
	}
	var nilLock *redquorum.Lock
	if _, ok := nilLock.Permit(); ok {
		t.Error("a nil lock has no permit")
	}
}

// A shorthand has its kind: a kind option or WithResources given to it is refused, naming the
// shorthand, before anything is sent; the other options apply.
func TestShorthandsRefuseAnotherKind(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:shorthand-kind"
	ctx := context.Background()
	for name, call := range map[string]func() (*redquorum.Lock, error){
		"Lock": func() (*redquorum.Lock, error) { return c.Lock(ctx, resource, time.Second, redquorum.WithRead()) },
		"LockFenced": func() (*redquorum.Lock, error) {
			return c.LockFenced(ctx, resource, time.Second, redquorum.WithReentrant("o"))
		},
		"ReadLock": func() (*redquorum.Lock, error) { return c.ReadLock(ctx, resource, time.Second, redquorum.WithWrite()) },
		"WriteLock": func() (*redquorum.Lock, error) {
			return c.WriteLock(ctx, resource, time.Second, redquorum.WithFenced())
		},
		"Semaphore": func() (*redquorum.Lock, error) {
			return c.Semaphore(ctx, resource, 2, time.Second, redquorum.WithSemaphore(2))
		},
		"Lock with WithResources": func() (*redquorum.Lock, error) {
			return c.Lock(ctx, resource, time.Second, redquorum.WithResources("go:shorthand-other"))
		},
	} {
		l, err := call()
		if l != nil {
			l.Unlock()
		}
		assertInvalid(t, name, err)
		if shorthand, _, _ := strings.Cut(name, " "); !strings.Contains(err.Error(), shorthand+" takes no") {
			t.Errorf("%s: %v does not name the shorthand", name, err)
		}
	}
	assertFree(t, resource)
	// The options of patience, auto-extension and owner apply.
	l, err := c.ReadLock(ctx, resource, 10*time.Second, redquorum.WithOnce(), redquorum.WithOwner("reader"),
		redquorum.WithAutoExtend(redquorum.AutoExtend{}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := c.WriteLock(ctx, resource, 10*time.Second, redquorum.WithOwner("reader")); !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("WriteLock by the owner of a read lock = %v, want ErrInvalidArgument (the owner reached the request)", err)
	}
}

// The self-wait check goes by owner: one owner's read or write lock refuses that owner's
// write lock (and its write lock that owner's read lock) at once, from any goroutine, while
// another owner waits for it.
func TestOwnerCannotWaitForItself(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw-owner"
	alice, bob := redquorum.NewOwner(), redquorum.NewOwner()
	patient := redquorum.WithWait(time.Minute)

	r, err := c.ReadLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice))
	if err != nil {
		t.Fatal(err)
	}
	// The same owner on another goroutine: refused at once, though a wait was asked for.
	refused := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice), patient)
		refused <- err
	}()
	err = <-refused
	assertInvalid(t, "alice's write lock over her read lock", err)
	if !strings.Contains(err.Error(), alice) {
		t.Errorf("the refusal %q does not name the owner", err)
	}
	if d := time.Since(start); d > cancelBound {
		t.Errorf("the refusal took %v: it waited", d)
	}
	// Another reader of the same owner is fine: readers share.
	r2, err := c.ReadLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice), redquorum.WithOnce())
	if err != nil {
		t.Fatalf("alice's second read lock: %v", err)
	}
	r2.Unlock()

	// Another owner waits, and gets the write lock once the reader is gone.
	waitsUntilReleased(t, "bob's write lock over alice's read lock", r, func() (*redquorum.Lock, error) {
		return c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(bob), patient)
	})

	// Holding the write lock: the same owner's read and write locks are refused.
	w, err := c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice), patient)
	assertInvalid(t, "alice's read lock over her write lock", err)
	_, err = c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice), patient)
	assertInvalid(t, "alice's second write lock", err)
	// A plain or fenced lock is no read-write lock: it waits (here: gives up) like any other.
	if _, err := acquire(c, resource, time.Second, redquorum.WithFenced(), redquorum.WithOnce()); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("a fenced lock over alice's write lock: %v, want ErrNotAcquired", err)
	}
	w.Unlock()
	// Released: the owner may take the write lock again.
	w, err = c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithOwner(alice), redquorum.WithOnce())
	if err != nil {
		t.Fatalf("alice's write lock after her release: %v", err)
	}
	w.Unlock()
	assertNoKey(t, resource)
}

// Without WithOwner the owner is the Request: goroutines sharing one write Request act for
// one owner (the second is refused while the first holds it), and separate Requests wait
// for each other.
func TestRequestIsTheDefaultOwner(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	const resource = "go:rw-default-owner"
	req := redquorum.NewRequest(resource, 10*time.Second, redquorum.WithWrite(), redquorum.WithWait(time.Minute))
	defer req.Close()
	w, err := c.Acquire(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	copied := *req
	for name, req := range map[string]*redquorum.Request{"the same Request": req, "a copy of it": &copied} {
		refused := make(chan error, 1)
		go func() {
			_, err := c.Acquire(context.Background(), req)
			refused <- err
		}()
		assertInvalid(t, name+" on another goroutine", <-refused)
	}
	waitsUntilReleased(t, "another Request's write lock", w, func() (*redquorum.Lock, error) {
		return c.WriteLock(context.Background(), resource, 10*time.Second, redquorum.WithWait(time.Minute))
	})
	assertNoKey(t, resource)
}

// waitsUntilReleased runs acquire on another goroutine, checks that it is still waiting
// after 300 ms, unlocks held, and checks that acquire then gets its lock (and unlocks it).
func waitsUntilReleased(t *testing.T, what string, held *redquorum.Lock, acquire func() (*redquorum.Lock, error)) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		l, err := acquire()
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("%s returned while the holder held: %v", what, err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("%s once the holder released: %v", what, err)
	}
}
