package redquorum

import (
	"runtime"
	"testing"
	"time"
)

// A copy of a Request keeps the C request alive after the original is collected, and
// closing both copies frees it once.
func TestRequestCopiesShareOneHandle(t *testing.T) {
	req := NewRequest("go:internal-copy", time.Second, WithWrite())
	cp := *req
	h := cp.h
	req = nil
	runtime.GC()
	runtime.GC()
	h.mu.Lock()
	live := h._ptr != nil && h.caller != nil
	h.mu.Unlock()
	if !live {
		t.Fatal("the C request was freed while a copy of its Request is reachable")
	}
	again := cp
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if h._ptr != nil || h.caller != nil || !h.closed {
		t.Fatal("Close left the C request allocated")
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	h.free() // the finalizer, had it not been cleared: nothing left to free
	if h._ptr != nil {
		t.Fatal("freed twice")
	}
}

// Only read and write locks carry an owner name to C.
func TestOnlyReadWriteRequestsCarryAnOwner(t *testing.T) {
	for _, tc := range []struct {
		opt   RequestOption
		owner bool
	}{{nil, false}, {WithFenced(), false}, {WithRead(), true}, {WithWrite(), true}, {WithSemaphore(2), false}} {
		req := NewRequest("go:internal-owner", time.Second, tc.opt)
		if (req.h.caller != nil) != tc.owner {
			t.Errorf("%v: owner name %v, want one: %v", tc.opt, req.h.caller, tc.owner)
		}
		req.Close()
	}
}

// A failed build leaves no handle, only the error for Acquire.
func TestRequestBuildFailureHasNoHandle(t *testing.T) {
	req := NewRequest("go:internal-bad", time.Second, WithFenced(), WithResources("go:other"))
	if req.h != nil || req.err == nil {
		t.Fatalf("a fenced request of two resources: handle %v, error %v", req.h, req.err)
	}
	if err := req.Close(); err != nil {
		t.Fatal(err)
	}
}
