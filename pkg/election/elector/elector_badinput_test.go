package elector

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// lockWithAnnotation is the lock ConfigMap holding raw as its record, plus
// content that belongs to others and must survive every write.
func lockWithAnnotation(raw string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: lockName, Namespace: ns,
			Labels:      map[string]string{"owner": "someone-else"},
			Annotations: map[string]string{resourcelock.LeaderAnnotationKey: raw, "keep": "me"},
		},
		Data: map[string]string{"k": "v"},
	}
}

// eventElector is an elector on the fake clock of h whose events go to sink.
func (h *harness) eventElector(identity string, sink *eventSink) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: identity, EventRecorder: sink})
	if err != nil {
		h.t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: waitDone},
		Clock:     h.clock,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}

func (h *harness) assertOthersKept() {
	h.t.Helper()
	cm, err := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if cm.Annotations["keep"] != "me" || cm.Labels["owner"] != "someone-else" || cm.Data["k"] != "v" {
		h.t.Fatalf("writing the record lost other content: labels %v annotations %v data %v", cm.Labels, cm.Annotations, cm.Data)
	}
}

func TestBadRecordsAreTreatedAsExpiredAfterLeaseDuration(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"not JSON", "holder=a; lease=30"},
		{"empty string", ""},
		{"JSON array", `[{"holderIdentity":"b"}]`},
		{"JSON string", `"b"`},
		{"JSON number", `42`},
		{"wrong field types", `{"holderIdentity":7,"leaseDurationSeconds":"30"}`},
		{"negative lease", `{"holderIdentity":"b","leaseDurationSeconds":-30}`},
		{"lease overflowing int", `{"holderIdentity":"b","leaseDurationSeconds":1e40}`},
		{"negative transitions", `{"holderIdentity":"b","leaseDurationSeconds":30,"leaderTransitions":-1}`},
		{"time out of range", `{"holderIdentity":"b","leaseDurationSeconds":30,"renewTime":"10000-01-01T00:00:00Z"}`},
		{"trailing data", `{"holderIdentity":"b","leaseDurationSeconds":30} {}`},
		{"1 MiB annotation", `{"holderIdentity":"` + strings.Repeat("b", 1<<20) + `","leaseDurationSeconds":30}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, lockWithAnnotation(tc.raw))
			sink := &eventSink{}
			le := h.eventElector("a", sink)
			// Held by an unknown holder for one LeaseDuration of this
			// candidate from when the bytes were first seen...
			mustAttempt(t, le, false, heldByOther)
			h.clock.Step(4*time.Second - time.Millisecond)
			mustAttempt(t, le, false, heldByOther)
			if le.IsLeader() || le.GetLeader() == "a" {
				t.Fatal("took a corrupt lock before its lease could have run out")
			}
			// ...then replaced, keeping everything else in the object.
			h.clock.Step(2 * time.Millisecond)
			mustAttempt(t, le, false, acquired)
			if rec := h.record(); rec.HolderIdentity != "a" || rec.LeaseDurationSeconds != 4 {
				t.Fatalf("record after repair = %+v", rec)
			}
			h.assertOthersKept()
			if n := sink.count(corev1.EventTypeWarning, ReasonCorruptRecord); n != 1 {
				t.Fatalf("%d corrupt-record warnings, want 1", n)
			}
		})
	}
}

// TestEmptyRecordsAreFree: "{}" and "null" decode to a record without a
// holder, which istiod and client-go read as a free lock; meshd agrees.
// An empty record found by a candidate that never saw a record of the lock
// may be a lock re-created while its holder works: it is free after a lease
// from first sight, not before, and it is no corrupt record.
func TestEmptyRecordsAreFreeAfterALease(t *testing.T) {
	for _, raw := range []string{`{}`, `null`, `{"holderIdentity":""}`} {
		t.Run(raw, func(t *testing.T) {
			h := newHarness(t, lockWithAnnotation(raw))
			sink := &eventSink{}
			le := h.eventElector("a", sink)
			mustAttempt(t, le, false, heldByOther)
			h.clock.Step(le.cfg.LeaseDuration)
			mustAttempt(t, le, false, heldByOther)
			h.clock.Step(time.Millisecond)
			mustAttempt(t, le, false, acquired)
			h.assertOthersKept()
			if n := sink.count(corev1.EventTypeWarning, ReasonCorruptRecord); n != 0 {
				t.Fatalf("%d corrupt-record warnings for a free lock", n)
			}
		})
	}
}

func TestUnknownFieldsAndHolderKeysAreKeptAsWritten(t *testing.T) {
	raw := `{"holderIdentity":"b","holderKey":"\u0000^^weird/key","leaseDurationSeconds":4,"futureField":{"x":1}}`
	h := newHarness(t, lockWithAnnotation(raw))
	var seen string
	lock, _ := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	le, err := New(Config{Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:     Callbacks{OnStartedLeading: waitDone},
		KeyComparison: func(k string) bool { seen = k; return false },
		Clock:         h.clock})
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, heldByOther)
	if seen != "\x00^^weird/key" {
		t.Fatalf("comparison saw key %q", seen)
	}
}

// TestFutureTimesDoNotExtendTheLease: expiry counts from when a candidate saw
// the record, never from the times written in it.
func TestFutureTimesDoNotExtendTheLease(t *testing.T) {
	rec := held("b", "", 4)
	rec.AcquireTime = metav1.NewTime(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	rec.RenewTime = rec.AcquireTime
	h := newHarness(t)
	h.writeRecord(rec)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(4*time.Second + time.Millisecond)
	mustAttempt(t, le, false, acquired)
}

// TestHugeLeaseIsHonouredUpToMaxLeaseDuration: a holder that wrote a lease of
// ten years and died blocks the election for MaxLeaseDuration, not ten years.
func TestHugeLeaseIsHonouredUpToMaxLeaseDuration(t *testing.T) {
	for _, secs := range []int{10 * 365 * 24 * 3600, 1<<31 - 1, 1 << 40} {
		h := newHarness(t)
		h.writeRecord(held("b", "", secs))
		sink := &eventSink{}
		le := h.eventElector("a", sink)
		mustAttempt(t, le, false, heldByOther)
		h.clock.Step(MaxLeaseDuration)
		mustAttempt(t, le, false, heldByOther)
		h.clock.Step(time.Millisecond)
		mustAttempt(t, le, false, acquired)
		if n := sink.count(corev1.EventTypeWarning, reasonLeaseTooLong); n != 1 {
			t.Fatalf("lease %ds: %d warnings, want 1", secs, n)
		}
	}
	// Leases up to the cap are honoured exactly, with no warning.
	h := newHarness(t)
	h.writeRecord(held("b", "", int(MaxLeaseDuration/time.Second)))
	sink := &eventSink{}
	le := h.eventElector("a", sink)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(MaxLeaseDuration)
	mustAttempt(t, le, false, heldByOther)
	if n := sink.count(corev1.EventTypeWarning, reasonLeaseTooLong); n != 0 {
		t.Fatalf("%d warnings for a lease at the cap", n)
	}
}

// TestFractionalLeaseDurationIsRoundedUp: the record stores whole seconds.
// Rounding a 1.9s lease down to 1s would let followers take over while the
// leader, with its 1.5s renew deadline, still leads.
func TestFractionalLeaseDurationIsRoundedUp(t *testing.T) {
	h := newHarness(t)
	lock, _ := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	le, err := New(Config{Lock: lock, LeaseDuration: 1900 * time.Millisecond, RenewDeadline: 1500 * time.Millisecond,
		RetryPeriod: time.Second, Callbacks: Callbacks{OnStartedLeading: waitDone}, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, acquired)
	if got := h.record().LeaseDurationSeconds; got != 2 {
		t.Fatalf("leaseDurationSeconds = %d, want 2 (1.9s rounded up)", got)
	}
	t.Run("partitioned leader", func(t *testing.T) {
		res := partitionOnce(t, 1, 0, 1900*time.Millisecond, 1500*time.Millisecond, time.Second)
		if res.overlap != 0 {
			t.Fatalf("leaders overlapped for %v", res.overlap)
		}
	})
}

// TestFailingWritesAreRetriedAtThePollingPace: a follower facing an expired
// lock whose writes fail at once (the API server answers 500 or 429, or RBAC
// forbids the update) must not retry in a tight loop.
func TestFailingWritesAreRetriedAtThePollingPace(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"500", apierrors.NewInternalError(errors.New("etcd is sad"))},
		{"429", apierrors.NewTooManyRequests("slow down", 1)},
		{"403", apierrors.NewForbidden(gr, lockName, errors.New("no RBAC for update"))},
		{"namespace missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := kubetest.NewClientset()
			stale := held("b", "", 1) // expires a second after it is seen
			cm := lockWithAnnotation(string(resourcelock.EncodeRecord(stale)))
			if _, err := client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var writes atomic.Int32
			fail := func(k8stesting.Action) (bool, runtime.Object, error) {
				writes.Add(1)
				return true, nil, tc.err
			}
			client.PrependReactor("update", "configmaps", fail)
			client.PrependReactor("create", "configmaps", fail)
			lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, client, resourcelock.Config{Identity: "a"})
			if err != nil {
				t.Fatal(err)
			}
			le, err := New(Config{Name: lockName, Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
				RetryPeriod: 250 * time.Millisecond, Callbacks: Callbacks{OnStartedLeading: waitDone}, Watch: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			le.Run(ctx) // returns when ctx ends: it can never acquire
			// About 2s of an expired lock at one try per 250ms-550ms.
			if n := writes.Load(); n < 2 || n > 12 {
				t.Fatalf("%d write attempts in 3s, want a handful (one per retry period)", n)
			}
			if err := le.LastError(); err == nil || !strings.Contains(err.Error(), tc.err.Error()) {
				t.Fatalf("LastError = %v, want it to carry %q", err, tc.err)
			}
			if le.IsLeader() {
				t.Fatal("leads although every write failed")
			}
		})
	}
}

// TestDeletedLockIsNotTakenWhileItsHolderMayStillWork: someone deletes the
// lock object while its holder leads. A follower must not take the lock at
// once, as if it had been released: the holder has not stopped its work,
// and stopping takes time (here 300ms). The followers wait for the lease as
// they saw it; the holder, which knows it is alive, recreates the lock and
// keeps leading.
func TestDeletedLockIsNotTakenWhileItsHolderMayStillWork(t *testing.T) {
	client := kubetest.NewClientset()
	l := &ledger.Ledger{}
	start := func(identity string) *LeaderElector {
		lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, client, resourcelock.Config{Identity: identity})
		if err != nil {
			t.Fatal(err)
		}
		le, err := New(Config{
			Name: lockName, Lock: lock,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 250 * time.Millisecond,
			Callbacks: Callbacks{OnStartedLeading: noErr(l.Wrap(lockName, identity, func(ctx context.Context) {
				<-ctx.Done()
				time.Sleep(300 * time.Millisecond) // a controller shutting down
			}))},
			StopTimeout: time.Second,
			Watch:       true,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				le.Run(ctx)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return le
	}
	a := start("a")
	waitFor(t, "a to lead", a.IsLeader)
	b := start("b")
	waitFor(t, "b to follow a through its watch", func() bool { return b.GetLeader() == "a" && b.watch.Healthy() })
	if err := client.CoreV1().ConfigMaps(ns).Delete(context.Background(), lockName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("after the lock was deleted, a and b both led for %v", l.TotalOverlap())
	}
	if !a.IsLeader() || b.IsLeader() {
		t.Fatalf("after the deletion a leads %v, b leads %v; want a to keep leading", a.IsLeader(), b.IsLeader())
	}
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the holder did not recreate its lock: %v", err)
	}
	if rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey])); err != nil || rec.HolderIdentity != "a" {
		t.Fatalf("recreated record %+v, %v", rec, err)
	}
}
