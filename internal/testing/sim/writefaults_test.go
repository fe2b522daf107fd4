package sim

import (
	"context"
	"encoding/json"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// lockLease is a lock Lease whose record names holder, with handover h.
func lockLease(holder string, h *lockmeta.Handover, mark *lockmeta.SessionMark) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace}}
	now := metav1.NewTime(epoch)
	resourcelock.ApplyRecordToLease(resourcelock.Record{HolderIdentity: holder, LeaseDurationSeconds: 4, AcquireTime: now, RenewTime: now}, l)
	l.Annotations = map[string]string{}
	if h != nil {
		l.Annotations[lockmeta.HandoverAnnotationKey] = mustJSON(h)
	}
	if mark != nil {
		l.Annotations[lockmeta.SessionAnnotationKey] = mustJSON(mark)
	}
	return l
}

// TestWriteKinds: each write of the handover and session protocols is told
// apart from the writes around it.
func TestWriteKinds(t *testing.T) {
	api, _, _ := newTestAPI()
	req := &lockmeta.Handover{Holder: "a", Candidate: "b", CandidateKey: "canary", RequestTime: &metav1.Time{Time: epoch}}
	accepted := *req
	accepted.Answer = lockmeta.AnswerAccepted
	plain := &lockmeta.Handover{Holder: "a"}
	mark := &lockmeta.SessionMark{Holder: "a", Session: "meshd-session-4s-a/1"}
	if err := api.putLock(leases, lockLease("a", plain, nil), false); err != nil {
		t.Fatal(err)
	}
	sessionLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: session.LeasePrefix + "a"}}
	holder := "a"
	sessionLease.Spec.HolderIdentity = &holder
	for _, tc := range []struct {
		name   string
		actor  string
		res    string
		object string
		in     runtime.Object
		want   string
	}{
		{"renew", "a", leases, LockName, lockLease("a", plain, nil), ""},
		{"request", "b", leases, LockName, lockLease("a", req, nil), WriteRequest},
		{"successor", "a", leases, LockName, lockLease("b", plain, nil), WriteSuccessor},
		{"mark", "a", leases, LockName, lockLease("a", plain, mark), WriteMark},
		{"heartbeat", "a", leases, sessionLease.Name, sessionLease, WriteHeartbeat},
		{"session end", "a", leases, sessionLease.Name, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: sessionLease.Name}}, ""},
	} {
		if got := api.writeKind(tc.actor, tc.res, tc.object, tc.in); got != tc.want {
			t.Errorf("%s: kind %q, want %q", tc.name, got, tc.want)
		}
	}
	// With the request stored, the holder's answer is an answer, and the
	// candidate writing the same request again is none.
	stored := lockLease("a", req, nil)
	stored.ResourceVersion = api.getLock(leases, LockName).(*coordinationv1.Lease).ResourceVersion
	if err := api.putLock(leases, stored, true); err != nil {
		t.Fatal(err)
	}
	if got := api.writeKind("a", leases, LockName, lockLease("a", &accepted, nil)); got != WriteAnswer {
		t.Errorf("answer: kind %q, want %q", got, WriteAnswer)
	}
	if got := api.writeKind("b", leases, LockName, lockLease("a", req, nil)); got != "" {
		t.Errorf("the same request again: kind %q, want none", got)
	}
}

// TestWriteFaultFailsOnlyItsKind: a targeted fault fails the writes of its
// kind, as many as asked, unexecuted or with the reply lost, and no other.
func TestWriteFaultFailsOnlyItsKind(t *testing.T) {
	api, st, c := newTestAPI()
	ctx := context.Background()
	leasesOf := c.CoordinationV1().Leases(Namespace)
	plain := &lockmeta.Handover{Holder: "a"}
	if _, err := leasesOf.Create(ctx, lockLease("a", plain, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st.addWriteFaults(WriteSuccessor, 1, false)
	st.addWriteFaults(WriteMark, 1, true)
	cur := func() *coordinationv1.Lease { return api.getLock(leases, LockName).(*coordinationv1.Lease) }

	renew := lockLease("a", plain, nil)
	renew.ResourceVersion = cur().ResourceVersion
	if _, err := leasesOf.Update(ctx, renew, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("a renew failed: %v", err)
	}
	next := lockLease("b", plain, nil)
	next.ResourceVersion = cur().ResourceVersion
	if _, err := leasesOf.Update(ctx, next, metav1.UpdateOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("the successor write: err = %v, want a 500", err)
	}
	if h := resourcelock.LeaseToRecord(cur()).HolderIdentity; h != "a" {
		t.Fatalf("the failed successor write was executed: holder %q", h)
	}
	marked := lockLease("a", plain, &lockmeta.SessionMark{Holder: "a", Session: "s/1"})
	marked.ResourceVersion = cur().ResourceVersion
	before := cur().ResourceVersion
	if _, err := leasesOf.Update(ctx, marked, metav1.UpdateOptions{}); !apierrors.IsServerTimeout(err) {
		t.Fatalf("the mark write: err = %v, want a timeout", err)
	}
	if cur().ResourceVersion == before {
		t.Fatal("the mark write whose reply was lost was not executed")
	}
	next.ResourceVersion = cur().ResourceVersion
	if _, err := leasesOf.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the second successor write failed too: %v", err)
	}
	if st.writeFaultHits(WriteSuccessor) != 1 || st.writeFaultHits(WriteMark) != 1 {
		t.Fatalf("hits: successor %d, mark %d; want 1 each", st.writeFaultHits(WriteSuccessor), st.writeFaultHits(WriteMark))
	}
	if st.injectedAt().IsZero() {
		t.Fatal("the hits were not noted as one-off faults")
	}
}
