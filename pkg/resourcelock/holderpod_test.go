package resourcelock

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

func testHolderPod() lockmeta.HolderPod {
	return lockmeta.HolderPod{
		Namespace: "istio-system", Pod: "meshd-0", UID: "uid-1", Container: "meshd", RestartCount: 2,
		StartedAt:    metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		ProcessStart: metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 250000000, time.UTC)),
	}
}

// The Pod mark goes with the holder's own records only, once the source
// has one; a release, a record naming another holder or a source without
// a mark removes it; every other annotation stays; a lock without a source
// leaves the mark as it finds it.
func TestHolderPodMarkFollowsTheRecord(t *testing.T) {
	have := false
	source := func() (lockmeta.HolderPod, bool) { return testHolderPod(), have }
	for _, kind := range []string{ConfigMapsResourceLock, LeasesResourceLock} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			cs := fake.NewClientset()
			l, err := New(kind, testNamespace, testName, cs, Config{Identity: "a", HolderPod: source})
			if err != nil {
				t.Fatal(err)
			}
			reader := l.(holderPodReader)
			have = false
			if err := l.Create(ctx, Record{HolderIdentity: "a", LeaseDurationSeconds: 30}); err != nil {
				t.Fatal(err)
			}
			if p, ok := reader.HolderPod(); ok {
				t.Fatalf("a holder that has not checked its run published %+v", p)
			}
			have = true
			steps := []struct {
				holder string
				want   bool
			}{{"a", true}, {"b", false}, {"a", true}, {"", false}}
			for _, s := range steps {
				if err := l.Update(ctx, Record{HolderIdentity: s.holder, LeaseDurationSeconds: 30}); err != nil {
					t.Fatal(err)
				}
				got, ok := reader.HolderPod()
				want := testHolderPod()
				want.Holder = "a"
				if ok != s.want || (ok && (got.Holder != want.Holder || got.UID != want.UID || !got.ProcessStart.Equal(&want.ProcessStart) ||
					!got.StartedAt.Equal(&want.StartedAt) || got.RestartCount != want.RestartCount)) {
					t.Errorf("after a record naming %q: mark %+v (present %v), want present %v", s.holder, got, ok, s.want)
				}
			}

			// A lock without a source (istiod-like) keeps a mark it finds.
			if err := l.Update(ctx, Record{HolderIdentity: "a", LeaseDurationSeconds: 30}); err != nil {
				t.Fatal(err)
			}
			other, err := New(kind, testNamespace, testName, cs, Config{Identity: "b"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := other.Get(ctx); err != nil {
				t.Fatal(err)
			}
			if err := other.Update(ctx, Record{HolderIdentity: "b", LeaseDurationSeconds: 30}); err != nil {
				t.Fatal(err)
			}
			if p, ok := other.(holderPodReader).HolderPod(); !ok || p.Holder != "a" {
				t.Errorf("a writer without a source dropped or changed the mark: %+v %v", p, ok)
			}
		})
	}
}

// The mark keeps the other annotations of a ConfigMap.
func TestHolderPodMarkKeepsOtherAnnotations(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNamespace,
		Annotations: map[string]string{"example.com/owner": "platform-team"}}, Data: map[string]string{"k": "v"}}
	cs := fake.NewClientset(cm)
	l, err := NewConfigMapLock(cs.CoreV1(), testNamespace, testName, Config{Identity: "a",
		HolderPod: func() (lockmeta.HolderPod, bool) { return testHolderPod(), true }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, Record{HolderIdentity: "a", LeaseDurationSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps(testNamespace).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["example.com/owner"] != "platform-team" || got.Data["k"] != "v" {
		t.Errorf("other content lost: %v %v", got.Annotations, got.Data)
	}
	if _, ok := got.Annotations[lockmeta.HolderPodAnnotationKey]; !ok {
		t.Errorf("no mark written: %v", got.Annotations)
	}
}

// Any annotation value decodes to a complete mark or to none, never a
// panic, and a mark decoded survives encoding again.
func FuzzReadHolderPod(f *testing.F) {
	good, _ := json.Marshal(lockmeta.HolderPod{Holder: "a", Namespace: "n", Pod: "p", UID: "u", Container: "c",
		StartedAt: metav1.NewTime(time.Unix(1700000000, 0)), ProcessStart: metav1.NewMicroTime(time.Unix(1700000000, 5000))})
	for _, s := range []string{string(good), `{"holder":"a"}`, `{}`, `null`, `[`, ``, `{"holder":"a","restartCount":-1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, ok := lockmeta.ReadHolderPod(map[string]string{lockmeta.HolderPodAnnotationKey: raw})
		if !ok {
			return
		}
		if !p.Complete() {
			t.Fatalf("an incomplete mark was accepted: %q", raw)
		}
		again, _ := json.Marshal(p)
		p2, ok := lockmeta.ReadHolderPod(map[string]string{lockmeta.HolderPodAnnotationKey: string(again)})
		if !ok || p2.UID != p.UID || !p2.ProcessStart.Equal(&p.ProcessStart) || p2.RestartCount != p.RestartCount {
			t.Fatalf("mark %+v did not survive encoding: %s", p, again)
		}
	})
}

// A holder's mark is pending while the record it last saw of its own
// lacks the mark its source has now (found after the record was written,
// or withdrawn since), and not once a write carried it; never for a record
// of another holder or a lock without a source.
func TestHolderPodPendingUntilTheRecordCarriesTheMark(t *testing.T) {
	have := false
	source := func() (lockmeta.HolderPod, bool) { return testHolderPod(), have }
	type pending interface{ HolderPodPending() bool }
	for _, kind := range []string{ConfigMapsResourceLock, LeasesResourceLock} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			cs := fake.NewClientset()
			l, err := New(kind, testNamespace, testName, cs, Config{Identity: "a", HolderPod: source})
			if err != nil {
				t.Fatal(err)
			}
			p := l.(pending)
			have = false
			if p.HolderPodPending() {
				t.Fatal("pending before any object was seen")
			}
			rec := Record{HolderIdentity: "a", LeaseDurationSeconds: 30}
			if err := l.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if p.HolderPodPending() {
				t.Fatal("pending although the source has no mark")
			}
			have = true
			if !p.HolderPodPending() {
				t.Fatal("not pending once the source found its run")
			}
			if err := l.Update(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if p.HolderPodPending() {
				t.Fatal("pending after a write carried the mark")
			}
			have = false // withdrawn
			if !p.HolderPodPending() {
				t.Fatal("not pending after the source withdrew its mark")
			}
			if err := l.Update(ctx, Record{HolderIdentity: "b", LeaseDurationSeconds: 30}); err != nil {
				t.Fatal(err)
			}
			have = true
			if p.HolderPodPending() {
				t.Fatal("pending for a record of another holder")
			}
			plain, err := New(kind, testNamespace, testName, cs, Config{Identity: "b"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := plain.Get(ctx); err != nil {
				t.Fatal(err)
			}
			if plain.(pending).HolderPodPending() {
				t.Fatal("pending on a lock without a source")
			}
		})
	}
}
