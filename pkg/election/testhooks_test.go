package election

import "k8s.io/utils/clock"

// withClock sets the clock of the elector and of the run back-off.
func withClock(c clock.WithTicker) Option {
	return func(o *options) { o.clock = c; o.mark("withClock") }
}

// withProbe makes build report what it made to p.
func withProbe(p *buildProbe) Option { return func(o *options) { o.probe = p } }
