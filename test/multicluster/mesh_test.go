package multicluster

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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
)

const (
	// lockName is the election every cluster has: istiod's namespace
	// controller election, a ConfigMap in the mesh namespace.
	lockName = election.NamespaceController
	ttl      = 2 * time.Second
	// pollEvery is how often waits look again.
	pollEvery = 10 * time.Millisecond
)

// site is one cluster of a test's mesh.
type site struct {
	id             string // the cluster ID
	c              *testcluster.Cluster
	kubeconfigPath string // for meshd --kubeconfig
	kubeconfig     []byte // for a remote cluster Secret
}

// mesh is one test's two clusters, east and west, with a namespace of the
// same name in each, and the meshd processes it started.
type mesh struct {
	t          *testing.T
	ns         string
	east, west *site
	root       string // the mesh root, in east's cacerts
	dir        string

	mu      sync.Mutex
	procs   []*meshdproc.Process
	ledgers map[*meshdproc.Process]string
	// overlaps are the instants at which two processes said they led one
	// cluster's lock (see sample).
	overlaps []string
}

// newMesh creates the namespace in both clusters and a CA Secret with a
// fresh root in east's. West gets no CA: plugRoot gives it one.
func newMesh(t *testing.T) *mesh {
	t.Helper()
	ns := clusters[0].NewNamespace(t)
	ctx := context.Background()
	if _, err := clusters[1].Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := clusters[1].Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s of west: %v", ns, err)
		}
	})
	m := &mesh{t: t, ns: ns, dir: t.TempDir(), ledgers: map[*meshdproc.Process]string{}}
	m.east, m.west = m.site("east", clusters[0]), m.site("west", clusters[1])
	m.root = newRoot(t)
	m.plugRoot(m.east, m.root)
	t.Cleanup(m.cleanup)
	return m
}

func (m *mesh) site(id string, c *testcluster.Cluster) *site {
	m.t.Helper()
	s := &site{id: id, c: c, kubeconfigPath: filepath.Join(m.dir, id+".kubeconfig")}
	if err := c.WriteKubeconfig(s.kubeconfigPath); err != nil {
		m.t.Fatal(err)
	}
	var err error
	if s.kubeconfig, err = c.Kubeconfig(); err != nil {
		m.t.Fatal(err)
	}
	return s
}

// newRoot returns a fresh self-signed CA certificate, PEM.
func newRoot(t *testing.T) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "multicluster root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// plugRoot creates the Secret cacerts with root in s's mesh namespace.
func (m *mesh) plugRoot(s *site, root string) {
	m.t.Helper()
	_, err := s.c.Client.CoreV1().Secrets(m.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cacerts"}, Data: map[string][]byte{"root-cert.pem": []byte(root)}}, metav1.CreateOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
}

// putSecret creates or replaces a remote cluster Secret named name in s.
func (m *mesh) putSecret(s *site, name string, data map[string][]byte) {
	m.t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{multicluster.SecretLabel: "true"}}, Data: data}
	secrets := s.c.Client.CoreV1().Secrets(m.ns)
	_, err := secrets.Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
	}
	if err != nil {
		m.t.Fatal(err)
	}
}

// linkRemote puts the Secret of remote (its kubeconfig under its ID) into
// in, as "istioctl create-remote-secret" would.
func (m *mesh) linkRemote(in, remote *site) {
	m.t.Helper()
	m.putSecret(in, "istio-remote-secret-"+remote.id, map[string][]byte{remote.id: remote.kubeconfig})
}

func (m *mesh) deleteSecret(s *site, name string) {
	m.t.Helper()
	if err := s.c.Client.CoreV1().Secrets(m.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// start runs meshd as name in cluster s with --multicluster and only the
// namespace controller, and waits until it is ready.
func (m *mesh) start(name string, s *site, args ...string) *meshdproc.Process {
	m.t.Helper()
	ledgerFile := filepath.Join(m.dir, name+".ledger")
	p, err := meshdproc.Start(meshdproc.Options{
		Binary:      meshdBinary,
		Name:        name,
		Kubeconfig:  s.kubeconfigPath,
		Namespace:   m.ns,
		TTL:         ttl,
		Controllers: "namespace",
		LogDir:      filepath.Join(m.dir, "logs"),
		Args: append([]string{"--log-level=debug", "--cluster-id=" + s.id, "--multicluster", "--ledger-file=" + ledgerFile},
			args...),
		Env: []string{"GORACE=atexit_sleep_ms=0"},
	})
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.procs = append(m.procs, p)
	m.ledgers[p] = ledgerFile
	m.mu.Unlock()
	m.waitReady(p)
	return p
}

func (m *mesh) waitReady(p *meshdproc.Process) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		m.t.Fatal(err)
	}
}

// kill ends p with SIGKILL. Its ledger file is set aside: the terms it was
// running have no end in it, and would count as running until the end of
// the test.
func (m *mesh) kill(p *meshdproc.Process) {
	m.t.Helper()
	if err := p.Kill(); err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.ledgers[p]; f != "" {
		if err := os.Rename(f, f+".killed"); err != nil && !os.IsNotExist(err) {
			m.t.Fatal(err)
		}
	}
}

