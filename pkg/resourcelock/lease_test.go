package resourcelock

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func newLeaseLock(t *testing.T, cs *fake.Clientset, identity, key string) *LeaseLock {
	t.Helper()
	l, err := NewLeaseLock(cs.CoordinationV1(), testNamespace, testName, Config{Identity: identity, Key: key})
	if err != nil {
		t.Fatalf("NewLeaseLock: %v", err)
	}
	return l
}

func storedLease(t *testing.T, cs *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	obj, err := cs.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), testNamespace, testName)
	if err != nil {
		t.Fatalf("reading the stored Lease: %v", err)
	}
	return obj.(*coordinationv1.Lease)
}

// seededLease is a Lease as upstream client-go leaves it (no holder-key
// annotation), with labels and annotations of other parties.
func seededLease(t *testing.T) *coordinationv1.Lease {
	holder := "istiod-legacy"
	duration, transitions := int32(15), int32(2)
	acquire := metav1.NewMicroTime(mustTime(t, "2026-01-02T03:04:05Z").Time)
	renew := metav1.NewMicroTime(mustTime(t, "2026-01-02T03:04:20Z").Add(123456 * time.Microsecond))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testName,
			Namespace:       testNamespace,
			ResourceVersion: "5",
			Labels:          map[string]string{"app": "istiod"},
			Annotations:     map[string]string{"example.com/owner": "platform-team"},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &duration,
			LeaseTransitions:     &transitions,
			AcquireTime:          &acquire,
			RenewTime:            &renew,
		},
	}
}

func TestApplyRecordToLease(t *testing.T) {
	rec := Record{
		HolderIdentity:       "istiod-a",
		HolderKey:            "^canary",
		LeaseDurationSeconds: 30,
		AcquireTime:          mustTime(t, "2026-01-02T03:04:05Z"),
		RenewTime:            mustTime(t, "2026-01-02T03:04:20Z"),
		LeaderTransitions:    3,
	}
	lease := seededLease(t)
	ApplyRecordToLease(rec, lease)

	spec := lease.Spec
	switch {
	case spec.HolderIdentity == nil || *spec.HolderIdentity != "istiod-a":
		t.Errorf("holderIdentity = %v", spec.HolderIdentity)
	case spec.LeaseDurationSeconds == nil || *spec.LeaseDurationSeconds != 30:
		t.Errorf("leaseDurationSeconds = %v", spec.LeaseDurationSeconds)
	case spec.LeaseTransitions == nil || *spec.LeaseTransitions != 3:
		t.Errorf("leaseTransitions = %v", spec.LeaseTransitions)
	case spec.AcquireTime == nil || !spec.AcquireTime.Time.Equal(rec.AcquireTime.Time):
		t.Errorf("acquireTime = %v", spec.AcquireTime)
	case spec.RenewTime == nil || !spec.RenewTime.Time.Equal(rec.RenewTime.Time):
		t.Errorf("renewTime = %v", spec.RenewTime)
	}
	want := map[string]string{"example.com/owner": "platform-team", LeaseHolderKeyAnnotation: "^canary"}
	if !maps.Equal(lease.Annotations, want) {
		t.Errorf("annotations = %v, want %v", lease.Annotations, want)
	}
	if !maps.Equal(lease.Labels, map[string]string{"app": "istiod"}) {
		t.Errorf("labels = %v", lease.Labels)
	}

	// The pointers are the lease's own: changing the record later does not
	// reach into the lease.
	rec.HolderIdentity = "changed"
	if *lease.Spec.HolderIdentity != "istiod-a" {
		t.Errorf("lease aliases the record")
	}

	// An empty key removes the annotation and nothing else.
	rec.HolderKey = ""
	ApplyRecordToLease(rec, lease)
	if _, found := lease.Annotations[LeaseHolderKeyAnnotation]; found {
		t.Errorf("holder-key annotation kept for an empty key: %v", lease.Annotations)
	}
	if !maps.Equal(lease.Annotations, map[string]string{"example.com/owner": "platform-team"}) {
		t.Errorf("annotations after clearing the key = %v", lease.Annotations)
	}

	// No annotations at all: an empty key leaves them absent, a key creates them.
	bare := &coordinationv1.Lease{}
	ApplyRecordToLease(Record{HolderIdentity: "x"}, bare)
	if bare.Annotations != nil {
		t.Errorf("annotations created for an empty key: %v", bare.Annotations)
	}
	ApplyRecordToLease(Record{HolderIdentity: "x", HolderKey: "default"}, bare)
	if bare.Annotations[LeaseHolderKeyAnnotation] != "default" {
		t.Errorf("annotations = %v", bare.Annotations)
	}
}

