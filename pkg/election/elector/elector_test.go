package elector

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/pacing"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ns       = "istio-system"
	lockName = "istio-leader"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	t      *testing.T
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	// leases: the lock is the Lease lockName (session mode needs one); by
	// default it is the ConfigMap lockName.
	leases bool
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	return &harness{t: t, client: kubetest.NewClientset(objs...), clock: clocktesting.NewFakeClock(t0)}
}

// newLeaseHarness is a harness whose lock is a Lease.
func newLeaseHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.leases = true
	return h
}

// resource is the API resource of the harness's lock.
func (h *harness) resource() string {
	if h.leases {
		return "leases"
	}
	return "configmaps"
}

// lockObject reads the lock object as the watch would deliver it.
func (h *harness) lockObject() runtime.Object {
	h.t.Helper()
	obj, err := h.getLock()
	if err != nil {
		h.t.Fatal(err)
	}
	return obj
}

func (h *harness) getLock() (runtime.Object, error) {
	ctx := context.Background()
	if h.leases {
		return h.client.CoordinationV1().Leases(ns).Get(ctx, lockName, metav1.GetOptions{})
	}
	return h.client.CoreV1().ConfigMaps(ns).Get(ctx, lockName, metav1.GetOptions{})
}

// updateLock writes obj, the lock object read and changed by the test.
func (h *harness) updateLock(obj runtime.Object) {
	h.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		_, err = h.client.CoordinationV1().Leases(ns).Update(ctx, o, metav1.UpdateOptions{})
	case *corev1.ConfigMap:
		_, err = h.client.CoreV1().ConfigMaps(ns).Update(ctx, o, metav1.UpdateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// deleteLock deletes the lock object, as kubectl delete would.
func (h *harness) deleteLock() {
	h.t.Helper()
	ctx := context.Background()
	var err error
	if h.leases {
		err = h.client.CoordinationV1().Leases(ns).Delete(ctx, lockName, metav1.DeleteOptions{})
	} else {
		err = h.client.CoreV1().ConfigMaps(ns).Delete(ctx, lockName, metav1.DeleteOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// annotations returns the annotations of obj, a lock object, made non-nil.
func annotationsOf(obj runtime.Object) map[string]string {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	if m.GetAnnotations() == nil {
		m.SetAnnotations(map[string]string{})
	}
	return m.GetAnnotations()
}

func (h *harness) elector(identity, key string, cmp func(holderKey string) bool, onStart func(context.Context)) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: identity, Key: key})
	if err != nil {
		h.t.Fatal(err)
	}
	if onStart == nil {
		onStart = func(ctx context.Context) { <-ctx.Done() }
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: noErr(onStart)},
		KeyComparison:   cmp,
		ReleaseOnCancel: true,
		Clock:           h.clock,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}

// record reads the record stored in the lock object.
func (h *harness) record() resourcelock.Record {
	h.t.Helper()
	obj := h.lockObject()
	if l, ok := obj.(*coordinationv1.Lease); ok {
		return *resourcelock.LeaseToRecord(l)
	}
	rec, err := resourcelock.DecodeRecord([]byte(annotationsOf(obj)[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		h.t.Fatal(err)
	}
	return *rec
}

// writeRecord overwrites the record as another process would.
func (h *harness) writeRecord(r resourcelock.Record) {
	h.t.Helper()
	ctx := context.Background()
	obj, err := h.getLock()
	if apierrors.IsNotFound(err) {
		if h.leases {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}
			resourcelock.ApplyRecordToLease(r, l)
			_, err = h.client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
		} else {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}
			cm.Annotations = map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(r))}
			_, err = h.client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		}
		if err != nil {
			h.t.Fatal(err)
		}
		return
	}
	if err != nil {
		h.t.Fatal(err)
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		resourcelock.ApplyRecordToLease(r, l)
	} else {
		annotationsOf(obj)[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(r))
	}
	h.updateLock(obj)
}

func (h *harness) verbs() []string {
	v := kubetest.Verbs(h.client)
	h.client.ClearActions()
	return v
}

