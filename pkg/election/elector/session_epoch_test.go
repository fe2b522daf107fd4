package elector

import (
	"context"
	"testing"
	"time"

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
			le.loop.lastRenew = t0
			h.verbs()
			h.clock.SetTime(t0.Add(time.Second))
			s.sent = h.clock.Now()
			if end := le.renewOnce(context.Background()); end != nil {
				t.Fatalf("renew ended the term: %+v", end)
			}
			// After a break since its last write the holder cannot know it
			// has been handed every write since: it must write its record.
			assertVerbs(t, h.verbs(), tc.verbs...)
		})
	}
}
