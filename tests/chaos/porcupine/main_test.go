package main

import "testing"

// TestMadeUpHistories: each made-up history of selftest.go gets its known verdict (the chaos
// harness runs the same check through -self-test before each run).
func TestMadeUpHistories(t *testing.T) {
	for _, f := range runSelfTest() {
		t.Error(f)
	}
}
