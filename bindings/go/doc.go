// Package redquorum is the Go binding of redquorum, a Redlock distributed lock over N
// independent Redis masters. The algorithm runs in the Rust library libredlock, reached
// through its C ABI with cgo, so Go, Rust, C and Python programs contend on the same keys
// with the same bytes.
//
//	c, err := redquorum.New([]string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
//		"redis://127.0.0.1:7002"}, redquorum.WithNodeTimeout(100*time.Millisecond))
//	if err != nil { ... }
//	defer c.Close()
//
//	l, err := c.Lock(ctx, "orders:42", 10*time.Second)
//	switch {
//	case errors.Is(err, redquorum.ErrNotAcquired): // another owner holds it
//		return err
//	case err != nil: // ErrNoQuorum: too few nodes answered, ErrCancelled: ctx is done, ...
//		return err
//	}
//	defer l.Unlock()
//	// ... work for less than l.Validity() ...
//
// New takes functional options (ClientOption: WithNodeTimeout, WithRetryCount, ...). A
// Request (NewRequest with RequestOptions) describes any acquisition: the kind (fenced,
// reentrant, several resources, read or write side of a read-write lock, semaphore permit),
// the patience (the client's retries, WithRetries, WithOnce, WithWait) and auto-extension. It
// is built once and acquired as often as needed, from any goroutine, with Acquire: each
// acquisition is one call into libredlock, cancelled by its own context. A done context ends
// an acquisition at once with an error wrapping ErrCancelled and ctx.Err(); Close ends every
// pending one with ErrClosed. The shorthands Lock, TryLock, LockFenced, ReadLock, WriteLock,
// Semaphore and WithLock each acquire a Request made for the one call.
//
// A goroutine is not a thread, so the read-write lock's check that a caller does not wait
// for itself goes by owner: WithOwner names one, and without it a Request is its own owner.
// See WithOwner for what that means for goroutines sharing a Request.
//
// Every error from a C call is an *Error carrying the C status and message; it unwraps to
// one of the sentinel errors, so errors.Is works.
//
// # Leader election
//
// Client.Election makes a candidate; Campaign blocks until it leads, or its context is done.
// The Leadership's Context is done the moment the leadership is lost or resigned, and its Term
// is a fencing token, greater than every earlier leader's:
//
//	e, err := c.Election("scheduler", hostname, 10*time.Second)
//	if err != nil { ... }
//	defer e.Close()
//	l, err := e.Campaign(ctx)
//	if err != nil { ... } // ErrCancelled wrapping ctx.Err(), ErrNoQuorum, ErrClosed
//	defer l.Resign()
//	runScheduler(l.Context(), l.Term()) // stop when the context is done; send the term with writes
//
// Client.Leader tells who leads now, from any process, and Client.Observe (or
// Election.Observe) follows the changes on a channel; a *Leader is nil when nobody leads.
// OnStartedLeading, OnStoppedLeading and OnNewLeader are client-go style callbacks.
//
// # Building
//
// By default the package links the static libredlock.a that the released module carries
// for linux/amd64, so `go get` needs only Go and a C compiler (cgo), and the
// program needs no libredlock at run time. Without cgo (CGO_ENABLED=0) the build stops on
// the name redquorum_requires_cgo_set_CGO_ENABLED_1_and_a_C_compiler. The build tag
// redlock_pkgconfig links an installed libredlock found through pkg-config instead (add
// redlock_static for its libredlock.a); redlock_inrepo links the repository's own
// ../../target/release (after cargo build --release), as its tests do. The first New
// checks that the library loaded at run time matches the header the package was built
// against (ErrVersion). See README.md.
package redquorum
