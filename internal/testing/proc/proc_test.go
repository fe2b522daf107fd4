package proc

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, script string, onExit func(error)) *Process {
	t.Helper()
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script},
		LogPath: filepath.Join(t.TempDir(), "sh.log"), OnExit: onExit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestExitStatusLogAndOnExit(t *testing.T) {
	var seen error
	p := start(t, "echo one; echo two; exit 3", func(err error) { seen = err })
	err := p.Wait(10 * time.Second)
	var exit *exec.ExitError
	if !strings.Contains(DescribeExit(err), "exit status 3") || seen != err || !errors.As(err, &exit) {
		t.Fatalf("Wait = %v, OnExit saw %v; want exit status 3 from both", err, seen)
	}
	if p.Running() || p.ExitedAt().IsZero() {
		t.Fatalf("Running = %v, ExitedAt = %v after exit", p.Running(), p.ExitedAt())
	}
	tail := p.Tail(2)
	if want := "two\n"; !strings.HasPrefix(tail, want) || !strings.Contains(tail, "exited: exit status 3") {
		t.Fatalf("Tail(2) = %q; want the last output line and the exit line", tail)
	}
}

func TestStopGraceful(t *testing.T) {
	p := start(t, "trap 'exit 0' TERM; while :; do sleep 0.05; done", nil)
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	if err := p.Stop(syscall.SIGTERM, false, 10*time.Second); err != nil {
		t.Fatalf("Stop = %v; want nil for a child that exits on SIGTERM", err)
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("ExitErr = %v; want exit status 0", err)
	}
}

func TestStopKillsAStubbornGroup(t *testing.T) {
	p := start(t, "trap '' TERM; sleep 60 & wait", nil)
	time.Sleep(100 * time.Millisecond)
	err := p.Stop(syscall.SIGTERM, true, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Fatalf("Stop = %v; want an error saying it was killed", err)
	}
	if DescribeExit(p.ExitErr()) != "signal: killed" {
		t.Fatalf("ExitErr = %v; want signal: killed", p.ExitErr())
	}
	if err := p.Stop(syscall.SIGTERM, true, time.Second); err != nil {
		t.Fatalf("Stop after exit = %v; want nil", err)
	}
}

func TestWaitTimesOutAndStartValidates(t *testing.T) {
	p := start(t, "sleep 60", nil)
	if err := p.Wait(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Wait = %v; want still running", err)
	}
	if _, err := Start(Spec{Name: "x"}); err == nil {
		t.Fatal("Start without Path and LogPath succeeded")
	}
	if got := TailFile(filepath.Join(t.TempDir(), "absent"), 3); !strings.HasPrefix(got, "(cannot read") {
		t.Fatalf("TailFile(absent) = %q", got)
	}
}