func TestLeaseToRecord(t *testing.T) {
	t.Run("nil fields read as zero", func(t *testing.T) {
		for name, lease := range map[string]*coordinationv1.Lease{
			"empty lease":      {},
			"only annotations": {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x": "y"}}},
		} {
			if got := LeaseToRecord(lease); *got != (Record{}) {
				t.Errorf("%s: LeaseToRecord = %s, want the zero record", name, fmtRecord(*got))
			}
		}
	})
	t.Run("upstream lease", func(t *testing.T) {
		lease := seededLease(t)
		got := LeaseToRecord(lease)
		want := Record{
			HolderIdentity:       "istiod-legacy",
			LeaseDurationSeconds: 15,
			AcquireTime:          mustTime(t, "2026-01-02T03:04:05Z"),
			RenewTime:            metav1.NewTime(lease.Spec.RenewTime.Time),
			LeaderTransitions:    2,
		}
		if !sameRecord(*got, want) {
			t.Errorf("LeaseToRecord = %s, want %s", fmtRecord(*got), fmtRecord(want))
		}
	})
	t.Run("holder key", func(t *testing.T) {
		lease := seededLease(t)
		lease.Annotations[LeaseHolderKeyAnnotation] = "^canary"
		if got := LeaseToRecord(lease); got.HolderKey != "^canary" {
			t.Errorf("HolderKey = %q", got.HolderKey)
		}
	})
}

func TestLeaseLockCreateGetUpdate(t *testing.T) {
	ctx := context.Background()
	cs := newClientset(t)
	l := newLeaseLock(t, cs, "istiod-a", "canary")

	if _, _, err := l.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get on a missing Lease = %v, want NotFound", err)
	}
	if err := l.Update(ctx, Record{HolderIdentity: "istiod-a"}); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Update before Get = %v, want ErrNotInitialized", err)
	}

	rec, err := DecodeRecord(readFixture(t, "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(ctx, *rec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	lease := storedLease(t, cs)
	if got := LeaseToRecord(lease); !sameRecord(*got, *rec) {
		t.Errorf("stored Lease reads %s, want %s", fmtRecord(*got), fmtRecord(*rec))
	}
	if lease.Annotations[LeaseHolderKeyAnnotation] != "canary" {
		t.Errorf("stored annotations = %v", lease.Annotations)
	}

	other := newLeaseLock(t, cs, "istiod-b", "")
	got, raw, err := other.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !sameRecord(*got, *rec) {
		t.Errorf("Get = %s, want %s", fmtRecord(*got), fmtRecord(*rec))
	}
	// The raw bytes of a Lease lock are the record's canonical encoding.
	if string(raw) != string(readFixture(t, "valid.json")) {
		t.Errorf("raw = %s, want valid.json", raw)
	}

	// Taking over with an empty key drops the annotation.
	next := Record{HolderIdentity: "istiod-b", LeaseDurationSeconds: 30, LeaderTransitions: 4,
		AcquireTime: mustTime(t, "2026-01-02T03:06:00Z"), RenewTime: mustTime(t, "2026-01-02T03:06:00Z")}
	if err := other.Update(ctx, next); err != nil {
		t.Fatalf("Update: %v", err)
	}
	lease = storedLease(t, cs)
	if _, found := lease.Annotations[LeaseHolderKeyAnnotation]; found {
		t.Errorf("holder-key annotation left behind: %v", lease.Annotations)
	}
	if got := LeaseToRecord(lease); !sameRecord(*got, next) {
		t.Errorf("stored Lease reads %s, want %s", fmtRecord(*got), fmtRecord(next))
	}
	if v, want := verbs(cs), []string{"get", "create", "get", "update"}; !slices.Equal(v, want) {
		t.Errorf("verbs = %v, want %v", v, want)
	}
}

func TestLeaseLockKeepsOtherContent(t *testing.T) {
	ctx := context.Background()
	seed := seededLease(t)
	cs := newClientset(t, seed.DeepCopy())
	l := newLeaseLock(t, cs, "istiod-a", "canary")
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"canary", "", "^canary", ""} {
		rec := Record{HolderIdentity: "istiod-a", HolderKey: key, LeaseDurationSeconds: 30, LeaderTransitions: 3 + i}
		if err := l.Update(ctx, rec); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		lease := storedLease(t, cs)
		want := maps.Clone(seed.Annotations)
		if key != "" {
			want[LeaseHolderKeyAnnotation] = key
		}
		if !maps.Equal(lease.Annotations, want) {
			t.Errorf("update %d: annotations = %v, want %v", i, lease.Annotations, want)
		}
		if !maps.Equal(lease.Labels, seed.Labels) {
			t.Errorf("update %d: labels = %v, want %v", i, lease.Labels, seed.Labels)
		}
		if got := LeaseToRecord(lease); !sameRecord(*got, rec) {
			t.Errorf("update %d: stored %s, want %s", i, fmtRecord(*got), fmtRecord(rec))
		}
	}
}

