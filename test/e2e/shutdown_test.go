package e2e

import (
	"fmt"
	"net/url"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/testing/faultproxy"
)

// With the API server stopped (its port refuses connections and every open
// connection is reset) or unreachable (every byte held), SIGTERM still ends a
// leading meshd with status 0 within min(ttl, 10s): every watcher and
// informer stops on its context, and the lock releases give up in time
// instead of waiting for a server that will not answer. Ten times out of ten,
// the last two with the default ttl of 30s (bound 10s).
func TestShutdownWithAPIServerStopped(t *testing.T) {
	const runs = 10
	host, err := url.Parse(cluster.Host())
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		fault, ttl := "stopped", 4*time.Second
		if i%2 == 1 {
			fault = "unreachable"
		}
		if i >= runs-2 {
			ttl = 30 * time.Second
		}
		bound := min(ttl, 10*time.Second)
		took := shutdownWithoutAPIServer(t, host.Host, fault, ttl)
		if took > bound {
			t.Fatalf("run %d (%s, ttl %v): exited 0 after %v, want within %v", i+1, fault, ttl, took, bound)
		}
		t.Logf("run %d (API server %s, ttl %v): exit 0 after %v (bound %v)", i+1, fault, ttl, took.Round(time.Millisecond), bound)
	}
}

// shutdownWithoutAPIServer starts a meshd that talks to the API server
// through a proxy, waits until it leads, takes the API server away (fault
// "stopped" or "unreachable"), sends SIGTERM and returns how long the
// process took to exit with status 0.
func shutdownWithoutAPIServer(t *testing.T, upstream, fault string, ttl time.Duration) time.Duration {
	t.Helper()
	m := newMesh(t)
	proxy, err := faultproxy.New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = "https://" + proxy.Addr()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, cfg, kubeconfig)

	p := m.start("stopping", "stable", withTTL(ttl), withKubeconfig(kubeconfig))
	for _, lock := range []string{namespaceLock, statusLock, revisionLock("stable")} {
		m.waitLeader(lock, 20*time.Second, in("stopping"))
	}
	switch fault {
	case "stopped":
		if err := proxy.Close(); err != nil {
			t.Fatal(err)
		}
	case "unreachable":
		proxy.Partition()
	default:
		panic(fmt.Sprintf("unknown fault %q", fault))
	}
	// Let the failures start: watches break, retries back off.
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = p.Wait(2 * min(ttl, 10*time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("API server %s, ttl %v: after %v: %v\n%s", fault, ttl, took, err, p.LogTail(30))
	}
	return took
}
