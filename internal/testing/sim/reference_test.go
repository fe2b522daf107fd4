package sim

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// referenceSchedule is a random schedule of three holders of client-go's
// shape and the faults client-go is known to survive: API errors,
// timeouts, pauses, conflicts, lost replies, foreign writes and crashes.
// client-go never steals and stops its work RetryPeriod + RenewDeadline
// after its last renew, before anyone else's lease can run out; so any
// violation here is a false alarm of the harness.
func referenceSchedule(seed int64) Schedule {
	r := rand.New(rand.NewSource(seed))
	s := base(fmt.Sprintf("reference seed %d", seed), resourcelock.LeasesResourceLock, 20*time.Second)
	s.Seed = seed
	if r.Intn(2) == 0 {
		s.LockKind = resourcelock.ConfigMapsResourceLock
	}
	if r.Intn(3) == 0 {
		s.Timing = smallTiming()
	}
	g := &generator{r: r, s: &s}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("client-go-%d", i)
		s.Istiods = append(s.Istiods, IstiodSpec{Name: name, Key: revisions[r.Intn(2)], StartAt: time.Duration(r.Intn(1500)) * time.Millisecond})
		g.names = append(g.names, name)
	}
	for k := 3 + r.Intn(5); k > 0; k-- {
		at := time.Second + time.Duration(r.Int63n(int64(s.Duration-4*time.Second)))
		switch r.Intn(5) {
		case 0:
			g.apiErrors(at)
		case 1:
			g.pause(at)
		case 2:
			g.conflicts(at)
		case 3:
			g.add(at, "foreign write on the lock", func(w *World) { w.ForeignWrite(true) })
		default:
			name := g.pick()
			g.add(at, "crash "+name, func(w *World) {
				for _, s := range w.istiods {
					if s.spec.Name == name {
						s.crash()
					}
				}
				w.noteFault()
			})
		}
	}
	return s
}

func TestInvariantsHoldForClientGoShapedHolders(t *testing.T) {
	n := 300
	if raceEnabled {
		n = 50
	}
	starts := 0
	for seed := int64(1); seed <= int64(n); seed++ {
		res := Run(t, referenceSchedule(seed))
		starts += res.WorkStarts
		for _, v := range res.Violations {
			t.Errorf("reference seed %d: %v", seed, v)
		}
		if len(res.Violations) > 0 && *flagV {
			t.Logf("trace:\n%s", res.Trace)
		}
	}
	if starts < n {
		t.Fatalf("only %d terms of work in %d schedules: the holders hardly ran", starts, n)
	}
}

// benignSchedule is a random schedule of meshd candidates of one revision
// (no steals), with run functions that stop within the stop timeout, and
// the faults that no reproduced case of the elector involves: API errors,
// timeouts, pauses, conflicts, lost replies, lagging and broken watches,
// crashes and restarts.
func benignSchedule(seed int64) Schedule {
	r := rand.New(rand.NewSource(seed))
	s := base(fmt.Sprintf("benign seed %d", seed), resourcelock.ConfigMapsResourceLock, 20*time.Second)
	s.Seed = seed
	if r.Intn(2) == 0 {
		s.LockKind = resourcelock.LeasesResourceLock
	}
	if r.Intn(3) == 0 {
		s.Timing = smallTiming()
	}
	g := &generator{r: r, s: &s, truth: "stable"}
	for i := 0; i < 3; i++ {
		c := meshd(fmt.Sprintf("meshd-%d", i), "stable", "stable", time.Duration(r.Intn(1500))*time.Millisecond)
		c.Watch = r.Intn(3) != 0
		c.Work.Drain = time.Duration(r.Int63n(int64(s.Timing.StopTimeout / 2)))
		s.Candidates = append(s.Candidates, c)
		g.names = append(g.names, c.Name)
	}
	for k := 3 + r.Intn(5); k > 0; k-- {
		at := time.Second + time.Duration(r.Int63n(int64(s.Duration-4*time.Second)))
		switch r.Intn(5) {
		case 0:
			g.apiErrors(at)
		case 1:
			g.pause(at)
		case 2:
			g.conflicts(at)
		case 3:
			g.watchFault(at)
		default:
			g.crashOrStop(at)
		}
	}
	return s
}

func TestInvariantsHoldForMeshdUnderBenignFaults(t *testing.T) {
	n := 300
	if raceEnabled {
		n = 50
	}
	for seed := int64(1); seed <= int64(n); seed++ {
		res := Run(t, benignSchedule(seed))
		for _, v := range res.Violations {
			t.Errorf("benign seed %d: %v", seed, v)
		}
		if len(res.Violations) > 0 && *flagV {
			t.Logf("trace:\n%s", res.Trace)
		}
	}
}