func (m *mesh) cleanup() {
	m.mu.Lock()
	procs := slices.Clone(m.procs)
	m.mu.Unlock()
	meshdproc.StopAll(m.t, procs)
}

// lock reads the namespace election's lock in s.
func (m *mesh) lock(s *site) lockstatus.Lock {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks, err := lockstatus.List(ctx, s.c.Client, m.ns)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, l := range locks {
		if l.Election == lockName {
			return l
		}
	}
	return lockstatus.Lock{}
}

// leaders returns, for each cluster ID, the running processes that say
// they lead that cluster's namespace election.
func (m *mesh) leaders() map[string][]string {
	m.mu.Lock()
	procs := slices.Clone(m.procs)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	answers := make([][]monitoring.Election, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		if p.Running() {
			// An error means exiting or not listening yet: it leads nothing.
			wg.Go(func() { answers[i], _ = p.Elections(ctx) })
		}
	}
	wg.Wait()
	out := map[string][]string{}
	for i, es := range answers {
		for _, e := range es {
			if e.Leader && e.Name == lockName {
				out[e.Cluster] = append(out[e.Cluster], procs[i].Name())
			}
		}
	}
	return out
}

// waitLeader waits until who is the only process that says it leads s's
// lock, and the lock names it with key. It returns how long that took.
func (m *mesh) waitLeader(s *site, who, key string, timeout time.Duration) time.Duration {
	m.t.Helper()
	start := time.Now()
	var last string
	for {
		ls := m.leaders()[s.id]
		l := m.lock(s)
		if len(ls) == 1 && ls[0] == who && l.Holder == who && l.HolderKey == key {
			return time.Since(start)
		}
		last = fmt.Sprintf("leaders %v, lock holder %q key %q", ls, l.Holder, l.HolderKey)
		if time.Since(start) > timeout {
			m.t.Fatalf("%s: %s did not lead with key %q within %v; %s", s.id, who, key, timeout, last)
		}
		time.Sleep(pollEvery)
	}
}

// sample asks every process which locks it leads, every 20ms until ctx
// ends, and records each time two of them claim the same cluster's lock in
// two samples in a row. It covers the processes that are killed, up to
// their death, which the ledgers do not. (The processes are asked at once
// but answer at slightly different instants, so a single sample taken
// across a handover could show both; the ledgers check those exactly.)
func (m *mesh) sample(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		previous := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := map[string]bool{}
			for cluster, ls := range m.leaders() {
				if len(ls) < 2 {
					continue
				}
				now[cluster] = true
				if previous[cluster] {
					m.mu.Lock()
					m.overlaps = append(m.overlaps, fmt.Sprintf("%s: %v lead at once", cluster, ls))
					m.mu.Unlock()
				}
			}
			previous = now
		}
	}()
	return func() { <-done }
}

// checkNoOverlap fails the test if two processes ran one cluster's
// controller at once: from the ledgers of every run that was not killed,
// and from what sample saw.
func (m *mesh) checkNoOverlap() {
	m.t.Helper()
	m.mu.Lock()
	var files []string
	for _, f := range m.ledgers {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	overlaps := slices.Clone(m.overlaps)
	m.mu.Unlock()
	for _, o := range overlaps {
		m.t.Errorf("sampled: %s", o)
	}
	l, err := ledger.ReadFiles(files...)
	if err != nil {
		m.t.Fatal(err)
	}
	elections := map[string]int{}
	for _, iv := range l.Intervals() {
		elections[iv.Election]++
	}
	for _, o := range l.Overlaps() {
		m.t.Errorf("ledger: %s: %s and %s ran the controller at once for %v", o.Election, o.A, o.B, o.Duration)
	}
	m.t.Logf("ledger: controller terms per cluster: %v", elections)
}

// published returns the root in namespace ns of s, "" when there is none.
func (m *mesh) published(s *site, ns string) string {
	cm, err := s.c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "istio-ca-root-cert", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return cm.Data["root-cert.pem"]
}

// waitPublished waits until namespace ns of s holds root.
func (m *mesh) waitPublished(s *site, ns, root string, timeout time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for m.published(s, ns) != root {
		if time.Now().After(deadline) {
			m.t.Fatalf("%s: namespace %s does not hold the mesh root within %v", s.id, ns, timeout)
		}
		time.Sleep(pollEvery)
	}
}

// clusterState returns what p's /debug/clusters says of cluster id.
func clusterState(p *meshdproc.Process, id string) (monitoring.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out []monitoring.Cluster
	if err := p.GetJSON(ctx, "/debug/clusters", &out); err != nil {
		return monitoring.Cluster{}, err
	}
	for _, c := range out {
		if c.ID == id {
			return c, nil
		}
	}
	return monitoring.Cluster{}, fmt.Errorf("%s: /debug/clusters lists no cluster %q: %+v", p.Name(), id, out)
}

// containsAll reports which of wants s lacks.
func lacks(s string, wants ...string) []string {
	var out []string
	for _, w := range wants {
		if !strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}
