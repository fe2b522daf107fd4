package elector

import (
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
)

// Coordination configures a candidate of a coordinated election: a
// coordinator picks the holder and writes it into the lock, or names a
// better candidate as the preferred holder; candidates follow.
type Coordination struct {
	// Successor returns the candidate this holder hands the lock to when its
	// term ends gracefully (its run callback ended, or Run was cancelled
	// with ReleaseOnCancel): the best live candidate other than itself,
	// by the coordinator's rule. ok is false when none is known; the lock
	// is then released and the coordinator assigns it. Nil: always release.
	Successor func() (identity, key string, ok bool)
	// Live, if set, tells whether a candidate named as preferred holder is
	// still a live candidate as far as this process knows. A preference
	// for one that is not (it withdrew, or its heartbeat stopped) is
	// ignored until the coordinator corrects it, so that the lock is never
	// handed to a candidate that will not take it.
	Live func(identity string) bool
	// Patience is how long this candidate leaves a vacant lock (free,
	// expired or missing) to the coordinator before it takes the lock
	// itself, so that an election never stays without a leader when no
	// coordinator runs. It must exceed what a coordinator that takes over
	// from a dead one needs: its own election's lease, then a lease of its
	// own observation before it calls a silent holder's lease expired.
	// Zero means 2 x LeaseDuration. A candidate that the election ranks
	// lower (YieldOnRelease) waits that much longer, so that the best one
	// takes the lock when no coordinator does.
	Patience time.Duration
}

// problems lists what is wrong with c for the elector configured by cfg.
func (c *Coordination) problems(cfg *Config) []string {
	if c == nil {
		return nil
	}
	var msgs []string
	if _, ok := cfg.Lock.(lockcap.CoordinatedLock); cfg.Lock != nil && !ok {
		msgs = append(msgs, "Coordination needs a lock that carries a preferred holder (a Lease)")
	}
	if cfg.KeyComparison != nil || cfg.HandoverGrace > 0 {
		msgs = append(msgs, "a coordinated candidate never takes the lock from its holder: KeyComparison and HandoverGrace must be unset")
	}
	if c.Patience < 0 {
		msgs = append(msgs, "Coordination.Patience must not be negative")
	}
	return msgs
}

// coordinated reports whether this candidate follows a coordinator.
func (le *LeaderElector) coordinated() bool { return le.cfg.Coordination != nil }

// patience is how long a vacant lock is left to the coordinator.
func (le *LeaderElector) patience() time.Duration {
	p := le.cfg.Coordination.Patience
	if p <= 0 {
		p = 2 * le.cfg.LeaseDuration
	}
	return p + le.yieldDelay()
}

// leaveVacant reports whether a coordinated candidate that found the lock
// vacant at now must leave it to the coordinator: until it has seen the
// lock vacant for Coordination.Patience. Racing candidates never leave it.
func (le *LeaderElector) leaveVacant(now time.Time) bool {
	if !le.coordinated() {
		return false
	}
	if le.vacantSince.IsZero() {
		le.vacantSince = now
	}
	return now.Before(le.vacantSince.Add(le.patience()))
}

// acquiredVacancy notes that this candidate took the lock: a coordinated
// one that took a vacant lock no coordinator assigned says so.
func (le *LeaderElector) acquiredVacancy() {
	// A lock a coordinator assigned was observed naming this candidate,
	// which cleared vacantSince; only a lock taken by this candidate's own
	// write after its patience leaves it set.
	if le.coordinated() && !le.vacantSince.IsZero() {
		le.log.Warn("no coordinator assigned the vacant lock within the patience; took it as a racing candidate would",
			zap.Duration("patience", le.patience()))
	}
	le.vacantSince = time.Time{}
}

// vacancyWake is when a coordinated candidate that saw the lock vacant may
// take it itself; zero when it waits for nothing.
func (le *LeaderElector) vacancyWake() time.Time {
	if !le.coordinated() || le.vacantSince.IsZero() {
		return time.Time{}
	}
	return le.vacantSince.Add(le.patience())
}

// preferredSuccessor returns the candidate named as preferred holder in
// the lock object last seen, when it is another one than this holder.
func (le *LeaderElector) preferredSuccessor() *lockmeta.Handover {
	if !le.coordinated() {
		return nil
	}
	name, key := le.cfg.Lock.(lockcap.CoordinatedLock).PreferredHolder()
	if name == "" || name == le.cfg.Lock.Identity() {
		return nil
	}
	if live := le.cfg.Coordination.Live; live != nil && !live(name) {
		return nil
	}
	return &lockmeta.Handover{Holder: le.cfg.Lock.Identity(), Candidate: name, CandidateKey: key}
}

// directedSuccessor is who a holder ending its term gracefully hands the
// lock to when no candidate asked: the preferred holder, else the best live
// candidate Coordination.Successor knows. Nil: release.
func (le *LeaderElector) directedSuccessor() *lockmeta.Handover {
	if h := le.preferredSuccessor(); h != nil {
		return h
	}
	if !le.coordinated() || le.cfg.Coordination.Successor == nil {
		return nil
	}
	name, key, ok := le.cfg.Coordination.Successor()
	if !ok || name == "" || name == le.cfg.Lock.Identity() {
		return nil
	}
	return &lockmeta.Handover{Holder: le.cfg.Lock.Identity(), Candidate: name, CandidateKey: key}
}

// yieldDelay is how long this candidate lets better ones go first when the
// lock is up for grabs (released or expired); zero without YieldOnRelease.
func (le *LeaderElector) yieldDelay() time.Duration {
	if le.cfg.YieldOnRelease == nil {
		return 0
	}
	return max(le.cfg.YieldOnRelease(), 0)
}

// yieldWake is when a candidate that yields after a release tries; zero
// when it does not yield.
func (le *LeaderElector) yieldWake(now time.Time) time.Time {
	if le.yieldAt.After(now) {
		return le.yieldAt
	}
	return time.Time{}
}

// yieldOnRelease decides, for a watch event that shows the lock released,
// whether this candidate tries at once (false) or lets better candidates
// go first until yieldAt (true).
func (le *LeaderElector) yieldOnRelease(now time.Time) bool {
	if le.cfg.YieldOnRelease == nil {
		return false
	}
	rec, _ := le.Observed()
	if rec.HolderIdentity != "" || noRecord(&rec) {
		return false
	}
	d := le.yieldDelay()
	if d <= 0 {
		return false
	}
	le.yieldAt = now.Add(d)
	return true
}
