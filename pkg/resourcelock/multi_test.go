package resourcelock

import (
	"context"
	"math"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

func newMulti(t *testing.T, identity string) (*multiLock, func() (Record, Record)) {
	m, both, _ := newMultiOn(t, identity)
	return m, both
}

func newMultiOn(t *testing.T, identity string) (*multiLock, func() (Record, Record), *fake.Clientset) {
	t.Helper()
	cs := newClientset(t)
	l, err := New(ConfigMapsLeasesResourceLock, testNamespace, testName, cs, Config{Identity: identity, Key: "canary"})
	if err != nil {
		t.Fatal(err)
	}
	both := func() (Record, Record) {
		cm, _ := NewConfigMapLock(cs.CoreV1(), testNamespace, testName, Config{Identity: "reader"})
		ls, _ := NewLeaseLock(cs.CoordinationV1(), testNamespace, testName, Config{Identity: "reader"})
		var a, b Record
		if r, _, err := cm.Get(context.Background()); err == nil {
			a = *r
		}
		if r, _, err := ls.Get(context.Background()); err == nil {
			b = *r
		}
		return a, b
	}
	return l.(*multiLock), both, cs
}

func TestMultiLockWritesBothObjects(t *testing.T) {
	ctx := context.Background()
	m, both := newMulti(t, "a")
	if _, _, err := m.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get on nothing = %v, want NotFound", err)
	}
	rec := Record{HolderIdentity: "a", HolderKey: "canary", LeaseDurationSeconds: 30, LeaderTransitions: 1}
	if err := m.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.RenewTime = metav1.Now()
	if err := m.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	cm, lease := both()
	if cm.HolderIdentity != "a" || lease.HolderIdentity != "a" || cm.HolderKey != "canary" || lease.HolderKey != "canary" {
		t.Fatalf("configmap %+v, lease %+v", cm, lease)
	}
	got, _, err := m.Get(ctx)
	if err != nil || got.HolderIdentity != "a" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// An instance that uses only the ConfigMap holds it; the multi lock reads
// that holder and writes the missing Lease when it takes over.
func TestMultiLockSeesAHolderOfEitherKind(t *testing.T) {
	ctx := context.Background()
	m, _, cs := newMultiOn(t, "b")
	cmOnly, _ := NewConfigMapLock(cs.CoreV1(), testNamespace, testName, Config{Identity: "old"})
	if err := cmOnly.Create(ctx, Record{HolderIdentity: "old", LeaseDurationSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	got, _, err := m.Get(ctx)
	if err != nil || got.HolderIdentity != "old" {
		t.Fatalf("Get = %+v, %v; want the ConfigMap's holder", got, err)
	}
	if err := m.Update(ctx, Record{HolderIdentity: "b", LeaseDurationSeconds: 30}); err != nil {
		t.Fatalf("Update creating the missing Lease: %v", err)
	}
	// Two different holders (instances of the two kinds at once) read as
	// held by neither.
	leaseOnly, _ := NewLeaseLock(cs.CoordinationV1(), testNamespace, testName, Config{Identity: "new"})
	if _, _, err := leaseOnly.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leaseOnly.Update(ctx, Record{HolderIdentity: "new", LeaseDurationSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	got, _, err = m.Get(ctx)
	if err != nil || got.HolderIdentity != "b,new" {
		t.Fatalf("Get = %+v, %v; want both holders named", got, err)
	}
}

func TestNewMultiLockValidates(t *testing.T) {
	cs := newClientset(t)
	a, _ := NewConfigMapLock(cs.CoreV1(), testNamespace, testName, Config{Identity: "a"})
	b, _ := NewLeaseLock(cs.CoordinationV1(), testNamespace, testName, Config{Identity: "b"})
	if _, err := newMultiLock(a, b); err == nil || !strings.Contains(err.Error(), "different identities") {
		t.Fatalf("err = %v", err)
	}
	if _, err := newMultiLock(a, nil); err == nil {
		t.Fatal("nil secondary accepted")
	}
}

func TestLeaseFieldsAreClampedToInt32(t *testing.T) {
	lease := &coordinationv1.Lease{}
	ApplyRecordToLease(Record{HolderIdentity: "a", LeaderTransitions: math.MaxInt32 + 10, LeaseDurationSeconds: math.MaxInt64}, lease)
	if *lease.Spec.LeaseTransitions != math.MaxInt32 || *lease.Spec.LeaseDurationSeconds != math.MaxInt32 {
		t.Fatalf("transitions %d, duration %d", *lease.Spec.LeaseTransitions, *lease.Spec.LeaseDurationSeconds)
	}
}

// The acknowledgement extends the annotation's JSON; the fields a reader of
// the first format knows keep their names and meaning.
func TestHandoverAnswerRoundTrips(t *testing.T) {
	raw := `{"holder":"h","candidate":"c","candidateKey":"canary","requestTime":"2026-01-02T03:04:05Z","answer":"accepted","stopWithinMillis":5000}`
	h := lockmeta.ReadHandover(map[string]string{lockmeta.HandoverAnnotationKey: raw})
	if !h.Requested("h") || h.Pending("h") || h.Answer != lockmeta.AnswerAccepted || h.StopWithinMillis != 5000 {
		t.Fatalf("decoded %+v", h)
	}
	old := lockmeta.ReadHandover(map[string]string{lockmeta.HandoverAnnotationKey: `{"holder":"h","candidate":"c","candidateKey":"canary"}`})
	if !old.Pending("h") {
		t.Fatalf("a request without an answer is not pending: %+v", old)
	}
	meta := &metav1.ObjectMeta{}
	lockmeta.WriteHandover(meta, h)
	if got := meta.Annotations[lockmeta.HandoverAnnotationKey]; got != raw {
		t.Fatalf("encoded %s, want %s", got, raw)
	}
}
