// Package redistest runs a real redis-server for tests: on a free loopback
// port, in a temporary directory, with the append-only file on (appendonly
// yes, appendfsync everysec) so that a restart keeps the data, as in
// production.
//
// When redis-server is not installed the test is skipped with a one-line
// reason, unless the environment has CI=true: then it fails, so that CI never
// passes without having run the Redis tests.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd's process has been waited for.
	exited chan struct{}
}

// startTimeout bounds the wait for a fresh redis-server to answer PING
// (loading the append-only file included).
const startTimeout = 10 * time.Second

// Start starts a redis-server and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found on PATH (CI=true, so this fails instead of skipping): install the redis-server package")
		}
		t.Skip("redis-server not found on PATH; install the redis-server package to run this test")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.kill)
	// A free port can be taken between our probe and redis-server's bind:
	// try a few.
	for attempt := 0; ; attempt++ {
		s.port, err = freePort()
		if err == nil {
			err = s.start()
		}
		if err == nil {
			return s
		}
		if attempt == 2 {
			t.Fatalf("redistest: %v", err)
		}
	}
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns redis://host:port/0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's working directory (append-only file, log).
func (s *Server) Dir() string { return s.dir }

// Stop shuts the server down cleanly (SIGTERM: the append-only file is
// flushed) and waits for it to exit.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot shut down
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-exited
		s.t.Fatalf("redistest: redis-server on %s did not stop within %v; killed it", s.Addr(), startTimeout)
	}
}

// Restart stops the server if it runs and starts it again on the same port
// and directory, so that it reloads its append-only file. It returns when
// the server answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing
// answers, as with a hung or partitioned Redis. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: redis-server on %s is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v to redis-server: %v", sig, err)
	}
}

func (s *Server) start() error {
	logFile := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--appendonly", "yes",
		"--appendfsync", "everysec",
		"--save", "",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", logFile,
	)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := waitReady(s.Addr(), exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redis-server on %s: %w; log: %s", s.Addr(), err, tail(logFile))
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// kill ends the server at cleanup, whatever state it is in.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// waitReady waits until the server answers PING with PONG (not LOADING).
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during start-up")
		default:
		}
		if last = ping(addr); last == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %w", startTimeout, last)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of the server's log for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const n = 1000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
