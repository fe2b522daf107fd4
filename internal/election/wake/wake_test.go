package wake

import (
	"testing"
	"time"
)

func TestHeldWakesJustAfterWhatItWaitsFor(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	const poll = 2 * time.Second
	tests := []struct {
		name string
		held Held
		// due is the time the follower waits for; zero when it polls.
		due time.Time
	}{
		{"lease runs out", Held{End: at(4 * time.Second)}, at(4 * time.Second)},
		{"lease and yield", Held{End: at(4 * time.Second), Yield: 30 * time.Millisecond}, at(4*time.Second + 30*time.Millisecond)},
		{"a protocol acts first", Held{End: at(4 * time.Second), Act: []time.Time{{}, at(time.Second)}}, at(time.Second)},
		{"a protocol acts after the lease", Held{End: at(4 * time.Second), Act: []time.Time{at(5 * time.Second)}}, at(4 * time.Second)},
		{"expired, left to the coordinator", Held{End: at(-time.Second), Vacancy: at(300 * time.Millisecond)}, at(300 * time.Millisecond)},
		{"expired, vacancy already over", Held{End: at(-time.Second), Vacancy: at(-time.Millisecond)}, now},
		{"expired, emptied lock held a while", Held{End: at(-time.Second), Empty: at(time.Second)}, at(time.Second)},
		{"expired, emptied lock held past a poll", Held{End: at(-time.Second), Empty: at(time.Minute)}, time.Time{}},
		{"expired", Held{End: at(-time.Second)}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.held.Wait(now, poll)
			if tt.due.IsZero() {
				if got != poll {
					t.Fatalf("waits %v, want the poll %v", got, poll)
				}
				return
			}
			woke := now.Add(got)
			// The checks that follow a wake-up ask whether the time has
			// passed (due.Before(now)): on the time itself, they would
			// find nothing to do and the follower would wait a poll more.
			if !tt.due.Before(woke) {
				t.Fatalf("wakes at %v, not after %v", woke, tt.due)
			}
			if late := woke.Sub(tt.due); late > Slack {
				t.Fatalf("wakes %v after %v, more than the slack %v", late, tt.due, Slack)
			}
		})
	}
}

func TestFreeWaitsForTheEarliestWakeOrThePoll(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const poll = 2 * time.Second
	if got := Free(now, poll); got != poll {
		t.Fatalf("nothing to wait for: waits %v, want %v", got, poll)
	}
	if got := Free(now, poll, time.Time{}, now.Add(time.Second), now.Add(500*time.Millisecond)); got != 500*time.Millisecond+Slack {
		t.Fatalf("waits %v, want the earliest wake plus the slack", got)
	}
	if got := Free(now, poll, now.Add(-time.Second)); got != Slack {
		t.Fatalf("a past wake: waits %v, want only the slack", got)
	}
	if got := Free(now, poll, now.Add(time.Minute)); got != poll {
		t.Fatalf("a wake after the poll: waits %v, want %v", got, poll)
	}
}
