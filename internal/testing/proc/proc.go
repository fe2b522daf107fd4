// Package proc supervises child processes for the test harness and the
// tools: etcd and kube-apiserver for the test control plane, meshd for the
// end-to-end tests, the demo and the chaos run.
//
// A Process is one run of a program. Its stdout and stderr go to a log
// file, it runs in its own process group (so a terminal's Ctrl-C reaches
// only the parent, and a signal to the group reaches anything it spawned),
// and on Linux the kernel kills it when the parent dies. To run a program
// again, start a new Process.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// killWait bounds how long a process may take to disappear after SIGKILL.
const killWait = 10 * time.Second

// Spec describes one run of a program.
type Spec struct {
	// Name names the process in errors and log lines. Required.
	Name string
	// Path is the executable. Required.
	Path string
	// Args are its arguments, without the program name.
	Args []string
	// Env, if not nil, is the whole environment of the child; nil inherits
	// the parent's.
	Env []string
	// LogPath receives stdout and stderr. Required. The file is appended to,
	// after a line that says when and how the program was started.
	LogPath string
	// OnExit, if set, is called once with how the run ended, after the
	// process was reaped and before Done is closed.
	OnExit func(err error)
}

// Process is one running (or finished) child. Methods are safe for
// concurrent use.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}

	mu       sync.Mutex
	waitErr  error
	exitedAt time.Time
}

// Start launches spec's program and returns once it runs.
func Start(spec Spec) (*Process, error) {
	if spec.Name == "" || spec.Path == "" || spec.LogPath == "" {
		return nil, errors.New("proc: Spec.Name, Spec.Path and Spec.LogPath are required")
	}
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: %s: %w", spec.Name, err)
	}
	fmt.Fprintf(logFile, "=== %s starting %s: %s %s\n", time.Now().Format(time.RFC3339Nano),
		spec.Name, spec.Path, strings.Join(spec.Args, " "))
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("proc: start %s: %w", spec.Name, err)
	}
	p := &Process{name: spec.Name, logPath: spec.LogPath, cmd: cmd, done: make(chan struct{})}
	go p.reap(logFile, spec.OnExit)
	return p, nil
}

func (p *Process) reap(logFile *os.File, onExit func(error)) {
	err := p.cmd.Wait()
	exitedAt := time.Now()
	fmt.Fprintf(logFile, "=== %s %s exited: %s\n", exitedAt.Format(time.RFC3339Nano), p.name, DescribeExit(err))
	logFile.Close()
	p.mu.Lock()
	p.waitErr, p.exitedAt = err, exitedAt
	p.mu.Unlock()
	if onExit != nil {
		onExit(err)
	}
	close(p.done)
}

// Name is the process's name from its Spec.
func (p *Process) Name() string { return p.name }

// Pid is the child's process id (and its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file that receives the child's output.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the child has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the child has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is how the run ended: nil for exit status 0, an *exec.ExitError
// otherwise. It is only meaningful once Done is closed.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// ExitedAt is when the parent saw the child exit; zero while it runs.
func (p *Process) ExitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedAt
}

// Signal sends sig to the child alone. A child that already exited is not
// an error.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("proc: signal %v to %s: %w", sig, p.name, err)
	}
	return nil
}

// SignalGroup sends sig to the child's whole process group. A group that
// is already gone is not an error.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("proc: signal %v to the group of %s: %w", sig, p.name, err)
	}
	return nil
}

// Wait waits up to timeout for the child to exit and returns how it ended
// (nil for exit status 0), or an error saying it still runs.
func (p *Process) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.ExitErr()
	case <-t.C:
		return fmt.Errorf("proc: %s still running after %v", p.name, timeout)
	}
}

// Kill sends SIGKILL to the process group and waits for the child to exit.
func (p *Process) Kill() error {
	if err := p.SignalGroup(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("proc: %s (pid %d) survived SIGKILL for %v", p.name, p.Pid(), killWait)
	}
}

// Stop ends the run: sig (to the child alone, or to its group if group is
// set), then SIGKILL to the group if it has not exited within grace. It
// returns nil if the child exited by itself within grace, whatever its
// status, and an error if it had to be killed. A child that already exited
// is not signalled.
func (p *Process) Stop(sig syscall.Signal, group bool, grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	send := p.Signal
	if group {
		send = p.SignalGroup
	}
	if err := send(sig); err != nil {
		return err
	}
	if err := p.Wait(grace); err == nil || !p.Running() {
		return nil
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("proc: %s did not exit within %v of %v and was killed", p.name, grace, sig)
}

// Tail returns about the last n lines of the log file, reading at most its
// final 64 KiB. A file that cannot be read is described in the text.
func (p *Process) Tail(n int) string { return TailFile(p.logPath, n) }

// TailFile returns the last n lines of a file, reading at most its final
// 64 KiB. Errors are described in the returned text.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxRead = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		if _, err := f.Seek(st.Size()-maxRead, io.SeekStart); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// DescribeExit says how a run ended, from the error ExitErr or Wait
// returned: "exit status 0", "exit status 1", "signal: killed", ...
func DescribeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
