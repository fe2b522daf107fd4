package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/testing/faultproxy"
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
	monitoring string // 127.0.0.1:<port>, kept across incarnations
	args       []string
	binary     string
	dir        string
	// onExit, if set, is called when an incarnation exits; expected is
	// false unless signal stopped it.
	onExit func(in *instance, incarnation int, expected bool, err error)

	mu          sync.Mutex
	incarnation int
	cmd         *exec.Cmd
	exited      chan struct{} // closed when the current incarnation has exited
	expectExit  bool          // signal was asked to stop the current incarnation
	waitErr     error         // how the last incarnation ended
	ledgers     []LedgerFile  // one per incarnation; End set once it exited
}

// holder names an incarnation in the ledger analysis.
func (in *instance) holder(incarnation int) string {
	return fmt.Sprintf("%s#%d", in.name, incarnation)
}

// start launches a new incarnation.
func (in *instance) start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.exited != nil {
		select {
		case <-in.exited:
		default:
			return fmt.Errorf("%s is already running", in.name)
		}
	}
	in.incarnation++
	base := filepath.Join(in.dir, fmt.Sprintf("%s.%d", in.name, in.incarnation))
	ledgerPath := base + ".ledger.jsonl"
	logFile, err := os.Create(base + ".log")
	if err != nil {
		return err
	}
	args := append([]string{"run",
		"--kubeconfig", in.kubeconfig,
		"--identity", in.name,
		"--revision", in.revision,
		"--monitoring-address", in.monitoring,
		"--ledger-file", ledgerPath,
		// The run checks every namespace gets the one source's root; the
		// test control plane has no mesh CA, so meshd mints it.
		"--self-signed-root",
	}, in.args...)
	cmd := exec.Command(in.binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	cmd.Env = append(os.Environ(), "POD_NAME=", "REVISION=")
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", in.name, err)
	}
	idx, incarnation := len(in.ledgers), in.incarnation
	in.ledgers = append(in.ledgers, LedgerFile{Path: ledgerPath, Holder: in.holder(incarnation)})
	exited := make(chan struct{})
	in.cmd, in.exited, in.expectExit = cmd, exited, false
	go func() {
		err := cmd.Wait()
		end := Now()
		logFile.Close()
		in.mu.Lock()
		in.ledgers[idx].End = end
		in.waitErr = err
		expected := in.expectExit
		in.mu.Unlock()
		close(exited)
		if in.onExit != nil {
			in.onExit(in, incarnation, expected, err)
		}
	}()
	return nil
}

// exitErr is how the last incarnation that exited ended (nil: status 0).
func (in *instance) exitErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.waitErr
}

// running reports whether the current incarnation is alive.
func (in *instance) running() bool {
	in.mu.Lock()
	exited := in.exited
	in.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the current incarnation and waits up to wait for it
// to exit; if it has not, it is killed. It returns when the signal was sent.
func (in *instance) signal(sig syscall.Signal, wait time.Duration) (Mono, error) {
	in.mu.Lock()
	cmd, exited := in.cmd, in.exited
	in.expectExit = true
	in.mu.Unlock()
	if cmd == nil || !in.running() {
		return Now(), fmt.Errorf("%s is not running", in.name)
	}
	sent := Now()
	target := cmd.Process.Pid
	if sig == syscall.SIGKILL {
		target = -target // the whole process group
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return sent, fmt.Errorf("signal %s: %w", in.name, err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-exited:
		return sent, nil
	case <-timer.C:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		return sent, fmt.Errorf("%s did not exit after SIGKILL", in.name)
	}
	if sig != syscall.SIGKILL {
		return sent, fmt.Errorf("%s did not exit within %v of %v; killed", in.name, wait, sig)
	}
	return sent, nil
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
	b, err := os.ReadFile(filepath.Join(in.dir, fmt.Sprintf("%s.%d.log", in.name, incarnation)))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

var statusClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// statuses asks the current incarnation for /debug/elections.
func (in *instance) statuses(ctx context.Context) ([]election.Status, error) {
	if !in.running() {
		return nil, errors.New("not running")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.monitoring+"/debug/elections", nil)
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

// freeAddress returns 127.0.0.1:<a port that was free>.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
