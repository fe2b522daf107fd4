package election

import "testing"

// The mesh-level options reach the elector's configuration: the fenced start
// after a forced steal is the default, and WithStartAtOnceAfterSteal gives
// it up; StopTimeout is fitted into the lease.
func TestElectorConfigFromOptions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        []Option
		wantAtOnce  bool
		wantStopMax float64 // seconds
	}{
		{name: "defaults", opts: nil, wantAtOnce: false, wantStopMax: 5},
		{name: "at once", opts: []Option{WithStartAtOnceAfterSteal(true)}, wantAtOnce: true, wantStopMax: 5},
		{name: "small ttl", opts: []Option{WithTTL(2_000_000_000)}, wantAtOnce: false, wantStopMax: 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			o.apply(tc.opts)
			l := &LeaderElection{}
			cfg := l.electorConfig(nil, &o, false)
			if cfg.StartAtOnceAfterSteal != tc.wantAtOnce {
				t.Errorf("StartAtOnceAfterSteal = %v, want %v", cfg.StartAtOnceAfterSteal, tc.wantAtOnce)
			}
			if got := cfg.StopTimeout.Seconds(); got > tc.wantStopMax || got <= 0 {
				t.Errorf("StopTimeout = %v, want in (0, %vs]", cfg.StopTimeout, tc.wantStopMax)
			}
		})
	}
}
