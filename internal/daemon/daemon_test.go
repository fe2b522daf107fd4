package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// checkLeaks fails the test if it leaves goroutines behind. Call it first:
// the check runs after every later cleanup, including the daemons' stop. It
// ignores what outlives a test by design: the goroutines present when it
// started (the shared cluster's client) and idle keep-alive connections of
// client-go's shared transports.
func checkLeaks(t *testing.T) {
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// testController counts how often it runs and whether it is running now.
type testController struct {
	name string
	// block, when not nil, makes Run ignore its context until it is closed.
	block chan struct{}

	mu      sync.Mutex
	running bool
	starts  int
}

func (c *testController) Name() string { return c.name }

func (c *testController) Run(ctx context.Context) {
	c.mu.Lock()
	c.running = true
	c.starts++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	if c.block != nil {
		<-c.block
		return
	}
	<-ctx.Done()
}

func (c *testController) state() (running bool, starts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running, c.starts
}

// testDaemon is a Daemon running in this process with test controllers.
type testDaemon struct {
	daemon      *Daemon
	identity    string
	url         string
	cancel      context.CancelFunc
	done        chan error
	controllers map[Kind]*testController
}

func startDaemon(t *testing.T, client kubernetes.Interface, cfg Config) *testDaemon {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{identity: cfg.Identity, url: "http://" + ln.Addr().String(), done: make(chan error, 1),
		controllers: map[Kind]*testController{}}
	cfg.Client = client
	cfg.MonitoringListener = ln
	cfg.Logger = zaptest.NewLogger(t).Named(cfg.Identity)
	if cfg.Controllers == nil {
		cfg.Controllers = func(kind Kind, env ControllerEnv) ([]Controller, error) {
			if env.Identity != cfg.Identity || env.Registerer == nil || env.Logger == nil {
				t.Errorf("ControllerEnv %+v", env)
			}
			c := &testController{name: "test-" + string(kind)}
			td.controllers[kind] = c
			return []Controller{c}, nil
		}
	}
	d, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td.daemon, td.cancel = d, cancel
	go func() { td.done <- d.Run(ctx) }()
	t.Cleanup(func() { td.stop(t) })
	return td
}

// stop cancels the daemon and waits for Run; it may be called again.
func (td *testDaemon) stop(t *testing.T) {
	t.Helper()
	td.cancel()
	if td.done == nil {
		return
	}
	select {
	case err := <-td.done:
		td.done = nil
		if err != nil {
			t.Errorf("%s: Run: %v", td.identity, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Run did not return", td.identity)
	}
}

func (td *testDaemon) get(path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(td.url + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func (td *testDaemon) elections(t *testing.T) map[string]election.Status {
	t.Helper()
	code, body, err := td.get("/debug/elections")
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: /debug/elections: %d %v", td.identity, code, err)
	}
	var list []election.Status
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("%s: /debug/elections: %v\n%s", td.identity, err, body)
	}
	byID := map[string]election.Status{}
	for _, s := range list {
		byID[s.ID] = s
	}
	return byID
}

func waitReady(t *testing.T, d *testDaemon) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		code, body, err := d.get("/readyz")
		if err == nil && code != http.StatusOK {
			err = errors.New(body)
		}
		return err
	})
}

var electionIDs = []string{election.NamespaceController, status.ElectionID, revision.ElectionID}

// leaders returns, per election ID, the identities that report leading.
func leaders(t *testing.T, daemons ...*testDaemon) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, d := range daemons {
		for id, s := range d.elections(t) {
			if s.Leader {
				out[id] = append(out[id], d.identity)
			}
		}
	}
	return out
}

