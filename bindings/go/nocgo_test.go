package redquorum_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Without cgo the build stops on a name that says what to do (Go prints no error message of a
// package's own), not on an undefined function of the package.
func TestBuildWithoutCgoNamesTheFix(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "./...")
	cmd.Env = cleanEnv([]string{"CGO_ENABLED=0", "GOWORK=off"})
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the package builds without cgo:\n%s", out)
	}
	const name = "redquorum_requires_cgo_set_CGO_ENABLED_1_and_a_C_compiler"
	if !strings.Contains(string(out), name) {
		t.Errorf("the build without cgo does not name %s:\n%s", name, out)
	}
}
