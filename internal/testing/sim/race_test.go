//go:build race

package sim

// raceEnabled lowers the default budget: the race detector slows a schedule
// down about tenfold.
const raceEnabled = true
