package redquorum

// #include <stdint.h>
// #include "redlock.h"
// extern void redlockGoEvent(uintptr_t id, redlock_event *event);
// static void redlock_go_event(void *user, const redlock_event *event) {
//     redlockGoEvent((uintptr_t)user, (redlock_event *)event);
// }
// static enum redlock_status redlock_go_on_event(const redlock_client *client, uintptr_t id,
//                                                redlock_event_listener **out, redlock_error **err) {
//     return redlock_client_on_event(client, redlock_go_event, (void *)id, out, err);
// }
import "C"

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The client's events as slog records (WithLogger). The library calls redlockGoEvent on
// its dispatcher thread; that call only copies the event into Go memory and hands it over a
// buffered channel, without blocking (a full buffer drops the event and counts it), so no
// user code (slog handlers) runs on a libredlock thread. A goroutine per client logs what
// arrives. As for the lost signal (lost.go), C gets an integer id, never a Go pointer.

// eventBuffer is how many events wait for the logging goroutine; more are dropped.
const eventBuffer = 1024

// event is one event, copied out of the C event during the callback.
type event struct {
	name, resource, lockKind, node, reason string
	duration                               time.Duration
	hasDuration                            bool
	at                                     time.Time
}

// warningEvents are logged at slog.LevelWarn; the others at slog.LevelInfo.
var warningEvents = map[string]bool{
	"lost": true, "node_disconnected": true, "node_restarted": true,
	"node_quarantined": true, "server_warning": true,
}

// eventLog is a client's listener: the C handle, the channel and the goroutine that logs.
type eventLog struct {
	id       uintptr
	listener *C.redlock_event_listener
	events   chan event
	dropped  atomic.Uint64
	stopOnce sync.Once
}

var (
	eventsMu   sync.Mutex
	eventsNext uintptr
	eventLogs  = map[uintptr]*eventLog{}
)

// startEventLog registers a listener on the client that logs its events to logger.
func startEventLog(client *C.redlock_client, logger *slog.Logger) (*eventLog, error) {
	e := &eventLog{events: make(chan event, eventBuffer)}
	eventsMu.Lock()
	eventsNext++
	e.id = eventsNext
	eventLogs[e.id] = e
	eventsMu.Unlock()
	if err := cCall(func(cerr cErr) cStatus {
		return C.redlock_go_on_event(client, C.uintptr_t(e.id), &e.listener, cerr)
	}); err != nil {
		eventsMu.Lock()
		delete(eventLogs, e.id)
		eventsMu.Unlock()
		return nil, err
	}
	go e.run(logger)
	return e, nil
}

// stop removes the listener (once it returns the callback runs no more), then lets the
// goroutine log what is buffered and end. Safe to call more than once.
func (e *eventLog) stop() {
	if e == nil {
		return
	}
	e.stopOnce.Do(func() {
		C.redlock_event_listener_free(e.listener)
		eventsMu.Lock()
		delete(eventLogs, e.id)
		eventsMu.Unlock()
		close(e.events)
	})
}

func (e *eventLog) run(logger *slog.Logger) {
	ctx := context.Background()
	for ev := range e.events {
		level := slog.LevelInfo
		if warningEvents[ev.name] {
			level = slog.LevelWarn
		}
		if !logger.Enabled(ctx, level) {
			continue
		}
		attrs := []slog.Attr{slog.String("event", ev.name)}
		message := "redlock: " + ev.name
		if ev.resource != "" {
			attrs = append(attrs, slog.String("resource", ev.resource), slog.String("kind", ev.lockKind))
			message += " " + ev.resource
		}
		if ev.node != "" {
			attrs = append(attrs, slog.String("node", ev.node))
			message += " node " + ev.node
		}
		if ev.hasDuration {
			attrs = append(attrs, slog.Duration("duration", ev.duration))
		}
		if ev.reason != "" {
			attrs = append(attrs, slog.String("reason", ev.reason))
		}
		attrs = append(attrs, slog.Time("at", ev.at))
		logger.LogAttrs(ctx, level, message, attrs...)
	}
}

//export redlockGoEvent
func redlockGoEvent(id C.uintptr_t, ev *C.redlock_event) {
	eventsMu.Lock()
	e := eventLogs[uintptr(id)]
	eventsMu.Unlock()
	if e == nil {
		return
	}
	copied := event{
		name:     goString(C.redlock_event_name(ev)),
		resource: goString(C.redlock_event_resource(ev)),
		lockKind: goString(C.redlock_event_lock_kind(ev)),
		node:     goString(C.redlock_event_node(ev)),
		reason:   goString(C.redlock_event_reason(ev)),
		at:       time.UnixMilli(int64(C.redlock_event_unix_ms(ev))),
	}
	var ms C.uint64_t
	if C.redlock_event_duration_ms(ev, &ms) {
		copied.duration, copied.hasDuration = time.Duration(ms)*time.Millisecond, true
	}
	// The listener is freed before the channel is closed, and the free waits for a call in
	// progress: the channel is open here.
	select {
	case e.events <- copied:
	default:
		e.dropped.Add(1)
	}
}
