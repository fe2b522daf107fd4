// Package testcluster runs a real Kubernetes control plane (etcd and
// kube-apiserver, no controller-manager, scheduler or kubelet) on loopback
// for tests and local development.
//
// The binaries are built from Go modules by tools/kube/build.sh ("make
// kube-bins") and looked up in $KUBE_BIN_DIR or in .cache/kube/bin at the
// repository root. When they are missing, Start fails with an error telling
// the caller to run make kube-bins; tests fail rather than skip.
//
// A test package normally starts one cluster for all its tests:
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		c := testcluster.Get(t)
//		ns := c.NewNamespace(t)
//		_, err := c.Client.CoreV1().ConfigMaps(ns).Create(...)
//	}
//
// Because no controllers run, namespaces that are deleted stay Terminating
// forever, ServiceAccounts get no automatic "default" account or token, and
// nothing is garbage collected (the apiserver runs with the garbage collector
// disabled, so deletes never wait on finalizers it would add). Pods can be
// created but are never scheduled or run.
//
// Authentication uses a static token file: AdminUser is in system:masters,
// and RestrictedUsers have no groups beyond system:authenticated, so tests
// can grant them exactly the RBAC they need. ServiceAccountConfig mints
// real ServiceAccount tokens through the TokenRequest API.
package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/errlist"
)

// AdminUser is the static user behind Cluster.Config. It is a member of
// system:masters and so bypasses RBAC.
const AdminUser = "meshd-admin"

// RestrictedUsers are static users with no groups beyond
// system:authenticated. They can do nothing until a test binds RBAC to them;
// use ConfigForUser to act as one.
var RestrictedUsers = []string{"meshd-restricted-1", "meshd-restricted-2", "meshd-restricted-3"}

// User is an additional static user for Options.ExtraUsers.
type User struct {
	Name   string
	Groups []string
}

// Options configure Start. The zero value is ready to use.
type Options struct {
	// BinDir is the directory holding the etcd and kube-apiserver binaries.
	// Empty means $KUBE_BIN_DIR, else .cache/kube/bin at the repository root.
	BinDir string

	// Dir holds all state: etcd data, keys, certificates, the token file and
	// the logs. It must not exist or be empty, and Stop leaves it in place.
	// Empty means a fresh temporary directory that Stop removes.
	Dir string

	// StartTimeout bounds how long each component may take to become ready,
	// on Start and on every restart. Zero means 2 minutes.
	StartTimeout time.Duration

	// Verbosity is kube-apiserver's --v level. Zero keeps logs short.
	Verbosity int

	// ExtraUsers are static users added to AdminUser and RestrictedUsers.
	ExtraUsers []User

	// APIServerFlags are appended to kube-apiserver's command line, so they
	// override the defaults (for example "--feature-gates=...").
	APIServerFlags []string
}

// Cluster is a running etcd and kube-apiserver pair. Its methods are safe
// for concurrent use, but RestartAPIServer and RestartEtcd interrupt every
// client of the cluster, so tests calling them should not run in parallel
// with tests sharing the same cluster.
type Cluster struct {
	// Config authenticates as AdminUser and trusts the apiserver's
	// self-signed serving certificate. Use rest.CopyConfig before changing it.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Dir holds the cluster's state and the logs etcd.log and
	// kube-apiserver.log.
	Dir string
	// EtcdURL is the etcd client URL (http, loopback).
	EtcdURL string

	opts    Options
	ownDir  bool
	users   map[string]staticUser
	etcd    *process
	api     *process
	apiURL  string
	apiPort int

	mu      sync.Mutex // serialises restarts and Stop
	stopped bool
}

