package elector

// holderExited asks Config.HolderExit about the observed record when it
// names another holder.
func (le *LeaderElector) holderExited() bool {
	o := le.seen()
	return le.cfg.HolderExit != nil && !o.corrupt && o.record.HolderIdentity != "" && o.record.HolderIdentity != le.cfg.Lock.Identity() &&
		le.cfg.HolderExit.Exited(o.record)
}