func held(identity, key string, duration int) resourcelock.Record {
	return resourcelock.Record{
		HolderIdentity: identity, HolderKey: key, LeaseDurationSeconds: duration,
		AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(t0), LeaderTransitions: 2,
	}
}

func assertVerbs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("API calls = %q, want %q", got, want)
	}
}

func mustAttempt(t *testing.T, le *LeaderElector, renewing bool, want outcome) {
	t.Helper()
	got, err := le.attempt(context.Background(), renewing)
	if got != want {
		t.Fatalf("attempt(renewing=%v) = %v (err %v), want %v", renewing, got, err, want)
	}
}

func TestFirstAcquireGetsThenCreates(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "canary", nil, nil)
	mustAttempt(t, le, false, acquired)
	assertVerbs(t, h.verbs(), "get configmaps", "create configmaps")
	rec := h.record()
	if rec.HolderIdentity != "a" || rec.HolderKey != "canary" || rec.LeaseDurationSeconds != 4 || rec.LeaderTransitions != 0 {
		t.Fatalf("record after create = %+v", rec)
	}
}

func TestRenewIsOneUpdate(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	h.verbs()
	for i := 0; i < 3; i++ {
		h.clock.Step(time.Second)
		mustAttempt(t, le, true, acquired)
		assertVerbs(t, h.verbs(), "update configmaps")
	}
	rec := h.record()
	if !rec.RenewTime.Time.Equal(t0.Add(3*time.Second)) || !rec.AcquireTime.Time.Equal(t0) {
		t.Fatalf("renew/acquire time = %v/%v", rec.RenewTime, rec.AcquireTime)
	}
}

func TestRenewConflictFallsBackToGet(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	// Someone touches the object without changing the record (e.g. adds a label):
	// the blind update conflicts, the read shows the record is still ours.
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	cm.Labels = map[string]string{"touched": "yes"}
	if _, err := h.client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.verbs()
	mustAttempt(t, le, true, acquired)
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps", "update configmaps")
	cm, _ = h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if cm.Labels["touched"] != "yes" {
		t.Fatalf("renew dropped a label: %v", cm.Labels)
	}
}

func TestLeaderThatReadsAnotherHolderStopsAtOnce(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	h.writeRecord(held("b", "", 4))
	h.verbs()
	mustAttempt(t, le, true, heldByOther)
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps")
	if got := h.record().HolderIdentity; got != "b" {
		t.Fatalf("holder = %q, the leader must not overwrite b", got)
	}
}

func TestStealRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		steal     bool
		wantVerbs []string
		want      outcome
		holder    string
	}{
		{"comparison says take", true, []string{"get configmaps", "update configmaps"}, acquired, "a"},
		{"comparison says wait", false, []string{"get configmaps"}, heldByOther, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.writeRecord(held("b", "canary", 30))
			var seenKey string
			le := h.elector("a", "default", func(k string) bool { seenKey = k; return tc.steal }, nil)
			h.verbs()
			mustAttempt(t, le, false, tc.want)
			assertVerbs(t, h.verbs(), tc.wantVerbs...)
			if seenKey != "canary" {
				t.Fatalf("comparison saw key %q, want canary", seenKey)
			}
			rec := h.record()
			if rec.HolderIdentity != tc.holder {
				t.Fatalf("holder = %q, want %q", rec.HolderIdentity, tc.holder)
			}
			if tc.steal && (rec.LeaderTransitions != 3 || rec.HolderKey != "default") {
				t.Fatalf("after steal record = %+v, want transitions 3 and key default", rec)
			}
		})
	}
}

