package redquorum_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// The examples are compiled, not run: they need Redis nodes at the addresses they name. The
// README's Go blocks are parts of them (TestReadmeGoIsCompiled).

// exampleNodes are the example's Redis masters.
var exampleNodes = []string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"}

// exampleClient connects to exampleNodes with the defaults.
func exampleClient() *redquorum.Client {
	c, err := redquorum.New(exampleNodes)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// work stands for what the lock protects.
func work(context.Context) error { return nil }

func Example() {
	c, err := redquorum.New([]string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
		"redis://127.0.0.1:7002"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, err := c.Lock(ctx, "orders:42", 10*time.Second) // the client's retries; TryLock makes one attempt
	switch {
	case errors.Is(err, redquorum.ErrNotAcquired): // held by another owner
		log.Fatal(err)
	case err != nil: // ErrNoQuorum: too few nodes answered; ErrCancelled; ErrInvalidArgument; ErrClosed
		log.Fatal(err)
	}
	defer l.Unlock()                                   // safe to call twice
	if err := l.Extend(10 * time.Second); err != nil { // ErrLost, ErrExtensionLimit
		log.Fatal(err)
	}
	fmt.Println(l.Validity()) // how long the lock is still guaranteed to be held
}

func ExampleNew() {
	c, err := redquorum.New([]string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
		"redis://127.0.0.1:7002"},
		redquorum.WithNodeTimeout(100*time.Millisecond), // how long a call waits for one node
		redquorum.WithRetryCount(5),                     // Lock's retries after the first attempt,
		redquorum.WithRetryDelay(300*time.Millisecond),  // this far apart,
		redquorum.WithRetryJitter(100*time.Millisecond), // give or take this much
		redquorum.WithLogger(slog.Default()))            // lock and node events as slog records
	if err != nil {
		log.Fatal(err) // ErrInvalidArgument naming the bad option or node
	}
	defer c.Close()
}

// Waiting for a busy resource, woken by the release notifications the nodes publish, until
// the context is done.
func ExampleClient_Lock() {
	c := exampleClient()
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "orders:43", 10*time.Second, redquorum.WithWait(time.Minute))
	if errors.Is(err, context.DeadlineExceeded) {
		log.Fatal("gave up after 30 s; nothing is left on the nodes")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock()
}

// Any kind × patience × auto-extension: a Request, built once, acquired as often as needed,
// from any goroutine.
func ExampleClient_Acquire() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()

	req := redquorum.NewRequest("orders:44", 10*time.Second,
		redquorum.WithFenced(),                           // or WithReentrant(owner), WithRead(), WithSemaphore(n), ...
		redquorum.WithWait(30*time.Second),               // or WithRetries(n, delay, jitter), WithOnce()
		redquorum.WithAutoExtend(redquorum.AutoExtend{})) // extended until Unlock; watch l.Lost()
	defer req.Close()             // frees it now (else a finalizer does)
	l, err := c.Acquire(ctx, req) // one C call; ctx cancels it
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock()
	select {
	case <-l.Lost(): // an extension found it gone: stop working on what it protects
	case <-time.After(time.Minute):
	}
}

// Work under a lock that is extended while the work runs and released after it.
func ExampleClient_WithLock() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()

	err := c.WithLock(ctx, "orders:45", 10*time.Second, func(l *redquorum.Lock) error {
		return work(ctx) // watch l.Lost() during long work
	})
	if errors.Is(err, redquorum.ErrLost) {
		log.Fatal("the lock was lost while the work ran") // it may have overlapped another owner's
	}
}

// A fencing token for every write to the protected resource, which refuses a lower token
// than it has seen.
func ExampleClient_LockFenced() {
	c := exampleClient()
	defer c.Close()

	l, err := c.LockFenced(context.Background(), "orders:46", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock()
	fence, _ := l.Fence() // greater than that of every earlier holder
	fmt.Println(fence)
}

// Readers share a resource; a writer excludes them and other writers. An owner names who
// holds, for the check that an owner never waits for itself.
func ExampleClient_ReadLock() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()

	owner := redquorum.NewOwner()                                                   // one per logical owner, not per goroutine
	r, err := c.ReadLock(ctx, "report", 10*time.Second, redquorum.WithOwner(owner)) // many readers at once
	if err != nil {
		log.Fatal(err)
	}
	defer r.Unlock()
	// The write lock waits for the readers, but their owner gets ErrInvalidArgument at once
	// instead of waiting for itself.
	_, err = c.WriteLock(ctx, "report", 10*time.Second, redquorum.WithOwner(owner))
	fmt.Println(errors.Is(err, redquorum.ErrInvalidArgument)) // true
}

// One of a few permits.
func ExampleClient_Semaphore() {
	c := exampleClient()
	defer c.Close()

	p, err := c.Semaphore(context.Background(), "encoder", 3, 30*time.Second, redquorum.WithAutoExtend(redquorum.AutoExtend{}))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Unlock()
	slot, _ := p.Permit() // 0, 1 or 2
	fmt.Println(slot)
}

// A reentrant lock: its owner takes it again at once, and it is free after the last Unlock.
func ExampleWithReentrant() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()

	owner := redquorum.NewOwner() // one per logical owner, not per goroutine
	req := redquorum.NewRequest("orders:47", 10*time.Second, redquorum.WithReentrant(owner))
	defer req.Close()
	outer, err := c.Acquire(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Unlock()
	inner, err := c.Acquire(ctx, req) // the same owner: nests at once
	if err != nil {
		log.Fatal(err)
	}
	defer inner.Unlock()
	holds, _ := inner.HoldCount() // 2
	fmt.Println(holds)
}

// Several resources, all or none.
func ExampleWithResources() {
	c := exampleClient()
	defer c.Close()

	req := redquorum.NewRequest("orders:48", 10*time.Second, redquorum.WithResources("orders:49"))
	defer req.Close()
	l, err := c.Acquire(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock()
	fmt.Println(l.Resources()) // [orders:48 orders:49]
}

// One leader among many processes; its term is a fencing token.
func ExampleClient_Election() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()
	hostname, _ := os.Hostname()

	e, err := c.Election("scheduler", hostname, 10*time.Second, // name, identity, TTL
		redquorum.OnNewLeader(func(l *redquorum.Leader) { /* nil: nobody leads */ }))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	l, err := e.Campaign(ctx) // blocks until this process leads, or ctx is done
	if err != nil {
		log.Fatal(err) // ErrCancelled wrapping ctx.Err(), ErrNoQuorum, ErrClosed
	}
	defer l.Resign()                          // ErrLost if it had been lost meanwhile
	fmt.Println(l.Term())                     // send it with every write: a store refuses a lower term
	if err := work(l.Context()); err != nil { // done the moment leadership is lost or resigned
		log.Print(err)
	}
}

// Who leads, from any process, now and at each change.
func ExampleClient_Observe() {
	c := exampleClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	who, err := c.Leader("scheduler") // nil: nobody leads
	if err != nil {
		log.Fatal(err) // ErrNoQuorum when the nodes cannot tell
	}
	fmt.Println(who)
	changes, err := c.Observe(ctx, "scheduler") // or e.Observe(ctx); closed when ctx is done
	if err != nil {
		log.Fatal(err)
	}
	for leader := range changes { // *Leader or nil
		fmt.Println(leader)
	}
}

// Events as slog records, and the counters.
func ExampleWithLogger() {
	c, err := redquorum.New(exampleNodes, redquorum.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Stats() // s.Acquisitions["acquired"], s.Lost["refused"], s.LocksHeld, s.Prometheus
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(s.Prometheus)
}
