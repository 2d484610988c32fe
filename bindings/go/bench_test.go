package redquorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Acquire + release against one local node: what the binding adds to a lock's round trips.
// Compare runs of one session (benchstat); the machine's noise is larger than a cgo call.

func benchClient(b *testing.B) *redquorum.Client {
	b.Helper()
	cl, err := startCluster(b.TempDir(), 1)
	b.Cleanup(cl.stop)
	if err != nil {
		b.Fatal(err)
	}
	c, err := connectedClient(cl.urls())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func benchUnlock(b *testing.B, l *redquorum.Lock, err error) {
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		b.Fatal(err)
	}
}

// Lock builds a request per call.
func BenchmarkLockUnlock(b *testing.B) {
	c := benchClient(b)
	b.ResetTimer()
	for range b.N {
		l, err := c.Lock(context.Background(), "go:bench", 10*time.Second)
		benchUnlock(b, l, err)
	}
}

// A reused Request, without a context (the client's cancel handle).
func BenchmarkAcquireUnlock(b *testing.B) {
	c := benchClient(b)
	req := redquorum.NewRequest("go:bench", 10*time.Second)
	b.ResetTimer()
	for range b.N {
		l, err := c.Acquire(context.Background(), req)
		benchUnlock(b, l, err)
	}
}

// A reused Request with a context that can be cancelled (a cancel handle of its own).
func BenchmarkAcquireCancellableUnlock(b *testing.B) {
	c := benchClient(b)
	req := redquorum.NewRequest("go:bench", 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	for range b.N {
		l, err := c.Acquire(ctx, req)
		benchUnlock(b, l, err)
	}
}

// The binding's own cost per acquisition, without the network: a TTL too short to leave any
// validity passes the binding's checks and is refused by libredlock's first step, after the
// request has crossed into C.
func BenchmarkAcquireRefusedInC(b *testing.B) {
	c := benchClient(b)
	req := redquorum.NewRequest("go:bench", 2*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Acquire(ctx, req); !errors.Is(err, redquorum.ErrInvalidArgument) {
			b.Fatalf("a 2 ms TTL: %v, want ErrInvalidArgument", err)
		}
	}
}
