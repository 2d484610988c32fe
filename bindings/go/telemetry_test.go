package redquorum_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// records is a slog.Handler that keeps every record it is handed.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}

func attrs(rec slog.Record) map[string]slog.Value {
	m := map[string]slog.Value{}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
	return m
}

// waitFor returns the first record of event on resource, waiting up to 10 s for it.
func (r *records) waitFor(t *testing.T, event, resource string) (slog.Record, map[string]slog.Value) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for _, rec := range r.list {
			a := attrs(rec)
			if a["event"].String() == event && a["resource"].String() == resource {
				r.mu.Unlock()
				return rec, a
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s record for %q", event, resource)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLoggerReceivesEvents: lock events become slog records with their attributes, at Info,
// and a lost lock at Warn with its reason.
func TestLoggerReceivesEvents(t *testing.T) {
	h := &records{}
	c := newClient(t, shared.urls(), redquorum.WithNodeTimeout(time.Second), redquorum.WithLogger(slog.New(h)))
	resource := "go:telemetry:events"
	l := mustLock(t, c, resource, 10*time.Second)
	if err := l.Extend(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	acquired, a := h.waitFor(t, "acquired", resource)
	if acquired.Level != slog.LevelInfo || a["kind"].String() != "plain" {
		t.Errorf("acquired record: level %v, attrs %v", acquired.Level, a)
	}
	if d, ok := a["duration"]; !ok || d.Kind() != slog.KindDuration {
		t.Errorf("acquired record without a duration: %v", a)
	}
	if at := a["at"].Time(); time.Since(at) > time.Minute || time.Until(at) > time.Minute {
		t.Errorf("acquired at %v, not about now", at)
	}
	if _, ok := a["node"]; ok {
		t.Errorf("a lock event with a node: %v", a)
	}
	if !strings.Contains(acquired.Message, resource) {
		t.Errorf("message %q does not name the resource", acquired.Message)
	}
	h.waitFor(t, "extended", resource)
	if released, _ := h.waitFor(t, "released", resource); released.Level != slog.LevelInfo {
		t.Errorf("released at %v", released.Level)
	}

	lostResource := "go:telemetry:lost"
	err := c.WithLock(context.Background(), lostResource, 3*time.Second, func(l *redquorum.Lock) error {
		deleteOnMajority(t, lostResource)
		select {
		case <-l.Lost():
		case <-time.After(10 * time.Second):
			t.Error("Lost() not closed after the keys vanished on a majority")
		}
		return nil
	})
	if !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("WithLock = %v, want ErrLost", err)
	}
	lost, a := h.waitFor(t, "lost", lostResource)
	if lost.Level != slog.LevelWarn || a["reason"].String() != "refused" {
		t.Errorf("lost record: level %v, attrs %v", lost.Level, a)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Lost["refused"] != 1 || s.LocksHeld != 0 {
		t.Errorf("after a lost lock: Lost %v, LocksHeld %d", s.Lost, s.LocksHeld)
	}
}

// TestStatsCountOperations: the counters match what was done, and the Prometheus text
// carries them without resource names.
func TestStatsCountOperations(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	resource := "go:telemetry:stats"
	var held []*redquorum.Lock
	for _, suffix := range []string{":0", ":1", ":2"} {
		held = append(held, mustLock(t, c, resource+suffix, 10*time.Second))
	}
	if _, err := c.TryLock(resource+":0", 10*time.Second); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Fatalf("TryLock on a held resource = %v", err)
	}
	if err := held[1].Extend(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"acquired": 3, "refused": 1, "no_quorum": 0, "cancelled": 0, "error": 0}
	for outcome, n := range want {
		if s.Acquisitions[outcome] != n {
			t.Errorf("Acquisitions[%s] = %d, want %d", outcome, s.Acquisitions[outcome], n)
		}
	}
	if s.LocksHeld != 3 || s.Extensions != 1 || s.Waiters != 0 || s.EventsDropped != 0 {
		t.Errorf("stats %+v", s)
	}
	if !strings.Contains(s.Prometheus, `redlock_acquisitions_total{outcome="acquired",kind="plain"} 3`+"\n") {
		t.Errorf("Prometheus text without the acquisitions:\n%s", s.Prometheus)
	}
	if strings.Contains(s.Prometheus, resource) {
		t.Error("a resource name in the Prometheus text")
	}
	for _, l := range held {
		l.Unlock()
	}
	if s, _ := c.Stats(); s.LocksHeld != 0 {
		t.Errorf("LocksHeld after Unlock = %d", s.LocksHeld)
	}
	c.Close()
	if _, err := c.Stats(); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
	var nilClient *redquorum.Client
	if _, err := nilClient.Stats(); !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("Stats on nil = %v", err)
	}
}

// TestLoggerAndCloseRace: clients closed while their events are being logged, from several
// goroutines, with a handler that calls back into the client; run under -race.
func TestLoggerAndCloseRace(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				h := &records{}
				c, err := redquorum.New(shared.urls(), redquorum.WithNodeTimeout(time.Second), redquorum.WithLogger(slog.New(h)))
				if err != nil {
					t.Error(err)
					return
				}
				for j := 0; j < 5; j++ {
					if l, err := c.Lock(context.Background(), "go:telemetry:race:"+string(rune('a'+g)), 10*time.Second); err == nil {
						l.Unlock()
					}
				}
				c.Stats()
				c.Close()
			}
		}(g)
	}
	wg.Wait()
}
