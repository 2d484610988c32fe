package redquorum

// #include "redlock.h"
import "C"

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package is, or wraps, one of them (unless
// a newer libredlock returns a status this package does not know); test with errors.Is.
var (
	// ErrNotAcquired: the resource is held by another owner (for TryCampaign: another
	// candidate leads).
	ErrNotAcquired = errors.New("redlock: not acquired")
	// ErrNoQuorum: too few nodes answered (down, hung or erroring).
	ErrNoQuorum = errors.New("redlock: no quorum")
	// ErrLost: Extend or Unlock found the lock no longer ours on a quorum of nodes, or
	// Extend was called after Unlock; Resign found the leadership lost (and the cause of a
	// lost Leadership's Context wraps it).
	ErrLost = errors.New("redlock: lock lost")
	// ErrInvalidArgument: a bad URL, resource, TTL or option.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrExtensionLimit: Extend was called more than WithMaxExtensions allows; the
	// lock is still held.
	ErrExtensionLimit = errors.New("redlock: extension limit reached")
	// ErrPanic: a bug in libredlock; the call had no effect it can vouch for.
	ErrPanic = errors.New("redlock: panic in libredlock")
	// ErrIO: the operating system refused a resource, such as a thread.
	ErrIO = errors.New("redlock: operating system error")
	// ErrClosed: the Client was closed, before the call or (wrapped with ErrCancelled) while
	// it waited; or the Request was closed (wrapped with ErrInvalidArgument).
	ErrClosed = errors.New("redlock: client is closed")
	// ErrCancelled: an acquisition or a campaign ended early because its context was done or
	// its Client was closed; nothing of it is left on the nodes. The error also wraps the reason:
	// context.Canceled, context.DeadlineExceeded (and the context's cause) or ErrClosed.
	ErrCancelled = errors.New("redlock: acquisition cancelled")
	// ErrVersion: the libredlock loaded at run time is not one this package works with.
	ErrVersion = errors.New("redlock: libredlock version mismatch")
)

// Status is a status code of the C ABI (redlock_status).
type Status int

// The C status codes. Their numbers are never reused.
const (
	StatusOK              Status = C.REDLOCK_OK
	StatusNotAcquired     Status = C.REDLOCK_NOT_ACQUIRED
	StatusNoQuorum        Status = C.REDLOCK_NO_QUORUM
	StatusLost            Status = C.REDLOCK_LOST
	StatusInvalidArgument Status = C.REDLOCK_INVALID_ARGUMENT
	StatusExtensionLimit  Status = C.REDLOCK_EXTENSION_LIMIT
	StatusPanic           Status = C.REDLOCK_PANIC
	StatusIO              Status = C.REDLOCK_IO
	StatusCancelled       Status = C.REDLOCK_CANCELLED
)

// String returns the C name of the status, such as "REDLOCK_NOT_ACQUIRED", or
// "REDLOCK_UNKNOWN_STATUS".
func (s Status) String() string {
	return C.GoString(C.redlock_status_str(C.int(s)))
}

// Error is a failure reported by libredlock (or caught by this package before calling
// it): the status and the message. It unwraps to the sentinel error for its status.
type Error struct {
	Status  Status
	Message string
	// causes are further errors it wraps: for StatusCancelled, why (context.Canceled,
	// context.DeadlineExceeded, the context's cause or ErrClosed).
	causes []error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "redlock: " + e.Status.String()
	}
	return "redlock: " + e.Message
}

// Unwrap returns the sentinel error for e.Status (none for a status this version of the
// package does not know) and, for a cancelled acquisition, the reason it was cancelled, so
// errors.Is(err, context.DeadlineExceeded) and errors.Is(err, ErrClosed) work.
func (e *Error) Unwrap() []error {
	var errs []error
	if s := sentinel(e.Status); s != nil {
		errs = append(errs, s)
	}
	return append(errs, e.causes...)
}

func sentinel(s Status) error {
	switch s {
	case StatusNotAcquired:
		return ErrNotAcquired
	case StatusNoQuorum:
		return ErrNoQuorum
	case StatusLost:
		return ErrLost
	case StatusInvalidArgument:
		return ErrInvalidArgument
	case StatusExtensionLimit:
		return ErrExtensionLimit
	case StatusPanic:
		return ErrPanic
	case StatusIO:
		return ErrIO
	case StatusCancelled:
		return ErrCancelled
	}
	return nil
}

// statusError turns the result of a fallible C call into a Go error and frees cerr.
// cerr may be NULL even on failure.
func statusError(status C.enum_redlock_status, cerr *C.redlock_error) error {
	if cerr != nil {
		defer C.redlock_error_free(cerr)
	}
	if status == C.REDLOCK_OK {
		return nil
	}
	e := &Error{Status: Status(status)}
	if cerr != nil {
		e.Message = C.GoString(C.redlock_error_message(cerr))
	}
	return e
}

func invalidArgument(format string, args ...any) error {
	return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(format, args...)}
}
