package redquorum

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// The cgo boundary. Every file of the package that calls libredlock keeps these rules:
//
//   - Each C handle has one Go owner: Client (redlock_client), Lock (redlock_lock),
//     requestHandle (redlock_request), callCancel (redlock_cancel), Election
//     (redlock_election), Leadership (redlock_leadership), the goroutine of an Observe
//     (redlock_observer); a redlock_leader is copied into a Leader and freed at once. The
//     owner frees it once, in Close, Unlock or Resign (the observer's goroutine, when it
//     ends), and a finalizer frees it as a backstop when the owner becomes unreachable
//     first. A public type that may be copied (Request) does not own the handle itself but
//     points to an owner, so that a copy shares the handle instead of freeing it.
//   - runtime.KeepAlive(owner) follows every C call that uses the owner's handle: without it
//     the owner may be unreachable, and finalized, while C still runs with the handle.
//   - A handle used by blocking calls on several goroutines is freed only once the last of
//     them has returned (the owner counts them), never under a mutex held during a blocking
//     call.
//   - Every C.CString is freed by a defer in the function that made it (C.free, or the free
//     function cStrings returns), except one kept for the life of a handle (a request's
//     owner name), which the handle's owner frees with the handle. Go strings are checked
//     (cName) before they become C strings: a NUL byte would cut them short.
//   - Strings that libredlock returns are borrowed from their handle: goString copies them
//     before the handle goes.
//   - No Go pointer is kept by C: the lost callback gets an integer id (lost.go).
//   - A fallible call goes through cCall, which turns the status and the error out-parameter
//     into a Go error and frees the C error.

// cErr and cStatus spell the signature of a fallible C call: it returns a status and writes
// an error to its last argument.
type (
	cErr    = **C.redlock_error
	cStatus = C.enum_redlock_status
)

// cCall runs one fallible C call and returns its failure as an *Error (nil on success).
func cCall(call func(cerr cErr) cStatus) error {
	var cerr *C.redlock_error
	return statusError(call(&cerr), cerr)
}

// cStep is one fallible C call of a list that configures a handle (options, a request).
type cStep struct {
	on   bool // whether the setting is given; the steps that are not are skipped
	call func(cerr cErr) cStatus
}

// cSteps runs the steps that are on, in order, up to the first failure.
func cSteps(steps ...cStep) error {
	for _, s := range steps {
		if s.on {
			if err := cCall(s.call); err != nil {
				return err
			}
		}
	}
	return nil
}

// goString copies a C string; NULL is "".
func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// cName checks a Go string that becomes a C name (resource, owner, token): not empty, no NUL
// byte (C would cut it there) and UTF-8 (libredlock refuses anything else).
func cName(what, name string) error {
	switch {
	case name == "":
		return invalidArgument("empty %s", what)
	case strings.IndexByte(name, 0) >= 0:
		return invalidArgument("%s %q contains a NUL byte", what, name)
	case !utf8.ValidString(name):
		return invalidArgument("%s %q is not UTF-8", what, name)
	}
	return nil
}

// cStrings makes C copies of names; free releases them all.
func cStrings(names []string) (ptrs []*C.char, free func()) {
	ptrs = make([]*C.char, len(names))
	for i, name := range names {
		ptrs[i] = C.CString(name)
	}
	return ptrs, func() {
		for _, p := range ptrs {
			C.free(unsafe.Pointer(p))
		}
	}
}

// millis converts a duration setting to whole milliseconds, rounding up so that a positive
// duration never becomes 0 (which libredlock reads as "none" or "the default"); a negative
// one is 0.
func millis(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return C.uint64_t(ms)
}

// ttlMillis converts a TTL to whole milliseconds, rounding down so that a lock never lives
// longer than asked. libredlock checks the range, and its error says what it accepts (a TTL
// under a millisecond is 0 ms).
func ttlMillis(ttl time.Duration) (C.uint64_t, error) {
	if ttl < 0 {
		return 0, invalidArgument("TTL %v is negative", ttl)
	}
	return C.uint64_t(ttl / time.Millisecond), nil
}
