package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
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
		ml, ok := parseMonitorLine(line)
		if !ok {
			continue
		}
		m.mu.Lock()
		switch {
		case ml.cmd == "echo" && strings.HasPrefix(ml.arg(), "loadtest-mark-"):
			m.marks[ml.arg()] = true
		case ml.cmd == "info" || ml.cmd == "echo":
		case ml.src == "lua":
			m.script[ml.cmd]++
		case turnLogKey(ml.key()):
			m.client[ml.cmd+" (turn log)"]++
		default:
			m.client[ml.cmd]++
		}
		m.mu.Unlock()
	}
}

// monitorLine is one command as MONITOR shows it.
type monitorLine struct {
	// src is "lua" for a command a script ran, else the client's address.
	src string
	// cmd is the command's name in lower case.
	cmd string
	// args are the words after the name, unquoted.
	args []string
}

// arg is the command's first argument, or "".
func (l monitorLine) arg() string {
	if len(l.args) > 0 {
		return l.args[0]
	}
	return ""
}

// key is the first key the command names: the one after EVALSHA's script
// and key count, otherwise the first argument.
func (l monitorLine) key() string {
	switch l.cmd {
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
		if len(l.args) > 2 && l.args[1] != "0" {
			return l.args[2]
		}
		return ""
	}
	return l.arg()
}

// parseMonitorLine reads `+1700000000.123456 [0 127.0.0.1:5555] "HGET" "k"`.
// Redis quotes each word as a C string (\", \\, \n, \xHH ...), which is
// also Go's syntax, so strconv unquotes them: a key with a quote in it
// stays one word.
func parseMonitorLine(line string) (monitorLine, bool) {
	i := strings.IndexByte(line, '[')
	j := strings.IndexByte(line, ']')
	if i < 0 || j < i {
		return monitorLine{}, false
	}
	var l monitorLine
	_, l.src, _ = strings.Cut(line[i+1:j], " ")
	var words []string
	rest := line[j+1:]
	for {
		k := strings.IndexByte(rest, '"')
		if k < 0 {
			break
		}
		q, err := strconv.QuotedPrefix(rest[k:])
		if err != nil {
			break
		}
		w, err := strconv.Unquote(q)
		if err != nil {
			break
		}
		words = append(words, w)
		rest = rest[k+len(q):]
	}
	if len(words) == 0 || words[0] == "" {
		return monitorLine{}, false
	}
	l.cmd, l.args = strings.ToLower(words[0]), words[1:]
	return l, true
}

// turnLogKey tells the turn log's keys (agentdock serve gives it the
// session store's prefix plus ":turns") from the session store's.
func turnLogKey(key string) bool { return strings.Contains(key, ":turns:{") }

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
