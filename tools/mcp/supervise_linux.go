package mcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/agentdock-go/agentdock/internal/proc"
)

// A stdio server runs under a supervisor on Linux: this same executable,
// started again with supervisorEnv set, which starts the server and ends
// every process descended from it (setsid ones included) when the server
// exits, when the runtime closes it, or when the runtime dies, even by
// SIGKILL. A process cannot run code once SIGKILLed, so the one that cleans
// up must be another: the supervisor, which outlives the runtime just long
// enough. It learns that the runtime is gone from its lifeline, a pipe
// whose only writer is the runtime: the kernel closes it when the runtime
// dies, however it dies. It is the subreaper of the server's tree
// (PR_SET_CHILD_SUBREAPER), so an orphan, a daemon that forked twice or
// called setsid, is reparented to it instead of init and stays in reach.
//
// What it cannot end: a process that left the tree another way (started
// by a service manager or D-Bus on the server's request), one running as
// another user, and anything left when the supervisor itself is SIGKILLed
// (the server then gets SIGKILL from the kernel, its parent-death signal,
// but its own children are orphaned). docs/mcp.md says so.

// supervisorEnv marks a process started as a supervisor; its value is the
// lifeline's file descriptor.
const supervisorEnv = "AGENTDOCK_MCP_SUPERVISOR"

// supervisorName is the supervisor's argv[0], as ps shows it.
const supervisorName = "agentdock-mcp-supervisor"

// termGrace is how long the supervisor waits, after passing SIGTERM on,
// before it kills the tree: less than the SDK's wait before its own
// SIGKILL (terminateAfter), so that the supervisor is never killed first.
const termGrace = time.Second

// treeDeadline bounds the supervisor's work of ending the tree.
const treeDeadline = 5 * time.Second

func init() {
	// Before main, and before the rest of the program's start-up: a
	// supervisor is a different program that shares this executable.
	if fd := os.Getenv(supervisorEnv); fd != "" {
		os.Exit(superviseMain(fd, os.Args[1:]))
	}
}

// supervised returns the command that runs cmd under a supervisor, and
// the lifeline: the runtime keeps the writer and closes it to end the
// server's tree; the reader must be closed once the supervisor started.
// cmd.Path must be resolved already. The supervisor takes cmd's
// directory, environment and stderr; it is its process group's leader.
func supervised(cmd *exec.Cmd) (sup *exec.Cmd, lifeline, childEnd *os.File, err error) {
	// /proc/self/exe is this executable even when its file was replaced
	// or removed since it started (an upgrade in place).
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return nil, nil, nil, fmt.Errorf("finding this executable to supervise the server: %w", err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("making the supervisor's lifeline: %w", err)
	}
	sup = &exec.Cmd{
		Path:       exe,
		Args:       append([]string{supervisorName, cmd.Path}, cmd.Args[1:]...),
		Dir:        cmd.Dir,
		Env:        append(cmd.Env[:len(cmd.Env):len(cmd.Env)], supervisorEnv+"=3"),
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{r}, // fd 3
		// Its own group, as the server had: Ctrl-C in the runtime's
		// terminal reaches the runtime only, and the group can be killed
		// as a last resort. No parent-death signal: it must outlive the
		// runtime to end the tree.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	return sup, w, r, nil
}

// superviseMain is the supervisor: it runs argv with the supervisor's
// stdin, stdout and stderr and ends the tree as said above. It returns the
// server's exit code (128+signal when a signal ended it).
func superviseMain(lifelineFD string, argv []string) int {
	os.Unsetenv(supervisorEnv)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, supervisorName+": "+format+"\n", args...)
		return 127
	}
	fd, err := strconv.Atoi(lifelineFD)
	if err != nil || len(argv) == 0 {
		return fail("started without a lifeline or a command")
	}
	syscall.CloseOnExec(fd) // the server must not hold the runtime's pipe
	lifeline := os.NewFile(uintptr(fd), "lifeline")
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fail("becoming the subreaper of the server's processes: %v", errno)
	}
	// Notified before the server starts, so that no SIGCHLD or SIGTERM is
	// missed.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Same group as the supervisor (the runtime's last resort kills it),
	// and killed by the kernel if the supervisor is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	// The server holds the stdio pipes now: the supervisor's copies must
	// not keep them open after it, or the runtime would not see the
	// server's stdout end.
	if null, err := os.Open(os.DevNull); err == nil {
		_ = syscall.Dup3(int(null.Fd()), 0, 0)
		_ = syscall.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, lifeline) // nothing is written: EOF when the runtime is gone
		close(gone)
	}()

	t := &tree{self: os.Getpid(), main: cmd.Process.Pid}
	var grace <-chan time.Time
	for !t.exited {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGCHLD:
				t.reap()
			default:
				if grace == nil {
					// Passed on to the group (the supervisor ignores its
					// own copy); the tree is killed after termGrace.
					_ = syscall.Kill(0, sig.(syscall.Signal))
					grace = time.After(termGrace)
				}
			}
		case <-grace:
			t.end()
		case <-gone:
			t.end()
		}
	}
	// The server exited: what it left goes too.
	t.end()
	return t.code
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// tree is the supervisor's view of the server's processes.
type tree struct {
	self, main int
	exited     bool // main was reaped
	code       int  // its exit code
}

// reap collects every child that ended; those of the tree that were
// orphaned are children of the supervisor too.
func (t *tree) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if pid == t.main {
			t.exited = true
			t.code = ws.ExitStatus()
			if ws.Signaled() {
				t.code = 128 + int(ws.Signal())
			}
		}
	}
}

// end kills every process descended from the supervisor until there is
// none, and reaps them. A process forked meanwhile is found by the next
// scan: a killed process forks no more.
func (t *tree) end() {
	deadline := time.Now().Add(treeDeadline)
	for {
		pids := descendants(t.self)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.reap()
		if len(pids) == 0 || time.Now().After(deadline) {
			if !t.exited {
				// Killed with the rest: its status is in.
				t.exited, t.code = true, 128+int(syscall.SIGKILL)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// descendants lists the live processes descended from pid, read from
// /proc (zombies left out: they are dead, and reaped by their parent or,
// orphaned, by the supervisor).
func descendants(pid int) []int {
	ps, err := proc.List(false)
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range ps {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