// Start launches etcd and kube-apiserver on free 127.0.0.1 ports and waits
// until the apiserver reports ready. On error nothing is left running, and
// the error includes the tail of the failing component's log.
func Start(opts Options) (_ *Cluster, retErr error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	binDir, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}

	c := &Cluster{opts: opts}
	if opts.Dir == "" {
		removeStaleTempDirs()
		c.Dir, err = os.MkdirTemp("", tempDirPrefix)
		if err != nil {
			return nil, err
		}
		c.ownDir = true
		if err := os.WriteFile(c.path(ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			os.RemoveAll(c.Dir)
			return nil, err
		}
	} else {
		if c.Dir, err = prepareDir(opts.Dir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if retErr != nil {
			c.stopProcesses()
			if c.ownDir {
				os.RemoveAll(c.Dir)
			}
		}
	}()

	if err := c.writeCredentials(); err != nil {
		return nil, err
	}
	for _, d := range []string{"etcd", "certs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}

	// A port found free can be taken by another process before the child
	// binds it; start again on new ports when that happens.
	const attempts = 3
	for i := 1; ; i++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		c.etcd = c.newEtcd(filepath.Join(binDir, etcdBinary), ports[0], ports[1])
		err = c.startEtcd()
		if err == nil {
			break
		}
		if i == attempts || !c.etcd.lostPortRace() {
			return nil, err
		}
		// Start over with an empty data dir that has never seen the old ports.
		if err := os.RemoveAll(c.path("etcd")); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(c.path("etcd"), 0o700); err != nil {
			return nil, err
		}
	}
	for i := 1; ; i++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		c.api = c.newAPIServer(filepath.Join(binDir, apiserverBinary), ports[0])
		err = c.startAPIServer()
		if err == nil {
			break
		}
		if i == attempts || !c.api.lostPortRace() {
			return nil, err
		}
	}
	if err := c.buildClients(); err != nil {
		return nil, err
	}
	return c, nil
}

const (
	tempDirPrefix = "meshd-testcluster-"
	// ownerFile in a temporary state directory holds the pid of the process
	// that created it.
	ownerFile = "owner.pid"
)

// removeStaleTempDirs deletes temporary state directories left behind by
// processes that were killed before they could call Stop (their children
// died with them). Directories whose owner is alive, or unknown, are kept.
func removeStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// prepareDir creates dir if needed and checks that it is empty.
func prepareDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("testcluster: Options.Dir %s is not empty; remove it or choose another", dir)
	}
	return dir, nil
}

