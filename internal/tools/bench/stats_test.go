package bench

import (
	"testing"
	"time"
)

// millis is the Durations of the given milliseconds, in that order.
func millis(v ...int) Durations {
	var d Durations
	for _, x := range v {
		d = append(d, time.Duration(x)*time.Millisecond)
	}
	return d
}

func TestDurations(t *testing.T) {
	if _, ok := millis().Median(); ok {
		t.Fatal("median of nothing")
	}
	if m, _ := millis(5, 1, 3).Median(); m != 3*time.Millisecond {
		t.Fatalf("median = %v", m)
	}
	if m, _ := millis(4, 1, 3, 2).Median(); m != 2500*time.Microsecond {
		t.Fatalf("even median = %v", m)
	}
	if p, _ := millis(10, 1, 2, 3, 4, 5, 6, 7, 8, 9).P99(); p != 10*time.Millisecond {
		t.Fatalf("p99 of 10 = %v, want the maximum", p)
	}
	var hundred []int
	for i := 1; i <= 200; i++ {
		hundred = append(hundred, i)
	}
	if p, _ := millis(hundred...).P99(); p != 198*time.Millisecond {
		t.Fatalf("p99 of 1..200 = %v", p)
	}
	if got := ratio(100, 2); got != "50.0x" {
		t.Fatalf("ratio = %q", got)
	}
	if got := ratio(1, 0); got != "n/a" {
		t.Fatalf("ratio by zero = %q", got)
	}
}
