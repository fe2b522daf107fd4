package elector

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// fakeSession is a Session whose state the test sets.
type fakeSession struct {
	ref     string
	sent    time.Time
	current bool
	alive   map[string]time.Time // ref -> until; missing: not alive
	known   bool
	// unechoed: no heartbeat of its own has come back since the time
	// asked; asked counts the calls that had to wait.
	unechoed bool
	asked    int
}

func (s *fakeSession) Ref() string                             { return s.ref }
func (s *fakeSession) Renewed() (time.Time, bool)              { return s.sent, s.current }
func (s *fakeSession) AliveUntil(ref string) (time.Time, bool) { return s.alive[ref], s.known }
func (s *fakeSession) EchoedSince(uint64, func()) bool {
	if s.unechoed {
		s.asked++
	}
	return !s.unechoed
}

// sessionElector is a Lease candidate in session mode whose watch counts
// as healthy without running (the tests call the loop's steps). The
// harness must be a Lease harness: a session needs the lock and the
// session Leases on one watch.
func (h *harness) sessionElector(identity string, s *fakeSession) *LeaderElector {
	h.t.Helper()
	if !h.leases {
		h.t.Fatal("sessionElector needs newLeaseHarness")
	}
	lock, err := resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: identity})
	if err != nil {
		h.t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Watch:     true, Session: inSession(lock, time.Second, s), Clock: h.clock,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	le.watch.MarkHealthy(true)
	return le
}

// writeMark sets the session annotation of the lock object.
func (h *harness) writeMark(m lockmeta.SessionMark) {
	h.t.Helper()
	obj := h.lockObject()
	raw, _ := json.Marshal(m)
	annotationsOf(obj)[lockmeta.SessionAnnotationKey] = string(raw)
	h.updateLock(obj)
}

func (h *harness) mark() (lockmeta.SessionMark, bool) {
	h.t.Helper()
	var m lockmeta.SessionMark
	raw, ok := annotationsOf(h.lockObject())[lockmeta.SessionAnnotationKey]
	if ok {
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			h.t.Fatal(err)
		}
	}
	return m, ok
}

// A follower in session mode takes an expired record only once the
// holder's session has run out too, and waits while it cannot tell.
func TestFollowerWaitsForTheHoldersSession(t *testing.T) {
	cases := []struct {
		name  string
		mark  *lockmeta.SessionMark
		alive time.Time
		known bool
		at    time.Duration // after t0; the record's lease of 4s ends at t0+4s
		want  outcome
		mixed bool
	}{
		{"session alive past the record", &lockmeta.SessionMark{Holder: "a", Session: "s/1"}, t0.Add(8 * time.Second), true, 5 * time.Second, heldByOther, false},
		{"session run out too", &lockmeta.SessionMark{Holder: "a", Session: "s/1"}, t0.Add(8 * time.Second), true, 9 * time.Second, acquired, false},
		{"session not known here", &lockmeta.SessionMark{Holder: "a", Session: "s/1"}, time.Time{}, false, 60 * time.Second, heldByOther, false},
		{"session ended or never seen", &lockmeta.SessionMark{Holder: "a", Session: "s/1"}, time.Time{}, true, 5 * time.Second, acquired, false},
		{"a mark without a session: the record decides", &lockmeta.SessionMark{Holder: "a"}, t0.Add(time.Hour), true, 5 * time.Second, acquired, false},
		{"a mark of an earlier holder means nothing", &lockmeta.SessionMark{Holder: "old", Session: "s/1"}, t0.Add(time.Hour), true, 5 * time.Second, acquired, true},
		{"no mark: a holder without sessions", nil, t0.Add(time.Hour), true, 5 * time.Second, acquired, true},
		{"record still valid", &lockmeta.SessionMark{Holder: "a", Session: "s/1"}, time.Time{}, true, 3 * time.Second, heldByOther, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newLeaseHarness(t)
			h.writeRecord(held("a", "", 4))
			if c.mark != nil {
				h.writeMark(*c.mark)
			}
			s := &fakeSession{ref: "s/2", sent: t0, current: true, known: c.known, alive: map[string]time.Time{}}
			if !c.alive.IsZero() {
				s.alive["s/1"] = c.alive
			}
			le := h.sessionElector("b", s)
			le.watch.MarkHealthy(false) // first read from the API server
			mustAttempt(t, le, false, heldByOther)
			le.watch.MarkHealthy(true)
			if le.SessionFallback() != c.mixed {
				t.Errorf("SessionFallback() = %v, want %v", le.SessionFallback(), c.mixed)
			}
			h.clock.SetTime(t0.Add(c.at))
			h.verbs()
			mustAttempt(t, le, false, c.want)
			if c.want == heldByOther {
				assertVerbs(t, h.verbs())
			}
		})
	}
}