func TestComparisonNotConsultedForFreeOrExpiredLock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     resourcelock.Record
		advance time.Duration
	}{
		{"released", resourcelock.Record{LeaseDurationSeconds: 1, LeaderTransitions: 2}, 0},
		{"expired", held("b", "canary", 4), 4*time.Second + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.writeRecord(tc.rec)
			consulted := 0
			le := h.elector("a", "x", func(string) bool { consulted++; return false }, nil)
			if tc.advance > 0 {
				mustAttempt(t, le, false, heldByOther) // first observation starts the clock
				h.clock.Step(tc.advance)
				consulted = 0
			}
			mustAttempt(t, le, false, acquired)
			if consulted != 0 {
				t.Fatalf("comparison consulted %d times for a free lock", consulted)
			}
			if rec := h.record(); rec.HolderIdentity != "a" || rec.LeaderTransitions != 3 {
				t.Fatalf("record = %+v", rec)
			}
		})
	}
}

func TestExpiryUsesLocalObservationTime(t *testing.T) {
	h := newHarness(t)
	// The holder's renewTime is far in the past by our clock: only the time
	// we observed the record counts.
	rec := held("b", "", 4)
	rec.RenewTime = metav1.NewTime(t0.Add(-time.Hour))
	h.writeRecord(rec)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(4 * time.Second)
	mustAttempt(t, le, false, heldByOther) // exactly LeaseDuration: not yet expired
	h.clock.Step(time.Millisecond)
	mustAttempt(t, le, false, acquired)
}

func TestRecordChangeRestartsExpiry(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(3 * time.Second)
	renewed := held("b", "", 4)
	renewed.RenewTime = metav1.NewTime(t0.Add(3 * time.Second))
	h.writeRecord(renewed)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(3 * time.Second) // 6s after first sight, 3s after the renew
	mustAttempt(t, le, false, heldByOther)
}

func TestCorruptRecordTreatedAsExpiredAfterLeaseDuration(t *testing.T) {
	h := newHarness(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: lockName, Namespace: ns,
		Annotations: map[string]string{resourcelock.LeaderAnnotationKey: "{not json", "keep": "me"},
	}, Data: map[string]string{"k": "v"}})
	rec := &eventSink{}
	lock, _ := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a", EventRecorder: rec})
	le, err := New(Config{Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: waitDone}, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(2 * time.Second)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(2 * time.Second)
	mustAttempt(t, le, false, acquired)
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if cm.Annotations["keep"] != "me" || cm.Data["k"] != "v" {
		t.Fatalf("repair lost data: %v %v", cm.Annotations, cm.Data)
	}
	if got := h.record().HolderIdentity; got != "a" {
		t.Fatalf("holder = %q", got)
	}
	if n := rec.count(corev1.EventTypeWarning, ReasonCorruptRecord); n != 1 {
		t.Fatalf("corrupt-record warnings = %d, want exactly 1", n)
	}
}

// A lock object without a record, found by a candidate that never saw a
// record of it, may have been re-created while a holder works: it is free
// a lease after first sight.
func TestMissingAnnotationIsFreeAfterALease(t *testing.T) {
	h := newHarness(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}, Data: map[string]string{"k": "v"}})
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	assertVerbs(t, h.verbs(), "get configmaps")
	h.clock.Step(le.cfg.LeaseDuration + time.Millisecond)
	mustAttempt(t, le, false, acquired)
	assertVerbs(t, h.verbs(), "get configmaps", "update configmaps")
}

func TestDeletedLockIsRecreated(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	if err := h.client.CoreV1().ConfigMaps(ns).Delete(context.Background(), lockName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.verbs()
	mustAttempt(t, le, true, acquired)
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps", "create configmaps")
	if got := h.record().HolderIdentity; got != "a" {
		t.Fatalf("holder = %q", got)
	}
}

func TestForbiddenUpdateIsAFailureNotAPanic(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(resourcelock.Record{LeaseDurationSeconds: 1})
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, lockName, errors.New("no RBAC"))
	})
	le := h.elector("a", "", nil, nil)
	got, err := le.attempt(context.Background(), false)
	if got != failed || !apierrors.IsForbidden(err) {
		t.Fatalf("attempt = %v, %v; want failed with a Forbidden error", got, err)
	}
	if le.IsLeader() {
		t.Fatal("IsLeader after a forbidden update")
	}
}

