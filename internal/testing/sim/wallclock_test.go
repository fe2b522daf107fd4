package sim

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// handoverAt is a handover annotation requested and answered at t.
func handoverAt(t time.Time) string {
	raw, _ := json.Marshal(lockmeta.Handover{Holder: "a", Candidate: "b", CandidateKey: "canary",
		RequestTime: &metav1.Time{Time: t}, Answer: lockmeta.AnswerRefused, AnswerTime: &metav1.Time{Time: t}})
	return string(raw)
}

func handoverTimes(t *testing.T, ann map[string]string) (req, ans time.Time) {
	t.Helper()
	h := decodeHandover(ann[lockmeta.HandoverAnnotationKey])
	if h.RequestTime == nil || h.AnswerTime == nil || h.Candidate != "b" {
		t.Fatalf("handover annotation %q lost its content", ann[lockmeta.HandoverAnnotationKey])
	}
	return h.RequestTime.Time, h.AnswerTime.Time
}

// TestWallClockShiftsLeaseTimes: an actor whose wall clock is ahead writes
// its times ahead, reads back what it wrote, and reads another actor's
// times shifted back; a version it has met keeps the shift it had then,
// after a step, and a newer version takes the new one.
func TestWallClockShiftsLeaseTimes(t *testing.T) {
	api, a, ca := newTestAPI()
	b := newActorState("b", api.clock)
	cb := newActorClient(api, b)
	ctx := context.Background()
	t0 := epoch.Add(time.Second)
	a.stepWall(5 * time.Second)

	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace,
		Annotations: map[string]string{lockmeta.HandoverAnnotationKey: handoverAt(t0)}},
		Spec: coordinationv1.LeaseSpec{AcquireTime: &metav1.MicroTime{Time: t0}, RenewTime: &metav1.MicroTime{Time: t0}}}
	mine, err := ca.CoordinationV1().Leases(Namespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("the caller's object was changed: renewTime %v", l.Spec.RenewTime.Time)
	}
	if !mine.Spec.RenewTime.Time.Equal(t0) || !mine.Spec.AcquireTime.Time.Equal(t0) {
		t.Fatalf("the writer reads back %v/%v, want what it wrote, %v", mine.Spec.AcquireTime, mine.Spec.RenewTime, t0)
	}
	if req, ans := handoverTimes(t, mine.Annotations); !req.Equal(t0) || !ans.Equal(t0) {
		t.Fatalf("the writer reads back handover times %v/%v, want %v", req, ans, t0)
	}
	stored := api.getLock(leases, LockName).(*coordinationv1.Lease)
	if want := t0.Add(5 * time.Second); !stored.Spec.RenewTime.Time.Equal(want) {
		t.Fatalf("the API stores renewTime %v, want the writer's wall clock %v", stored.Spec.RenewTime.Time, want)
	}
	if req, _ := handoverTimes(t, stored.Annotations); !req.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("the API stores requestTime %v, want %v", req, t0.Add(5*time.Second))
	}
	theirs, err := cb.CoordinationV1().Leases(Namespace).Get(ctx, LockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(5 * time.Second); !theirs.Spec.RenewTime.Time.Equal(want) {
		t.Fatalf("an actor on the world's clock reads renewTime %v, want %v", theirs.Spec.RenewTime.Time, want)
	}

	// a steps back by 3s: the version it met reads as before.
	a.stepWall(-3 * time.Second)
	again, err := ca.CoordinationV1().Leases(Namespace).Get(ctx, LockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("after a step the writer reads the same version as %v, want %v as before", again.Spec.RenewTime.Time, t0)
	}

	// b writes a new version at t1: a, now 2s ahead, reads it 2s back.
	t1 := t0.Add(time.Second)
	theirs.Spec.RenewTime = &metav1.MicroTime{Time: t1}
	if _, err := cb.CoordinationV1().Leases(Namespace).Update(ctx, theirs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := ca.CoordinationV1().Leases(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("listed %d Leases, want 1", len(list.Items))
	}
	if got, want := list.Items[0].Spec.RenewTime.Time, t1.Add(-2*time.Second); !got.Equal(want) {
		t.Fatalf("a lists b's renewTime as %v, want %v", got, want)
	}
	if got, want := list.Items[0].Spec.AcquireTime.Time, t0.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("a lists the acquireTime it wrote 5s ahead, kept by b, as %v, want %v", got, want)
	}
}

