package coordinated

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/pkg/election"
)

// startOldest runs a candidate of the status election in
// OldestEmulationVersion mode, announcing version as its binary (and so
// emulation) version; its work is recorded in l. The returned function
// stops it and waits until it has.
func startOldest(t *testing.T, b *background, ns, identity, version string, l *ledger.Ledger) (stop func()) {
	t.Helper()
	le, err := election.New(cluster.Client, election.Spec{
		Namespace: ns, ElectionID: statusLease, Identity: identity, Revision: "stable",
		Lock: election.LeaseLock, Mode: election.OldestEmulationVersion,
	}, append(electionOpts(t, identity), election.WithBinaryVersion(version))...)
	if err != nil {
		t.Fatal(err)
	}
	le.Add(func(ctx context.Context) error {
		l.Wrap(statusLease, identity, func(ctx context.Context) { <-ctx.Done() })(ctx)
		return nil
	})
	return b.start(identity, le.RunContext)
}

// apiServerLogged reports whether kube-apiserver's log has a line with
// every one of parts: the leader-election controller logs each decision.
func apiServerLogged(t *testing.T, parts ...string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.Dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "leaderelection_controller.go") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// With Kubernetes' own strategy and no meshd coordinator, the API server's
// leader-election controller decides: it gives the vacant Lease to the
// only candidate, prefers the candidate with the oldest emulation version
// when it joins (the holder hands over), ignores a newer one joining, and
// when the oldest stops the lock goes straight to the next oldest.
func TestOldestEmulationVersionWithoutMeshdCoordinator(t *testing.T) {
	// The API server's controller runs once the API server has won its
	// own election, a few seconds after it is ready; until then meshd's
	// candidates would wait their patience out and race.
	waitFor(t, "the API server's leader-election controller", func() (bool, error) {
		l, err := cluster.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), "leader-election-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	ns := cluster.NewNamespace(t)
	b := newBackground(t)
	l := &ledger.Ledger{}
	holders := followLease(t, b, cluster.Client, ns, statusLease)
	name := func(identity string) string { return coordinated.CandidateName(statusLease, identity) }
	lease := ns + "/" + statusLease

	startOldest(t, b, ns, "newest", "1.36.0", l)
	waitFor(t, "the only candidate leading", func() (bool, error) {
		holder, strategy, err := leaseHolder(ns)
		if err != nil {
			return false, nil // not created yet
		}
		return holder == name("newest") && strategy == string(coordinationv1.OldestEmulationVersion) &&
			slices.Equal(running(l), []string{"newest"}), nil
	})
	if !apiServerLogged(t, lease, name("newest")) {
		t.Errorf("the API server's controller did not assign %s to %s", lease, name("newest"))
	}

	stopOldest := startOldest(t, b, ns, "oldest", "1.34.0", l)
	waitFor(t, "the oldest candidate leading", func() (bool, error) {
		holder, _, err := leaseHolder(ns)
		return holder == name("oldest") && slices.Equal(running(l), []string{"oldest"}), err
	})
	if !apiServerLogged(t, lease, "holder changed from", name("newest"), name("oldest")) {
		t.Errorf("the API server's controller did not prefer %s", name("oldest"))
	}
	if got, want := holders.list(), []string{name("newest"), name("oldest")}; !slices.Equal(slices.DeleteFunc(got, func(h string) bool { return h == "" }), want) {
		t.Errorf("holders: %v, want %v", got, want)
	}

	// A newer candidate joining changes nothing: the oldest keeps the lock
	// and nobody is preferred.
	startOldest(t, b, ns, "middle", "1.35.0", l)
	waitFor(t, "the middle candidate announced", func() (bool, error) {
		c, err := cluster.Client.CoordinationV1beta1().LeaseCandidates(ns).Get(context.Background(), name("middle"), metav1.GetOptions{})
		return err == nil && c.Spec.RenewTime != nil, nil
	})
	time.Sleep(time.Second) // the controller decides on every candidate event
	got, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), statusLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.PreferredHolder != nil || holders.last() != name("oldest") {
		t.Errorf("after a newer candidate joined: holder %q, preferred %v; want the oldest, no preference", holders.last(), got.Spec.PreferredHolder)
	}

	stopOldest()
	waitFor(t, "the next oldest leading", func() (bool, error) {
		return holders.last() == name("middle") && slices.Equal(running(l), []string{"middle"}), nil
	})
	all := holders.list()
	after := all[slices.Index(all, name("oldest")):]
	if want := []string{name("oldest"), name("middle")}; !slices.Equal(after, want) {
		t.Errorf("holders after the oldest stopped: %v, want %v", after, want)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Errorf("two leaders worked at once: %+v", o)
	}
}
