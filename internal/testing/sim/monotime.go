package sim

import (
	"reflect"
	"sync"
	"time"

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

var timeType = reflect.TypeFor[time.Time]()

// stripMonotonic drops the monotonic reading of every time in obj, as
// serialization by a real client does. obj is changed in place.
func stripMonotonic(obj runtime.Object) {
	stripValue(reflect.ValueOf(obj))
}

func stripValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			stripValue(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == timeType {
			if v.CanSet() {
				v.Set(reflect.ValueOf(v.Interface().(time.Time).Round(0)))
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() { // unexported fields hold no times a process writes
				stripValue(f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			stripValue(v.Index(i))
		}
	case reflect.Map:
		// Maps of objects hold no times a process writes.
	}
}
