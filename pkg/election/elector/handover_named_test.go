package elector

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// recordsNaming counts the updates of the lock whose record names holder.
func recordsNaming(h *harness, holder string) int {
	n := 0
	for _, a := range h.client.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok {
			continue
		}
		cm, ok := u.GetObject().(*corev1.ConfigMap)
		if ok && strings.Contains(cm.Annotations[resourcelock.LeaderAnnotationKey], `"holderIdentity":"`+holder+`"`) {
			n++
		}
	}
	return n
}

// A candidate whose request the holder accepted leads on the record the
// holder writes for it: its request is its only write before its work
// starts, so the handover costs one watched write after the work stopped.
func TestCandidateHandedTheLockLeadsOnTheHoldersRecord(t *testing.T) {
	synctest.Test(t, testCandidateHandedTheLockLeadsOnTheHoldersRecord)
}

func testCandidateHandedTheLockLeadsOnTheHoldersRecord(t *testing.T) {
	h := newHarness(t)
	l := &ledger.Ledger{}
	holder := h.start(candidateOpts{identity: "h", key: "canary", accept: true, ledger: l})
	waitFor(t, "h to lead", holder.le.IsLeader)
	h.client.ClearActions()
	cand := h.start(candidateOpts{identity: "c", key: "stable", steal: true, ledger: l})
	waitFor(t, "c's term in the ledger", func() bool { return l.Starts(lockName) == 2 })
	// The request (c), the answer (h), the record naming c (h): no write
	// after these. The fake clock stands still, so nobody renews
	// meanwhile. h, contending again with a watch of its own that starts
	// anew, may read the lock once.
	verbs := kubetest.Verbs(h.client)
	if len(verbs) > 3 && slices.ContainsFunc(verbs[3:], func(v string) bool { return v != "get configmaps" }) {
		t.Fatalf("API calls %q: a write after the record naming c", verbs)
	}
	assertVerbs(t, verbs[:min(3, len(verbs))], "update configmaps", "update configmaps", "update configmaps")
	if n := recordsNaming(h, "c"); n != 1 {
		t.Fatalf("%d writes of a record naming c, want 1 (the holder's)", n)
	}
	if !cand.le.IsLeader() || holder.le.IsLeader() {
		t.Fatalf("c leads %v, h leads %v", cand.le.IsLeader(), holder.le.IsLeader())
	}
	if rec := h.record(); rec.HolderIdentity != "c" || rec.HolderKey != "stable" || rec.LeaderTransitions != 1 || rec.LeaseDurationSeconds != 4 {
		t.Fatalf("record after handover = %+v", rec)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("run functions overlapped: %+v", o)
	}
	// Its first renew is one UPDATE of the holder's record, a RetryPeriod on.
	h.client.ClearActions()
	h.steps(5, 250*time.Millisecond)
	if n := recordsNaming(h, "c"); n != 1 || !cand.le.IsLeader() {
		t.Fatalf("after a retry period: %d renewals by c (want 1), leading %v", n, cand.le.IsLeader())
	}
}

