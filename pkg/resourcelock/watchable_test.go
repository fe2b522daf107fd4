package resourcelock

import (
	"errors"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
)

func TestObserveTakesOnlyNewerVersionsOfItsOwnObject(t *testing.T) {
	client := fake.NewClientset()
	l, err := NewConfigMapLock(client.CoreV1(), "ns", "lock", Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name, rv, holder string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv,
			Annotations: map[string]string{LeaderAnnotationKey: `{"holderIdentity":"` + holder + `"}`}}}
	}
	if _, _, err := l.Observe(cm("other", "5", "x"), false); !errors.Is(err, lockwatch.ErrForeignObject) {
		t.Fatalf("foreign object: err = %v", err)
	}
	if _, _, err := l.Peek(); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("a foreign object was cached: %v", err)
	}
	if rec, _, err := l.Observe(cm("lock", "10", "b"), false); err != nil || rec.HolderIdentity != "b" {
		t.Fatalf("Observe = %+v, %v", rec, err)
	}
	if rec, _, _ := l.Observe(cm("lock", "9", "old"), false); rec.HolderIdentity != "b" || l.ResourceVersion() != "10" {
		t.Fatalf("an older version replaced a newer one: %+v rv %s", rec, l.ResourceVersion())
	}
	if _, _, err := l.Observe(cache.DeletedFinalStateUnknown{Obj: cm("other", "11", "x")}, true); !errors.Is(err, lockwatch.ErrForeignObject) {
		t.Fatalf("deletion of a foreign object: err = %v", err)
	}
	if l.ResourceVersion() != "10" {
		t.Fatal("deletion of a foreign object dropped the lock's object")
	}
	if rec, _, err := l.Observe(cache.DeletedFinalStateUnknown{Obj: cm("lock", "12", "b")}, true); err != nil || rec.HolderIdentity != "" || l.ResourceVersion() != "" {
		t.Fatalf("own deletion: %+v %v rv %q", rec, err, l.ResourceVersion())
	}
	if _, _, err := l.Observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: "ns"}}, false); err == nil {
		t.Fatal("a Lease was accepted by a ConfigMap lock")
	}
}

