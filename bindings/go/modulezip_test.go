package redquorum_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// The module as a user gets it: the zip a release publishes (scripts/go-module-zip, with
// libredlock.a inside), served by a module proxy (GOPROXY=file://), fetched by `go get` into a
// fresh module away from the repository, built and run against real nodes. No replace
// directive, no CGO_* variable, no PKG_CONFIG_PATH, no LD_LIBRARY_PATH, no libredlock
// installed: Go and a C compiler only. Then vendored (go mod vendor), as some users build.
func TestGoGetModuleZip(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the repository builds the module's library for linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	version := "v" + redquorum.Version()
	run(t, root, nil, filepath.Join(root, "scripts", "go-module-zip"), "--targets", "linux/amd64", proxy, version)

	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(app, "go.mod"), "module example.com/app\n\ngo 1.22\n")
	writeFile(t, filepath.Join(app, "main.go"), appSource)
	// A module cache of its own, so that the module comes from the zip (its files are read-only:
	// go clean -modcache removes them).
	env := []string{"GOPROXY=file://" + proxy, "GONOSUMDB=github.com/redquorum", "GOFLAGS=-mod=mod",
		"GOMODCACHE=" + filepath.Join(tmp, "modcache"), "GOWORK=off", "GOTOOLCHAIN=local"}
	t.Cleanup(func() { run(t, app, env, goBin, "clean", "-modcache") })
	run(t, app, env, goBin, "get", "github.com/redquorum/redquorum/bindings/go@"+version)
	gomod, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "github.com/redquorum/redquorum/bindings/go "+version) {
		t.Fatalf("go get did not add the module to go.mod:\n%s", gomod)
	}

	bin := filepath.Join(tmp, "app-bin")
	run(t, app, env, goBin, "build", "-o", bin, ".")
	if deps := run(t, app, nil, "ldd", bin); strings.Contains(deps, "libredlock") {
		t.Errorf("the program needs libredlock at run time:\n%s", deps)
	}
	holdWithProgram(t, bin, nil, "go:module-zip")

	run(t, app, env, goBin, "mod", "vendor")
	run(t, app, env, goBin, "build", "-mod=vendor", "-o", bin+"-vendored", ".")
}
