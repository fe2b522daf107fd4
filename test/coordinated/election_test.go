package coordinated

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election"
)

// electionTTL is the ttl of the elections built through package election.
const electionTTL = 2 * time.Second

// statusLease is the election these tests run.
const statusLease = "meshd-status-leader"

// meshInstance is one candidate of the coordinated election, with the
// coordinator election its process would run.
type meshInstance struct {
	identity string
	stop     func()
}

func electionOpts(t *testing.T, name string) []election.Option {
	return []election.Option{
		election.WithTTL(electionTTL),
		election.WithStopTimeout(time.Second),
		election.WithLogger(zaptest.NewLogger(t).Named(name)),
	}
}

// startInstance runs a coordinated candidate and a coordinator election,
// both stopped by the returned instance's stop.
func startInstance(t *testing.T, b *background, ns, identity, revision string, remote bool, l *ledger.Ledger) *meshInstance {
	t.Helper()
	// The candidate and its coordinator are one process: one Shared.
	shared := election.WithShared(election.NewShared())
	le, err := election.New(cluster.Client, election.Spec{
		Namespace: ns, ElectionID: statusLease, Identity: identity, Revision: revision, Remote: remote,
		Lock: election.LeaseLock, Mode: election.Coordinated,
	}, append(electionOpts(t, identity), shared)...)
	if err != nil {
		t.Fatal(err)
	}
	le.Add(func(ctx context.Context) error {
		l.Wrap(statusLease, identity, func(ctx context.Context) { <-ctx.Done() })(ctx)
		return nil
	})
	coord, err := election.NewCoordinator(cluster.Client, ns, identity, nil, append(electionOpts(t, identity+"-coordinator"), shared)...)
	if err != nil {
		t.Fatal(err)
	}
	stopCoord := b.start(identity+" coordinator", coord.RunContext)
	stopCand := b.start(identity, le.RunContext)
	return &meshInstance{identity: identity, stop: func() { stopCand(); stopCoord() }}
}

// holderLog records every holder the Lease names, in order.
type holderLog struct {
	mu      sync.Mutex
	holders []string
}

func (h *holderLog) add(holder string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.holders); n == 0 || h.holders[n-1] != holder {
		h.holders = append(h.holders, holder)
	}
}

func (h *holderLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.holders)
}

func (h *holderLog) last() string {
	l := h.list()
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// followLease records every write of the Lease's holder until the test ends.
func followLease(t *testing.T, b *background, client kubernetes.Interface, ns, name string) *holderLog {
	t.Helper()
	log := &holderLog{}
	w, err := client.CoordinationV1().Leases(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.start("lease watch", func(ctx context.Context) error {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case ev, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("the watch of Lease %s closed", name)
				}
				if lease, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
					holder := ""
					if lease.Spec.HolderIdentity != nil {
						holder = *lease.Spec.HolderIdentity
					}
					log.add(holder)
				}
			}
		}
	})
	return log
}

// leaseHolder reads the Lease's holder and strategy.
func leaseHolder(ns string) (holder, strategy string, err error) {
	lease, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), statusLease, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.Strategy != nil {
		strategy = string(*lease.Spec.Strategy)
	}
	return holder, strategy, nil
}

// running reports who runs the election's work now, by the ledger.
func running(l *ledger.Ledger) []string {
	var who []string
	for _, in := range l.Intervals() {
		if in.Stop.IsZero() {
			who = append(who, in.Holder)
		}
	}
	return who
}

func TestCoordinatedElectionThroughThePublicAPI(t *testing.T) {
	ns := cluster.NewNamespace(t)
	b := newBackground(t)
	l := &ledger.Ledger{}
	holders := followLease(t, b, cluster.Client, ns, statusLease)
	kubetest.SetDefaultRevision(t, cluster.Client, ns, "stable")
	name := func(identity string) string { return coordinated.CandidateName(statusLease, identity) }

	startInstance(t, b, ns, "stable-remote-1", "stable", true, l)
	startInstance(t, b, ns, "canary-1", "canary", false, l)
	startInstance(t, b, ns, "stable-1", "stable", false, l)

	waitFor(t, "three candidates and the local stable instance leading", func() (bool, error) {
		cands, err := cluster.Client.CoordinationV1beta1().LeaseCandidates(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		holder, strategy, err := leaseHolder(ns)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return len(cands.Items) == 3 && holder == name("stable-1") && strategy == string(coordinated.Strategy) &&
			slices.Equal(running(l), []string{"stable-1"}), err
	})

	// The default flips: canary leads through preferredHolder, and the two
	// never work at once.
	kubetest.SetDefaultRevision(t, cluster.Client, ns, "canary")
	waitFor(t, "canary-1 to lead", func() (bool, error) { return slices.Equal(running(l), []string{"canary-1"}), nil })
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders worked at once: %+v", o)
	}
	// Every holder the Lease named: no other candidate came between (the
	// API server's controller created the Lease without a holder).
	for _, h := range holders.list() {
		if h != "" && h != name("stable-1") && h != name("canary-1") {
			t.Fatalf("the Lease named %q on the way to canary: %v", h, holders.list())
		}
	}
}

func TestGracefulStopHandsToTheNextBestCandidate(t *testing.T) {
	ns := cluster.NewNamespace(t)
	b := newBackground(t)
	l := &ledger.Ledger{}
	holders := followLease(t, b, cluster.Client, ns, statusLease)
	kubetest.SetDefaultRevision(t, cluster.Client, ns, "canary")
	name := func(identity string) string { return coordinated.CandidateName(statusLease, identity) }

	startInstance(t, b, ns, "stable-remote-1", "stable", true, l)
	startInstance(t, b, ns, "stable-1", "stable", false, l)
	const trials = 20
	for i := range trials {
		canary := fmt.Sprintf("canary-%d", i)
		in := startInstance(t, b, ns, canary, "canary", false, l)
		waitFor(t, canary+" to lead", func() (bool, error) {
			return slices.Equal(running(l), []string{canary}) && holders.last() == name(canary), nil
		})
		in.stop()
		waitFor(t, "stable-1 to lead after "+canary+" stopped", func() (bool, error) {
			return slices.Equal(running(l), []string{"stable-1"}) && holders.last() == name("stable-1"), nil
		})
		// The Lease went from the canary straight to stable-1: no remote
		// instance and no empty holder in between.
		all := holders.list()
		after := all[slices.Index(all, name(canary)):]
		if want := []string{name(canary), name("stable-1")}; !slices.Equal(after, want) {
			t.Fatalf("trial %d: holders after SIGTERM of %s = %v, want %v", i, canary, after, want)
		}
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders worked at once: %+v", o)
	}
	if got := holders.last(); got != name("stable-1") {
		t.Fatalf("final holder %q", got)
	}
}
