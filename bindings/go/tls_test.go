package redquorum_test

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// makePKI writes a test CA and a server certificate for 127.0.0.1 into dir with the
// openssl CLI, or skips the test when openssl is missing.
func makePKI(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not found: cannot make test certificates")
	}
	ext := "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n" +
		"subjectAltName=IP:127.0.0.1,DNS:localhost\n"
	if err := os.WriteFile(filepath.Join(dir, "server.ext"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	for _, args := range [][]string{
		append(append([]string{"req", "-x509"}, ec...), "-keyout", "ca.key", "-out", "ca.crt",
			"-days", "2", "-subj", "/CN=redlock test CA"),
		append(append([]string{"req"}, ec...), "-keyout", "server.key", "-out", "server.csr",
			"-subj", "/CN=localhost"),
		{"x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
			"-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext"},
	} {
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// startTLSNode starts a node that also serves TLS, and returns it with its TLS port; it
// skips the test when this redis-server cannot serve TLS.
func startTLSNode(t *testing.T, dir string) (*node, int) {
	t.Helper()
	var lastErr error
	for range 3 { // the free TLS port can be taken before redis-server binds it
		tlsPort, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{dir: dir, extra: []string{
			"--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", filepath.Join(dir, "server.crt"),
			"--tls-key-file", filepath.Join(dir, "server.key"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"),
			"--tls-auth-clients", "no",
		}}
		if lastErr = nd.startOnFreePort(); lastErr == nil {
			t.Cleanup(nd.kill)
			return nd, tlsPort
		}
	}
	t.Skipf("redis-server does not serve TLS here: %v", lastErr)
	return nil, 0
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	makePKI(t, dir)
	nd, tlsPort := startTLSNode(t, dir)
	url := "rediss://127.0.0.1:" + strconv.Itoa(tlsPort)
	ca := filepath.Join(dir, "ca.crt")

	c := newClient(t, []string{url}, redquorum.WithNodeTimeout(time.Second), redquorum.WithTLSCAFile(ca))
	l := mustLock(t, c, "go:tls", 10*time.Second)
	if got, _ := nd.get(t, "go:tls"); got != l.Token() {
		t.Fatalf("node holds %q, want the lock's token %q", got, l.Token())
	}
	if err := l.Extend(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, held := nd.get(t, "go:tls"); held {
		t.Fatal("the key is still there after Unlock")
	}

	// Without the CA the system roots do not trust the test CA: a clear error, no hang.
	plain := newClient(t, []string{url}, redquorum.WithNodeTimeout(time.Second))
	_, err := plain.TryLock("go:tls:untrusted", 10*time.Second)
	if !errors.Is(err, redquorum.ErrNoQuorum) {
		t.Fatalf("want ErrNoQuorum, got %v", err)
	}
	for _, want := range []string{"127.0.0.1:" + strconv.Itoa(tlsPort), "certificate", "TLS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// A URL error never quotes the URL, which may carry a password.
	_, err = redquorum.New([]string{"rediss://:go-secret-pw@127.0.0.1:1\x00"})
	assertInvalid(t, "URL with NUL", err)
	if strings.Contains(err.Error(), "go-secret-pw") {
		t.Errorf("password shown: %v", err)
	}

	// Bad TLS options are invalid arguments.
	for what, opts := range map[string][]redquorum.ClientOption{
		"missing CA file":      {redquorum.WithTLSCAFile(filepath.Join(dir, "missing.crt"))},
		"NUL in CA file":       {redquorum.WithTLSCAFile("ca\x00.crt")},
		"cert without key":     {redquorum.WithTLSCAFile(ca), redquorum.WithTLSClientCertFile(ca, "")},
		"CA without rediss://": {redquorum.WithTLSCAFile(ca)},
	} {
		urls := []string{url}
		if what == "CA without rediss://" {
			urls = []string{"redis://" + nd.addr()}
		}
		c, err := redquorum.New(urls, opts...)
		if c != nil {
			c.Close()
		}
		assertInvalid(t, what, err)
	}
}

// TestInsecureWarns: a URL ending in #insecure accepts any certificate, never silently: a
// warning in the node's status, and a Warn record of the logger.
func TestInsecureWarns(t *testing.T) {
	dir := t.TempDir()
	makePKI(t, dir)
	_, tlsPort := startTLSNode(t, dir)
	url := "rediss://127.0.0.1:" + strconv.Itoa(tlsPort) + "/#insecure"
	h := &records{}
	c := newClient(t, []string{url}, redquorum.WithNodeTimeout(time.Second), redquorum.WithLogger(slog.New(h)))
	if err := mustLock(t, c, "go:tls:insecure", 10*time.Second).Unlock(); err != nil {
		t.Fatal(err)
	}
	statuses, err := c.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	if w := statuses[0].Warnings; len(w) == 0 || !strings.Contains(strings.Join(w, "; "), "#insecure") {
		t.Errorf("node status warnings %q do not name #insecure", w)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		var warned *slog.Record
		for i, rec := range h.list {
			if a := attrs(rec); a["event"].String() == "server_warning" &&
				strings.Contains(a["reason"].String(), "#insecure") {
				warned = &h.list[i]
			}
		}
		h.mu.Unlock()
		if warned != nil {
			if warned.Level != slog.LevelWarn {
				t.Errorf("the #insecure record is at %v, want Warn", warned.Level)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no server_warning record names #insecure")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
