package e2ecoordinated

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/pkg/election"
)

const (
	// statusLock is the Lease of the status controller's election, the
	// one coordinated election the tests' processes take part in.
	statusLock = status.ElectionID
	// coordinatorLock is the Lease of the coordinator election.
	coordinatorLock = election.CoordinatorElectionID
	// ttl is every process's --ttl.
	ttl = 2 * time.Second
	// pollEvery is how often waits look again.
	pollEvery = 10 * time.Millisecond
)

// candidateName is the holder identity the status Lease records for the
// meshd instance identity.
func candidateName(identity string) string { return coordinated.CandidateName(statusLock, identity) }

// mesh is one test's meshd processes in the test's own namespace.
type mesh struct {
	t          *testing.T
	ns         string
	kubeconfig string
	logDir     string

	mu    sync.Mutex
	procs []*meshdproc.Process
}

// newMesh creates a namespace and an admin kubeconfig for the test. Every
// process started through the mesh is stopped when the test ends; if the
// test failed, the end of each process's log is logged.
func newMesh(t *testing.T) *mesh {
	t.Helper()
	dir := t.TempDir()
	m := &mesh{t: t, ns: cluster.NewNamespace(t), kubeconfig: filepath.Join(dir, "kubeconfig"), logDir: filepath.Join(dir, "logs")}
	if err := cluster.WriteKubeconfig(m.kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.cleanup)
	return m
}

// start runs "meshd run --election-mode coordinated --controllers status"
// as name, of revision rev, remote if asked, and waits until it is ready.
// Its controller terms go to its ledger file (see ledgerPath).
func (m *mesh) start(name, rev string, remote bool) *meshdproc.Process {
	m.t.Helper()
	p, err := meshdproc.Start(meshdproc.Options{
		Binary:      meshdBinary,
		Name:        name,
		Kubeconfig:  m.kubeconfig,
		Namespace:   m.ns,
		Revision:    rev,
		Remote:      remote,
		TTL:         ttl,
		Controllers: "status",
		LogDir:      m.logDir,
		Args: []string{"--log-level=debug", "--election-mode=coordinated",
			"--ledger-file=" + m.ledgerPath(name)},
		// A race-enabled binary otherwise sleeps 1s before it exits.
		Env: []string{"GORACE=atexit_sleep_ms=0"},
	})
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.procs = append(m.procs, p)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// ledgerPath is the ledger file of the process name.
func (m *mesh) ledgerPath(name string) string { return filepath.Join(m.logDir, name+".ledger") }

func (m *mesh) cleanup() {
	m.mu.Lock()
	procs := slices.Clone(m.procs)
	m.mu.Unlock()
	meshdproc.StopAll(m.t, procs)
}

// ledger merges the ledger files of every process started so far, keeping
// the status election's terms only.
func (m *mesh) ledger() []ledger.Interval {
	m.t.Helper()
	m.mu.Lock()
	var paths []string
	for _, p := range m.procs {
		if _, err := os.Stat(m.ledgerPath(p.Name())); err == nil {
			paths = append(paths, m.ledgerPath(p.Name()))
		}
	}
	m.mu.Unlock()
	l, err := ledger.ReadFiles(paths...)
	if err != nil {
		m.t.Fatal(err)
	}
	var out []ledger.Interval
	for _, in := range l.Intervals() {
		if in.Election == statusLock {
			out = append(out, in)
		}
	}
	return out
}

// starts returns the start times of holder's status terms, in order.
func starts(intervals []ledger.Interval, holder string) []time.Time {
	var out []time.Time
	for _, in := range intervals {
		if in.Holder == holder {
			out = append(out, in.Start)
		}
	}
	return out
}

// overlap sums the time in which two holders both ran the status work;
// intervals of a process killed at killedAt (monotonic, zero if none) are
// cut there, since a killed process's open term ends with it.
func overlap(intervals []ledger.Interval, killed string, killedAt time.Time) time.Duration {
	var total time.Duration
	for i, a := range intervals {
		for _, b := range intervals[i+1:] {
			if a.Holder == b.Holder {
				continue
			}
			aStop, bStop := a.Stop, b.Stop
			if a.Holder == killed && !killedAt.IsZero() && aStop.After(killedAt) {
				aStop = killedAt
			}
			if b.Holder == killed && !killedAt.IsZero() && bStop.After(killedAt) {
				bStop = killedAt
			}
			lo, hi := later(a.Start, b.Start), earlier(aStop, bStop)
			if hi.After(lo) {
				total += hi.Sub(lo)
			}
		}
	}
	return total
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// monoNow reads CLOCK_MONOTONIC, the clock of the ledger files.
func monoNow(t *testing.T) time.Time {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ts.Nano())
}

// setDefault makes rev the default revision through the webhook label, as
// istioctl does; the webhook is deleted when the test ends.
func (m *mesh) setDefault(rev string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "istio-revision-tag-default-" + m.ns
	whs := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := whs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		wh = &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"istio.io/rev": rev}}}
		if _, err := whs.Create(ctx, wh, metav1.CreateOptions{}); err != nil {
			m.t.Fatal(err)
		}
		m.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = whs.Delete(ctx, name, metav1.DeleteOptions{})
		})
		return
	}
	if err != nil {
		m.t.Fatal(err)
	}
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	wh.Labels["istio.io/rev"] = rev
	if _, err := whs.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// lease reads the Lease name; a missing Lease is nil with no error.
func (m *mesh) lease(name string) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := client.CoordinationV1().Leases(m.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// holderOf is the Lease's holder identity, "" for none.
func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitFor polls cond until it returns nil and fails the test with cond's
// last error after timeout. It returns how long the wait took.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(pollEvery)
	}
}

// write is one write of a Lease as a watch saw it.
type write struct {
	holder  string
	seen    time.Time // local clock when the event arrived
	acquire time.Time // spec.acquireTime, zero when unset
	renew   time.Time // spec.renewTime, zero when unset
}

// leaseLog records every write of one Lease that a watch delivers.
type leaseLog struct {
	mu     sync.Mutex
	writes []write
	err    error
}

// followLease watches the Lease name until the test ends.
func (m *mesh) followLease(name string) *leaseLog {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.CoordinationV1().Leases(m.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		cancel()
		m.t.Fatal(err)
	}
	log := &leaseLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			wr := write{holder: holderOf(l), seen: time.Now()}
			if l.Spec.AcquireTime != nil {
				wr.acquire = l.Spec.AcquireTime.Time
			}
			if l.Spec.RenewTime != nil {
				wr.renew = l.Spec.RenewTime.Time
			}
			log.mu.Lock()
			log.writes = append(log.writes, wr)
			log.mu.Unlock()
		}
		if ctx.Err() == nil {
			log.mu.Lock()
			log.err = fmt.Errorf("the watch of Lease %s ended early", name)
			log.mu.Unlock()
		}
	}()
	m.t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return log
}

// all returns every write seen so far and the watch's error, if any.
func (l *leaseLog) all() ([]write, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes), l.err
}

// holders returns the distinct successive holders seen so far.
func (l *leaseLog) holders() []string {
	ws, _ := l.all()
	var out []string
	for _, w := range ws {
		if n := len(out); n == 0 || out[n-1] != w.holder {
			out = append(out, w.holder)
		}
	}
	return out
}
