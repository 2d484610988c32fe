package redquorum_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

func TestGuardOptionsAreValidated(t *testing.T) {
	cl := newCluster(t, 1)
	for _, tc := range []struct {
		name string
		opts []redquorum.ClientOption
		want string
	}{
		{"negative threshold", []redquorum.ClientOption{redquorum.WithClockJumpThreshold(-time.Millisecond)}, "WithClockJumpThreshold(-1ms)"},
		{"negative quarantine", []redquorum.ClientOption{redquorum.WithClockQuarantine(-time.Second)}, "WithClockQuarantine(-1s)"},
		{"threshold with the guard off", []redquorum.ClientOption{redquorum.WithoutClockGuard(), redquorum.WithClockJumpThreshold(time.Second)}, "WithoutClockGuard"},
		{"guard off after a threshold", []redquorum.ClientOption{redquorum.WithClockJumpThreshold(time.Second), redquorum.WithoutClockGuard()}, "WithoutClockGuard"},
		{"huge threshold", []redquorum.ClientOption{redquorum.WithClockJumpThreshold(11 * 365 * 24 * time.Hour)}, "WithClockJumpThreshold(96360h0m0s): "},
		{"huge quarantine", []redquorum.ClientOption{redquorum.WithClockQuarantine(11 * 365 * 24 * time.Hour)}, "WithClockQuarantine(96360h0m0s): "},
		{"zero quarantine", []redquorum.ClientOption{redquorum.WithClockQuarantine(0)}, "WithClockQuarantine(0s): "},
	} {
		c, err := redquorum.New(cl.urls(), tc.opts...)
		if !errors.Is(err, redquorum.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: New = %v, want ErrInvalidArgument naming %s", tc.name, err, tc.want)
		}
	}
	// Accepted settings still lock.
	for i, opts := range [][]redquorum.ClientOption{
		{redquorum.WithoutClockGuard(), redquorum.WithNodeTimeout(time.Second)},
		{redquorum.WithClockJumpThreshold(250 * time.Millisecond), redquorum.WithClockQuarantine(2 * time.Minute), redquorum.WithStrictServers(), redquorum.WithNodeTimeout(time.Second)},
	} {
		c := newClient(t, cl.urls(), opts...)
		l := mustLock(t, c, "go:guard-settings", 10*time.Second)
		if err := l.Unlock(); err != nil {
			t.Fatalf("settings %d: Unlock: %v", i, err)
		}
	}
}

func TestNodeStatusReportsTheGuards(t *testing.T) {
	cl := newCluster(t, 3)
	c := newClient(t, cl.urls(), redquorum.WithNodeTimeout(time.Second), redquorum.WithStrictServers())
	l := mustLock(t, c, "go:guard-status", 10*time.Second) // samples each node's TIME
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	statuses, err := c.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	sampled := 0
	for _, s := range statuses {
		if s.ServerVersion == "" || s.ServerVersion[0] < '1' || s.ServerVersion[0] > '9' {
			t.Errorf("%s: ServerVersion %q", s.Address, s.ServerVersion)
		}
		if s.ServerName != "redis" && s.ServerName != "valkey" {
			t.Errorf("%s: ServerName %q", s.Address, s.ServerName)
		}
		if !strings.Contains(s.Persistence, "AOF") {
			t.Errorf("%s: Persistence %q", s.Address, s.Persistence)
		}
		if len(s.Warnings) != 0 || s.QuarantineRemaining != 0 || s.QuarantineReason != "" {
			t.Errorf("%s: unexpected warnings or quarantine: %+v", s.Address, s)
		}
		if s.Master != "" || s.Failovers != 0 || s.Errors != 0 {
			t.Errorf("%s: a healthy standalone node with a master, failovers or errors: %+v", s.Address, s)
		}
		if s.ClockOffsetKnown {
			sampled++
			// Same host: the nodes' clocks are ours, within a generous bound.
			if s.ClockOffset < -5*time.Second || s.ClockOffset > 5*time.Second {
				t.Errorf("%s: ClockOffset %v", s.Address, s.ClockOffset)
			}
		}
	}
	// Calls return on a quorum: at least that many nodes answered TIME.
	if sampled < len(statuses)/2+1 {
		t.Errorf("clock offset known for %d of %d nodes", sampled, len(statuses))
	}

	off := newClient(t, cl.urls(), redquorum.WithNodeTimeout(time.Second), redquorum.WithoutClockGuard())
	l = mustLock(t, off, "go:guard-off", 10*time.Second)
	l.Unlock()
	statuses, err = off.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statuses {
		if s.ClockOffsetKnown {
			t.Errorf("%s: clock offset %v with the guard off", s.Address, s.ClockOffset)
		}
	}
}

func TestMinReplicasIsPassedOnAndChecked(t *testing.T) {
	cl := newCluster(t, 1)
	if c, err := redquorum.New(cl.urls(), redquorum.WithMinReplicas(-1)); !errors.Is(err, redquorum.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithMinReplicas(-1)") {
		if c != nil {
			c.Close()
		}
		t.Errorf("WithMinReplicas(-1): New = %v, want ErrInvalidArgument naming WithMinReplicas", err)
	}
	// The test node has no replica: the vote fails at once, saying why.
	c := newClient(t, cl.urls(), redquorum.WithMinReplicas(1), redquorum.WithRetryCount(0))
	l, err := c.TryLock("go:min-replicas", 5*time.Second)
	if l != nil || !errors.Is(err, redquorum.ErrNoQuorum) || !strings.Contains(err.Error(), "fewer than min_replicas 1") {
		t.Fatalf("TryLock with WithMinReplicas(1) and no replica = %v, want ErrNoQuorum naming min_replicas", err)
	}
	statuses, err := c.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(statuses[0].Warnings, "\n"), "min_replicas 1") {
		t.Errorf("NodeStatus warnings %q do not name min_replicas", statuses[0].Warnings)
	}
}
