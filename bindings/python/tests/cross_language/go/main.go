// Command lock takes or probes a lock from Go, for the cross-language tests
// (bindings/python/tests/test_cross_language.py):
//
//	lock try  RESOURCE URL...   exit 0 if acquired (then released), 3 if held elsewhere
//	lock hold RESOURCE URL...   acquire, print "HELD <token>", release when stdin closes
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

func main() {
	if len(os.Args) < 4 || (os.Args[1] != "try" && os.Args[1] != "hold") {
		fmt.Fprintln(os.Stderr, "usage: lock try|hold RESOURCE URL...")
		os.Exit(2)
	}
	mode, resource, urls := os.Args[1], os.Args[2], os.Args[3:]
	// One attempt whose answer the tests rely on: give each node a second to answer, so a
	// briefly stalled node (a loaded machine) does not turn "held elsewhere" or "acquired"
	// into a no-quorum failure.
	c, err := redquorum.New(urls, redquorum.WithNodeTimeout(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	l, err := c.TryLock(resource, 30*time.Second)
	if errors.Is(err, redquorum.ErrNotAcquired) {
		fmt.Println("NOT_ACQUIRED")
		os.Exit(3)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if mode == "hold" {
		fmt.Printf("HELD %s\n", l.Token())
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	} else {
		fmt.Println("ACQUIRED")
	}
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
