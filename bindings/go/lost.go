package redlock

// #include <stdint.h>
import "C"

import "sync"

// The lost signal: the library calls redlockGoLost on its extender thread when a lock is
// found lost. The C side gets a plain id, not a Go pointer, and the id is looked up here, so
// a callback that races with Unlock (which forgets the id) finds nothing and does nothing.

var (
	lostMu      sync.Mutex
	lostNext    uintptr
	lostSignals = map[uintptr]*lostSignal{}
)

type lostSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *lostSignal) fire() { s.once.Do(func() { close(s.ch) }) }

func registerLost(s *lostSignal) uintptr {
	lostMu.Lock()
	defer lostMu.Unlock()
	lostNext++
	lostSignals[lostNext] = s
	return lostNext
}

func forgetLost(id uintptr) {
	lostMu.Lock()
	defer lostMu.Unlock()
	delete(lostSignals, id)
}

//export redlockGoLost
func redlockGoLost(id C.uintptr_t) {
	lostMu.Lock()
	s := lostSignals[uintptr(id)]
	lostMu.Unlock()
	if s != nil {
		s.fire()
	}
}
