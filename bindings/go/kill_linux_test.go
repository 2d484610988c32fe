package redquorum_test

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill the node when the test binary dies, even by a
// panic or a -timeout, which skip TestMain's cleanup.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