func TestTwoDaemonsHandOver(t *testing.T) {
	checkLeaks(t)
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)

	a := startDaemon(t, newClient(t, c), Config{Namespace: ns, Identity: "meshd-a", TTL: 2 * time.Second})
	b := startDaemon(t, newClient(t, c), Config{Namespace: ns, Identity: "meshd-b", TTL: 2 * time.Second})
	byIdentity := map[string]*testDaemon{a.identity: a, b.identity: b}

	waitReady(t, a)
	waitReady(t, b)

	// Exactly one leader per election, the same one seen by both.
	var first *testDaemon
	testutil.Eventually(t, 20*time.Second, func() error {
		l := leaders(t, a, b)
		for _, id := range electionIDs {
			if len(l[id]) != 1 {
				return errors.New(id + ": leaders " + strings.Join(l[id], ","))
			}
		}
		leader := l[election.NamespaceController][0]
		for _, d := range []*testDaemon{a, b} {
			if h := d.elections(t)[election.NamespaceController].Holder; h != leader {
				return errors.New(d.identity + " sees holder " + h)
			}
		}
		first = byIdentity[leader]
		return nil
	})
	second := a
	if first == a {
		second = b
	}
	nsStatus := first.elections(t)[election.NamespaceController]
	if nsStatus.Lock != election.ConfigMapLock || nsStatus.Namespace != ns || nsStatus.Name != election.NamespaceController ||
		nsStatus.HolderKey != "default" || nsStatus.Revision != "default" || nsStatus.Remote {
		t.Fatalf("namespace election status: %+v", nsStatus)
	}
	if s := first.elections(t)[revision.ElectionID]; s.Lock != election.LeaseLock || s.Name != "meshd-revision-default" {
		t.Fatalf("revision election status: %+v", s)
	}
	if s := first.elections(t)[status.ElectionID]; s.Lock != election.LeaseLock || s.HolderKey != "default" {
		t.Fatalf("status election status: %+v", s)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if running, _ := first.controllers[KindNamespace].state(); !running {
			return errors.New("not running")
		}
		return nil
	})
	if running, starts := second.controllers[KindNamespace].state(); running || starts != 0 {
		t.Fatalf("follower's namespace controller ran: running=%v starts=%d", running, starts)
	}
	transitions := nsStatus.Transitions

	// Endpoints of a healthy leader.
	if code, body, err := first.get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}
	code, metrics, err := first.get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, want := range []string{
		`meshd_election_leader{cluster="Kubernetes",name="istio-namespace-controller-election",revision="default"} 1`,
		`leader_election_master_status{cluster="Kubernetes",name="istio-namespace-controller-election",revision="default"} 1`,
		// The per-revision election may be led by either daemon; the
		// namespace election is led by this one.
		`meshd_election_acquired_total{cluster="Kubernetes",name="istio-namespace-controller-election",revision="default"} 1`,
		// Counters exist at 0 before anything happened.
		`meshd_election_steals_total{cluster="Kubernetes",name="meshd-status-leader",revision="default"} 0`,
		`leader_election_slowpath_total{cluster="Kubernetes",name="meshd-revision-default",revision="default"} `,
		// API requests by verb and status code.
		`rest_client_requests_total{code="200",host="`,
		`rest_client_request_duration_seconds_bucket{host="`,
		`verb="GET"`,
		"go_goroutines",
		"process_start_time_seconds",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The leader stops: it releases its locks and the other takes over.
	stopped := time.Now()
	first.stop(t)
	if running, _ := first.controllers[KindNamespace].state(); running {
		t.Fatal("controller still running after Run returned")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		l := leaders(t, second)
		for _, id := range electionIDs {
			if len(l[id]) != 1 {
				return errors.New(id + " not led")
			}
		}
		return nil
	})
	t.Logf("handover of all elections took %v", time.Since(stopped).Round(time.Millisecond))
	s := second.elections(t)[election.NamespaceController]
	if s.Holder != second.identity || s.Transitions != transitions+1 {
		t.Fatalf("after handover: %+v (transitions before %d)", s, transitions)
	}

	// Lock events reach the API server under the component "meshd".
	testutil.Eventually(t, 10*time.Second, func() error {
		events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Source.Component == EventComponent && e.Reason == "LeaderElection" && e.InvolvedObject.Name == election.NamespaceController {
				return nil
			}
		}
		return errors.New("no event yet")
	})

	// The last one stops: every lock is left released.
	second.stop(t)
	ctx := context.Background()
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, election.NamespaceController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		t.Fatal(err)
	}
	if rec.HolderIdentity != "" {
		t.Fatalf("ConfigMap lock still held after shutdown: %+v", rec)
	}
	for _, name := range []string{status.ElectionID, "meshd-revision-default"} {
		lease, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec := resourcelock.LeaseToRecord(lease); rec.HolderIdentity != "" {
			t.Fatalf("Lease %s still held after shutdown: %+v", name, rec)
		}
	}
}

