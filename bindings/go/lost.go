package redquorum

// #include <stdint.h>
import "C"

import "sync"

// The lost signal: the library calls redlockGoLost on its extender thread when a lock (or a
// leadership) is found lost. The C side gets a plain id, not a Go pointer, and the id is looked
// up here, so a callback that races with Unlock or Resign (which forget the id) finds nothing
// and does nothing. What runs is quick and never blocks: the extender thread serves every
// auto-extended lock of the client.

var (
	lostMu    sync.Mutex
	lostNext  uintptr
	lostFuncs = map[uintptr]func(){}
)

type lostSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *lostSignal) fire() { s.once.Do(func() { close(s.ch) }) }

// registerLost returns the id under which the library's lost callback runs f.
func registerLost(f func()) uintptr {
	lostMu.Lock()
	defer lostMu.Unlock()
	lostNext++
	lostFuncs[lostNext] = f
	return lostNext
}

func forgetLost(id uintptr) {
	lostMu.Lock()
	defer lostMu.Unlock()
	delete(lostFuncs, id)
}

//export redlockGoLost
func redlockGoLost(id C.uintptr_t) {
	lostMu.Lock()
	f := lostFuncs[uintptr(id)]
	lostMu.Unlock()
	if f != nil {
		f()
	}
}
