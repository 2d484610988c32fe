package redquorum_test

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The module with an installed libredlock: bindings/go copied alone (as into a module cache),
// used by a program through a replace directive, built with -tags redlock_pkgconfig (no CGO_*
// flags), linked through pkg-config against a libredlock installed into a temporary prefix, and
// run against a real node. Shared and static.

// appSource takes a lock, prints it, and releases it when its stdin closes.
const appSource = `package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

func main() {
	c, err := redquorum.New(os.Args[2:], redquorum.WithNodeTimeout(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, os.Args[1], 30*time.Second, redquorum.WithWait(time.Hour))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("LOCKED %s %s\n", redquorum.Version(), l.Token())
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

func TestOutOfTreeBuild(t *testing.T) {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		if os.Getenv("REDLOCK_REQUIRE_PKGCONFIG") != "" {
			t.Fatal("pkg-config is required (REDLOCK_REQUIRE_PKGCONFIG is set) but not found")
		}
		t.Skip("pkg-config not found; set REDLOCK_REQUIRE_PKGCONFIG=1 to make this a failure")
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
	prefix := filepath.Join(tmp, "prefix")
	run(t, root, nil, filepath.Join(root, "scripts", "install"), prefix)

	// The module alone, away from the repository (no ../../include, no ../../target).
	mod := filepath.Join(tmp, "gomod", "redlock")
	copyTree(t, ".", mod)
	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(app, "go.mod"), "module example.com/app\n\ngo 1.22\n\n"+
		"require github.com/redquorum/redquorum/bindings/go v0.0.0\n\n"+
		"replace github.com/redquorum/redquorum/bindings/go => "+mod+"\n")
	writeFile(t, filepath.Join(app, "main.go"), appSource)

	env := []string{"PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib", "pkgconfig"), "GOWORK=off",
		"GOFLAGS=-mod=mod", "GOPROXY=off", "CGO_ENABLED=1"}
	for _, tc := range []struct {
		name, tags string
		runEnv     []string
	}{
		{"shared", "redlock_pkgconfig", []string{"LD_LIBRARY_PATH=" + filepath.Join(prefix, "lib")}},
		{"static", "redlock_pkgconfig,redlock_static", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(tmp, "app-"+tc.name)
			run(t, app, env, goBin, "build", "-o", bin, "-tags", tc.tags, ".")
			deps := run(t, app, tc.runEnv, "ldd", bin)
			if strings.Contains(deps, filepath.Join(root, "target")) {
				t.Errorf("the program links the repository's library:\n%s", deps)
			}
			if tc.name == "shared" && !strings.Contains(deps, filepath.Join(prefix, "lib", "libredlock.so")) {
				t.Errorf("the program does not load libredlock.so from the prefix:\n%s", deps)
			}
			if tc.name == "static" && strings.Contains(deps, "libredlock") {
				t.Errorf("a static build needs libredlock at run time:\n%s", deps)
			}
			holdWithProgram(t, bin, tc.runEnv, "go:out-of-tree-"+tc.name)
		})
	}
}

// holdWithProgram runs bin, checks that it holds resource on a quorum, and lets it release.
func holdWithProgram(t *testing.T, bin string, env []string, resource string) {
	cmd := exec.Command(bin, append([]string{resource}, shared.urls()...)...)
	cmd.Env = cleanEnv(env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the program printed no lock: %v", err)
	}
	var version, token string
	if _, err := fmt.Sscanf(line, "LOCKED %s %s", &version, &token); err != nil {
		t.Fatalf("the program printed %q: %v", line, err)
	}
	if holders := tokenHolders(t, resource, token); holders < 3 {
		t.Errorf("%d of 5 nodes hold the program's token, want a quorum", holders)
	}
	assertHeld(t, resource)
	stdin.Close()
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the program failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not exit")
	}
	assertNoKey(t, resource)
}

// run runs name in dir with the environment cleaned of build settings plus env, and returns
// its output; a failure ends the test.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanEnv is the environment without the variables that would point a build or a program
// at the repository, plus env.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CGO_ENABLED", "CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_LDFLAGS", "GOFLAGS", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "GOWORK":
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		copyFile(t, path, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
