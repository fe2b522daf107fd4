package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers"
	ct "github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

const wait = 20 * time.Second

// writeLock creates a lock object holding rec.
func writeLock(t *testing.T, client kubernetes.Interface, kind, ns, name string, rec resourcelock.Record) resourcelock.Interface {
	t.Helper()
	identity := rec.HolderIdentity
	if identity == "" {
		identity = "nobody"
	}
	lock, err := resourcelock.New(kind, ns, name, client, resourcelock.Config{Identity: identity, Key: rec.HolderKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Create(ct.Context(t), rec); err != nil {
		t.Fatalf("create lock %s: %v", name, err)
	}
	return lock
}

func held(holder, key string, renew time.Time) resourcelock.Record {
	return resourcelock.Record{HolderIdentity: holder, HolderKey: key, LeaseDurationSeconds: 30,
		AcquireTime: metav1.NewTime(renew), RenewTime: metav1.NewTime(renew)}
}

func readStatus(t *testing.T, client kubernetes.Interface, ns string) (*corev1.ConfigMap, map[string]Leader, error) {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ct.Context(t), ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	var leaders map[string]Leader
	if err := json.Unmarshal([]byte(cm.Data[KeyLeaders]), &leaders); err != nil {
		return cm, nil, fmt.Errorf("leaders %q: %w", cm.Data[KeyLeaders], err)
	}
	return cm, leaders, nil
}

func TestWritesStatusOfHandMadeLocks(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	now := time.Now()

	leader := writeLock(t, c.Client, resourcelock.ConfigMapsResourceLock, mesh, "istio-leader", held("istiod-a", "canary", now))
	writeLock(t, c.Client, resourcelock.LeasesResourceLock, mesh, "meshd-revision-blue", held("istiod-b", "", now))
	writeLock(t, c.Client, resourcelock.LeasesResourceLock, mesh, "istio-status-leader", held("istiod-c", "^green", now.Add(-time.Hour)))
	writeLock(t, c.Client, resourcelock.ConfigMapsResourceLock, mesh, "istio-analyze-leader", resourcelock.Record{LeaseDurationSeconds: 30})
	// The status ConfigMap exists with someone else's keys, which must stay.
	_, err := c.Client.CoreV1().ConfigMaps(mesh).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Labels: map[string]string{"team": "a"}},
		Data:       map[string]string{"note": "keep", KeyRevisions: "stale"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	leaks := ct.LeakCheck(t)
	reg := prometheus.NewRegistry()
	ctrl, err := New(c.Client, Options{MeshNamespace: mesh, Identity: "meshd-x", Revision: "stable",
		Interval: 100 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	stop := ct.Run(t, ctrl)

	testutil.Eventually(t, wait, func() error {
		cm, leaders, err := readStatus(t, c.Client, mesh)
		if err != nil {
			return err
		}
		if got := cm.Data[KeyRevisions]; got != "blue\ncanary\nstable" {
			return fmt.Errorf("revisions = %q", got)
		}
		if cm.Data[KeyUpdatedBy] != "meshd-x" {
			return fmt.Errorf("updatedBy = %q", cm.Data[KeyUpdatedBy])
		}
		if ts, err := time.Parse(time.RFC3339, cm.Data[KeyUpdateTime]); err != nil || time.Since(ts) > time.Minute {
			return fmt.Errorf("updateTime = %q", cm.Data[KeyUpdateTime])
		}
		if cm.Data["note"] != "keep" || cm.Labels["team"] != "a" {
			return errors.New("other content of the status ConfigMap lost")
		}
		if len(leaders) != 2 {
			return fmt.Errorf("leaders = %v", leaders)
		}
		l := leaders["istio-leader"]
		if l.Holder != "istiod-a" || l.HolderKey != "canary" || l.Lock != "ConfigMap" {
			return fmt.Errorf("istio-leader = %+v", l)
		}
		if at, err := time.Parse(time.RFC3339, l.ExpireTime); err != nil || !at.After(time.Now().Add(-time.Second)) || at.After(time.Now().Add(31*time.Second)) {
			return fmt.Errorf("istio-leader expireTime = %q", l.ExpireTime)
		}
		if _, err := time.Parse(time.RFC3339, l.RenewTime); err != nil {
			return fmt.Errorf("istio-leader renewTime = %q", l.RenewTime)
		}
		if l := leaders["meshd-revision-blue"]; l.Holder != "istiod-b" || l.Lock != "Lease" {
			return fmt.Errorf("meshd-revision-blue = %+v", l)
		}
		return nil
	})

	// A release shows at the next refresh.
	if _, _, err := leader.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leader.Update(ctx, resourcelock.Record{LeaseDurationSeconds: 30, LeaderTransitions: 1}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		cm, leaders, err := readStatus(t, c.Client, mesh)
		if err != nil {
			return err
		}
		if got := cm.Data[KeyRevisions]; got != "blue\nstable" || len(leaders) != 1 {
			return fmt.Errorf("after release: revisions %q, leaders %v", got, leaders)
		}
		return nil
	})

	// Refreshes that find nothing new do not write: only heartbeats do.
	writes := ct.Counter(t, reg, "meshd_controller_writes_total", Name)
	reconciles := ct.Counter(t, reg, "meshd_controller_reconciles_total", Name)
	testutil.Eventually(t, wait, func() error {
		if n := ct.Counter(t, reg, "meshd_controller_reconciles_total", Name) - reconciles; n < 20 {
			return fmt.Errorf("%v refreshes so far", n)
		}
		return nil
	})
	dw := ct.Counter(t, reg, "meshd_controller_writes_total", Name) - writes
	dr := ct.Counter(t, reg, "meshd_controller_reconciles_total", Name) - reconciles
	t.Logf("%v writes in %v refreshes", dw, dr)
	if dw < 1 || dw*4 > dr {
		t.Errorf("%v writes in %v refreshes of an unchanged status: want at least one heartbeat, and few writes", dw, dr)
	}

	// A deleted status comes back.
	if err := c.Client.CoreV1().ConfigMaps(mesh).Delete(ctx, ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		cm, _, err := readStatus(t, c.Client, mesh)
		if err != nil {
			return err
		}
		if cm.Data[KeyRevisions] != "blue\nstable" {
			return fmt.Errorf("revisions = %q", cm.Data[KeyRevisions])
		}
		return nil
	})
	stop()
	leaks()
}

func TestTriggerRefreshesAtOnce(t *testing.T) {
	c := testcluster.Get(t)
	mesh := c.NewNamespace(t)
	leaks := ct.LeakCheck(t)
	ctrl, err := New(c.Client, Options{MeshNamespace: mesh, Identity: "meshd-y", Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stop := ct.Run(t, ctrl)
	testutil.Eventually(t, wait, func() error {
		cm, _, err := readStatus(t, c.Client, mesh)
		if err != nil {
			return err
		}
		if cm.Data[KeyRevisions] != "default" {
			return fmt.Errorf("revisions = %q", cm.Data[KeyRevisions])
		}
		return nil
	})

	writeLock(t, c.Client, resourcelock.LeasesResourceLock, mesh, "meshd-revision-canary", held("istiod-b", "canary", time.Now()))
	ctrl.Trigger()
	testutil.Eventually(t, wait, func() error {
		cm, leaders, err := readStatus(t, c.Client, mesh)
		if err != nil {
			return err
		}
		if cm.Data[KeyRevisions] != "canary\ndefault" || leaders["meshd-revision-canary"].Holder != "istiod-b" {
			return fmt.Errorf("revisions %q, leaders %v", cm.Data[KeyRevisions], leaders)
		}
		return nil
	})
	stop()
	leaks()
	ctrl.Trigger() // stopped: a no-op
}

func TestRunsOnlyWhileLeading(t *testing.T) {
	c := testcluster.Get(t)
	mesh := c.NewNamespace(t)
	leaks := ct.LeakCheck(t)

	type candidate struct {
		id   string
		stop func()
	}
	start := func(id string) *candidate {
		le, err := election.NewLeaderElection(mesh, id, ElectionID, "", c.Client, election.WithEnabled(true),
			election.WithTTL(2*time.Second), election.WithReleaseOnCancel(true))
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := New(c.Client, Options{MeshNamespace: mesh, Identity: id, Interval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		controllers.Gate(le, ctrl)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); le.RunContext(ctx) }()
		stop := func() {
			cancel()
			select {
			case <-done:
			case <-time.After(wait):
				t.Fatalf("%s: election did not stop", id)
			}
		}
		t.Cleanup(stop)
		return &candidate{id: id, stop: stop}
	}
	// leaderWrites waits until the status is written by the holder of the
	// status election, other than previous, and returns that holder.
	leaderWrites := func(previous string) string {
		var holder string
		testutil.Eventually(t, wait, func() error {
			cm, leaders, err := readStatus(t, c.Client, mesh)
			if err != nil {
				return err
			}
			holder = leaders[ElectionID].Holder
			if holder == "" || holder == previous || cm.Data[KeyUpdatedBy] != holder {
				return fmt.Errorf("updatedBy %q, %s held by %q", cm.Data[KeyUpdatedBy], ElectionID, holder)
			}
			return nil
		})
		return holder
	}

	a, b := start("meshd-a"), start("meshd-b")
	first := leaderWrites("")
	leader, follower := a, b
	if first == b.id {
		leader, follower = b, a
	}
	leader.stop()
	if got := leaderWrites(leader.id); got != follower.id {
		t.Fatalf("after %s stopped, the status is written by %s", leader.id, got)
	}
	follower.stop()
	leaks()
}