func TestLeaseLockConflict(t *testing.T) {
	ctx := context.Background()
	cs := newClientset(t, seededLease(t))
	l := newLeaseLock(t, cs, "istiod-a", "canary")
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}

	// upstream client-go renews its Lease behind the lock's back.
	lease, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renew := metav1.NowMicro()
	lease.Spec.RenewTime = &renew
	if _, err := cs.CoordinationV1().Leases(testNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("concurrent write: %v", err)
	}

	if err := l.Update(ctx, Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30}); !apierrors.IsConflict(err) {
		t.Fatalf("Update over a stale version = %v, want a Conflict", err)
	}
	if got := storedLease(t, cs); *got.Spec.HolderIdentity != "istiod-legacy" || !got.Spec.RenewTime.Equal(&renew) {
		t.Errorf("the conflicting Update changed the Lease: %+v", got.Spec)
	}
}

// FuzzLeaseMapping: a record with values a Lease can hold (non-negative
// int32 counters, second-precision times within years 1-9999) survives
// ApplyRecordToLease then LeaseToRecord, whatever the Lease held before, and
// the rest of the Lease's metadata is left alone.
func FuzzLeaseMapping(f *testing.F) {
	f.Add("istiod-a", "canary", int32(30), int32(3), int64(1767323045), int64(1767323060))
	f.Add("", "", int32(1), int32(0), int64(0), int64(0))
	f.Add("istiod-remote", "^canary", int32(math.MaxInt32), int32(math.MaxInt32), int64(-62135596800), int64(253402300799))
	f.Add("istiod-b", "default", int32(0), int32(-1), int64(-1), int64(math.MaxInt64))

	const minUnix, maxUnix = -62135596800, 253402300799 // 0001-01-01 to 9999-12-31T23:59:59, UTC
	clampTime := func(sec int64) metav1.Time {
		if sec < minUnix || sec > maxUnix {
			sec = minUnix + (sec%(maxUnix-minUnix)+(maxUnix-minUnix))%(maxUnix-minUnix)
		}
		return metav1.NewTime(time.Unix(sec, 0))
	}
	nonNegative := func(v int32) int {
		if v < 0 {
			return int(-(v + 1)) // maps [MinInt32, -1] onto [0, MaxInt32]
		}
		return int(v)
	}

	f.Fuzz(func(t *testing.T, identity, key string, duration, transitions int32, acquire, renew int64) {
		rec := Record{
			HolderIdentity:       identity,
			HolderKey:            key,
			LeaseDurationSeconds: nonNegative(duration),
			AcquireTime:          clampTime(acquire),
			RenewTime:            clampTime(renew),
			LeaderTransitions:    nonNegative(transitions),
		}
		lease := seededLease(t)
		lease.Annotations[LeaseHolderKeyAnnotation] = "stale-key"
		ApplyRecordToLease(rec, lease)

		if got := LeaseToRecord(lease); !sameRecord(*got, rec) {
			t.Fatalf("round trip through a Lease\n got %s\nwant %s", fmtRecord(*got), fmtRecord(rec))
		}
		if lease.Annotations["example.com/owner"] != "platform-team" || lease.Labels["app"] != "istiod" {
			t.Fatalf("other metadata lost: annotations %v, labels %v", lease.Annotations, lease.Labels)
		}
		if _, found := lease.Annotations[LeaseHolderKeyAnnotation]; found != (key != "") {
			t.Fatalf("key %q: holder-key annotation present = %v", key, found)
		}
		// Applying the same record again changes nothing.
		again := lease.DeepCopy()
		ApplyRecordToLease(rec, again)
		if got := LeaseToRecord(again); !sameRecord(*got, rec) || !maps.Equal(again.Annotations, lease.Annotations) {
			t.Fatalf("second application differs: %s, %v", fmtRecord(*got), again.Annotations)
		}
	})
}
