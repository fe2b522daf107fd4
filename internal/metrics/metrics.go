// Package metrics names what the elector core reports about its work, so
// that a program can count it (package electionmetrics adapts it to
// Prometheus); Nop discards it.
package metrics

// Metrics receives what an elector does. Implementations must be safe for
// concurrent use; the default does nothing.
type Metrics interface {
	// SetLeading reports whether this process currently leads election name.
	SetLeading(name string, leading bool)
	// Acquired counts terms started by this process (a transition to it).
	Acquired(name string)
	// Stole counts acquisitions that took an unexpired lock via KeyComparison.
	Stole(name string)
	// RenewFailed counts renew attempts that did not succeed.
	RenewFailed(name string)
	// Lost counts terms that ended without a release by this process.
	Lost(name string)
	// HandoverRequested counts requests this candidate wrote asking a holder
	// to hand over.
	HandoverRequested(name string)
	// HandedOver counts terms this process ended by handing the lock to a
	// candidate that asked for it.
	HandedOver(name string)
	// Request counts API requests this elector made, by verb (get, create,
	// update). The list and watch that follow the lock are shared by every
	// elector of its hub (Config.Hub) and not counted here.
	Request(name, verb string)
	// StealCycle counts steal cycles detected by this candidate: it
	// outranked the holder and the holder's key outranked it.
	StealCycle(name string)
	// SetPreemptionSuspended reports whether this candidate has suspended
	// preemption after a steal cycle (see Preemption).
	SetPreemptionSuspended(name string, suspended bool)
	// RunFailed counts terms ended by a failed run function. The elector
	// never calls it: package election, which supervises run functions,
	// does.
	RunFailed(name string)
	// SlowPath counts renewals whose write from the cached object failed,
	// so that the leader read the lock before trying again.
	SlowPath(name string)
}

// Nop is Metrics that discards everything.
type Nop struct{}

func (Nop) SetLeading(string, bool)             {}
func (Nop) Acquired(string)                     {}
func (Nop) Stole(string)                        {}
func (Nop) RenewFailed(string)                  {}
func (Nop) Lost(string)                         {}
func (Nop) HandoverRequested(string)            {}
func (Nop) HandedOver(string)                   {}
func (Nop) Request(string, string)              {}
func (Nop) StealCycle(string)                   {}
func (Nop) SetPreemptionSuspended(string, bool) {}
func (Nop) RunFailed(string)                    {}
func (Nop) SlowPath(string)                     {}