// A holder names its session when it takes the lock, and then leaves its
// renewals to the session while the session is current; otherwise it
// rewrites its record, with a mark that names no session.
func TestHolderLeavesRenewalsToACurrentSession(t *testing.T) {
	h := newLeaseHarness(t)
	s := &fakeSession{ref: "s/1", sent: t0, current: true, known: true}
	le := h.sessionElector("a", s)
	le.watch.MarkHealthy(false)
	mustAttempt(t, le, false, acquired)
	le.watch.MarkHealthy(true)
	if m, ok := h.mark(); !ok || m != (lockmeta.SessionMark{Holder: "a", Session: "s/1", Process: "s/1"}) {
		t.Fatalf("mark after acquiring: %+v (present %v)", m, ok)
	}
	le.loop.lastRenew = t0
	h.verbs()
	// The watch became healthy only after the write that took the lock:
	// until the holder has written once with it healthy, it cannot tell
	// that the watch has handed it every write since, so it writes.
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("the first renew ended the term: %+v", end)
	}
	assertVerbs(t, h.verbs(), "update leases")
	for i := 1; i <= 3; i++ {
		h.clock.SetTime(t0.Add(time.Duration(i) * time.Second))
		s.sent = h.clock.Now()
		if end := le.renewOnce(context.Background()); end != nil {
			t.Fatalf("renew %d ended the term: %+v", i, end)
		}
		assertVerbs(t, h.verbs())
		if !le.loop.lastRenew.Equal(s.sent) {
			t.Fatalf("renew %d: the term's last renew is %v, want the heartbeat's %v", i, le.loop.lastRenew, s.sent)
		}
	}
	if err := le.Check(0); err != nil {
		t.Errorf("a holder renewed by its session fails its health check: %v", err)
	}
	// The session stops being current: the holder writes its record.
	s.current = false
	h.clock.Step(time.Second)
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	assertVerbs(t, h.verbs(), "update leases")
	if m, ok := h.mark(); !ok || m != (lockmeta.SessionMark{Holder: "a", Process: "s/1"}) {
		t.Errorf("mark after a renew without a current session: %+v (present %v)", m, ok)
	}
	// Neither renewed for the renew deadline: the term ends.
	h.client.PrependReactor("update", "leases", failAll)
	h.clock.Step(2*time.Second + time.Millisecond)
	if end := le.renewOnce(context.Background()); end == nil || end.stillHeld {
		t.Errorf("no renew for the deadline did not end the term: %+v", end)
	}
}

// failAll is a reactor that fails every request it sees.
func failAll(k8stesting.Action) (bool, runtime.Object, error) {
	return true, nil, apierrors.NewServiceUnavailable("down")
}

// Deleting the lock object of a holder renewed by its session is not a
// release: a follower keeps waiting for the session it saw named.
func TestDeletedLockKeepsTheHoldersSession(t *testing.T) {
	h := newLeaseHarness(t)
	h.writeRecord(held("a", "", 4))
	h.writeMark(lockmeta.SessionMark{Holder: "a", Session: "s/1"})
	s := &fakeSession{ref: "s/2", current: true, known: true, alive: map[string]time.Time{"s/1": t0.Add(time.Minute)}}
	le := h.sessionElector("b", s)
	le.watch.MarkHealthy(false)
	mustAttempt(t, le, false, heldByOther)
	le.watch.MarkHealthy(true)

	last := h.lockObject()
	h.deleteLock()
	le.watch.Deliver(last, true)
	le.watch.ingest()
	h.clock.SetTime(t0.Add(30 * time.Second)) // the record's own lease ran out long ago
	h.verbs()
	mustAttempt(t, le, false, heldByOther)
	assertVerbs(t, h.verbs())
	h.clock.SetTime(t0.Add(61 * time.Second))
	mustAttempt(t, le, false, acquired)
}

