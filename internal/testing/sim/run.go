package sim

import (
	"fmt"
	"math/rand"
	"runtime/debug"
	"testing"
	"testing/synctest"
	"time"
)

// WallLimit bounds the real time one schedule may take. A schedule needs
// milliseconds; one that takes longer has a goroutine that spins or waits
// on something outside the simulation, which the world cannot step past.
// The process then ends with every goroutine's stack and the seed.
var WallLimit = 2 * time.Minute

// Run runs schedule s in a synctest bubble of t and returns what it found.
// It does not fail t; the caller decides.
//
// Run seeds math/rand's global source with the schedule's seed, because the
// elector and client-go draw their jitter from it. That seeding takes effect
// only in a binary built with the setting randseednop=0 (a //go:debug line
// in a test file of the caller), and only while no other schedule runs in
// the same process at the same time.
func Run(t *testing.T, s Schedule) Result {
	t.Helper()
	//lint:ignore SA1019 the global source is seeded on purpose (see above)
	rand.Seed(s.Seed) //nolint:staticcheck // see above
	watchdog := time.AfterFunc(WallLimit, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("sim: schedule %q (seed %d) did not finish within %v of real time", s.Name, s.Seed, WallLimit))
	})
	defer watchdog.Stop()
	var res Result
	synctest.Test(t, func(*testing.T) { res = newWorld(s).run() })
	return res
}
