// Package redlock is the Go binding of redlock, a Redlock distributed lock over N
// independent Redis masters. The algorithm runs in the Rust library libredlock, reached
// through its C ABI with cgo, so Go, Rust, C and Python programs contend on the same keys
// with the same bytes.
//
//	c, err := redlock.New([]string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7001",
//		"redis://127.0.0.1:7002"}, redlock.Options{})
//	if err != nil { ... }
//	defer c.Close()
//
//	l, err := c.Lock("orders:42", 10*time.Second)
//	switch {
//	case errors.Is(err, redlock.ErrNotAcquired): // another owner holds it
//	case errors.Is(err, redlock.ErrNoQuorum):    // too few nodes answered
//	case err != nil: ...
//	}
//	defer l.Unlock()
//	// ... work for less than l.Validity() ...
//
// Every error from a C call is an *Error carrying the C status and message; it unwraps to
// one of the sentinel errors, so errors.Is works.
//
// # Building
//
// The package links libredlock from the repository it lives in: the header from
// ../../include and the shared library from ../../target/release (with an rpath to it),
// so after `cargo build --release` at the repository root, `go test ./...` works offline.
// To use a libredlock installed elsewhere, set the cgo environment variables; cgo puts
// them before the package's own flags, so they win:
//
//	CGO_CFLAGS="-I/opt/redlock/include" \
//	CGO_LDFLAGS="-L/opt/redlock/lib -Wl,-rpath,/opt/redlock/lib" go build
//
// To link libredlock.a instead of the shared library, so the program needs no
// libredlock.so at run time, build with the redlock_static tag (CGO_LDFLAGS="-L..."
// still chooses the directory):
//
//	go build -tags redlock_static
package redlock
