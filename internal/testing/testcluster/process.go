package testcluster

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/testing/proc"
)

// process is one child program (etcd or kube-apiserver) that can be started,
// stopped and started again with the same arguments. Every run appends its
// output to the same log file.
type process struct {
	name    string
	path    string
	args    []string
	logPath string

	mu  sync.Mutex
	run *proc.Process // the current or last run; nil before the first
}

// start launches a new run. It fails if the current run has not exited.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil && p.run.Running() {
		return fmt.Errorf("%s is already running", p.name)
	}
	run, err := proc.Start(proc.Spec{Name: p.name, Path: p.path, Args: p.args, LogPath: p.logPath})
	if err != nil {
		return err
	}
	p.run = run
	return nil
}

func (p *process) current() *proc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// exited returns a channel closed when the current run ends, or nil if the
// process was never started.
func (p *process) exited() <-chan struct{} {
	if run := p.current(); run != nil {
		return run.Done()
	}
	return nil
}

// exitError describes how the last run ended.
func (p *process) exitError() error {
	run := p.current()
	if run == nil {
		return errors.New("never started")
	}
	if err := run.ExitErr(); err != nil {
		return err
	}
	return errors.New("exited with status 0")
}

// running reports whether the current run has not exited yet.
func (p *process) running() bool {
	run := p.current()
	return run != nil && run.Running()
}

// stop sends SIGTERM to the process group, waits up to grace for the run to
// end and then sends SIGKILL. Once the run ended, anything it left behind
// in its group is killed. It is a no-op if the process is not running.
func (p *process) stop(grace time.Duration) error {
	run := p.current()
	if run == nil || !run.Running() {
		return nil
	}
	err := run.Stop(syscall.SIGTERM, true, grace)
	_ = run.SignalGroup(syscall.SIGKILL)
	return err
}

// logTail returns about the last n lines of the process's log file.
func (p *process) logTail(n int) string {
	return proc.TailFile(p.logPath, n)
}
