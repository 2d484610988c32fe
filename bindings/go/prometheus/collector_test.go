package prometheus_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	redquorum "github.com/redquorum/redquorum/bindings/go"
	redlockprom "github.com/redquorum/redquorum/bindings/go/prometheus"
)

// startNode starts a redis-server ($REDLOCK_REDIS_SERVER or on PATH) on a free port in a
// temporary directory, killed when the test ends.
func startNode(t *testing.T) string {
	t.Helper()
	binary := os.Getenv("REDLOCK_REDIS_SERVER")
	if binary == "" {
		var err error
		if binary, err = exec.LookPath("redis-server"); err != nil {
			t.Fatal("redis-server not found; set REDLOCK_REDIS_SERVER")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(binary, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return "redis://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start", addr)
		}
	}
}

func TestCollectorExposesTheClientsMetrics(t *testing.T) {
	client, err := redquorum.New([]string{startNode(t)}, redquorum.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := 0; i < 2; i++ {
		l, err := client.Lock(context.Background(), "go:prometheus", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(redlockprom.NewCollector(client))
	want := `
# HELP redlock_acquisitions_total Acquisitions by outcome and kind of lock.
# TYPE redlock_acquisitions_total counter
redlock_acquisitions_total{kind="plain",outcome="acquired"} 2
# HELP redlock_locks_held Locks held now.
# TYPE redlock_locks_held gauge
redlock_locks_held 0
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want),
		"redlock_acquisitions_total", "redlock_locks_held"); err != nil {
		t.Error(err)
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"redlock_acquire_duration_seconds", "redlock_node_up", "redlock_lost_total"} {
		if !found[name] {
			t.Errorf("no %s among the gathered families", name)
		}
	}
	client.Close()
	if n, err := testutil.GatherAndCount(registry); err != nil || n != 0 {
		t.Errorf("a closed client's metrics: %d, %v", n, err)
	}
}
