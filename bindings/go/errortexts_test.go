package redquorum_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// The texts of the common errors as a Go program prints them: libredlock's (tests/error_texts.rs
// holds the same), through the C ABI, each behind its sentinel error.
func TestErrorTexts(t *testing.T) {
	node := shared.urls()[:1]
	holder := newClient(t, node, patient...)
	l := mustLock(t, holder, "go:error-texts", 10*time.Second)
	defer l.Unlock()
	other := newClient(t, node, patient...)

	for _, tc := range []struct {
		name string
		err  func() error
		is   error
		want string
	}{
		{"TTL of 0", func() error {
			_, err := other.TryLock("go:error-texts-ttl", 0)
			return err
		}, redquorum.ErrInvalidArgument,
			"ttl must be at least 3 ms (with drift_factor 0.01) and at most 10 years, got 0 ms"},
		{"URL without a port number", func() error {
			c, err := redquorum.New([]string{"redis://host:notaport"})
			if c != nil {
				c.Close()
			}
			return err
		}, redquorum.ErrInvalidArgument, "not a usable Redis URL: invalid port number"},
		{"lock held elsewhere", func() error {
			_, err := other.TryLock("go:error-texts", 10*time.Second)
			return err
		}, redquorum.ErrNotAcquired,
			`lock "go:error-texts" not acquired after 1 attempt(s), held by another owner; ` +
				"the last attempt: 0 granted, 1 refused, 0 failed, 0 not waited for, of 1 nodes (quorum 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if !errors.Is(err, tc.is) {
				t.Fatalf("got %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error reads\n\t%s\nnot\n\t%s", err, tc.want)
			}
		})
	}
}