// writeCredentials creates the service account key pair and the static
// token file.
func (c *Cluster) writeCredentials() error {
	if err := writeServiceAccountKeys(c.path("sa.key"), c.path("sa.pub")); err != nil {
		return err
	}
	all := []User{{Name: AdminUser, Groups: []string{"system:masters"}}}
	for _, name := range RestrictedUsers {
		all = append(all, User{Name: name})
	}
	all = append(all, c.opts.ExtraUsers...)
	c.users = make(map[string]staticUser, len(all))
	var list []staticUser
	for _, u := range all {
		if u.Name == "" || strings.ContainsAny(u.Name, ",\"\n") {
			return fmt.Errorf("testcluster: invalid static user name %q", u.Name)
		}
		if _, dup := c.users[u.Name]; dup {
			return fmt.Errorf("testcluster: duplicate static user %q", u.Name)
		}
		token, err := randomToken()
		if err != nil {
			return err
		}
		su := staticUser{name: u.Name, token: token, groups: slices.Clone(u.Groups)}
		c.users[u.Name] = su
		list = append(list, su)
	}
	return writeTokenFile(c.path("tokens.csv"), list)
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

func (c *Cluster) newEtcd(bin string, clientPort, peerPort int) *process {
	c.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	return &process{
		name: "etcd",
		path: bin,
		args: []string{
			"--name=testcluster",
			"--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + c.EtcdURL,
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--log-level=warn",
			// The data is disposable; skipping fsync makes writes much faster.
			"--unsafe-no-fsync",
			"--start-timeout=" + c.opts.StartTimeout.String(),
			// The data is closed before this grace starts; it only bounds
			// how long open watch streams can delay a restart.
			"--shutdown-grace=1s",
		},
		logPath: c.path("etcd.log"),
	}
}

func (c *Cluster) newAPIServer(bin string, port int) *process {
	c.apiPort = port
	c.apiURL = "https://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// The apiserver writes a self-signed serving certificate here on
		// first start and reuses it on restarts.
		"--cert-dir=" + c.path("certs"),
		"--token-auth-file=" + c.path("tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--authorization-mode=RBAC",
		// Needed for the default/kubernetes Service; nothing routes to it.
		"--service-cluster-ip-range=10.0.0.0/24",
		// Endpoints may not hold loopback addresses, so do not publish the
		// apiserver's own address.
		"--endpoint-reconciler-type=none",
		// No garbage collector runs: keep deletes from waiting on it.
		"--enable-garbage-collector=false",
		// The ServiceAccount plugin rejects pods until a controller has
		// created the namespace's default account, which never happens here.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
		// Open watches otherwise hold a graceful stop for up to a minute,
		// which makes RestartAPIServer slow for tests that watch.
		"--shutdown-watch-termination-grace-period=2s",
		"--v=" + strconv.Itoa(c.opts.Verbosity),
	}
	args = append(args, c.opts.APIServerFlags...)
	return &process{name: "kube-apiserver", path: bin, args: args, logPath: c.path("kube-apiserver.log")}
}

// lostPortRace reports whether the last run exited because its port was
// already taken.
func (p *process) lostPortRace() bool {
	return !p.running() && strings.Contains(p.logTail(50), "address already in use")
}

// startEtcd starts etcd and waits until its /health endpoint reports
// healthy.
func (c *Cluster) startEtcd() error {
	if err := c.etcd.start(); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	err := waitFor(c.opts.StartTimeout, c.etcd, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.EtcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"true"`) {
			return fmt.Errorf("/health: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	})
	if err != nil {
		_ = c.etcd.stop(10 * time.Second)
		return fmt.Errorf("testcluster: etcd did not become healthy: %w\n--- tail of %s ---\n%s",
			err, c.etcd.logPath, c.etcd.logTail(40))
	}
	return nil
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (c *Cluster) startAPIServer() error {
	if err := c.api.start(); err != nil {
		return err
	}
	if err := c.waitAPIServerReady(); err != nil {
		_ = c.api.stop(10 * time.Second)
		return err
	}
	return nil
}

// waitAPIServerReady polls /readyz as the admin until it answers 200.
func (c *Cluster) waitAPIServerReady() error {
	// The serving certificate may not exist yet when polling starts, so the
	// probe does not verify it; it only ever talks to 127.0.0.1.
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback readiness probe
			DisableKeepAlives: true,
		},
	}
	token := c.users[AdminUser].token
	err := waitFor(c.opts.StartTimeout, c.api, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.apiURL+"/readyz?verbose", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s: %s", resp.Status, failedChecks(string(body)))
		}
		return nil
	})
	if err != nil {
		msg := fmt.Sprintf("testcluster: kube-apiserver did not become ready: %v\n--- tail of %s ---\n%s",
			err, c.api.logPath, c.api.logTail(40))
		if !c.etcd.running() {
			msg += fmt.Sprintf("\n--- etcd is not running; tail of %s ---\n%s", c.etcd.logPath, c.etcd.logTail(20))
		}
		return errors.New(msg)
	}
	return nil
}

// failedChecks keeps the failing lines of a verbose /readyz answer.
func failedChecks(body string) string {
	var failed []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimSpace(line))
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(body)
	}
	return strings.Join(failed, "; ")
}

// waitFor calls probe every 200ms until it succeeds, p exits, or timeout
// passes. The error names the last probe failure.
func waitFor(timeout time.Duration, p *process, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	exited := p.exited()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		last = probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited: %v", p.name, p.exitError())
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v, last probe: %v", timeout, last)
		case <-tick.C:
		}
	}
}

// buildClients creates Config and Client, trusting the certificate the
// apiserver generated in its cert dir, and checks that they work.
func (c *Cluster) buildClients() error {
	ca, err := os.ReadFile(c.path(filepath.Join("certs", "apiserver.crt")))
	if err != nil {
		return fmt.Errorf("testcluster: read the apiserver's generated certificate: %w", err)
	}
	cfg := &rest.Config{
		Host:            c.apiURL,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		BearerToken:     c.users[AdminUser].token,
		UserAgent:       "meshd-testcluster",
		QPS:             100,
		Burst:           200,
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("testcluster: apiserver is ready but the admin client fails: %w", err)
	}
	c.Config = cfg
	c.Client = client
	return nil
}

// Host returns the apiserver URL, https://127.0.0.1:<port>.
func (c *Cluster) Host() string { return c.apiURL }

// ConfigForUser returns a config that authenticates as one of the static
// users: AdminUser, a name in RestrictedUsers, or one of Options.ExtraUsers.
// It panics for any other name, which is a mistake in the calling test.
func (c *Cluster) ConfigForUser(user string) *rest.Config {
	u, ok := c.users[user]
	if !ok {
		names := make([]string, 0, len(c.users))
		for n := range c.users {
			names = append(names, n)
		}
		slices.Sort(names)
		panic(fmt.Sprintf("testcluster: unknown static user %q (known: %s)", user, strings.Join(names, ", ")))
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = u.token
	return cfg
}

// ServiceAccountConfig returns a config that authenticates as the
// ServiceAccount namespace/name, creating the account if it does not exist.
// The namespace must exist. The token comes from the TokenRequest API and is
// valid for 24 hours.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("testcluster: create ServiceAccount %s/%s: %w", namespace, name, err)
	}
	expiry := int64((24 * time.Hour).Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	tr, err = c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testcluster: request a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// RestartAPIServer stops kube-apiserver gracefully and starts it again with
// the same flags, port and data, then waits until it is ready.
func (c *Cluster) RestartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("testcluster: cluster is stopped")
	}
	// A kill after the grace period is still a stop: start it again either
	// way, so that a slow shutdown never leaves the cluster down.
	stopErr := c.api.stop(30 * time.Second)
	if err := c.api.start(); err != nil {
		return errlist.Join(stopErr, err)
	}
	return c.waitAPIServerReady()
}

// RestartEtcd stops etcd gracefully and starts it again on the same ports
// with the same data, then waits until etcd is healthy and the apiserver,
// which keeps running meanwhile, is ready again.
func (c *Cluster) RestartEtcd() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("testcluster: cluster is stopped")
	}
	stopErr := c.etcd.stop(30 * time.Second)
	if err := c.startEtcd(); err != nil {
		return errlist.Join(stopErr, err)
	}
	return c.waitAPIServerReady()
}

// Stop terminates kube-apiserver and etcd, killing them if they do not exit
// in time, and removes the state directory if Start created it. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	err := c.stopProcesses()
	if c.ownDir {
		if rerr := os.RemoveAll(c.Dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// stopProcesses stops the apiserver before etcd.
func (c *Cluster) stopProcesses() error {
	var errs []error
	if c.api != nil {
		errs = append(errs, c.api.stop(30*time.Second))
	}
	if c.etcd != nil {
		errs = append(errs, c.etcd.stop(30*time.Second))
	}
	return errlist.Join(errs...)
}

// LogTails returns the last lines of the etcd and kube-apiserver logs, for
// failure messages.
func (c *Cluster) LogTails(lines int) string {
	var b strings.Builder
	for _, p := range []*process{c.etcd, c.api} {
		if p != nil {
			fmt.Fprintf(&b, "--- tail of %s ---\n%s\n", p.logPath, p.logTail(lines))
		}
	}
	return b.String()
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testcluster: find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
