package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// monitor counts the commands Redis runs, through MONITOR, split into
// those clients sent (round trips) and those Lua scripts ran inside
// EVALSHA; INFO commandstats counts both alike.
type monitor struct {
	conn net.Conn
	done chan struct{}

	mu             sync.Mutex
	client, script map[string]int64
	marks          map[string]bool
	err            error
}

func startMonitor(ctx context.Context, addr string) (*monitor, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("MONITOR: %w", err)
	}
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		c.Close()
		return nil, fmt.Errorf("MONITOR: %w", err)
	}
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ok, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(ok) != "+OK" {
		c.Close()
		return nil, fmt.Errorf("MONITOR answered %q: %v", ok, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	m := &monitor{conn: c, done: make(chan struct{}), client: map[string]int64{}, script: map[string]int64{}, marks: map[string]bool{}}
	go m.read(r)
	return m, nil
}

func (m *monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		src, cmd, arg, ok := parseMonitorLine(line)
		if !ok {
			continue
		}
		m.mu.Lock()
		switch {
		case cmd == "echo" && strings.HasPrefix(arg, "loadtest-mark-"):
			m.marks[arg] = true
		case cmd == "info" || cmd == "echo":
		case src == "lua":
			m.script[cmd]++
		default:
			m.client[cmd]++
		}
		m.mu.Unlock()
	}
}

// parseMonitorLine reads `+1700000000.123456 [0 127.0.0.1:5555] "HGET" "k"`
// into the source ("lua" or the client's address), the lower-case command
// and its first argument.
func parseMonitorLine(line string) (src, cmd, arg string, ok bool) {
	line = strings.TrimRight(line, "\r\n")
	i := strings.IndexByte(line, '[')
	j := strings.IndexByte(line, ']')
	if i < 0 || j < i {
		return "", "", "", false
	}
	_, src, _ = strings.Cut(line[i+1:j], " ")
	rest := strings.TrimSpace(line[j+1:])
	parts := strings.SplitN(rest, "\"", 5)
	// parts: "", CMD, " ", ARG, ...
	if len(parts) < 3 || parts[1] == "" {
		return "", "", "", false
	}
	cmd = strings.ToLower(parts[1])
	if len(parts) >= 4 {
		arg = parts[3]
	}
	return src, cmd, arg, true
}

// sync waits until MONITOR has shown every command sent before it: it sends
// a marked ECHO and waits for it.
func (m *monitor) sync(ctx context.Context, rc *redis.Client, n int) error {
	mark := fmt.Sprintf("loadtest-mark-%d", n)
	if err := rc.Echo(ctx, mark).Err(); err != nil {
		return fmt.Errorf("ECHO: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		seen, err := m.marks[mark], m.err
		m.mu.Unlock()
		switch {
		case seen:
			return nil
		case err != nil:
			return fmt.Errorf("MONITOR: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("MONITOR did not show %s within 10s", mark)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// take returns the counts so far and starts new ones.
func (m *monitor) take() (client, script map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	client, script = m.client, m.script
	m.client, m.script = map[string]int64{}, map[string]int64{}
	return client, script
}

func (m *monitor) close() {
	m.conn.Close()
	<-m.done
}
