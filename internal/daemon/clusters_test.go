package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/election/lockread"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A remote cluster comes and goes with its Secret: its election and
// controller start, its series appear, and on removal the controller
// stops, the lock is released and the series go; it can come back.
func TestRemoteClusterFollowsItsSecret(t *testing.T) {
	checkLeaks(t)
	local := testcluster.Get(t)
	remote, err := testcluster.Start(testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remote.Stop(); err != nil {
			t.Error(err)
		}
	})
	ns := local.NewNamespace(t)
	ctx := context.Background()
	if _, err := remote.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		ctls = map[string]*testController{}
	)
	controllerOf := func(cluster string) *testController {
		mu.Lock()
		defer mu.Unlock()
		return ctls[cluster]
	}
	d := startDaemon(t, newClient(t, local), Config{Namespace: ns, Identity: "meshd-mc", TTL: 2 * time.Second,
		Kinds: []Kind{KindNamespace}, ClusterID: "east", Multicluster: true,
		Controllers: func(kind Kind, env ControllerEnv) ([]Controller, error) {
			if kind != KindNamespace || env.Remote != (env.Cluster == "west") || (env.SourceClient != nil) != env.Remote {
				t.Errorf("ControllerEnv for %s: kind %s, remote %v, source client %v", env.Cluster, kind, env.Remote, env.SourceClient != nil)
			}
			c := &testController{name: "test-" + env.Cluster}
			mu.Lock()
			ctls[env.Cluster] = c
			mu.Unlock()
			return []Controller{c}, nil
		}})
	waitReady(t, d)
	if got := clustersOf(t, d); len(got) != 1 || got[0].ID != "east" || got[0].State != ClusterLocal {
		t.Fatalf("/debug/clusters before any Secret: %+v", got)
	}

	kubeconfig, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "remotes", Labels: map[string]string{multicluster.SecretLabel: "true"}},
		Data: map[string][]byte{"west": kubeconfig, "east": []byte("ignored"), "bad": []byte("{{{")}}
	secrets := local.Client.CoreV1().Secrets(ns)
	westLock := func() (*resourcelock.Record, error) {
		return lockread.Read(ctx, remote.Client, resourcelock.ConfigMapsResourceLock, ns, election.NamespaceController)
	}
	series := `meshd_election_leader{cluster="west",name="` + election.NamespaceController + `",revision="default"} 1`
	for round := 1; round <= 2; round++ {
		if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			rec, err := westLock()
			if err != nil || rec == nil || rec.HolderIdentity != "meshd-mc" || rec.HolderKey != "^default" {
				return fmt.Errorf("west's lock %+v (err %v), want held by meshd-mc with key ^default", rec, err)
			}
			if c := controllerOf("west"); c == nil {
				return errors.New("no controller for west")
			} else if running, _ := c.state(); !running {
				return errors.New("west's controller is not running")
			}
			if _, metrics, err := d.get("/metrics"); err != nil || !strings.Contains(metrics, series) {
				return fmt.Errorf("/metrics lacks %s (err %v)", series, err)
			}
			return nil
		})
		es := electionsOf(t, d)
		if len(es) != 2 || es[0].Cluster != "east" || es[1].Cluster != "west" || !es[1].Leader {
			t.Errorf("round %d: /debug/elections %+v, want east's then west's, led", round, es)
		}
		cs := clustersOf(t, d)
		if len(cs) != 3 || cs[1].ID != "west" || cs[1].State != ClusterRunning || cs[2].ID != "bad" || cs[2].State != ClusterInvalid ||
			!strings.Contains(strings.Join(cs[2].Problems, ";"), "not a kubeconfig") {
			t.Errorf("round %d: /debug/clusters %+v", round, cs)
		}

		westCtl := controllerOf("west")
		if err := secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			if running, _ := westCtl.state(); running {
				return errors.New("west's controller still runs")
			}
			if rec, err := westLock(); err != nil || rec == nil || rec.HolderIdentity != "" {
				return fmt.Errorf("west's lock %+v (err %v), want released", rec, err)
			}
			if _, metrics, err := d.get("/metrics"); err != nil || strings.Contains(metrics, `cluster="west"`) {
				return fmt.Errorf("/metrics still has west's series (err %v)", err)
			}
			if es := electionsOf(t, d); len(es) != 1 {
				return fmt.Errorf("/debug/elections %+v, want only east's", es)
			}
			return nil
		})
	}
	if running, _ := controllerOf("east").state(); !running {
		t.Error("east's controller stopped")
	}
}

func clustersOf(t *testing.T, d *testDaemon) []monitoring.Cluster {
	t.Helper()
	var out []monitoring.Cluster
	getJSON(t, d, "/debug/clusters", &out)
	return out
}

func electionsOf(t *testing.T, d *testDaemon) []monitoring.Election {
	t.Helper()
	var out []monitoring.Election
	getJSON(t, d, "/debug/elections", &out)
	return out
}

func getJSON(t *testing.T, d *testDaemon, path string, out any) {
	t.Helper()
	code, body, err := d.get(path)
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: %d %v", path, code, err)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, body)
	}
}

func TestMulticlusterConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no namespace kind":       {Config{Multicluster: true, Kinds: []Kind{KindStatus}}, `Multicluster needs kind "namespace"`},
		"external without remote": {Config{ExternalControlPlane: true}, "ExternalControlPlane applies only with Multicluster"},
		"bad cluster ID":          {Config{ClusterID: "no spaces"}, `invalid ClusterID "no spaces"`},
	} {
		t.Run(name, func(t *testing.T) {
			var client kubernetes.Interface = fake.NewClientset()
			tc.cfg.Client = client
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
