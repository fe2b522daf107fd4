package elector

// holderExited asks Config.HolderExit about the observed record when it
// names another holder.
func (le *LeaderElector) holderExited() bool {
	le.mu.Lock()
	rec, corrupt := le.obs.record, le.obs.corrupt
	le.mu.Unlock()
	return le.cfg.HolderExit != nil && !corrupt && rec.HolderIdentity != "" && rec.HolderIdentity != le.cfg.Lock.Identity() &&
		le.cfg.HolderExit.Exited(rec)
}
