package elector

import "github.com/meshd-io/meshd/pkg/resourcelock"

// HolderExit is the hook through which a follower learns, before the lease
// runs out, that the observed holder's process has exited (package
// election/podexit implements it from the kubelet's reports of the
// holder's Pod). The elector asks it whenever it judges whether the lease
// of a record naming another holder still binds it; a true answer ends
// that lease at once, and the follower takes the lock through the usual
// write over the version it observed, which fails when the holder wrote
// meanwhile.
//
// A lease ended this way is not a steal: no fence is set for the exited
// holder, whose work cannot run. A fence set earlier for another holder
// (one this candidate took the lock from by force) stays as it is.
type HolderExit interface {
	// Exited reports whether the process that holds rec, the record of
	// the lock's object version last seen, has exited for certain. It is
	// called from the election loop, must not block, and must answer false
	// whenever it is in doubt: a wrong true lets a successor start beside
	// a holder that still works.
	Exited(rec resourcelock.Record) bool
}

// holderExited asks Config.HolderExit about the observed record when it
// names another holder.
func (le *LeaderElector) holderExited() bool {
	le.mu.Lock()
	rec, corrupt := le.obs.record, le.obs.corrupt
	le.mu.Unlock()
	return le.cfg.HolderExit != nil && !corrupt && rec.HolderIdentity != "" && rec.HolderIdentity != le.cfg.Lock.Identity() &&
		le.cfg.HolderExit.Exited(rec)
}

// podMarkPending reports whether the holder's Pod mark (resourcelock
// Config.HolderPod) is not yet, or no longer, what the lock object shows:
// its renew cannot then be left to a session.
func podMarkPending(lock resourcelock.Interface) bool {
	p, ok := lock.(interface{ HolderPodPending() bool })
	return ok && p.HolderPodPending()
}
