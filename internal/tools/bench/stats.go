package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Durations are the results of repeated trials.
type Durations []time.Duration

// sorted returns a sorted copy.
func (d Durations) sorted() Durations {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// Quantile returns the nearest-rank q-quantile (0 < q <= 1); with fewer than
// 100 samples the 0.99-quantile is the maximum. ok is false without samples.
func (d Durations) Quantile(q float64) (time.Duration, bool) {
	if len(d) == 0 {
		return 0, false
	}
	s := d.sorted()
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))], true
}

// Median is the middle value (the mean of the two middle values for an even
// count).
func (d Durations) Median() (time.Duration, bool) {
	if len(d) == 0 {
		return 0, false
	}
	s := d.sorted()
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// P99 is Quantile(0.99).
func (d Durations) P99() (time.Duration, bool) { return d.Quantile(0.99) }

// Shift returns d with delta added to every value.
func (d Durations) Shift(delta time.Duration) Durations {
	out := make(Durations, len(d))
	for i, v := range d {
		out[i] = v + delta
	}
	return out
}

// medianFloat is the median of xs, NaN when empty.
func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtDur prints a duration in milliseconds with a precision that suits its
// size.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(ms); {
	case a >= 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case a >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// ratio formats a/b as "12x"; "n/a" when either is missing or b is not
// positive.
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return "n/a"
	}
	r := a / b
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	default:
		return fmt.Sprintf("%.2fx", r)
	}
}

// ms converts a duration to float milliseconds for ratios.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
