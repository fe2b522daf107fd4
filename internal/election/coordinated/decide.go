package coordinated

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// view is what the coordinator knows about one election when it decides.
type view struct {
	now time.Time
	// lease is the cached Lease, nil when absent.
	lease *coordinationv1.Lease
	// vacant: no Lease, no holder, or expired by our own observation.
	vacant bool
	// expiresAt is when a held Lease expires by our observation.
	expiresAt time.Time
	// cands are all candidates of the Lease.
	cands []Candidate
	// defaultRevision is the mesh's default revision, "" if unknown.
	defaultRevision string
	// pinged holds our own pings, which the cache may not show yet.
	pinged     map[string]time.Time
	ackTimeout time.Duration
}

// plan is what the coordinator does about one election.
type plan struct {
	ping        []Candidate
	assign      *Candidate // write it as the holder of a vacant Lease
	prefer      *Candidate // name it in spec.preferredHolder
	clear       bool       // remove spec.preferredHolder
	setStrategy bool       // set spec.strategy of a held Lease
	wake        time.Time  // look again then (zero: on the next event)
}

// coordinated reports whether the election is ours: it has candidates and
// all announce Strategy. Mixed strategies are left alone, as Kubernetes
// does.
func coordinated(cands []Candidate) bool {
	for _, c := range cands {
		if c.Strategy != Strategy {
			return false
		}
	}
	return len(cands) > 0
}

// decide is the coordinator's whole policy for one election.
func decide(v view) plan {
	if !coordinated(v.cands) {
		return plan{}
	}
	live := liveRanked(v.cands, v.defaultRevision)
	if v.vacant {
		var p plan
		p.assign, p.ping, p.wake = v.choose(live)
		return p
	}
	p := v.preference(live)
	p.setStrategy = v.lease.Spec.Strategy == nil || *v.lease.Spec.Strategy != Strategy
	if p.wake.IsZero() || v.expiresAt.Before(p.wake) {
		p.wake = v.expiresAt
	}
	return p
}

// preference decides spec.preferredHolder of a held, valid Lease.
func (v view) preference(live []Candidate) plan {
	current := ""
	if v.lease.Spec.PreferredHolder != nil {
		current = *v.lease.Spec.PreferredHolder
	}
	var eligible []Candidate
	if preempts(live) {
		holder, holderKey := v.holder()
		for _, c := range live {
			if c.Name != holder && priority.LocationPrioritizedComparison(holderKey, priority.ParseKey(c.Key), v.defaultRevision) {
				eligible = append(eligible, c)
			}
		}
	}
	if len(eligible) > 0 && eligible[0].Name == current && v.lease.Annotations[PreferredHolderKeyAnnotation] == eligible[0].Key {
		return plan{} // keeping a decision needs no new ping, only a live candidate
	}
	best, pings, wake := v.choose(eligible)
	p := plan{ping: pings, wake: wake}
	switch {
	case best != nil && (best.Name != current || v.lease.Annotations[PreferredHolderKeyAnnotation] != best.Key):
		p.prefer = best
	case best == nil && wake.IsZero() && current != "":
		p.clear = true
	}
	return p
}

// holder returns the Lease's holder and its key: the Lease's holder-key
// annotation, else the key its candidate announces.
func (v view) holder() (name, key string) {
	if v.lease.Spec.HolderIdentity != nil {
		name = *v.lease.Spec.HolderIdentity
	}
	if k, ok := v.lease.Annotations[resourcelock.LeaseHolderKeyAnnotation]; ok {
		return name, k
	}
	for _, c := range v.cands {
		if c.Name == name {
			return name, c.Key
		}
	}
	return name, ""
}

// preempts reports whether every live candidate asks for a prioritized
// election: one per-revision candidate is enough to never move a holder.
func preempts(live []Candidate) bool {
	for _, c := range live {
		if !c.Preempts {
			return false
		}
	}
	return len(live) > 0
}

// choose returns the first of ranked that is known to be alive: it renewed
// within its lease duration, or answered a ping. A stale candidate is
// pinged, and nothing worse than it is chosen until it answers or AckTimeout
// passes; one that did not answer is skipped until its lease duration after
// the ping has passed, then pinged again (wake asks for that look). Every stale candidate that needs
// a ping gets it in the same round.
func (v view) choose(ranked []Candidate) (pick *Candidate, pings []Candidate, wake time.Time) {
	waiting := false
	for i := range ranked {
		c := ranked[i]
		pingAt := c.PingTime
		if own := v.pinged[c.Name]; own.After(pingAt) {
			pingAt = own
		}
		unanswered := !pingAt.IsZero() && c.RenewTime.Before(pingAt)
		switch {
		case !v.now.After(c.RenewTime.Add(c.LeaseDuration)):
			if !waiting {
				return &c, pings, wake
			}
		case unanswered && v.now.Before(pingAt.Add(v.ackTimeout)):
			waiting = true
			wake = earliest(wake, pingAt.Add(v.ackTimeout))
		case unanswered && v.now.Before(pingAt.Add(c.LeaseDuration)):
			// did not answer its last ping: skip it, ping again later
			wake = earliest(wake, pingAt.Add(c.LeaseDuration))
		default:
			pings = append(pings, c)
			waiting = true
			wake = earliest(wake, v.now.Add(v.ackTimeout))
		}
	}
	return nil, pings, wake
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
