package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/testing/faultproxy"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/proc"
	"github.com/meshd-io/meshd/pkg/election"
)

// instance is one meshd identity, run as a child process ("meshd run")
// that reaches the API server only through its own fault proxy. It can be
// killed and started again; each start is a new incarnation with its own
// ledger and log file.
type instance struct {
	name       string
	revision   string
	proxy      *faultproxy.Proxy
	kubeconfig string
	args       []string
	binary     string
	dir        string
	// pod, with Config.Pods, is the instance's Pod, whose status the run
	// writes as the kubelet would.
	pod *kubeletPod
	// onExit, if set, is called when an incarnation exits; expected is
	// false unless signal stopped it.
	onExit func(in *instance, incarnation int, expected bool, err error)

	mu          sync.Mutex
	incarnation int
	run         *proc.Process // the current or last incarnation
	monitoring  string        // the current incarnation's monitoring address, once logged
	expectExit  bool          // signal was asked to stop the current incarnation
	ledgers     []LedgerFile  // one per incarnation; End set once it exited
}

// base is the path of an incarnation's files without their extension.
func (in *instance) base(incarnation int) string {
	return filepath.Join(in.dir, fmt.Sprintf("%s.%d", in.name, incarnation))
}

// holder names an incarnation in the ledger analysis.
func (in *instance) holder(incarnation int) string {
	return fmt.Sprintf("%s#%d", in.name, incarnation)
}

// start launches a new incarnation.
func (in *instance) start() error {
	if in.pod != nil {
		in.pod.alignStart()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.run != nil && in.run.Running() {
		return fmt.Errorf("%s is already running", in.name)
	}
	incarnation := in.incarnation + 1
	base := in.base(incarnation)
	ledgerPath := base + ".ledger.jsonl"
	args := append([]string{"run",
		"--kubeconfig", in.kubeconfig,
		"--identity", in.name,
		"--revision", in.revision,
		// The kernel picks the port; the log says which (see monitoringAddr).
		"--monitoring-address", meshdproc.AnyPort,
		"--ledger-file", ledgerPath,
		// The run checks every namespace gets the one source's root; the
		// test control plane has no mesh CA, so meshd mints it.
		"--self-signed-root",
	}, in.args...)
	idx := len(in.ledgers)
	env := append(os.Environ(), "POD_NAME=", "REVISION=")
	if in.pod != nil {
		env = append(env, in.pod.env()...)
	}
	launched := time.Now()
	run, err := proc.Start(proc.Spec{
		Name: in.holder(incarnation), Path: in.binary, Args: args, LogPath: base + ".log",
		Env:    env,
		OnExit: func(err error) { in.exitedNow(idx, incarnation, err) },
	})
	if err != nil {
		return err
	}
	if in.pod != nil {
		if err := in.pod.reportRunning(context.Background(), launched); err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
	}
	in.incarnation = incarnation
	in.ledgers = append(in.ledgers, LedgerFile{Path: ledgerPath, Holder: in.holder(incarnation)})
	in.run, in.expectExit = run, false
	in.monitoring = ""
	return nil
}

// exitedNow records that incarnation (ledger index idx) ended with err and
// tells onExit.
func (in *instance) exitedNow(idx, incarnation int, err error) {
	end := Now()
	if in.pod != nil {
		in.pod.exited(time.Now(), err)
	}
	in.mu.Lock()
	in.ledgers[idx].End = end
	expected := in.expectExit
	in.mu.Unlock()
	if in.onExit != nil {
		in.onExit(in, incarnation, expected, err)
	}
}

func (in *instance) current() *proc.Process {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.run
}

// exitErr is how the last incarnation that exited ended (nil: status 0).
func (in *instance) exitErr() error {
	if run := in.current(); run != nil {
		return run.ExitErr()
	}
	return nil
}

// running reports whether the current incarnation is alive.
func (in *instance) running() bool {
	run := in.current()
	return run != nil && run.Running()
}

// signal sends sig to the current incarnation (SIGKILL to its whole
// process group) and waits up to wait for it to exit; if it has not, it is
// killed. It returns when the signal was sent.
func (in *instance) signal(sig syscall.Signal, wait time.Duration) (Mono, error) {
	in.mu.Lock()
	run := in.run
	in.expectExit = true
	in.mu.Unlock()
	if run == nil || !run.Running() {
		return Now(), fmt.Errorf("%s is not running", in.name)
	}
	sent := Now()
	return sent, run.Stop(sig, sig == syscall.SIGKILL, wait)
}

// kill SIGKILLs the current incarnation, if any, and waits for it.
func (in *instance) kill() {
	if in.running() {
		_, _ = in.signal(syscall.SIGKILL, 10*time.Second)
	}
}

// ledgerFiles returns the ledgers of every incarnation so far.
func (in *instance) ledgerFiles() []LedgerFile {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]LedgerFile(nil), in.ledgers...)
}

// logTail returns the last n bytes of an incarnation's log; 0 is the
// current one.
func (in *instance) logTail(incarnation, n int) string {
	if incarnation == 0 {
		in.mu.Lock()
		incarnation = in.incarnation
		in.mu.Unlock()
	}
	b, err := os.ReadFile(in.base(incarnation) + ".log")
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

var statusClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// monitoringAddr is the current incarnation's monitoring address, read from
// its log once it has written it; "" before that.
func (in *instance) monitoringAddr() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.monitoring == "" && in.incarnation > 0 {
		in.monitoring, _ = meshdproc.MonitoringAddressInFile(in.base(in.incarnation)+".log", 0)
	}
	return in.monitoring
}

// statuses asks the current incarnation for /debug/elections.
func (in *instance) statuses(ctx context.Context) ([]election.Status, error) {
	if !in.running() {
		return nil, errors.New("not running")
	}
	addr := in.monitoringAddr()
	if addr == "" {
		return nil, errors.New("has not logged its monitoring address yet")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/elections", nil)
	if err != nil {
		return nil, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/debug/elections: %s", resp.Status)
	}
	var out []election.Status
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("/debug/elections: %w", err)
	}
	return out, nil
}
