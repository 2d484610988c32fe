//go:build !linux

package redquorum_test

import "os/exec"

// killWithParent has no equivalent of Linux's Pdeathsig here: a node outlives a test
// binary that dies without running TestMain's cleanup.
func killWithParent(*exec.Cmd) {}
