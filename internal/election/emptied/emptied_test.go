package emptied

import (
	"testing"
	"time"
)

const lease = 10 * time.Second

var t0 = time.Unix(1000, 0)

func TestAnEmptiedObjectCountsAsHeldForALeaseFromFirstSight(t *testing.T) {
	var s Since
	s.Note(false, t0)
	if held, fresh := s.Held(t0.Add(time.Second), lease, false); !held || fresh {
		t.Fatalf("a second after first sight: held %v, fresh %v; want held, not fresh", held, fresh)
	}
	if held, _ := s.Held(t0.Add(lease), lease, false); !held {
		t.Fatal("held no longer at exactly a lease after first sight")
	}
	if held, _ := s.Held(t0.Add(lease+time.Nanosecond), lease, false); held {
		t.Fatal("still held after a lease from first sight")
	}
}

func TestSeeingItEmptiedAgainDoesNotRestartTheWait(t *testing.T) {
	var s Since
	s.Note(false, t0)
	s.Note(false, t0.Add(5*time.Second))
	if got := s.WakeAt(t0.Add(6*time.Second), lease); !got.Equal(t0.Add(lease)) {
		t.Fatalf("WakeAt = %v, want %v", got, t0.Add(lease))
	}
}

func TestARecordOrAnOwnWriteStartsTheCountAfresh(t *testing.T) {
	for name, refill := range map[string]func(*Since){
		"record":    func(s *Since) { s.Note(true, t0.Add(time.Second)) },
		"own write": func(s *Since) { s.Clear() },
	} {
		var s Since
		s.Note(false, t0)
		refill(&s)
		if s.Seen() {
			t.Errorf("%s: still seen emptied", name)
		}
		later := t0.Add(20 * time.Second)
		if held, fresh := s.Held(later, lease, false); !held || !fresh {
			t.Errorf("%s: emptied again at %v: held %v, fresh %v; want a fresh wait", name, later, held, fresh)
		}
	}
}

func TestTheFirstElectionTakesAMissingObjectAtOnce(t *testing.T) {
	var s Since
	if held, fresh := s.Held(t0, lease, true); held || fresh {
		t.Fatalf("first election: held %v, fresh %v; want free", held, fresh)
	}
	if s.Seen() || !s.WakeAt(t0, lease).IsZero() {
		t.Fatal("the first election noted the object as emptied")
	}
}

func TestWakeAtIsZeroOnceTheWaitIsOver(t *testing.T) {
	var s Since
	if !s.WakeAt(t0, lease).IsZero() {
		t.Fatal("WakeAt without an emptied object is not zero")
	}
	s.Note(false, t0)
	if !s.WakeAt(t0.Add(lease), lease).IsZero() {
		t.Fatal("WakeAt at the end of the wait is not zero")
	}
}
