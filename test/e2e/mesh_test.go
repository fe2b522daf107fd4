package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/pkg/election"
)

// The locks of the three elections "meshd run" takes part in.
const (
	namespaceLock = election.NamespaceController // ConfigMap, prioritized, remote-aware
	statusLock    = status.ElectionID            // Lease, prioritized
)

// revisionLock is the Lease of rev's per-revision election.
func revisionLock(rev string) string { return revision.ElectionID + "-" + rev }

// pollEvery is how often waits look again.
const pollEvery = 10 * time.Millisecond

// mesh is one test's meshd processes in the test's own namespace.
type mesh struct {
	t          *testing.T
	ns         string
	root       string // the root certificate in the namespace's cacerts
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
	ns := cluster.NewNamespace(t)
	dir := t.TempDir()
	m := &mesh{t: t, ns: ns, kubeconfig: filepath.Join(dir, "kubeconfig"), logDir: filepath.Join(dir, "logs")}
	if err := cluster.WriteKubeconfig(m.kubeconfig); err != nil {
		t.Fatal(err)
	}
	// Like a real mesh, the namespace has a CA for the namespace
	// controller to publish.
	m.root = createCASecret(t, ns, "cacerts", "root-cert.pem")
	t.Cleanup(m.cleanup)
	return m
}

// createCASecret creates Secret name in ns holding a fresh self-signed CA
// certificate under key, and returns the PEM text.
func createCASecret(t *testing.T, ns, name, key string) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "e2e root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	_, err = cluster.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{key: []byte(cert)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// option changes how one process is started.
type option func(*meshdproc.Options)

func withTTL(ttl time.Duration) option { return func(o *meshdproc.Options) { o.TTL = ttl } }
func withRemote() option               { return func(o *meshdproc.Options) { o.Remote = true } }
func withKubeconfig(path string) option {
	return func(o *meshdproc.Options) { o.Kubeconfig = path }
}
func withoutIdentity() option { return func(o *meshdproc.Options) { o.NoIdentity = true } }
func withControllers(list string) option {
	return func(o *meshdproc.Options) { o.Controllers = list }
}

// start runs "meshd run" as name with revision rev (ttl 2s unless an option
// says otherwise) and waits until it is ready.
func (m *mesh) start(name, rev string, opts ...option) *meshdproc.Process {
	m.t.Helper()
	o := meshdproc.Options{
		Binary:     meshdBinary,
		Name:       name,
		Kubeconfig: m.kubeconfig,
		Namespace:  m.ns,
		Revision:   rev,
		TTL:        2 * time.Second,
		LogDir:     m.logDir,
		Args:       []string{"--log-level=debug"},
		// A race-enabled binary otherwise sleeps 1s before it exits, which
		// would count against the graceful-stop bound.
		Env: []string{"GORACE=atexit_sleep_ms=0"},
	}
	for _, opt := range opts {
		opt(&o)
	}
	p, err := meshdproc.Start(o)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.procs = append(m.procs, p)
	m.mu.Unlock()
	m.waitReady(p)
	return p
}

// waitReady waits until p's /readyz succeeds.
func (m *mesh) waitReady(p *meshdproc.Process) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mesh) cleanup() {
	m.mu.Lock()
	procs := slices.Clone(m.procs)
	m.mu.Unlock()
	meshdproc.StopAll(m.t, procs)
}

// state is one look at the mesh: for each lock, the processes that say on
// /debug/elections that they lead it, and the holder its record names.
type state struct {
	leaders map[string][]string
	holders map[string]string
}

// soleLeader returns the process that leads lockName if exactly one says it
// does and the lock's record agrees, else "".
func (s state) soleLeader(lockName string) string {
	if ls := s.leaders[lockName]; len(ls) == 1 && s.holders[lockName] == ls[0] {
		return ls[0]
	}
	return ""
}

func (s state) describe(lockName string) string {
	return fmt.Sprintf("%s: leaders %v, lock holder %q", lockName, s.leaders[lockName], s.holders[lockName])
}

// look asks every running process for its elections and reads every lock.
func (m *mesh) look() (state, error) {
	m.mu.Lock()
	procs := slices.Clone(m.procs)
	m.mu.Unlock()
	s := state{leaders: map[string][]string{}, holders: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Ask all at once, so that one look is close to one instant.
	answers := make([][]monitoring.Election, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		if !p.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// An error means exiting or not listening yet: it leads nothing.
			answers[i], _ = p.Elections(ctx)
		}()
	}
	wg.Wait()
	for i, st := range answers {
		for _, e := range st {
			if e.Leader {
				s.leaders[e.Name] = append(s.leaders[e.Name], procs[i].Name())
			}
		}
	}
	locks, err := lockstatus.List(ctx, cluster.Client, m.ns)
	if err != nil {
		return s, err
	}
	for _, l := range locks {
		s.holders[l.Election] = l.Holder
	}
	return s, nil
}

