// Package meshdproc runs the meshd binary as child processes ("meshd run")
// and talks to them over their monitoring endpoints. The end-to-end tests and
// the demo (internal/tools/cmd/demo) use it to start, kill, stop and restart
// instances and to ask each one which elections it leads.
//
// Every process listens for monitoring on a port of 127.0.0.1 that the kernel
// picks when it binds (AnyPort), which the harness reads back from the
// process's log, and appends its output to a log file. Children run in their own process
// group, so a Ctrl-C in the terminal reaches only the parent, which decides
// how to stop them; on Linux they are also killed when the parent dies.
package meshdproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/testing/proc"
)

// Options describe one meshd instance.
type Options struct {
	// Binary is the meshd executable. Required.
	Binary string
	// Name is the holder identity (--identity, unless NoIdentity) and names
	// the log file. Required.
	Name string
	// Kubeconfig is passed as --kubeconfig. Required.
	Kubeconfig string
	// Namespace is the mesh namespace (--namespace). Required.
	Namespace string
	// Revision is --revision; empty leaves meshd's default.
	Revision string
	// Remote adds --remote.
	Remote bool
	// TTL is --ttl; zero leaves meshd's default.
	TTL time.Duration
	// Controllers is --controllers; empty leaves meshd's default (all).
	Controllers string
	// SelfSignedRoot adds --self-signed-root: the namespace controller mints
	// a root when the mesh has no CA Secret. For demos and tests only.
	SelfSignedRoot bool
	// NoIdentity leaves --identity out, so that meshd picks its own.
	NoIdentity bool
	// LogDir receives the log file <Name>.log. Required.
	LogDir string
	// Env is added to the parent's environment.
	Env []string
	// Args are appended to the command line.
	Args []string
}

func (o Options) validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"Binary", o.Binary}, {"Name", o.Name}, {"Kubeconfig", o.Kubeconfig},
		{"Namespace", o.Namespace}, {"LogDir", o.LogDir},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("meshdproc: Options.%s required", strings.Join(missing, ", Options."))
	}
	return nil
}

// Process is one meshd instance. It can be started again after it exited,
// with the same options and a new monitoring port. Methods are safe for
// concurrent use.
type Process struct {
	opts    Options
	logPath string
	client  *http.Client

	mu        sync.Mutex
	run       *proc.Process // the current or last run
	logOffset int64         // where the current run's output begins in the log
	addr      string        // the current run's monitoring address, once logged
}

// Start launches a new instance. It returns once the process runs; use
// WaitReady to wait for its endpoints.
func Start(opts Options) (*Process, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &Process{
		opts:    opts,
		logPath: filepath.Join(opts.LogDir, opts.Name+".log"),
		client: &http.Client{
			Timeout: 2 * time.Second,
			// Loopback only: never through a proxy from the environment.
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2},
		},
	}
	if err := p.Restart(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the instance's identity.
func (p *Process) Name() string { return p.opts.Name }

// Options returns the options the instance was started with.
func (p *Process) Options() Options { return p.opts }

// LogPath is the file that collects the instance's output over all its runs.
func (p *Process) LogPath() string { return p.logPath }

// Addr is the monitoring address of the current run, 127.0.0.1:<port>, or
// "" until the run has logged it (WaitReady waits for that).
func (p *Process) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr == "" && p.run != nil {
		p.addr, _ = MonitoringAddressInFile(p.logPath, p.logOffset)
	}
	return p.addr
}

// Pid is the process id of the current run, 0 if never started.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run == nil {
		return 0
	}
	return p.run.Pid()
}

// Restart starts the instance again after it exited. It fails if the
// instance is running.
func (p *Process) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil && p.run.Running() {
		return fmt.Errorf("meshdproc: %s is already running", p.opts.Name)
	}
	args := []string{"run",
		"--kubeconfig=" + p.opts.Kubeconfig,
		"--namespace=" + p.opts.Namespace,
		"--monitoring-address=" + AnyPort,
	}
	if !p.opts.NoIdentity {
		args = append(args, "--identity="+p.opts.Name)
	}
	if p.opts.SelfSignedRoot {
		args = append(args, "--self-signed-root")
	}
	if p.opts.Revision != "" {
		args = append(args, "--revision="+p.opts.Revision)
	}
	if p.opts.Remote {
		args = append(args, "--remote")
	}
	if p.opts.TTL > 0 {
		args = append(args, "--ttl="+p.opts.TTL.String())
	}
	if p.opts.Controllers != "" {
		args = append(args, "--controllers="+p.opts.Controllers)
	}
	args = append(args, p.opts.Args...)

	if err := os.MkdirAll(p.opts.LogDir, 0o755); err != nil {
		return err
	}
	var offset int64
	if fi, err := os.Stat(p.logPath); err == nil {
		offset = fi.Size()
	}
	run, err := proc.Start(proc.Spec{Name: p.opts.Name, Path: p.opts.Binary, Args: args,
		Env: append(os.Environ(), p.opts.Env...), LogPath: p.logPath})
	if err != nil {
		return fmt.Errorf("meshdproc: %w", err)
	}
	p.run, p.logOffset, p.addr = run, offset, ""
	return nil
}

