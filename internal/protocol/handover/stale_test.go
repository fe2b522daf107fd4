package handover

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestRequestAgeIsBoundedByTheHoldersOwnWrite: a holder judges whether a
// request is too old to act on. A request it met after its own write of the
// lock, which did not carry it, is fresh for a lease after that write by
// the holder's own clock, whatever the asking candidate's wall clock says;
// without such a write, or a lease after it, the request time decides, by
// the holder's wall clock. Before, only the request time decided, so a
// candidate whose wall clock was more than a lease off the holder's had
// every request cleared, and took the lock by force after the grace: one
// such take after another kept the best candidate waiting past the bound
// of the priority invariant (session seed 5100000407, 5.12 s against 5 s).
func TestRequestAgeIsBoundedByTheHoldersOwnWrite(t *testing.T) {
	const lease = 4 * time.Second
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// wrote: the holder wrote the lock at t0, before the request.
		wrote bool
		// candidateOff: the candidate's wall clock against the holder's.
		candidateOff time.Duration
		// answerAt: when the holder answers, after t0.
		answerAt time.Duration
		accepted bool
	}{
		{"witnessed, candidate's clock 6 s ahead", true, 6 * time.Second, time.Second, true},
		{"witnessed, candidate's clock 6 s behind", true, -6 * time.Second, time.Second, true},
		{"witnessed, clocks agree", true, 0, time.Second, true},
		{"no write of the holder's, candidate's clock 6 s ahead", false, 6 * time.Second, time.Second, false},
		{"no write of the holder's, clocks agree", false, 0, time.Second, true},
		{"write more than a lease ago, candidate's clock 10 s ahead", true, 10 * time.Second, lease + time.Second, false},
		{"write more than a lease ago, asked recently by an agreeing clock", true, lease, lease + time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			holderLock, err := resourcelock.NewLeaseLock(client.CoordinationV1(), "ns", "lock", resourcelock.Config{Identity: "holder", Key: "stable"})
			if err != nil {
				t.Fatal(err)
			}
			candLock, err := resourcelock.NewLeaseLock(client.CoordinationV1(), "ns", "lock", resourcelock.Config{Identity: "cand", Key: "canary"})
			if err != nil {
				t.Fatal(err)
			}
			rec := resourcelock.Record{HolderIdentity: "holder", HolderKey: "stable", LeaseDurationSeconds: 4,
				AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(t0)}
			if err := holderLock.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			p := New(Config{Name: "lock", Lock: holderLock, Grace: 2 * time.Second,
				Accept:        func(key string) bool { return key == "canary" },
				LeaseDuration: lease, RetryPeriod: time.Second})
			if tc.wrote {
				p.Wrote(t0)
			}
			// The candidate asks 100 ms after the holder's write, by its
			// own wall clock.
			if _, _, err := candLock.Get(ctx); err != nil {
				t.Fatal(err)
			}
			asked := metav1.NewTime(t0.Add(100*time.Millisecond + tc.candidateOff))
			if err := candLock.RequestHandover(ctx, lockmeta.Handover{Holder: "holder", Candidate: "cand", CandidateKey: "canary", RequestTime: &asked}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := holderLock.Get(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := p.Answer(ctx, t0.Add(tc.answerAt), time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := holderLock.Get(ctx); err != nil {
				t.Fatal(err)
			}
			stored := holderLock.Handover()
			if tc.accepted {
				if got == nil || got.Candidate != "cand" || stored.Answer != lockmeta.AnswerAccepted {
					t.Fatalf("the request was not accepted: Answer returned %+v, the lock carries %+v", got, stored)
				}
				return
			}
			if got != nil || stored.Candidate != "" {
				t.Fatalf("a request that may be more than a lease old was acted on: Answer returned %+v, the lock carries %+v", got, stored)
			}
		})
	}
}

// TestARequestFoundInAReplacedObjectIsJudgedByItsTime: the witness rule
// takes a request that the holder's own write did not carry, and a later
// version of the object does, for one written after that write. That holds
// within one object's history only. An object deleted and created again
// from a copy saved an hour ago (a restore, a replace of a saved manifest)
// carries, under a new uid, a request from a candidate that may be long
// gone; the holder judges it by its time, as stale, and does not hand the
// lock to nobody for a lease.
func TestARequestFoundInAReplacedObjectIsJudgedByItsTime(t *testing.T) {
	const lease = 4 * time.Second
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	client := fake.NewClientset()
	holderLock, err := resourcelock.NewLeaseLock(client.CoordinationV1(), "ns", "lock", resourcelock.Config{Identity: "holder", Key: "stable", Cooperative: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := resourcelock.Record{HolderIdentity: "holder", HolderKey: "stable", LeaseDurationSeconds: 4,
		AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(t0)}
	if err := holderLock.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	p := New(Config{Name: "lock", Lock: holderLock, Grace: 2 * time.Second,
		Accept:        func(key string) bool { return key == "canary" },
		LeaseDuration: lease, RetryPeriod: time.Second})
	p.Wrote(t0) // the holder's write (its renewal) at t0, carrying no request

	// An old copy of the object, saved an hour ago while "gone" had a
	// request pending, replaces the lock object.
	old, err := client.CoordinationV1().Leases("ns").Get(ctx, "lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asked := metav1.NewTime(t0.Add(-time.Hour))
	restored := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: "ns", UID: "restored",
		Annotations: map[string]string{}}, Spec: old.Spec}
	meta := metav1.ObjectMeta{Annotations: restored.Annotations}
	lockmeta.WriteHandover(&meta, lockmeta.Handover{Holder: "holder", Candidate: "gone", CandidateKey: "canary", RequestTime: &asked, HonoursFence: true})
	restored.Annotations = meta.Annotations
	if err := client.CoordinationV1().Leases("ns").Delete(ctx, "lock", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("ns").Create(ctx, restored, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := holderLock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := p.Answer(ctx, t0.Add(time.Second), time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Fatalf("accepted a request an hour old (%v, now %v) found in a replaced object: handed to %q", asked.UTC(), t0.Add(time.Second), got.Candidate)
	}
}