// TestWallClockShiftsConfigMapRecordAndWatch: the record of a ConfigMap
// lock (whole seconds, in an annotation) is shifted like a Lease's times,
// every other annotation and data key is kept, and a watch delivers each
// object by the reader's clock.
func TestWallClockShiftsConfigMapRecordAndWatch(t *testing.T) {
	api, a, ca := newTestAPI()
	b := newActorState("b", api.clock)
	cb := newActorClient(api, b)
	ctx := context.Background()
	b.stepWall(-4 * time.Second)
	w, err := cb.CoreV1().ConfigMaps(Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	t0 := epoch.Add(10 * time.Second)
	rec := resourcelock.Record{HolderIdentity: "a", HolderKey: "stable", LeaseDurationSeconds: 4,
		AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(t0)}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace, Annotations: map[string]string{
		resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(rec)),
		lockmeta.HandoverAnnotationKey:   handoverAt(t0),
		"example.com/other":              "kept",
	}}, Data: map[string]string{"k": "v"}}
	a.stepWall(2 * time.Second)
	if _, err := ca.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api.deliver(func() {})
	ev := <-w.ResultChan()
	if ev.Type != watch.Added {
		t.Fatalf("watch delivered %s, want ADDED", ev.Type)
	}
	got := ev.Object.(*corev1.ConfigMap)
	r, err := resourcelock.DecodeRecord([]byte(got.Annotations[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		t.Fatal(err)
	}
	// Written 2s ahead, read by a clock 4s behind: 6s ahead of the writer's.
	want := t0.Add(6 * time.Second)
	if !r.RenewTime.Time.Equal(want) || !r.AcquireTime.Time.Equal(want) || r.HolderIdentity != "a" || r.LeaderTransitions != 0 {
		t.Fatalf("b reads record %+v, want times %v and the rest as written", r, want)
	}
	if req, ans := handoverTimes(t, got.Annotations); !req.Equal(want) || !ans.Equal(want) {
		t.Fatalf("b reads handover times %v/%v, want %v", req, ans, want)
	}
	if got.Annotations["example.com/other"] != "kept" || got.Data["k"] != "v" {
		t.Fatalf("the shift lost other content: annotations %v data %v", got.Annotations, got.Data)
	}
}

// TestShiftLeavesBadAnnotationsAlone: an annotation that does not decode
// passes unchanged, for its readers to reject; a shift of zero returns
// the object itself.
func TestShiftLeavesBadAnnotationsAlone(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Annotations: map[string]string{
		resourcelock.LeaderAnnotationKey: "{not json",
		lockmeta.HandoverAnnotationKey:   "[]",
	}}}
	out := shiftTimes(cm, time.Second).(*corev1.ConfigMap)
	if out == cm {
		t.Fatal("a non-zero shift returned the object itself, not a copy")
	}
	for k, v := range cm.Annotations {
		if out.Annotations[k] != v {
			t.Fatalf("annotation %s became %q, want %q unchanged", k, out.Annotations[k], v)
		}
	}
	if shiftTimes(cm, 0) != cm {
		t.Fatal("a zero shift copied the object")
	}
	var nilLease *coordinationv1.Lease
	if shiftTimes(nilLease, time.Second) != nilLease {
		t.Fatal("a nil Lease was not passed through")
	}
}

// TestWallStepKeepsTheOrderOfRenewals: a reader whose wall clock steps
// forward by the time between two renewals still sees the second renewal
// as a new, later renew time, as a real process reading stored times
// would (the session view tells a renewal by a renew time that changed);
// a step smaller than the gap shows as before.
func TestWallStepKeepsTheOrderOfRenewals(t *testing.T) {
	tests := []struct {
		name string
		step time.Duration
		gap  time.Duration
		want time.Duration // the shift the reader sees the second renewal by
	}{
		{"step as large as the gap", time.Second, time.Second, 0},
		{"step larger than the gap", 2 * time.Second, time.Second, 0},
		{"step smaller than the gap", time.Second, 3 * time.Second, -time.Second},
		{"step back", -time.Second, time.Second, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, _, writer := newTestAPI()
			reader := newActorState("reader", api.clock)
			cr := newActorClient(api, reader)
			ctx := context.Background()
			t0 := epoch.Add(time.Second)
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace},
				Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: t0}}}
			l, err := writer.CoordinationV1().Leases(Namespace).Create(ctx, l, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first, err := cr.CoordinationV1().Leases(Namespace).Get(ctx, LockName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			reader.stepWall(tc.step)
			l.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(tc.gap)}
			if _, err := writer.CoordinationV1().Leases(Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			second, err := cr.CoordinationV1().Leases(Namespace).Get(ctx, LockName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !second.Spec.RenewTime.Time.After(first.Spec.RenewTime.Time) {
				t.Fatalf("the reader sees renewals at %v and then %v: the later one is not later", first.Spec.RenewTime.Time, second.Spec.RenewTime.Time)
			}
			if got, want := second.Spec.RenewTime.Time, t0.Add(tc.gap).Add(tc.want); !got.Equal(want) {
				t.Fatalf("the reader sees the second renewal at %v, want %v", got, want)
			}
		})
	}
}
