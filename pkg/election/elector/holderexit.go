package elector

import "github.com/meshd-io/meshd/pkg/resourcelock"

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