func TestReleaseWritesEmptyHolder(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "canary", nil, nil)
	mustAttempt(t, le, false, acquired)
	h.verbs()
	le.release()
	assertVerbs(t, h.verbs(), "update configmaps")
	rec := h.record()
	if rec.HolderIdentity != "" || rec.HolderKey != "" || rec.LeaseDurationSeconds != 1 || rec.LeaderTransitions != 0 {
		t.Fatalf("released record = %+v", rec)
	}
}

func TestReleaseRetriesOnConflictWhileStillOurs(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	cm.Labels = map[string]string{"touched": "yes"}
	_, _ = h.client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	h.verbs()
	le.release()
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps", "update configmaps")
	if rec := h.record(); rec.HolderIdentity != "" {
		t.Fatalf("not released: %+v", rec)
	}
}

func TestReleaseDoesNotClearAnotherHolder(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, acquired)
	h.writeRecord(held("b", "", 4))
	h.verbs()
	le.release()
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps")
	if rec := h.record(); rec.HolderIdentity != "b" {
		t.Fatalf("release overwrote b: %+v", rec)
	}
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	lock, _ := resourcelock.NewConfigMapLock(fake.NewClientset().CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"empty", Config{}, []string{"Lock must be set", "LeaseDuration 0s", "RenewDeadline 0s must be positive", "RetryPeriod 0s must be positive", "OnStartedLeading"}},
		{"renew >= lease", Config{Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
			Callbacks: Callbacks{OnStartedLeading: waitDone}},
			[]string{"LeaseDuration 2s must be greater than RenewDeadline 2s"}},
		{"retry too long", Config{Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: Callbacks{OnStartedLeading: waitDone}},
			[]string{"RenewDeadline 2s must be greater than 1.2 x RetryPeriod 2s"}},
		{"sub-second lease", Config{Lock: lock, LeaseDuration: 500 * time.Millisecond, RenewDeadline: 200 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
			Callbacks: Callbacks{OnStartedLeading: waitDone}},
			[]string{"at least 1s"}},
		{"zero pacer", Config{Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			Callbacks: Callbacks{OnStartedLeading: waitDone}, Pacer: &pacing.Pacer{}},
			[]string{"Pacer was not built by NewPacer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	ld, rd, rp := TimingFromTTL(30 * time.Second)
	if _, err := New(Config{Lock: lock, LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp,
		Callbacks: Callbacks{OnStartedLeading: waitDone}}); err != nil {
		t.Fatalf("ttl 30s timing rejected: %v", err)
	}
}

type eventSink struct {
	mu     sync.Mutex
	events []string
}

func (e *eventSink) Eventf(_ runtime.Object, eventType, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, eventType+"/"+reason)
}

func (e *eventSink) count(eventType, reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev == eventType+"/"+reason {
			n++
		}
	}
	return n
}

// Case 5 of the review: only a change of the record is a sign of life. A
// label, a foreign annotation or a rewrite of the same record changes the
// object, not the record, and must not extend a dead holder's lease.
func TestOnlyRecordChangesShowHolderAlive(t *testing.T) {
	h := newHarness(t)
	rec := held("b", "", 4)
	h.writeRecord(rec)
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(3 * time.Second)
	h.writeRecord(rec) // same record: only the resourceVersion changes
	h.touch(func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"team": "mesh"}
		cm.Annotations["example.com/note"] = "unrelated"
		cm.Annotations[lockmeta.HandoverAnnotationKey] = `{"holder":"b","candidate":"x"}`
	})
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(1001 * time.Millisecond) // 4s after the record last changed
	mustAttempt(t, le, false, acquired)
	got := h.record()
	if got.HolderIdentity != "a" || got.LeaderTransitions != 3 {
		t.Fatalf("record = %+v", got)
	}
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if cm.Labels["team"] != "mesh" || cm.Annotations["example.com/note"] != "unrelated" {
		t.Fatalf("other metadata lost: %v %v", cm.Labels, cm.Annotations)
	}
}

// touch changes the lock object as another tool would.
func (h *harness) touch(change func(*corev1.ConfigMap)) {
	h.t.Helper()
	cm, err := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	change(cm)
	if _, err := h.client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}
