package election

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/priority"
)

// Mode is how the candidates of an election agree on its leader.
type Mode string

const (
	// Racing candidates each write the lock themselves; the first write
	// wins, and the steal rule and the handover protocol move the lock to
	// the best candidate afterwards. It is istiod's way and the only mode
	// in which meshd and istiod can share an election.
	Racing Mode = "racing"
	// Coordinated candidates publish a coordination.k8s.io/v1beta1
	// LeaseCandidate each and never race: a meshd coordinator (see
	// NewCoordinator) picks the holder by the mesh's rule, the strategy
	// meshd.io/prioritized, and moves the lock through
	// spec.preferredHolder. It needs a Lease lock and an API server that
	// serves LeaseCandidates; the holder identity written into the Lease is
	// the name of the candidate's LeaseCandidate, derived from the Lease's
	// name and the candidate's identity.
	Coordinated Mode = "coordinated"
	// OldestEmulationVersion is coordinated by the API server's own
	// controller (feature gate CoordinatedLeaderElection) with Kubernetes'
	// strategy of that name: meshd is a plain candidate that follows the
	// Lease. The mesh's rule does not apply.
	OldestEmulationVersion Mode = "oldest-emulation-version"
)

// ParseMode reads a mode written in configuration: "racing", "coordinated"
// or "oldest-emulation-version", in any letter case; "" is Racing.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(s)); m {
	case "":
		return Racing, nil
	case Racing, Coordinated, OldestEmulationVersion:
		return m, nil
	}
	return "", fmt.Errorf("unknown election mode %q: want %s, %s or %s", s, Racing, Coordinated, OldestEmulationVersion)
}

// coordinatedMode reports whether m has candidates follow a coordinator.
func (m Mode) coordinatedMode() bool { return m == Coordinated || m == OldestEmulationVersion }

// strategy is the coordinated lease strategy of m.
func (m Mode) strategy() coordinationv1.CoordinatedLeaseStrategy {
	if m == OldestEmulationVersion {
		return coordinationv1.OldestEmulationVersion
	}
	return coordinated.Strategy
}

// releaseYieldStep is how long a racing candidate waits, per class below
// the best, before it takes a released or expired lock. All candidates
// see a release at about the same time through their watches; a better
// candidate's write that reaches the API server first makes a lesser one's
// write of the same version conflict, so the step only needs to cover the
// spread of watch delivery, not a whole write.
const releaseYieldStep = 15 * time.Millisecond

// releaseYield is how long this racing candidate lets better ones go first
// after a release or expiry, by its class in the priority rule
// (priority.Compare): none for a local instance of the default revision
// (or when no default is known); one step for a remote one; two more
// steps for an instance of another revision than the default.
func (l *LeaderElection) releaseYield() time.Duration {
	steps := 0
	if def := l.defaultRevision(); def != "" && l.spec.Revision != def {
		steps += 2
	}
	if l.candidate.Remote {
		steps++
	}
	return time.Duration(steps) * l.yieldStep
}

// defaultRevision is the default revision as this election knows it; ""
// for a per-revision election, which does not follow it.
func (l *LeaderElection) defaultRevision() string {
	if l.watcher == nil {
		return ""
	}
	return l.watcher.GetDefault()
}

// candidacy is the coordinated side of an election: the LeaseCandidate it
// publishes while it runs and the roster it ranks successors from.
type candidacy struct {
	client  kubernetes.Interface
	rosters *coordinated.Rosters
	spec    coordinated.CandidateSpec
	log     *zap.Logger

	mu     sync.Mutex
	roster *coordinated.Roster // set while running
}

// newCandidacy describes the LeaseCandidate of a coordinated election.
func newCandidacy(client kubernetes.Interface, spec Spec, lockName, name string, o *options, leaseDuration time.Duration, log *zap.Logger) *candidacy {
	return &candidacy{
		client:  client,
		rosters: o.shared.rosters,
		log:     log,
		spec: coordinated.CandidateSpec{
			Namespace:     spec.Namespace,
			LeaseName:     lockName,
			Name:          name,
			Identity:      spec.Identity,
			Key:           priority.Candidate{Revision: spec.Revision, Remote: spec.Remote}.Key(),
			Preempts:      !spec.PerRevision && o.prioritized,
			Strategy:      spec.Mode.strategy(),
			BinaryVersion: o.binaryVersion,
			LeaseDuration: leaseDuration,
			Owner:         o.candidateOwner,
		},
	}
}

