package sim

import (
	"math/rand"
	"testing"
	"testing/synctest"
)

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
	var res Result
	synctest.Test(t, func(*testing.T) { res = newWorld(s).run() })
	return res
}