func TestCooperativeWritesAdvertiseTheHolder(t *testing.T) {
	client := fake.NewClientset()
	l, _ := NewLeaseLock(client.CoordinationV1(), "ns", "lock", Config{Identity: "a", Cooperative: true})
	ctx := t.Context()
	if err := l.Create(ctx, Record{HolderIdentity: "a", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h.Holder != "a" || h.Candidate != "" {
		t.Fatalf("after create: %+v", h)
	}
	if err := l.RequestHandover(ctx, lockmeta.Handover{Holder: "a", Candidate: "c", CandidateKey: "stable"}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); !h.Requested("a") || h.Requested("b") {
		t.Fatalf("request not visible: %+v", h)
	}
	if err := l.Update(ctx, Record{HolderIdentity: "c", HolderKey: "stable", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h.Holder != "c" || h.Candidate != "" {
		t.Fatalf("a record write must clear the request and name the new holder: %+v", h)
	}
	if err := l.Update(ctx, Record{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if _, found := l.obj.Annotations[lockmeta.HandoverAnnotationKey]; found {
		t.Fatal("a release left the handover annotation behind")
	}
}

// Handover is the annotation of the version the lock last saw, whichever
// way it saw it (a watch, its own write, a deletion), although it decodes
// each version once.
func TestHandoverFollowsTheVersionLastSeen(t *testing.T) {
	client := fake.NewClientset()
	l, err := NewLeaseLock(client.CoordinationV1(), "ns", "lock", Config{Identity: "a", Cooperative: true})
	if err != nil {
		t.Fatal(err)
	}
	lease := func(rv string, h lockmeta.Handover) *coordinationv1.Lease {
		meta := metav1.ObjectMeta{Name: "lock", Namespace: "ns", ResourceVersion: rv}
		lockmeta.WriteHandover(&meta, h)
		holder := "a"
		return &coordinationv1.Lease{ObjectMeta: meta, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	if h := l.Handover(); h != (lockmeta.Handover{}) {
		t.Fatalf("before any version: %+v", h)
	}
	asked := lockmeta.Handover{Holder: "a", Candidate: "b", CandidateKey: "k"}
	if _, _, err := l.Observe(lease("10", asked), false); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read comes from the decoded version
		if h := l.Handover(); h != asked {
			t.Fatalf("after the watch: %+v, want %+v", h, asked)
		}
	}
	answered := asked
	answered.Answer = lockmeta.AnswerRefused
	if _, _, err := l.Observe(lease("11", answered), false); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h != answered {
		t.Fatalf("after a newer version: %+v, want %+v", h, answered)
	}
	if _, _, err := l.Observe(lease("12", lockmeta.Handover{}), false); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h != (lockmeta.Handover{}) {
		t.Fatalf("after a version without the annotation: %+v", h)
	}
	if _, _, err := l.Observe(lease("13", asked), false); err != nil {
		t.Fatal(err)
	}
	_ = l.Handover()
	if _, _, err := l.Observe(cache.DeletedFinalStateUnknown{Obj: lease("14", asked)}, true); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h != (lockmeta.Handover{}) {
		t.Fatalf("after the deletion: %+v", h)
	}
	// The lock's own write: the request addressed to someone else is
	// cleared, and Handover says so at once.
	ctx := t.Context()
	if err := l.Create(ctx, Record{HolderIdentity: "a", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h != (lockmeta.Handover{Holder: "a"}) {
		t.Fatalf("after its create: %+v", h)
	}
	if err := l.RequestHandover(ctx, lockmeta.Handover{Holder: "a", Candidate: "b"}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h.Candidate != "b" {
		t.Fatalf("after its request: %+v", h)
	}
	if err := l.Update(ctx, Record{HolderIdentity: "c", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if h := l.Handover(); h != (lockmeta.Handover{Holder: "c"}) {
		t.Fatalf("after its update naming c: %+v", h)
	}
}

// The fence a record carries to the holder it names stays in the annotation
// when another candidate asks that holder to hand over or takes its request
// back; the holder's own writes are the ones that drop it.
func TestAnotherCandidatesRequestKeepsTheCarriedFence(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	newLock := func(id string) *LeaseLock {
		l, err := NewLeaseLock(client.CoordinationV1(), "ns", "lock", Config{Identity: id, Cooperative: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// write reads the lock's object and writes h into its annotation.
	write := func(l *LeaseLock, h lockmeta.Handover) {
		t.Helper()
		if _, _, err := l.Get(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.RequestHandover(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	fence := func() int64 {
		t.Helper()
		l := newLock("reader")
		if _, _, err := l.Get(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Handover().FenceMillis
	}
	old, other, named := newLock("old"), newLock("other"), newLock("named")
	if err := old.Create(ctx, Record{HolderIdentity: "old", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	asked := metav1.Now()
	req := lockmeta.Handover{Holder: "old", Candidate: "named", CandidateKey: "k", RequestTime: &asked, HonoursFence: true}
	write(named, req)
	req.Answer, req.FenceMillis = lockmeta.AnswerAccepted, 2500
	write(old, req)
	if err := old.Update(ctx, Record{HolderIdentity: "named", LeaseDurationSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if got := fence(); got != 2500 {
		t.Fatalf("the record naming the candidate carries fence %d, want 2500", got)
	}
	write(other, lockmeta.Handover{Holder: "named", Candidate: "other", CandidateKey: "k2", RequestTime: &asked, HonoursFence: true})
	if got := fence(); got != 2500 {
		t.Fatalf("after another candidate's request: fence %d, want 2500", got)
	}
	write(other, lockmeta.Handover{Holder: "named"})
	if got := fence(); got != 2500 {
		t.Fatalf("after that candidate took its request back: fence %d, want 2500", got)
	}
	write(named, lockmeta.Handover{Holder: "named"})
	if got := fence(); got != 0 {
		t.Fatalf("after the named holder's own write: fence %d, want 0", got)
	}
}
