package redquorum_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// The tests run against real redis-server processes started here: free ports, a temp
// dir, no persistence; never a pre-running server or a fixed port.

var (
	redisServer string            // path of the redis-server binary
	shared      *cluster          // five nodes for the tests that do not break nodes
	observer    *redquorum.Client // a connected client on shared, to check who holds what
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests is TestMain's body, so that its deferred cleanup runs before os.Exit.
func runTests(m *testing.M) int {
	redisServer = os.Getenv("REDLOCK_REDIS_SERVER")
	if redisServer == "" {
		var err error
		if redisServer, err = exec.LookPath("redis-server"); err != nil {
			fmt.Fprintln(os.Stderr, "redis-server not found; set REDLOCK_REDIS_SERVER:", err)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "redlock-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = startCluster(dir, 5)
	defer shared.stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if observer, err = connectedClient(shared.urls()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer observer.Close()
	return m.Run()
}

// connectedClient returns a client whose workers have connected to the nodes.
func connectedClient(urls []string) (*redquorum.Client, error) {
	c, err := redquorum.New(urls, redquorum.WithNodeTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	l, err := c.Lock(context.Background(), "go:warm-up", time.Second)
	if err == nil {
		err = l.Unlock()
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("warming up a client: %w", err)
	}
	return c, nil
}

type cluster struct{ nodes []*node }

// startCluster starts n nodes in subdirectories of dir. On error it returns the nodes
// started so far, for the caller to kill.
func startCluster(dir string, n int) (*cluster, error) {
	c := &cluster{}
	for i := range n {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.Mkdir(nodeDir, 0o700); err != nil {
			return c, err
		}
		nd := &node{dir: nodeDir}
		if err := nd.startOnFreePort(); err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// newCluster starts a cluster of n nodes that lives until the end of the test.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c, err := startCluster(t.TempDir(), n)
	t.Cleanup(c.stop)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) urls() []string {
	urls := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		urls[i] = "redis://" + nd.addr()
	}
	return urls
}

// stop ends every node and lets their ports go.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		nd.kill()
		nd.releasePort()
	}
}

type node struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	extra  []string      // more redis-server arguments
	// While killed, the port bound without listening (see reservePort).
	reserved *os.File
}

func (nd *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

func (nd *node) startOnFreePort() error {
	var err error
	// Another process may take the port between freePort and redis-server's bind.
	for range 5 {
		if nd.port, err = freePort(); err != nil {
			return err
		}
		if err = nd.start(); err == nil {
			return nil
		}
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on nd.port and waits until it answers INFO as the process started.
func (nd *node) start() error {
	nd.releasePort()
	logPath := filepath.Join(nd.dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"--save", "", "--appendonly", "no",
		"--port", strconv.Itoa(nd.port), "--bind", "127.0.0.1", "--dir", nd.dir}
	cmd := exec.Command(redisServer, append(args, nd.extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(nd.exited)

	for deadline := time.Now().Add(10 * time.Second); ; {
		// Ours, not another process's server that took the port first (ours then exits on
		// the bind, and the select below says so).
		reply, err := redisCommand(nd.addr(), "INFO", "server")
		if err == nil && strings.Contains(reply, fmt.Sprintf("process_id:%d\r", cmd.Process.Pid)) {
			return nil
		}
		select {
		case <-nd.exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis-server on port %d exited: %s", nd.port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			nd.kill()
			return fmt.Errorf("redis-server on port %d does not answer INFO as our process %d: %v", nd.port, cmd.Process.Pid, err)
		}
	}
}

// kill sends SIGKILL (which also ends a stopped process) and waits for the exit. The port
// then refuses connections until restart.
func (nd *node) kill() {
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Kill()
	<-nd.exited
	nd.cmd = nil
	nd.reservePort()
}

// reservePort binds a killed node's port without listening: a connection to it is refused,
// as to any dead server, and no other test's node starts on it (suites run at once, each
// taking free ports from bind(0), which skips a bound port). With SO_REUSEADDR, as
// redis-server binds, so that connections left in TIME_WAIT do not stop it.
func (nd *node) reservePort() {
	nd.releasePort()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "reserved port")
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if syscall.Bind(fd, &syscall.SockaddrInet4{Port: nd.port, Addr: [4]byte{127, 0, 0, 1}}) != nil {
		f.Close()
		return
	}
	nd.reserved = f
}

func (nd *node) releasePort() {
	if nd.reserved != nil {
		nd.reserved.Close()
		nd.reserved = nil
	}
}

// restart starts a killed node again on its old port, empty (no persistence).
func (nd *node) restart(t *testing.T) {
	t.Helper()
	if err := nd.start(); err != nil {
		t.Fatal(err)
	}
}

// stop hangs the node with SIGSTOP (its connections stay open, unanswered) until cont;
// the test's cleanup continues it in any case.
func (nd *node) stop(t *testing.T) {
	t.Helper()
	if err := nd.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.cont(t) })
}

func (nd *node) cont(t *testing.T) {
	t.Helper()
	if nd.cmd == nil {
		return
	}
	if err := nd.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// get returns the value of key on the node, and whether it exists.
func (nd *node) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	reply, err := redisCommand(nd.addr(), "GET", key)
	if errors.Is(err, errNil) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return reply, true
}

var errNil = errors.New("nil reply")

// subscribers returns how many clients of the node listen on channel (PUBSUB NUMSUB).
func (nd *node) subscribers(t *testing.T, channel string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", nd.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$%d\r\n%s\r\n", len(channel), channel)
	// The reply: *2, $len, the channel name, :count.
	r := bufio.NewReader(conn)
	var lines [4]string
	for i := range lines {
		if lines[i], err = r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if lines[0] != "*2\r\n" || !strings.HasPrefix(lines[3], ":") {
		t.Fatalf("PUBSUB NUMSUB %s: unexpected reply %q", channel, lines)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[3][1:]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// redisCommand sends one command over a fresh connection and reads a simple string,
// bulk string or integer reply; a nil bulk string is errNil.
func redisCommand(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+', ':':
		return rest, nil
	case '-':
		return "", fmt.Errorf("redis error: %s", rest)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", errNil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
