package elector

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// A session holder leaves a renewal to its session only if its watch has
// not broken since before its last write of its record. A watch that
// breaks after the write reached the API server and lists again before the
// answer is handled has opened a new period of health, which must not pass
// for the one of the write: a write that took the lock in between may
// still be on its way. So the holder notes the watch's period before it
// writes, and after such a break its next renew writes.
func TestSessionHolderWritesWhenItsWatchBrokeDuringItsWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flap  bool
		verbs []string
	}{
		// Control: an unbroken watch since the write leaves the renew to
		// the session (no request).
		{"watch unbroken since the write", false, nil},
		{"watch broke and relisted during the write", true, []string{"update leases"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLeaseHarness(t)
			s := &fakeSession{ref: "s/1", sent: t0, current: true, known: true}
			le := h.sessionElector("a", s) // watch healthy from the start
			flap := tc.flap
			h.client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if !flap || (a.GetVerb() != "create" && a.GetVerb() != "update") {
					return false, nil, nil
				}
				flap = false
				// The write reaches the API server first ...
				_, obj, err := k8stesting.ObjectReaction(h.client.Tracker())(a)
				// ... then the watch breaks and relists before the
				// elector handles the response.
				le.watch.SetHealth(false)
				le.watch.SetHealth(true)
				return true, obj, err
			})
			mustAttempt(t, le, false, acquired)
			if flap {
				t.Fatal("the write that took the lock was not seen by the reactor")
			}
			if m, ok := h.mark(); !ok || m.Session != "s/1" {
				t.Fatalf("mark after acquiring: %+v (present %v)", m, ok)
			}
			// After a break since its last write the holder cannot know it
			// has been handed every write since: it must write its record.
			assertVerbs(t, renewWithSession(t, h, le, s), tc.verbs...)
		})
	}
}

// A holder whose watch broke during or after its write has to write its
// record again, unless the watch, once back, handed that very write over:
// then the object was still at the written version when the watch
// delivered it, and every later change comes after it in the same period
// of health. Under load a shared watch of thousands of Leases breaks and
// lists again while its holders are still acquiring them; each used to
// write its record once more a retry period later, for nothing.
func TestSessionHolderCreditsAWatchThatHandedItsWriteOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		// back brings the watch back after the write: h is the harness,
		// le the holder.
		back  func(h *harness, le *LeaderElector)
		verbs []string
	}{
		{"listed again and handed the written version over", func(h *harness, le *LeaderElector) {
			le.watch.Deliver(h.lockObject(), false)
		}, nil},
		{"resumed and handed the written version over twice", func(h *harness, le *LeaderElector) {
			le.watch.Deliver(h.lockObject(), false)
			le.watch.Deliver(h.lockObject(), false)
		}, nil},
		{"healthy again without handing anything over", func(h *harness, le *LeaderElector) {
			le.watch.SetHealth(true)
		}, []string{"update leases"}},
		{"handed over a version written after the holder's", func(h *harness, le *LeaderElector) {
			obj := h.lockObject()
			annotationsOf(obj)["example.com/other"] = "x"
			h.updateLock(obj)
			le.watch.Deliver(h.lockObject(), false)
		}, []string{"update leases"}},
		{"handed the write over, then broke and came back", func(h *harness, le *LeaderElector) {
			le.watch.Deliver(h.lockObject(), false)
			le.watch.SetHealth(false)
			le.watch.SetHealth(true)
		}, []string{"update leases"}},
		{"the object deleted after the written version was handed over", func(h *harness, le *LeaderElector) {
			obj := h.lockObject()
			le.watch.Deliver(obj, false)
			if err := h.client.CoordinationV1().Leases(ns).Delete(context.Background(), lockName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			le.watch.Deliver(obj, true)
		}, []string{"get leases", "create leases"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLeaseHarness(t)
			s := &fakeSession{ref: "s/1", sent: t0, current: true, known: true}
			le := h.sessionElector("a", s)
			broke := false
			h.client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if !broke {
					broke = true
					le.watch.SetHealth(false) // the watch breaks before the write
				}
				return false, nil, nil
			})
			mustAttempt(t, le, false, acquired)
			if !broke {
				t.Fatal("the write that took the lock was not seen by the reactor")
			}
			tc.back(h, le)
			le.watch.ingest() // as the loop does when the watch wakes it
			assertVerbs(t, renewWithSession(t, h, le, s), tc.verbs...)
		})
	}
}

// renewWithSession runs the holder le's renew one second after t0, with
// its session s renewed just then, and returns the API verbs it sent.
func renewWithSession(t *testing.T, h *harness, le *LeaderElector, s *fakeSession) []string {
	t.Helper()
	le.loop.lastRenew = t0
	h.verbs()
	h.clock.SetTime(t0.Add(time.Second))
	s.sent = h.clock.Now()
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	return h.verbs()
}
