package lockcap

import (
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/monotime"
)

var base = time.Date(2026, 3, 1, 12, 0, 0, 400_000_000, time.UTC)

// at is a clock reading whose wall clock has been stepped by step from a
// monotonic clock that reads elapsed since base.
func at(elapsed, step time.Duration) time.Time {
	return monotime.WithMonotonic(base.Add(elapsed+step), time.Hour+elapsed)
}

func TestNextFollowsTheWallClockWhenItDoesNotStep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		write     time.Time
		now       time.Time
		wantAfter time.Duration
	}{
		{"no mark", time.Time{}, at(3*time.Second, 0), 0},
		{"monotonic readings", at(0, 0), at(3*time.Second, 0), 0},
		{"fake clock without monotonic readings", base, base.Add(3 * time.Second), 0},
		{"wall clock stepped forward", at(0, 0), at(3*time.Second, 10*time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m RenewMark
			if !tc.write.IsZero() {
				m = RenewMark{}.Wrote(tc.write, tc.write, true)
			}
			got := m.Next(tc.now)
			if !got.Equal(tc.now.Round(0)) {
				t.Fatalf("Next(%v) = %v, want the wall clock's reading", tc.now.Round(0), got)
			}
		})
	}
}

// A renew time written after a step back rises past the last one, and
// leads the stepped wall clock by no more than the step.
func TestRenewTimeRisesAfterAStepBackAndLeadsByNoMoreThanTheStep(t *testing.T) {
	for _, step := range []time.Duration{-time.Millisecond, -time.Second, -4 * time.Second, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			write := at(0, 0)
			m := RenewMark{}.Wrote(write, write, true)
			now := at(time.Second, step)
			got := m.Next(now)
			if !got.After(write.Round(0)) {
				t.Fatalf("renew time %v after the step, not after the last written %v", got, write.Round(0))
			}
			if lead := got.Sub(now.Round(0)); lead > -step {
				t.Fatalf("renew time leads the wall clock by %v after a step of %v", lead, step)
			}
		})
	}
}

// A chain of renewals across a step forward and the step back that undoes
// it stores renew times that only rise, and never more than a renew period
// apart beyond the time passed.
func TestRenewTimesOnlyRiseWhenTheWallClockStepsForwardThenBack(t *testing.T) {
	steps := []time.Duration{0, 0, 30 * time.Second, 30 * time.Second, 0, 0, -5 * time.Second, 0}
	var m RenewMark
	var last time.Time
	for i, step := range steps {
		now := at(time.Duration(i)*time.Second, step)
		renew := m.Next(now)
		if i > 0 && !renew.Truncate(time.Second).After(last.Truncate(time.Second)) {
			t.Fatalf("renewal %d stored %v (whole seconds) after %v: the same or an earlier second", i, renew.Truncate(time.Second), last.Truncate(time.Second))
		}
		m, last = m.Wrote(renew, now, true), renew
	}
}
