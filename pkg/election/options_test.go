package election

import (
	"strings"
	"testing"
	"time"
)

// The mesh-level options reach the elector's configuration: the fenced start
// after a forced steal is the default, and withStartAtOnceAfterSteal gives
// it up; StopTimeout is fitted into the lease.
func TestElectorConfigFromOptions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        []Option
		wantAtOnce  bool
		wantStopMax float64 // seconds
	}{
		{name: "defaults", opts: nil, wantAtOnce: false, wantStopMax: 5},
		{name: "at once", opts: []Option{withStartAtOnceAfterSteal(true)}, wantAtOnce: true, wantStopMax: 5},
		{name: "small ttl", opts: []Option{WithTTL(2_000_000_000)}, wantAtOnce: false, wantStopMax: 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			o.apply(tc.opts)
			o.shared = NewShared()
			l := &LeaderElection{}
			cfg := l.electorConfig(nil, &o, false)
			if cfg.Hub != o.shared.hub || cfg.Pacer != o.shared.pacer {
				t.Error("the elector does not watch through the election's hub and pace with its pacer")
			}
			if cfg.StartAtOnceAfterSteal != tc.wantAtOnce {
				t.Errorf("StartAtOnceAfterSteal = %v, want %v", cfg.StartAtOnceAfterSteal, tc.wantAtOnce)
			}
			if got := cfg.StopTimeout.Seconds(); got > tc.wantStopMax || got <= 0 {
				t.Errorf("StopTimeout = %v, want in (0, %vs]", cfg.StopTimeout, tc.wantStopMax)
			}
		})
	}
}

// withTiming sets the three durations apart (controller-runtime's 15s, 10s
// and 2s here); they reach the elector as given and are validated together,
// and WithTTL cannot be given beside them.
func TestTimingSetsTheThreeDurations(t *testing.T) {
	o := defaultOptions()
	o.apply([]Option{withTiming(15*time.Second, 10*time.Second, 2*time.Second)})
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	o.shared = NewShared()
	cfg := (&LeaderElection{}).electorConfig(nil, &o, false)
	if cfg.LeaseDuration != 15*time.Second || cfg.RenewDeadline != 10*time.Second || cfg.RetryPeriod != 2*time.Second {
		t.Fatalf("elector timing %v/%v/%v, want 15s/10s/2s", cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod)
	}
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"renew deadline not under the lease", []Option{withTiming(10*time.Second, 10*time.Second, 2*time.Second)}, "LeaseDuration > RenewDeadline"},
		{"retry period too close to the deadline", []Option{withTiming(15*time.Second, 10*time.Second, 9*time.Second)}, "1.2 x RetryPeriod"},
		{"zero retry period", []Option{withTiming(15*time.Second, 10*time.Second, 0)}, "RetryPeriod > 0"},
		{"lease under a second", []Option{withTiming(900*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond)}, "at least 1s"},
		{"both ttl and timing", []Option{WithTTL(30 * time.Second), withTiming(15*time.Second, 10*time.Second, 2*time.Second)}, "both set"},
	} {
		o := defaultOptions()
		o.apply(c.opts)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one that says %q", c.name, err, c.want)
		}
	}
}
