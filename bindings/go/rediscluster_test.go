package redquorum_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// A whole Redis Cluster is one node (redis+cluster://): the URL goes through the core's
// builder like any other, so one lock on a single-master cluster is what is checked here
// (3-master clusters and failovers are tested in the Rust suite, tests/cluster.rs).
func TestClusterURLIsOneNode(t *testing.T) {
	bus, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{dir: t.TempDir(), extra: []string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus)}}
	if err := nd.startOnFreePort(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nd.kill)
	if reply, err := redisCommand(nd.addr(), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil || reply != "OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %q %v", reply, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := redisCommand(nd.addr(), "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not become ready: %q %v", info, err)
		}
	}

	c, err := redquorum.New([]string{"redis+cluster://" + nd.addr()}, patient...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	statuses, err := c.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	if s := statuses[0]; s.Address != "cluster:"+nd.addr() || s.Master != nd.addr() || !s.Connected {
		t.Fatalf("node status: %+v", s)
	}
	l, err := c.TryLock("go:cluster", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := nd.get(t, "go:cluster"); v != l.Token() {
		t.Fatalf("the key holds %q, not the token", v)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(c, "go:a", 5*time.Second, redquorum.WithResources("go:b"), redquorum.WithOnce()); !errors.Is(err, redquorum.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "hash slot") {
		t.Fatalf("resources in two slots: %v", err)
	}
	if _, err := redquorum.New([]string{"redis+cluster://127.0.0.1:1/3"}, patient...); !errors.Is(err, redquorum.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "only database 0") {
		t.Fatalf("a bad cluster URL: %v", err)
	}

	// WithMinReplicas on a cluster node: each master needs that many replicas, and this one
	// has none, so the vote fails at once, naming it.
	ac, err := redquorum.New([]string{"redis+cluster://" + nd.addr()}, redquorum.WithNodeTimeout(time.Second),
		redquorum.WithMinReplicas(1), redquorum.WithRetryCount(0))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if l, err := ac.TryLock("go:cluster-acked", 5*time.Second); l != nil || !errors.Is(err, redquorum.ErrNoQuorum) ||
		!strings.Contains(err.Error(), "master "+nd.addr()+" of the cluster has 0 replicas") {
		t.Fatalf("TryLock with WithMinReplicas(1) on a cluster without replicas = %v, want ErrNoQuorum naming the master", err)
	}
}