func (p *Process) current() *proc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// Exited returns a channel closed when the current run ends.
func (p *Process) Exited() <-chan struct{} { return p.current().Done() }

// Running reports whether the current run has not exited.
func (p *Process) Running() bool { return p.current().Running() }

// ExitErr is how the last run ended: nil for exit status 0, an
// *exec.ExitError otherwise. It is only meaningful once Exited is closed.
func (p *Process) ExitErr() error { return p.current().ExitErr() }

// ExitedAt is when the parent saw the last run exit. It is only meaningful
// once Exited is closed.
func (p *Process) ExitedAt() time.Time { return p.current().ExitedAt() }

// Signal sends sig to the current run.
func (p *Process) Signal(sig syscall.Signal) error { return p.current().Signal(sig) }

// Wait waits up to timeout for the current run to exit and returns how it
// ended (nil for status 0).
func (p *Process) Wait(timeout time.Duration) error { return p.current().Wait(timeout) }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() error { return p.current().Kill() }

// Stop ends the current run for cleanup: SIGTERM, then SIGKILL if it has
// not exited within grace. It returns how the process ended; a process that
// had already exited is not signalled again.
func (p *Process) Stop(grace time.Duration) error {
	if err := p.current().Stop(syscall.SIGTERM, false, grace); err != nil {
		return err
	}
	return p.ExitErr()
}

// WaitReady polls /readyz until it answers 200, the process exits, or ctx
// ends.
func (p *Process) WaitReady(ctx context.Context) error {
	exited := p.Exited()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = p.Ready(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("meshdproc: %s exited before it was ready (%s); log tail:\n%s",
				p.opts.Name, DescribeExit(p.ExitErr()), p.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("meshdproc: %s not ready: %w (last: %v); log tail:\n%s",
				p.opts.Name, ctx.Err(), last, p.LogTail(20))
		case <-tick.C:
		}
	}
}

// Ready returns nil when /readyz answers 200.
func (p *Process) Ready(ctx context.Context) error {
	_, err := p.get(ctx, "/readyz")
	return err
}

// Healthy returns nil when /healthz answers 200.
func (p *Process) Healthy(ctx context.Context) error {
	_, err := p.get(ctx, "/healthz")
	return err
}

// Elections returns what the instance reports on /debug/elections.
func (p *Process) Elections(ctx context.Context) ([]monitoring.Election, error) {
	body, err := p.get(ctx, "/debug/elections")
	if err != nil {
		return nil, err
	}
	var out []monitoring.Election
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("meshdproc: %s: decode /debug/elections: %w", p.opts.Name, err)
	}
	return out, nil
}

// Leads reports whether the instance says it leads the election whose lock
// is named lockName (the election ID, or <id>-<revision> for per-revision
// elections). An instance that cannot be asked does not lead.
func (p *Process) Leads(ctx context.Context, lockName string) bool {
	st, err := p.Elections(ctx)
	if err != nil {
		return false
	}
	for _, s := range st {
		if s.Name == lockName {
			return s.Leader
		}
	}
	return false
}

// GetJSON decodes the JSON document the instance serves on path into out.
func (p *Process) GetJSON(ctx context.Context, path string, out any) error {
	body, err := p.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("meshdproc: %s: decode %s: %w", p.opts.Name, path, err)
	}
	return nil
}

// Metrics returns the Prometheus text exposition from /metrics.
func (p *Process) Metrics(ctx context.Context) (string, error) {
	body, err := p.get(ctx, "/metrics")
	return string(body), err
}

func (p *Process) get(ctx context.Context, path string) ([]byte, error) {
	addr := p.Addr()
	if addr == "" {
		return nil, fmt.Errorf("meshdproc: %s has not logged its monitoring address yet", p.opts.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("%s%s: %s: %s", p.opts.Name, path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// Log returns everything the instance has written over all its runs.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return string(b)
}

// LogTail returns the last n lines of Log.
func (p *Process) LogTail(n int) string { return proc.TailFile(p.logPath, n) }

// DescribeExit says how a run ended, from the error ExitErr or Wait
// returned: "exit status 0", "exit status 1", "signal: killed", ...
func DescribeExit(err error) string { return proc.DescribeExit(err) }