// start publishes the candidate and follows the election's candidates.
// withdraw deletes the candidate and returns once it is gone; stop, called
// after withdraw, stops following them. changed is called after every
// change of the election's candidates.
func (c *candidacy) start(clk clock.Clock, changed func()) (withdraw, stop func()) {
	roster, release, err := c.rosters.Acquire(c.client, c.spec.Namespace, clk)
	if err != nil {
		c.log.Error("cannot follow the election's candidates; the lock is released rather than handed over", zap.Error(err))
		return func() {}, func() {}
	}
	pub, err := coordinated.NewPublisher(c.client, roster, c.spec, c.log, clk)
	if err != nil {
		release()
		c.log.Error("cannot publish this candidate", zap.Error(err))
		return func() {}, func() {}
	}
	c.mu.Lock()
	c.roster = roster
	c.mu.Unlock()
	unsubscribe := roster.SubscribeAll(func(lease string) {
		if lease == c.spec.LeaseName {
			changed()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pub.Run(ctx); err != nil {
			c.log.Warn("could not withdraw this candidate", zap.Error(err))
		}
	}()
	withdraw = func() {
		cancel()
		<-done
	}
	stop = func() {
		unsubscribe()
		c.mu.Lock()
		c.roster = nil
		c.mu.Unlock()
		release()
	}
	return withdraw, stop
}

// live reports whether name is a live candidate of the election, as far
// as the roster knows; true while no roster runs (nothing is known).
func (c *candidacy) live(name string) bool {
	c.mu.Lock()
	roster := c.roster
	c.mu.Unlock()
	if roster == nil {
		return true
	}
	for _, cand := range roster.Candidates(c.spec.LeaseName) {
		if cand.Name == name {
			return cand.Live
		}
	}
	return false
}

// successor is the best live candidate other than this one, by the
// election's rule and the default revision def.
func (c *candidacy) successor(def string) (name, key string, ok bool) {
	c.mu.Lock()
	roster := c.roster
	c.mu.Unlock()
	if roster == nil {
		return "", "", false
	}
	for _, m := range roster.Ranked(c.spec.LeaseName, def) {
		if m.Name != c.spec.Name {
			return m.Name, m.Key, true
		}
	}
	return "", "", false
}

// oldestSuccessor is the live candidate other than this one that
// Kubernetes' OldestEmulationVersion strategy picks: the oldest emulation
// version, then the oldest binary version, then the earliest created.
func (c *candidacy) oldestSuccessor() (name, key string, ok bool) {
	c.mu.Lock()
	roster := c.roster
	c.mu.Unlock()
	if roster == nil {
		return "", "", false
	}
	var best *coordinationv1beta1.LeaseCandidate
	for _, cand := range roster.Candidates(c.spec.LeaseName) {
		if !cand.Live || cand.Name == c.spec.Name {
			continue
		}
		if obj, found := roster.Get(cand.Name); found && validVersions(obj) && (best == nil || olderCandidate(obj, best)) {
			best, key = obj, cand.Key
		}
	}
	if best == nil {
		return "", "", false
	}
	return best.Name, key, true
}

// validVersions reports whether the strategy may pick c: both versions are
// semantic versions.
func validVersions(c *coordinationv1beta1.LeaseCandidate) bool {
	_, errE := version.ParseSemantic(c.Spec.EmulationVersion)
	_, errB := version.ParseSemantic(c.Spec.BinaryVersion)
	return errE == nil && errB == nil
}

// olderCandidate orders candidates of valid versions as the
// OldestEmulationVersion strategy does.
func olderCandidate(a, b *coordinationv1beta1.LeaseCandidate) bool {
	if d := compareVersions(a.Spec.EmulationVersion, b.Spec.EmulationVersion); d != 0 {
		return d < 0
	}
	if d := compareVersions(a.Spec.BinaryVersion, b.Spec.BinaryVersion); d != 0 {
		return d < 0
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func compareVersions(a, b string) int {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA != nil || errB != nil:
		return 0 // not reached: validVersions filtered them
	case va.LessThan(vb):
		return -1
	case vb.LessThan(va):
		return 1
	}
	return 0
}

// WithBinaryVersion sets the binary version a coordinated candidate
// announces (a semantic version without "v"); the strategies prefer the
// oldest. Empty means the module version of the running binary. It
// applies to coordinated elections only.
func WithBinaryVersion(v string) Option {
	return func(o *options) { o.binaryVersion = v; o.mark("WithBinaryVersion") }
}

// WithCandidateOwner makes ref (normally the Pod this instance runs in) the
// owner of a coordinated candidate's LeaseCandidate and of the session
// Lease (WithSessions), so that the garbage collector removes them with a
// deleted Pod. It applies to coordinated elections and to sessions only.
func WithCandidateOwner(ref *metav1.OwnerReference) Option {
	return func(o *options) { o.candidateOwner = ref; o.mark("WithCandidateOwner") }
}
