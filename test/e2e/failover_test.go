package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A crashed leader cannot release its locks: the others must take over once
// the lease has run out, and not much later.
func TestKillLeaderFailsOverAfterLease(t *testing.T) {
	const ttl = 2 * time.Second
	m := newMesh(t)
	a := m.start("a", "stable", withTTL(ttl))
	locks := []string{namespaceLock, statusLock, revisionLock("stable")}
	m.watchLeaders(locks, in("a")).wait(t, 10*time.Second)
	m.start("b", "stable", withTTL(ttl))
	m.start("c", "stable", withTTL(ttl))

	w := m.watchLeaders(locks, not("a"))
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	// The lease runs from the last renewal the others saw, at most one
	// retry period before the kill; the margin covers the watch, one write
	// and a slow machine.
	bound := ttl + time.Second
	for l, took := range w.wait(t, bound+5*time.Second) {
		t.Logf("%s: %s leads %v after the kill (lease %v)", l, m.holder(l), took.Round(time.Millisecond), ttl)
		if took > bound {
			t.Errorf("%s: failover took %v, want at most the lease (%v) plus 1s", l, took, ttl)
		}
	}
}

// SIGTERM makes meshd stop its controllers, release every lock it holds and
// exit 0 at once; a follower takes over long before the lease would expire.
func TestSigtermReleasesLocksAndExitsZero(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	a := m.start("a", "stable", withTTL(ttl))
	locks := []string{namespaceLock, statusLock, revisionLock("stable")}
	m.watchLeaders(locks, in("a")).wait(t, 10*time.Second)
	m.start("b", "stable", withTTL(ttl))

	w := m.watchLeaders(locks, in("b"))
	sent := time.Now()
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(ttl); err != nil {
		t.Fatalf("a after SIGTERM: %v, want exit status 0", err)
	}
	exited := a.ExitedAt().Sub(sent)
	t.Logf("a exited %v after SIGTERM", exited.Round(time.Millisecond))
	if exited > 2*time.Second {
		t.Errorf("a took %v to exit after SIGTERM, want under 2s", exited)
	}
	// Once a is gone no lock may still name it: each was released (holder
	// empty) or already taken over by b.
	for _, l := range locks {
		if h := m.holder(l); h != "" && h != "b" {
			t.Errorf("%s names %q after a exited, want it released or held by b", l, h)
		}
	}
	for l, took := range w.wait(t, ttl) {
		t.Logf("%s: b leads %v after SIGTERM", l, took.Round(time.Millisecond))
		if took >= ttl/2 {
			t.Errorf("%s: b took over %v after SIGTERM; a released lock should be taken within ttl/2 (%v), not at expiry", l, took, ttl/2)
		}
	}
}

// A leader that crashed and comes back joins as a follower: the instance
// that took over keeps leading, and the restarted one knows who leads.
func TestRestartedInstanceRejoinsAsFollower(t *testing.T) {
	const ttl = 2 * time.Second
	m := newMesh(t)
	a := m.start("a", "stable", withTTL(ttl))
	locks := []string{namespaceLock, statusLock, revisionLock("stable")}
	m.watchLeaders(locks, in("a")).wait(t, 10*time.Second)
	m.start("b", "stable", withTTL(ttl))
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	m.watchLeaders(locks, in("b")).wait(t, ttl+5*time.Second)
	transitions := map[string]int{}
	for _, l := range locks {
		rec, _ := m.lock(l)
		transitions[l] = rec.Transitions
	}

	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	m.waitReady(a)
	followsB := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := a.Elections(ctx)
		if err != nil {
			return err
		}
		if len(st) != len(locks) {
			return fmt.Errorf("a reports %d elections, want %d", len(st), len(locks))
		}
		for _, s := range st {
			if s.Leader || s.Holder != "b" {
				return fmt.Errorf("a reports %s: leader=%v holder=%q, want a follower of b", s.Name, s.Leader, s.Holder)
			}
		}
		return nil
	}
	testutil.Eventually(t, 5*time.Second, followsB)
	// Two whole leases: plenty of renewals by b that a must accept.
	testutil.Consistently(t, 2*ttl, func() error {
		if err := followsB(); err != nil {
			return err
		}
		for _, l := range locks {
			if ls := m.leaders(l); len(ls) != 1 || ls[0] != "b" {
				return fmt.Errorf("%s: leaders %v, want [b]", l, ls)
			}
		}
		return nil
	})
	for _, l := range locks {
		if rec, _ := m.lock(l); rec.Holder != "b" || rec.Transitions != transitions[l] {
			t.Errorf("%s: holder %q with %d transitions, want b still, with %d", l, rec.Holder, rec.Transitions, transitions[l])
		}
	}
}

// An instance that is stopped just after the old leader handed it the
// lock, possibly before it confirmed the handover, must still release the
// lock on its way out: nobody should wait for the lease to expire.
func TestSigtermJustAfterHandoverReleases(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	m.start("canary-1", "canary", withTTL(ttl))
	m.waitLeader(namespaceLock, 10*time.Second, in("canary-1"))
	stable := m.start("stable-1", "stable", withTTL(ttl))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch, err := cluster.Client.CoreV1().ConfigMaps(m.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", namespaceLock).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	m.setDefault("stable")
	// Stop stable-1 the moment the record names it.
	var sent time.Time
	for ev := range watch.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
		if err == nil && rec.HolderIdentity == "stable-1" {
			sent = time.Now()
			if err := stable.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if sent.IsZero() {
		t.Fatal("the lock never named stable-1")
	}
	if err := stable.Wait(ttl); err != nil {
		t.Fatalf("stable-1 after SIGTERM: %v, want exit status 0", err)
	}
	if h := m.holder(namespaceLock); h == "stable-1" {
		t.Errorf("%s still names stable-1 after it exited: it was not released", namespaceLock)
	}
	m.waitLeader(namespaceLock, ttl+5*time.Second, in("canary-1"))
	took := time.Since(sent)
	t.Logf("canary-1 leads again %v after stable-1 was stopped", took.Round(time.Millisecond))
	if took >= ttl/2 {
		t.Errorf("canary-1 took over %v after SIGTERM; a released lock should be taken within ttl/2 (%v), not at expiry", took, ttl/2)
	}
}
