package coordinated

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/meshd-io/meshd/internal/election/priority"
)

// LivenessFactor is how many heartbeats a candidate may miss before it
// stops being live: a candidate is live while
// now <= renewTime + LivenessFactor x heartbeat. It tolerates one lost
// renewal and clock offsets between nodes below one heartbeat.
const LivenessFactor = 2

// Candidate is what a LeaseCandidate announces, as read by a Roster.
type Candidate struct {
	// Name is the LeaseCandidate's name: the identity written into the
	// Lease when this candidate holds it.
	Name string
	// LeaseName is the Lease the candidate runs for.
	LeaseName string
	// Identity is the candidate's meshd identity (IdentityAnnotation).
	Identity string
	// Key is the candidate's holder key (HolderKeyAnnotation).
	Key string
	// Preempts is PreemptsAnnotation == "true".
	Preempts bool
	// Strategy is spec.strategy.
	Strategy coordinationv1.CoordinatedLeaseStrategy
	// BinaryVersion and EmulationVersion are copied from the spec.
	BinaryVersion, EmulationVersion string
	// RenewTime and PingTime are the spec's times, zero when unset.
	RenewTime, PingTime time.Time
	// LeaseDuration is LeaseDurationAnnotation, zero when absent or invalid.
	LeaseDuration time.Duration
	// Heartbeat is HeartbeatAnnotation, else 2 x LeaseDuration.
	Heartbeat time.Duration
	// Live reports whether the candidate renewed within LivenessFactor
	// heartbeats at the time the Roster was asked. A candidate without a
	// valid lease duration is never live.
	Live bool
}

// Member is one entry of a ranking.
type Member struct {
	// Name is the LeaseCandidate's name (the Lease holder identity).
	Name string
	// Key is its holder key.
	Key string
}

// Acked reports whether the candidate has answered its last ping: it has no
// ping, or renewed at or after it.
func (c Candidate) Acked() bool {
	return c.PingTime.IsZero() || !c.RenewTime.Before(c.PingTime)
}

// candidateFrom reads lc at time now.
func candidateFrom(lc *coordinationv1beta1.LeaseCandidate, now time.Time) Candidate {
	a := lc.Annotations
	c := Candidate{
		Name:             lc.Name,
		LeaseName:        lc.Spec.LeaseName,
		Identity:         a[IdentityAnnotation],
		Key:              a[HolderKeyAnnotation],
		Preempts:         a[PreemptsAnnotation] == "true",
		Strategy:         lc.Spec.Strategy,
		BinaryVersion:    lc.Spec.BinaryVersion,
		EmulationVersion: lc.Spec.EmulationVersion,
		LeaseDuration:    secondsAnnotation(a, LeaseDurationAnnotation),
		Heartbeat:        secondsAnnotation(a, HeartbeatAnnotation),
	}
	if lc.Spec.RenewTime != nil {
		c.RenewTime = lc.Spec.RenewTime.Time
	}
	if lc.Spec.PingTime != nil {
		c.PingTime = lc.Spec.PingTime.Time
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 2 * c.LeaseDuration
	}
	c.Live = c.LeaseDuration > 0 && !c.RenewTime.IsZero() &&
		!now.After(c.RenewTime.Add(LivenessFactor*c.Heartbeat))
	return c
}

// secondsAnnotation parses a positive whole number of seconds; anything
// else is 0.
func secondsAnnotation(a map[string]string, key string) time.Duration {
	n, err := strconv.ParseInt(a[key], 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// rank sorts candidates best first: priority.Compare of their keys under
// defaultRevision, then the oldest binary version (an unparsable version
// last), then the name. The order is total, so every process that sees the
// same candidates ranks them alike.
func rank(cands []Candidate, defaultRevision string) {
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		if c := priority.Compare(priority.ParseKey(a.Key), priority.ParseKey(b.Key), defaultRevision); c != 0 {
			return c
		}
		if c := compareVersions(a.BinaryVersion, b.BinaryVersion); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// compareVersions orders semantic versions oldest first, unparsable ones
// after every valid one.
func compareVersions(a, b string) int {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA != nil && errB != nil:
		return 0
	case errA != nil:
		return 1
	case errB != nil:
		return -1
	}
	switch {
	case va.LessThan(vb):
		return -1
	case va.GreaterThan(vb):
		return 1
	}
	return 0
}

func rankByName(cands []Candidate) {
	slices.SortFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.Name, b.Name) })
}
