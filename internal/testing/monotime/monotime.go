// Package monotime builds times whose wall and monotonic readings differ,
// as time.Now's do on a machine whose wall clock was stepped: tests use
// them to show a wall-clock step to code that measures durations with the
// monotonic clock.
//
// The time package builds such a time only in time.Now, so WithMonotonic
// sets the two readings itself, in the layout time.Time has kept since Go
// 1.9; CheckLayout proves that the result behaves as time.Now's does.
package monotime

import (
	"fmt"
	"time"
	"unsafe"
)

// timeFields mirrors the fields of time.Time.
type timeFields struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const (
	hasMonotonic = 1 << 63
	nsecShift    = 30
	// minWallSec is 1885-01-01 in seconds since the year 1: the origin of
	// the wall seconds packed in a time with a monotonic reading.
	minWallSec = (1884*365 + 1884/4 - 1884/100 + 1884/400) * 24 * 60 * 60
)

// WithMonotonic returns wall, in UTC, with mono as its monotonic reading:
// Sub, Before, After, Equal and Compare with another such time use the
// monotonic readings, anything else (formatting, Round(0), comparisons
// with a time without one, such as any time read from an object) the wall
// reading. wall must lie between 1885 and 2157.
func WithMonotonic(wall time.Time, mono time.Duration) time.Time {
	t := wall.UTC().Round(0)
	f := (*timeFields)(unsafe.Pointer(&t))
	// Without a monotonic reading, wall holds the nanoseconds and ext the
	// seconds since the year 1.
	f.wall = hasMonotonic | uint64(f.ext-minWallSec)<<nsecShift | f.wall
	f.ext = int64(mono)
	return t
}

// CheckLayout reports whether WithMonotonic builds times that behave as
// time.Now's: the wall reading shows in formatting and Round(0), the
// monotonic one in Sub and Before.
func CheckLayout() error {
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	a := WithMonotonic(base, time.Hour)
	b := WithMonotonic(base.Add(-5*time.Second), time.Hour+time.Second)
	switch {
	case a.Round(0) != base:
		return fmt.Errorf("the wall reading of %v is not %v", a, base)
	case b.Sub(a) != time.Second || !a.Before(b):
		return fmt.Errorf("the monotonic readings do not decide: %v - %v = %v, want 1s", b, a, b.Sub(a))
	case b.Round(0).Sub(a.Round(0)) != -5*time.Second:
		return fmt.Errorf("the wall readings differ by %v, want -5s", b.Round(0).Sub(a.Round(0)))
	case a == a.Round(0):
		return fmt.Errorf("%v carries no monotonic reading", a)
	}
	return nil
}
