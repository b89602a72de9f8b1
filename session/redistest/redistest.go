// Package redistest runs a real redis-server for tests: on a free loopback
// port, in a temporary directory, with the append-only file on (appendonly
// yes, appendfsync everysec) so that a restart keeps the data, as in
// production. Options turn it into a one-node Cluster or a Sentinel;
// StartCluster runs a Cluster with a replica for every primary.
//
// When redis-server is not installed the test is skipped with a one-line
// reason, unless the environment has CI=true: then it fails, so that CI never
// passes without having run the Redis tests.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	opts options

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd's process has been waited for.
	exited chan struct{}
}

// startTimeout bounds the wait for a fresh redis-server to answer PING
// (loading the append-only file included).
const startTimeout = 10 * time.Second

// Option selects a kind of server other than a plain one.
type Option func(*options)

type options struct {
	// cluster: a one-node Cluster serving every slot; clusterNode: a
	// node of a Cluster that StartCluster assembles.
	cluster, clusterNode bool
	// sentinel monitors this master under this name.
	master     *Server
	masterName string
	// primary: the server is a replica of this one.
	primary *Server
}

// Cluster makes the server a one-node Redis Cluster that serves all 16384
// slots, so that Cluster clients (MOVED handling, CROSSSLOT checks) can be
// tested against a real cluster-mode server.
func Cluster() Option { return func(o *options) { o.cluster = true } }

// ReplicaOf makes the server a replica of primary (replicaof), which a
// Sentinel of primary then finds and may promote.
func ReplicaOf(primary *Server) Option { return func(o *options) { o.primary = primary } }

// Sentinel makes the server a Sentinel that monitors master under name.
func Sentinel(master *Server, name string) Option {
	return func(o *options) { o.master, o.masterName = master, name }
}

// Start starts a redis-server and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found on PATH (CI=true, so this fails instead of skipping): install the redis-server package")
		}
		t.Skip("redis-server not found on PATH; install the redis-server package to run this test")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	for _, f := range opts {
		f(&s.opts)
	}
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
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", logFile,
	}
	switch {
	case s.opts.master != nil:
		// Sentinel rewrites its configuration file, so it needs one.
		conf := filepath.Join(s.dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil {
			// A master is judged down after 1 s, so that tests of a
			// failover need not wait Sentinel's default 30 s.
			text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 5000\n", s.opts.masterName, s.opts.master.port)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				return fmt.Errorf("write %s: %w", conf, err)
			}
		}
		args = append([]string{conf, "--sentinel"}, args...)
	default:
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "")
		if p := s.opts.primary; p != nil {
			args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(p.port))
		}
		if s.opts.cluster || s.opts.clusterNode {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		}
		if s.opts.clusterNode {
			// A primary is judged failed after 1 s, so that tests of a
			// failover need not wait the default 15 s.
			args = append(args, "--cluster-node-timeout", "1000")
		}
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	err := waitReady(s.Addr(), exited)
	if err == nil && s.opts.cluster {
		err = claimSlots(s.Addr())
	}
	if err != nil {
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
	reply, err := command(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

// claimSlots gives a one-node cluster all slots (a restarted node already
// has them in nodes.conf) and waits until the cluster reports ok.
func claimSlots(addr string) error {
	if reply, err := command(addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil && !strings.Contains(err.Error(), "already busy") {
		return fmt.Errorf("CLUSTER ADDSLOTSRANGE: %q, %w", reply, err)
	}
	return waitFor(addr, time.Now().Add(startTimeout), "cluster_state:ok", "CLUSTER", "INFO")
}

// command sends one command and returns its simple, integer or bulk string
// reply; an error reply is an error.
func command(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
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

// Nodes are the nodes of a Redis Cluster that StartCluster started:
// Primaries[i] serves an equal share of the 16384 slots and Replicas[i]
// replicates it.
type Nodes struct {
	Primaries, Replicas []*Server
}

// URL returns the store URL that names every node as a seed,
// redis+cluster://h1:p1,h2:p2,...
func (c *Nodes) URL() string {
	var addrs []string
	for _, s := range append(slices.Clone(c.Primaries), c.Replicas...) {
		addrs = append(addrs, s.Addr())
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// StartCluster starts a Redis Cluster of n primaries with one replica
// each, and returns once every node reports the cluster ok and every
// replica is in sync. A Cluster promotes a failed primary's replica only
// by a majority of the primaries, so n is at least 3. Its nodes judge a
// primary failed after 1 s. Every node stops when the test ends; a node
// restarted (Server.Restart) rejoins with the identity its nodes.conf
// keeps.
func StartCluster(t testing.TB, n int) *Nodes {
	t.Helper()
	if n < 3 {
		t.Fatalf("redistest: a Cluster of %d primaries cannot fail over; want at least 3", n)
	}
	node := func(o *options) { o.clusterNode = true }
	c := &Nodes{}
	for range n {
		c.Primaries = append(c.Primaries, Start(t, node))
		c.Replicas = append(c.Replicas, Start(t, node))
	}
	if err := c.assemble(); err != nil {
		t.Fatalf("redistest: assembling a Cluster of %d primaries: %v", n, err)
	}
	return c
}

// assemble gives each primary its slots, makes the nodes meet, attaches
// each replica to its primary and waits for the cluster and replication.
func (c *Nodes) assemble() error {
	n := len(c.Primaries)
	all := append(slices.Clone(c.Primaries), c.Replicas...)
	for i, p := range c.Primaries {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if _, err := command(p.Addr(), "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, p.Addr(), err)
		}
	}
	for _, s := range all[1:] {
		if _, err := command(s.Addr(), "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(all[0].port)); err != nil {
			return fmt.Errorf("CLUSTER MEET from %s: %w", s.Addr(), err)
		}
	}
	deadline := time.Now().Add(4 * startTimeout)
	// A replica can replicate a primary only once it knows the primary's
	// node, which gossip brings within a few node-timeout ticks.
	for i, r := range c.Replicas {
		id, err := command(c.Primaries[i].Addr(), "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", c.Primaries[i].Addr(), err)
		}
		for {
			_, err := command(r.Addr(), "CLUSTER", "REPLICATE", id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CLUSTER REPLICATE %s on %s: %w", id, r.Addr(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, s := range all {
		if err := waitFor(s.Addr(), deadline, "cluster_state:ok", "CLUSTER", "INFO"); err != nil {
			return err
		}
	}
	for _, p := range c.Primaries {
		if err := waitFor(p.Addr(), deadline, "state=online", "INFO", "replication"); err != nil {
			return err
		}
	}
	return nil
}

// waitFor sends args to addr until the reply contains want, or fails
// with the last reply at deadline.
func waitFor(addr string, deadline time.Time, want string, args ...string) error {
	for {
		reply, err := command(addr, args...)
		if err == nil && strings.Contains(reply, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on %s: no %q: %q, %v", strings.Join(args, " "), addr, want, reply, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
