package monotime

import (
	"testing"
	"time"
)

func TestTimesBuiltWithAMonotonicReadingBehaveAsTimeNowsDo(t *testing.T) {
	if err := CheckLayout(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if now == now.Round(0) {
		t.Fatal("time.Now carries no monotonic reading here")
	}
	// A stored time (no monotonic reading) compares by the wall clock.
	stepped := WithMonotonic(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Minute)
	stored := time.Date(2026, 3, 1, 12, 0, 3, 0, time.UTC)
	if !stepped.Before(stored) || stored.Sub(stepped) != 3*time.Second {
		t.Fatalf("%v against the stored %v: want 3s before it by the wall clock", stepped, stored)
	}
}
