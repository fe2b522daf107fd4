package elector

import (
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
)

// coordinationProblems lists what is wrong with c's coordination.
func (c *Config) coordinationProblems() []string {
	if c.Coordination == nil {
		return nil
	}
	var msgs []string
	if _, ok := c.Lock.(lockcap.CoordinatedLock); c.Lock != nil && !ok {
		msgs = append(msgs, "Coordination needs a lock that carries a preferred holder (a Lease)")
	}
	if c.KeyComparison != nil || c.Handover != nil {
		msgs = append(msgs, "a coordinated candidate never takes the lock from its holder: KeyComparison and Handover must be unset")
	}
	return append(msgs, c.Coordination.Problems()...)
}

// coordinated reports whether this candidate follows a coordinator.
func (le *LeaderElector) coordinated() bool { return le.cfg.Coordination != nil }

// leaveVacant reports whether a coordinated candidate that found the lock
// vacant at now must leave it to the coordinator. Racing candidates never
// leave it.
func (le *LeaderElector) leaveVacant(now time.Time) bool {
	return le.coordinated() && le.cfg.Coordination.LeaveVacant(now)
}

// occupied notes that the lock names a holder.
func (le *LeaderElector) occupied() {
	if le.coordinated() {
		le.cfg.Coordination.Occupied()
	}
}

// acquiredVacancy notes that this candidate took the lock: a coordinated
// one that took a vacant lock no coordinator assigned says so.
func (le *LeaderElector) acquiredVacancy() {
	if le.coordinated() && le.cfg.Coordination.Acquired() {
		le.log.Warn("no coordinator assigned the vacant lock within the patience; took it as a racing candidate would",
			zap.Duration("patience", le.cfg.Coordination.Patience()))
	}
}

// vacancyWake is when a coordinated candidate that saw the lock vacant may
// take it itself; zero when it waits for nothing.
func (le *LeaderElector) vacancyWake() time.Time {
	if !le.coordinated() {
		return time.Time{}
	}
	return le.cfg.Coordination.WakeAt()
}

// preferredSuccessor returns the candidate named as preferred holder in
// the lock object last seen, when it is another one than this holder.
func (le *LeaderElector) preferredSuccessor() *lockmeta.Handover {
	if !le.coordinated() {
		return nil
	}
	name, key := le.cfg.Lock.(lockcap.CoordinatedLock).PreferredHolder()
	if name == "" || name == le.cfg.Lock.Identity() || !le.cfg.Coordination.Live(name) {
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
	if !le.coordinated() {
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
	if le.loop.yieldAt.After(now) {
		return le.loop.yieldAt
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
	le.loop.yieldAt = now.Add(d)
	return true
}
