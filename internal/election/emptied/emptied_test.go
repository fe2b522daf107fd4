package emptied

import (
	"testing"
	"time"
)

const lease = 10 * time.Second

var t0 = time.Unix(1000, 0)

func TestAnEmptiedObjectCountsAsHeldForALeaseFromFirstSight(t *testing.T) {
	var s Since
	s.Note(false, false, "", t0)
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
	s.Note(false, false, "", t0)
	s.Note(false, false, "", t0.Add(5*time.Second))
	if got := s.WakeAt(t0.Add(6*time.Second), lease); !got.Equal(t0.Add(lease)) {
		t.Fatalf("WakeAt = %v, want %v", got, t0.Add(lease))
	}
}

func TestARecordOrAnOwnWriteStartsTheCountAfresh(t *testing.T) {
	for name, refill := range map[string]func(*Since){
		"record":    func(s *Since) { s.Note(true, false, "", t0.Add(time.Second)) },
		"own write": func(s *Since) { s.Clear() },
	} {
		var s Since
		s.Note(false, false, "", t0)
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
	s.Note(false, false, "", t0)
	if !s.WakeAt(t0.Add(lease), lease).IsZero() {
		t.Fatal("WakeAt at the end of the wait is not zero")
	}
}

// An emptied object that was created since the count began (another uid,
// or an object where there was none) starts the count afresh: a holder may
// have written its record into the object in between, unseen, and be
// working. Before, the count of the first object went on, and a polling
// candidate that had missed a record written and destroyed in between took
// the new object beside that holder's work (simulation classic seed
// 5400266087). The same object seen again, or missing again, does not.
func TestAnObjectCreatedSinceStartsTheCountAfresh(t *testing.T) {
	type look struct {
		missing bool
		uid     string
	}
	cases := []struct {
		name   string
		looks  []look
		wakeAt time.Time
	}{
		{"same object, emptied again", []look{{uid: "a"}, {uid: "a"}}, t0.Add(lease)},
		{"another uid", []look{{uid: "a"}, {uid: "b"}}, t0.Add(5*time.Second + lease)},
		// The object the count restarted for, looked at again: no version
		// between, the count goes on (simulation session seed 16200032913:
		// every candidate restarted it at every look, and none ever took
		// the emptied lock).
		{"another uid, then the same again", []look{{uid: "a"}, {uid: "b"}, {uid: "b"}}, t0.Add(5*time.Second + lease)},
		{"uids unknown", []look{{}, {}}, t0.Add(lease)},
		{"missing, then an object", []look{{missing: true}, {uid: "a"}}, t0.Add(5*time.Second + lease)},
		{"missing, then missing", []look{{missing: true}, {missing: true}}, t0.Add(lease)},
		// A deletion seen in between: what counts is that it went missing.
		{"object, then missing", []look{{uid: "a"}, {missing: true}}, t0.Add(lease)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Since
			at := []time.Time{t0, t0.Add(5 * time.Second), t0.Add(5500 * time.Millisecond)}
			for i, l := range tc.looks {
				s.Note(false, l.missing, l.uid, at[i])
			}
			if got := s.WakeAt(t0.Add(6*time.Second), lease); !got.Equal(tc.wakeAt) {
				t.Fatalf("WakeAt = %v, want %v", got.Sub(t0), tc.wakeAt.Sub(t0))
			}
		})
	}
	// An object, then none, then an object again: the lock cannot compare
	// the uids across the deletion, and the object found after it counts
	// as created since.
	var s Since
	s.Note(false, false, "", t0)
	s.Note(false, true, "", t0.Add(2*time.Second))
	s.Note(false, false, "", t0.Add(5*time.Second))
	if got, want := s.WakeAt(t0.Add(6*time.Second), lease), t0.Add(5*time.Second+lease); !got.Equal(want) {
		t.Fatalf("object, missing, object: WakeAt = %v, want %v", got.Sub(t0), want.Sub(t0))
	}
	// A record clears the look too.
	s.Note(true, false, "", t0.Add(7*time.Second))
	s.Note(false, false, "", t0.Add(8*time.Second))
	if got, want := s.WakeAt(t0.Add(9*time.Second), lease), t0.Add(8*time.Second+lease); !got.Equal(want) {
		t.Fatalf("after a record: WakeAt = %v, want %v", got.Sub(t0), want.Sub(t0))
	}
}