func newClient(t *testing.T, c *testcluster.Cluster) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func TestRemoteInstanceWritesRemoteKey(t *testing.T) {
	checkLeaks(t)
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	d := startDaemon(t, newClient(t, c), Config{Namespace: ns, Identity: "meshd-remote", Revision: "canary", Remote: true,
		TTL: 2 * time.Second, Kinds: []Kind{KindNamespace}})
	testutil.Eventually(t, 20*time.Second, func() error {
		s := d.elections(t)[election.NamespaceController]
		if !s.Leader || s.HolderKey != "^canary" || !s.Remote || s.Revision != "canary" {
			return errors.New("status " + s.Holder + " " + s.HolderKey)
		}
		return nil
	})
	if got := len(d.elections(t)); got != 1 {
		t.Fatalf("%d elections, want only the namespace election", got)
	}
	if _, ok := d.controllers[KindStatus]; ok {
		t.Fatal("controllers built for an unselected kind")
	}
}

func TestShutdownTimeout(t *testing.T) {
	// A controller that ignores its context keeps the daemon from stopping:
	// Run gives up after ShutdownTimeout and says so.
	block := make(chan struct{})
	checkLeaks(t)
	defer close(block)

	client := fake.NewClientset()
	var ctl *testController
	d := startDaemon(t, client, Config{Namespace: "istio-system", Identity: "stuck", TTL: time.Second,
		Kinds: []Kind{KindRevision}, ShutdownTimeout: 500 * time.Millisecond,
		Controllers: func(Kind, ControllerEnv) ([]Controller, error) {
			ctl = &testController{name: "stuck", block: block}
			return []Controller{ctl}, nil
		}})
	testutil.Eventually(t, 10*time.Second, func() error {
		if running, _ := ctl.state(); !running {
			return errors.New("not running")
		}
		return nil
	})
	start := time.Now()
	d.cancel()
	select {
	case err := <-d.done:
		d.done = nil
		if !errors.Is(err, ErrShutdownTimeout) || !strings.Contains(err.Error(), revision.ElectionID) {
			t.Fatalf("Run: %v, want ErrShutdownTimeout naming the election", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("Run took %v to give up", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not give up")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	checkLeaks(t) // New starts nothing
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}})
	d, err := New(Config{Client: client, Identity: "x", TTL: time.Second, Controllers: noControllers})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ready(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("Ready before Run = %v", err)
	}
	if err := d.Healthy(); err != nil {
		t.Fatalf("Healthy before Run = %v", err)
	}
	if got := len(d.Elections()); got != 3 {
		t.Fatalf("%d elections, want 3", got)
	}
	for _, e := range d.Elections() {
		s := e.Status
		if s.Leader || s.Namespace != "istio-system" {
			t.Fatalf("status before Run: %+v", s)
		}
	}
}

func noControllers(Kind, ControllerEnv) ([]Controller, error) { return nil, nil }

func TestNewRejectsBadConfig(t *testing.T) {
	checkLeaks(t)
	_, err := New(Config{Namespace: "Not_A_Namespace", TTL: 500 * time.Millisecond, Kinds: []Kind{"nope", KindStatus, KindStatus},
		HealthTolerance: -1, Controllers: noControllers})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{"Client is required", "invalid Namespace", "TTL 500ms", `unknown kind "nope"`, `"status" given twice`, "HealthTolerance"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	_, err = New(Config{Client: fake.NewClientset(), Revision: "Bad_Rev", TTL: time.Second, Controllers: noControllers})
	if err == nil || !strings.Contains(err.Error(), "Bad_Rev") {
		t.Fatalf("bad revision: %v", err)
	}

	_, err = New(Config{Client: fake.NewClientset(), TTL: time.Second,
		Controllers: func(k Kind, _ ControllerEnv) ([]Controller, error) { return nil, errors.New("boom " + string(k)) }})
	if err == nil || !strings.Contains(err.Error(), "boom namespace") {
		t.Fatalf("factory error: %v", err)
	}
}

func TestRunTwice(t *testing.T) {
	checkLeaks(t)
	td := startDaemon(t, fake.NewClientset(), Config{Identity: "twice", TTL: time.Second, Kinds: []Kind{KindRevision}})
	waitReady(t, td)
	if err := td.daemon.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("second Run = %v", err)
	}
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Kind
		err  string
	}{
		{"namespace,status,revision", AllKinds(), ""},
		{" revision , namespace,revision", []Kind{KindNamespace, KindRevision}, ""},
		{"status", []Kind{KindStatus}, ""},
		{"", nil, "no controllers selected"},
		{" , ", nil, "no controllers selected"},
		{"namespace,ingress,foo", nil, `unknown controllers "ingress", "foo"`},
	} {
		got, err := ParseKinds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseKinds(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(kindStrings(got), ",") != strings.Join(kindStrings(tc.want), ",") {
			t.Errorf("ParseKinds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func kindStrings(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func TestBuiltinControllers(t *testing.T) {
	checkLeaks(t)
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	root := createCASecret(t, c.Client, ns, "cacerts", "root-cert.pem")
	d := startDaemon(t, newClient(t, c), Config{Namespace: ns, Identity: "meshd-builtin", Revision: "canary",
		TTL: 2 * time.Second, Controllers: BuiltinControllers})

	ctx := context.Background()
	for _, name := range []string{"meshd-status", "meshd-revision-canary", "istio-ca-root-cert"} {
		testutil.Eventually(t, 30*time.Second, func() error {
			_, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	published, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
	if err != nil || published.Data["root-cert.pem"] != root {
		t.Fatalf("published root is not the cacerts Secret's root-cert.pem byte for byte (err %v)", err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "meshd-root-cert", metav1.GetOptions{}); err == nil {
		t.Error("a self-signed source was created although the setting is off")
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		_, metrics, err := d.get("/metrics")
		if err != nil {
			return err
		}
		for _, ctl := range []string{"namespace", "status", "revision"} {
			if want := `meshd_controller_writes_total{cluster="Kubernetes",controller="` + ctl + `",revision="canary"}`; !strings.Contains(metrics, want) {
				return errors.New("no " + want)
			}
		}
		return nil
	})
	d.stop(t)
}

// createCASecret creates Secret name in ns holding a fresh self-signed CA
// certificate under key, and returns the PEM text.
func createCASecret(t *testing.T, client kubernetes.Interface, ns, name, key string) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	_, err = client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{key: []byte(cert)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Without a CA Secret the namespace controller publishes nothing and the
// daemon says why; an empty identity becomes a unique one.
func TestNoMeshRootIsReported(t *testing.T) {
	checkLeaks(t)
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	app := c.NewNamespace(t)
	d := startDaemon(t, newClient(t, c), Config{Namespace: ns, TTL: 2 * time.Second,
		Kinds: []Kind{KindNamespace}, Controllers: BuiltinControllers})
	ctx := context.Background()

	testutil.Eventually(t, 30*time.Second, func() error {
		code, body, err := d.get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "no mesh root certificate") ||
			!strings.Contains(body, ns+"/cacerts") || !strings.Contains(body, ns+"/istio-ca-secret") {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	_, body, err := d.get("/debug/elections")
	if err != nil {
		t.Fatal(err)
	}
	var list []monitoring.Election
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("/debug/elections: %v\n%s", err, body)
	}
	got := list[0]
	if !got.Leader || len(got.Problems) != 1 || !strings.Contains(got.Problems[0], "no mesh root certificate") {
		t.Errorf("/debug/elections: %+v", got)
	}
	if !regexp.MustCompile(`^.+_[0-9a-f]{8}$`).MatchString(got.Identity) || got.Holder != got.Identity {
		t.Errorf("identity %q, holder %q: want <hostname>_<suffix>, holding", got.Identity, got.Holder)
	}
	for _, n := range []string{ns, app} {
		if _, err := c.Client.CoreV1().ConfigMaps(n).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s: istio-ca-root-cert written without a CA Secret (err %v)", n, err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "NoMeshRoot" && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "cacerts" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none NoMeshRoot", len(events.Items))
	})

	// istiod's own CA appears: it is published, and the daemon is ready.
	root := createCASecret(t, c.Client, ns, "istio-ca-secret", "ca-cert.pem")
	testutil.Eventually(t, 30*time.Second, func() error {
		cm, err := c.Client.CoreV1().ConfigMaps(app).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["root-cert.pem"] != root {
			return errors.New("another root")
		}
		return nil
	})
	waitReady(t, d)
	d.stop(t)
}
