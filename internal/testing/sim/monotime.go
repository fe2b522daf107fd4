package sim

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/internal/testing/monotime"
)

// A real process reads one clock in time.Now and gets two readings: the
// wall clock, which objects store and which a step moves, and the
// monotonic clock, which Sub, Before, After and Equal use when both times
// carry one, and which no step moves. An actor's clock (actorClock) gives
// the same pair (package monotime builds it): the world's time plus the
// actor's wall offset as the wall reading, the world's time as the
// monotonic one. Its times go into objects without the monotonic reading,
// as serialization drops it (stripMonotonic).

// actorClock is an actor's clock: the world's clock for timers and
// durations, with the actor's wall offset in the wall reading of Now.
type actorClock struct {
	*simClock
	state *actorState
}

var checkLayout sync.Once

// newActorClock returns the clock of the actor whose state is st. It
// panics if this Go's time.Time does not have the layout package monotime
// writes: the model would be wrong without it.
func newActorClock(clk *simClock, st *actorState) actorClock {
	checkLayout.Do(func() {
		if err := monotime.CheckLayout(); err != nil {
			panic("sim: cannot build times with a wall reading apart from the monotonic one: " + err.Error())
		}
	})
	return actorClock{simClock: clk, state: st}
}

// monoOrigin is subtracted from the world's time to make a monotonic
// reading: any constant works, since only differences of readings count.
var monoOrigin = epoch.Add(-time.Hour)

// Now implements clock.PassiveClock.
func (c actorClock) Now() time.Time {
	now := c.simClock.Now()
	return monotime.WithMonotonic(now.Add(c.state.wallOffset()), now.Sub(monoOrigin))
}

// Since implements clock.PassiveClock.
func (c actorClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// stripMonotonic drops the monotonic reading of every time a process
// writes in obj, as serialization by a real client does; obj is changed in
// place. The actors write times into two kinds of objects through their
// clients: the acquire and renew times of a Lease, and, in a ConfigMap,
// the record and handover annotations, whose times are JSON already
// (without a monotonic reading).
func stripMonotonic(obj runtime.Object) {
	if l, ok := obj.(*coordinationv1.Lease); ok && l != nil {
		for _, t := range []*metav1.MicroTime{l.Spec.AcquireTime, l.Spec.RenewTime} {
			if t != nil {
				t.Time = t.Round(0)
			}
		}
	}
}
