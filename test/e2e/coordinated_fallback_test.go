package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/pkg/election"
)

// fallbackLine is the warning meshd logs once when coordinated mode was
// asked for and the API server does not serve LeaseCandidates.
const fallbackLine = "the API server does not serve coordination.k8s.io/v1beta1 LeaseCandidates; meshd's Lease elections race instead"

// withArgs appends args to the command line.
func withArgs(args ...string) option {
	return func(o *meshdproc.Options) { o.Args = append(o.Args, args...) }
}

// This package's API server has no coordinated leader election: meshd run
// --election-mode coordinated says so in one log line and races, so its
// elections behave as in racing mode (holders are meshd identities, a
// released lock is taken at once) and no coordinator election runs.
func TestCoordinatedModeFallsBackToRacingOnAPlainServer(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	a := m.start("a", "stable", withTTL(ttl), withArgs("--election-mode=coordinated"))
	locks := []string{namespaceLock, statusLock, revisionLock("stable")}
	m.watchLeaders(locks, in("a")).wait(t, 10*time.Second)
	b := m.start("b", "stable", withTTL(ttl), withArgs("--election-mode=coordinated"))

	w := m.watchLeaders(locks, in("b"))
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(ttl); err != nil {
		t.Fatalf("a after SIGTERM: %v, want exit status 0", err)
	}
	for l, took := range w.wait(t, ttl) {
		t.Logf("%s: b leads %v after SIGTERM", l, took.Round(time.Millisecond))
		if took >= ttl/2 {
			t.Errorf("%s: b took over %v after SIGTERM; a released lock should be taken within ttl/2 (%v)", l, took, ttl/2)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cluster.Client.CoordinationV1().Leases(m.ns).Get(ctx, election.CoordinatorElectionID, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Lease %s: %v, want not found: a racing daemon runs no coordinator", election.CoordinatorElectionID, err)
	}
	for _, p := range []*meshdproc.Process{a, b} {
		if n := strings.Count(p.Log(), fallbackLine); n != 1 {
			t.Errorf("%s logged %q %d times, want once", p.Name(), fallbackLine, n)
		}
	}
}
