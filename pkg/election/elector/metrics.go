package elector

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
}

type noopMetrics struct{}

func (noopMetrics) SetLeading(string, bool) {}
func (noopMetrics) Acquired(string)         {}
func (noopMetrics) Stole(string)            {}
func (noopMetrics) RenewFailed(string)      {}
func (noopMetrics) Lost(string)             {}