// leaders returns the names of the running processes that say they lead
// lockName.
func (m *mesh) leaders(lockName string) []string {
	m.t.Helper()
	s, err := m.look()
	if err != nil {
		m.t.Fatal(err)
	}
	return s.leaders[lockName]
}

// lock returns the lock named name as stored; ok is false if it does not
// exist.
func (m *mesh) lock(name string) (lockstatus.Lock, bool) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks, err := lockstatus.List(ctx, cluster.Client, m.ns)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, l := range locks {
		if l.Election == name {
			return l, true
		}
	}
	return lockstatus.Lock{}, false
}

// holder returns the holder identity recorded in the lock named name.
func (m *mesh) holder(name string) string {
	m.t.Helper()
	l, _ := m.lock(name)
	return l.Holder
}

// waitLeader waits until exactly one process says it leads lockName, the
// lock records it as the holder, and accept (if not nil) agrees. It returns
// the leader's name and how long the wait took.
func (m *mesh) waitLeader(lockName string, timeout time.Duration, accept func(name string) bool) (string, time.Duration) {
	m.t.Helper()
	w := m.watchLeaders([]string{lockName}, accept)
	took := w.wait(m.t, timeout)
	return w.leader(lockName), took[lockName]
}

// leaderWatch looks at the mesh in the background and notes, per lock, when
// it first had an accepted sole leader (see state.soleLeader).
type leaderWatch struct {
	locks  []string
	start  time.Time
	done   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	at      map[string]time.Duration
	leaders map[string]string // the accepted leader, by lock
	last    state
	err     error
}

// watchLeaders starts a leaderWatch for locks; its clock starts now.
func (m *mesh) watchLeaders(locks []string, accept func(name string) bool) *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaderWatch{locks: locks, start: time.Now(), done: make(chan struct{}), cancel: cancel,
		at: map[string]time.Duration{}, leaders: map[string]string{}}
	m.t.Cleanup(func() {
		cancel()
		<-w.done
	})
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			s, err := m.look()
			now := time.Since(w.start)
			w.mu.Lock()
			w.last, w.err = s, err
			if err == nil {
				for _, l := range locks {
					if _, seen := w.at[l]; seen {
						continue
					}
					if leader := s.soleLeader(l); leader != "" && (accept == nil || accept(leader)) {
						w.at[l] = now
						w.leaders[l] = leader
					}
				}
			}
			all := len(w.at) == len(locks)
			w.mu.Unlock()
			if all {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pollEvery):
			}
		}
	}()
	return w
}

// leader returns the accepted leader first seen for lockName.
func (w *leaderWatch) leader(lockName string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leaders[lockName]
}

// wait waits until every lock had an accepted leader and returns, per
// lock, how long after the watch started that was first seen. It fails the
// test after timeout.
func (w *leaderWatch) wait(t *testing.T, timeout time.Duration) map[string]time.Duration {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.cancel()
		<-w.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.at) < len(w.locks) {
		var missing []string
		for _, l := range w.locks {
			if _, ok := w.at[l]; !ok {
				missing = append(missing, w.last.describe(l))
			}
		}
		t.Fatalf("no accepted sole leader within %v (last error: %v):\n%s", timeout, w.err, strings.Join(missing, "\n"))
	}
	return w.at
}

// webhookName is the object whose label names the mesh's default revision,
// for a mesh namespace other than istio-system.
func (m *mesh) webhookName() string { return "istio-revision-tag-default-" + m.ns }

// setDefault makes rev the default revision ("" removes the label) and
// returns when the API server accepted the change. The webhook is deleted
// when the test ends.
func (m *mesh) setDefault(rev string) time.Time {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	whs := cluster.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := whs.Get(ctx, m.webhookName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		wh = &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.webhookName()}}
		if rev != "" {
			wh.Labels = map[string]string{"istio.io/rev": rev}
		}
		sent := time.Now()
		if _, err := whs.Create(ctx, wh, metav1.CreateOptions{}); err != nil {
			m.t.Fatal(err)
		}
		m.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = whs.Delete(ctx, m.webhookName(), metav1.DeleteOptions{})
		})
		return sent
	}
	if err != nil {
		m.t.Fatal(err)
	}
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	if rev == "" {
		delete(wh.Labels, "istio.io/rev")
	} else {
		wh.Labels["istio.io/rev"] = rev
	}
	sent := time.Now()
	if _, err := whs.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		m.t.Fatal(err)
	}
	return sent
}

// in returns a predicate matching any of names.
func in(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

// not returns a predicate matching anything but name.
func not(name string) func(string) bool {
	return func(n string) bool { return n != name }
}