// The term of a candidate that leads on the holder's record counts from its
// request, the latest moment it knows to precede that record: when its
// renewals fail, its term ends RenewDeadline after the request, not after
// the handover (other candidates time the lease from when they saw the
// record, after the request).
func TestTermOnTheHoldersRecordCountsFromTheRequest(t *testing.T) {
	h := newHarness(t)
	holder := h.start(candidateOpts{identity: "h", key: "canary", accept: true, work: h.slowStop(300 * time.Millisecond)})
	waitFor(t, "h to lead", holder.le.IsLeader)
	// The first record naming c is the holder's handover; every later one
	// is c's own renew, and fails.
	var naming atomic.Int32
	h.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		if strings.Contains(obj.Annotations[resourcelock.LeaderAnnotationKey], `"holderIdentity":"c"`) && naming.Add(1) > 1 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd unavailable"))
		}
		return false, nil, nil
	})
	asked := h.clock.Now()
	cand := h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "h to accept", func() bool { return h.handover().Answer == lockmeta.AnswerAccepted })
	// h's work takes 300ms to stop; then h names c.
	waitFor(t, "h's work to stop", h.clock.HasWaiters)
	h.clock.Step(300 * time.Millisecond)
	waitFor(t, "c to lead", cand.le.IsLeader)
	if n := naming.Load(); n != 1 {
		t.Fatalf("%d writes of a record naming c, want 1 (the holder's)", n)
	}
	// Every renew of c fails. At the request + RenewDeadline (2s) the term
	// ends; counted from the handover it would last 300ms longer.
	for h.clock.Since(asked) < 1900*time.Millisecond {
		h.steps(1, 100*time.Millisecond)
	}
	if !cand.le.IsLeader() {
		t.Fatalf("c stopped leading %v after its request, before its renew deadline", h.clock.Since(asked))
	}
	for h.clock.Since(asked) < 2050*time.Millisecond {
		h.steps(1, 50*time.Millisecond)
	}
	waitFor(t, "c's term to end at its renew deadline", func() bool { return !cand.le.IsLeader() })
	holder.stop() // before c releases: h's slow work would take the lock
	<-holder.done
}

// A handover that comes late after the request (the holder's work took a
// while to stop) leaves too little of a renew deadline counted from the
// request: the candidate writes its own record first, as before.
func TestLateHandoverIsConfirmedByAWrite(t *testing.T) {
	h := newHarness(t)
	holder := h.start(candidateOpts{identity: "h", key: "canary", accept: true, stopTimeout: 2 * time.Second,
		work: h.slowStop(1500 * time.Millisecond)})
	waitFor(t, "h to lead", holder.le.IsLeader)
	cand := h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "h to accept", func() bool { return h.handover().Answer == lockmeta.AnswerAccepted })
	for !cand.le.IsLeader() {
		if h.clock.Since(t0) > 3*time.Second {
			t.Fatal("c did not lead within the holder's promise")
		}
		h.steps(1, 100*time.Millisecond)
	}
	// The holder's record, then c's own: c wrote before its work started.
	if n := recordsNaming(h, "c"); n != 2 {
		t.Fatalf("%d records naming c written, want 2 (the holder's, then c's)", n)
	}
}

func TestNamedSince(t *testing.T) {
	h := newHarness(t)
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "c", Key: "stable", Cooperative: true})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(cooperative(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:     Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		KeyComparison: func(string) bool { return true },
		Clock:         h.clock,
	}, 3*time.Second, func(string) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(10 * time.Second)
	named := resourcelock.Record{HolderIdentity: "c", HolderKey: "stable", LeaseDurationSeconds: 4,
		AcquireTime: metav1.NewTime(now), RenewTime: metav1.NewTime(now), LeaderTransitions: 3}
	for _, tc := range []struct {
		name    string
		askedAt time.Time
		edit    func(*resourcelock.Record)
		fence   time.Time
		want    bool
	}{
		{name: "asked just now", askedAt: now.Add(-20 * time.Millisecond), want: true},
		{name: "never asked", want: false},
		{name: "asked half a renew deadline ago", askedAt: now.Add(-time.Second), want: false},
		{name: "another key in the record", askedAt: now, edit: func(r *resourcelock.Record) { r.HolderKey = "canary" }, want: false},
		{name: "a shorter lease in the record", askedAt: now, edit: func(r *resourcelock.Record) { r.LeaseDurationSeconds = 3 }, want: false},
		{name: "a longer lease in the record", askedAt: now, edit: func(r *resourcelock.Record) { r.LeaseDurationSeconds = 30 }, want: true},
		{name: "a fence not passed", askedAt: now, fence: now.Add(time.Second), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := named
			if tc.edit != nil {
				tc.edit(&rec)
			}
			le.fence.startAt = tc.fence
			since, ok := le.namedSince(tc.askedAt, &rec, now)
			if ok != tc.want {
				t.Fatalf("namedSince = %v, %v; want ok %v", since, ok, tc.want)
			}
			if ok && !since.Equal(tc.askedAt) {
				t.Fatalf("the term counts from %v, want the request %v", since, tc.askedAt)
			}
		})
	}
}