// A forced steal from a holder that names a session starts the work no
// earlier than LeaseDuration after the steal, even when this candidate's
// view of the session is stale or says it ran out: the holder's term ends
// within RenewDeadline of the steal, and its work then has until the
// lease ends to stop. A fence of RenewDeadline let the thief start beside
// work still stopping within its budget (session seed 400075503).
func TestForcedStealFromASessionHolderIsFenced(t *testing.T) {
	h := newLeaseHarness(t)
	h.writeRecord(held("a", "stable", 1)) // its own lease ends before the deadline
	h.writeMark(lockmeta.SessionMark{Holder: "a", Session: "s/1"})
	s := &fakeSession{ref: "s/2", current: true, known: true, alive: map[string]time.Time{}}
	le := h.sessionElector("b", s)
	le.cfg.KeyComparison = func(string) bool { return true }
	le.watch.MarkHealthy(false)
	h.clock.SetTime(t0.Add(time.Second))
	mustAttempt(t, le, false, acquired)
	if want := t0.Add(time.Second + 4*time.Second); le.fence.startAt.Before(want) {
		t.Errorf("work may start at %v, before a lease after the steal (%v)", le.fence.startAt, want)
	}
}

// A session the view shows over counts as over only once a heartbeat of
// this process's own session, sent after that judgement, came back.
func TestFollowerConfirmsASessionIsOverWithItsOwnEcho(t *testing.T) {
	h := newLeaseHarness(t)
	h.writeRecord(held("a", "", 4))
	h.writeMark(lockmeta.SessionMark{Holder: "a", Session: "s/1"})
	s := &fakeSession{ref: "s/2", current: true, known: true, unechoed: true,
		alive: map[string]time.Time{"s/1": t0.Add(6 * time.Second)}}
	le := h.sessionElector("b", s)
	le.watch.MarkHealthy(false)
	mustAttempt(t, le, false, heldByOther)
	le.watch.MarkHealthy(true)
	h.clock.SetTime(t0.Add(7 * time.Second))
	h.verbs()
	mustAttempt(t, le, false, heldByOther)
	assertVerbs(t, h.verbs())
	if s.asked == 0 {
		t.Fatal("the follower did not ask for an echo of its own session")
	}
	if w := le.followerWait(); w > time.Second+10*time.Millisecond {
		t.Errorf("the follower sleeps %v waiting for the echo; want at most a retry period", w)
	}
	s.unechoed = false
	mustAttempt(t, le, false, acquired)
}

// A process that finds a record naming its own identity treats it as an
// earlier process's, whose work may still run, when the mark names another
// session of this identity, as the one keeping it alive or as the writer's
// (a forced steal while the session was not current names no session to
// keep it alive, only the writer's). It then leaves the record alone until
// the record's lease has passed from its first sight. A record that
// another holder wrote naming it (a handover) is its own at once.
func TestRestartRecognisesAnEarlierProcessRecord(t *testing.T) {
	cases := []struct {
		name    string
		mark    lockmeta.SessionMark
		earlier bool
	}{
		{"kept alive by the earlier session", lockmeta.SessionMark{Holder: "a", Session: "s/1", Process: "s/1"}, true},
		{"written by the earlier process, session not current", lockmeta.SessionMark{Holder: "a", Process: "s/1"}, true},
		{"written by an older meshd naming a session", lockmeta.SessionMark{Holder: "a", Session: "s/1"}, true},
		{"written by this process", lockmeta.SessionMark{Holder: "a", Process: "s/2"}, false},
		{"handed over by another holder", lockmeta.SessionMark{Holder: "a"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newLeaseHarness(t)
			h.writeRecord(held("a", "", 4))
			h.writeMark(c.mark)
			s := &fakeSession{ref: "s/2", sent: t0, current: true, known: true, alive: map[string]time.Time{}}
			le := h.sessionElector("a", s)
			le.watch.MarkHealthy(false)
			if !c.earlier {
				mustAttempt(t, le, false, acquired)
				return
			}
			mustAttempt(t, le, false, heldByOther)
			h.clock.SetTime(t0.Add(3 * time.Second))
			mustAttempt(t, le, false, heldByOther)
			h.clock.SetTime(t0.Add(4 * time.Second))
			mustAttempt(t, le, false, acquired)
		})
	}
}

// Every record a candidate in session mode writes naming itself names its
// process's session, also when the session is not current and the record
// names no session to keep it alive.
func TestOwnWritesNameTheWritingProcess(t *testing.T) {
	h := newLeaseHarness(t)
	s := &fakeSession{ref: "s/2", known: true, alive: map[string]time.Time{}}
	le := h.sessionElector("a", s)
	le.watch.MarkHealthy(false)
	mustAttempt(t, le, false, acquired)
	if m, _ := h.mark(); m != (lockmeta.SessionMark{Holder: "a", Process: "s/2"}) {
		t.Errorf("mark %+v, want the writer's session and none keeping the holder alive", m)
	}
}
