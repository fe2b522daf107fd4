package resourcelock

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

func newConfigMapLock(t *testing.T, cs *fake.Clientset, identity, key string) *ConfigMapLock {
	t.Helper()
	l, err := NewConfigMapLock(cs.CoreV1(), testNamespace, testName, Config{Identity: identity, Key: key})
	if err != nil {
		t.Fatalf("NewConfigMapLock: %v", err)
	}
	return l
}

// storedConfigMap reads the lock object straight from the fake's tracker, so
// that the read shows up neither in Actions() nor in the lock's state.
func storedConfigMap(t *testing.T, cs *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), testNamespace, testName)
	if err != nil {
		t.Fatalf("reading the stored ConfigMap: %v", err)
	}
	return obj.(*corev1.ConfigMap)
}

// seededConfigMap is a lock ConfigMap that other parties also write to.
func seededConfigMap(annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testName,
			Namespace:       testNamespace,
			ResourceVersion: "7",
			UID:             "0b5c4a2e-9f6d-4c1b-8d3e-1a2b3c4d5e6f",
			Labels:          map[string]string{"app": "istiod", "istio.io/rev": "canary"},
			Annotations:     annotations,
			Finalizers:      []string{"example.com/keep"},
		},
		Data:       map[string]string{"mesh": "defaultConfig: {}", "note": "hands off"},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}
}

// checkOtherContent fails unless got still has everything of want except the
// record annotation.
func checkOtherContent(t *testing.T, got, want *corev1.ConfigMap) {
	t.Helper()
	otherAnnotations := func(cm *corev1.ConfigMap) map[string]string {
		out := maps.Clone(cm.Annotations)
		delete(out, LeaderAnnotationKey)
		return out
	}
	if !maps.Equal(otherAnnotations(got), otherAnnotations(want)) {
		t.Errorf("annotations other than the record = %v, want %v", otherAnnotations(got), otherAnnotations(want))
	}
	if !maps.Equal(got.Labels, want.Labels) {
		t.Errorf("labels = %v, want %v", got.Labels, want.Labels)
	}
	if !maps.Equal(got.Data, want.Data) {
		t.Errorf("data = %v, want %v", got.Data, want.Data)
	}
	if !maps.EqualFunc(got.BinaryData, want.BinaryData, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("binaryData = %v, want %v", got.BinaryData, want.BinaryData)
	}
	if len(got.Finalizers) != len(want.Finalizers) || (len(want.Finalizers) > 0 && got.Finalizers[0] != want.Finalizers[0]) {
		t.Errorf("finalizers = %v, want %v", got.Finalizers, want.Finalizers)
	}
	if got.UID != want.UID {
		t.Errorf("uid = %q, want %q", got.UID, want.UID)
	}
}

func TestConfigMapLockGetMissing(t *testing.T) {
	cs := newClientset(t)
	l := newConfigMapLock(t, cs, "istiod-a", "canary")
	rec, raw, err := l.Get(context.Background())
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, %q, %v; want a NotFound error", rec, raw, err)
	}
	if rec != nil || raw != nil {
		t.Errorf("Get returned %v, %q along with NotFound", rec, raw)
	}
	// A failed Get leaves nothing to update.
	if err := l.Update(context.Background(), Record{HolderIdentity: "istiod-a"}); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Update after a NotFound Get = %v, want ErrNotInitialized", err)
	}
}

func TestConfigMapLockCreateThenGet(t *testing.T) {
	ctx := context.Background()
	cs := newClientset(t)
	l := newConfigMapLock(t, cs, "istiod-a", "canary")
	want, err := DecodeRecord(readFixture(t, "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(ctx, *want); err != nil {
		t.Fatalf("Create: %v", err)
	}

	cm := storedConfigMap(t, cs)
	if got := cm.Annotations[LeaderAnnotationKey]; got != string(readFixture(t, "valid.json")) {
		t.Errorf("stored annotation = %s, want valid.json", got)
	}
	if len(cm.Annotations) != 1 || len(cm.Labels) != 0 || len(cm.Data) != 0 {
		t.Errorf("Create wrote more than the record: annotations %v, labels %v, data %v", cm.Annotations, cm.Labels, cm.Data)
	}

	// Read back through the same lock and through a fresh one.
	for name, reader := range map[string]*ConfigMapLock{"same lock": l, "other lock": newConfigMapLock(t, cs, "istiod-b", "")} {
		got, raw, err := reader.Get(ctx)
		if err != nil {
			t.Fatalf("%s: Get: %v", name, err)
		}
		if !sameRecord(*got, *want) {
			t.Errorf("%s: Get = %s, want %s", name, fmtRecord(*got), fmtRecord(*want))
		}
		if string(raw) != cm.Annotations[LeaderAnnotationKey] {
			t.Errorf("%s: raw = %s, want the annotation value", name, raw)
		}
	}

	// Creating again fails and does not adopt the existing object.
	again := newConfigMapLock(t, cs, "istiod-c", "")
	if err := again.Create(ctx, Record{HolderIdentity: "istiod-c"}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create = %v, want AlreadyExists", err)
	}
	if err := again.Update(ctx, Record{HolderIdentity: "istiod-c"}); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Update after a failed Create = %v, want ErrNotInitialized", err)
	}
}

func TestConfigMapLockUpdateBeforeGet(t *testing.T) {
	cs := newClientset(t, seededConfigMap(nil))
	l := newConfigMapLock(t, cs, "istiod-a", "canary")
	err := l.Update(context.Background(), Record{HolderIdentity: "istiod-a"})
	if !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Update = %v, want ErrNotInitialized", err)
	}
	if len(cs.Actions()) != 0 {
		t.Errorf("Update before Get talked to the API server: %v", verbs(cs))
	}
}

// TestConfigMapLockKeepsOtherContent: the lock owns one annotation, and several
// updates in a row leave every other annotation, label and data key alone.
func TestConfigMapLockKeepsOtherContent(t *testing.T) {
	ctx := context.Background()
	seed := seededConfigMap(map[string]string{
		LeaderAnnotationKey:                  string(readFixture(t, "default-key.json")),
		"example.com/owner":                  "platform-team",
		"kubectl.kubernetes.io/last-applied": `{"kind":"ConfigMap"}`,
	})
	cs := newClientset(t, seed.DeepCopy())
	l := newConfigMapLock(t, cs, "istiod-a", "canary")
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatalf("Get: %v", err)
	}

	acquire := mustTime(t, "2026-01-02T03:04:05Z")
	lastRV := seed.ResourceVersion
	for i := range 4 {
		rec := Record{
			HolderIdentity:       "istiod-a",
			HolderKey:            "canary",
			LeaseDurationSeconds: 30,
			AcquireTime:          acquire,
			RenewTime:            metav1.NewTime(acquire.Add(15 * time.Duration(i) * time.Second)),
			LeaderTransitions:    6,
		}
		if err := l.Update(ctx, rec); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		cm := storedConfigMap(t, cs)
		if got, want := cm.Annotations[LeaderAnnotationKey], string(EncodeRecord(rec)); got != want {
			t.Errorf("update %d: record annotation = %s, want %s", i, got, want)
		}
		if cm.ResourceVersion == lastRV {
			t.Errorf("update %d: resourceVersion did not change", i)
		}
		lastRV = cm.ResourceVersion
		checkOtherContent(t, cm, seed)
	}
	if got, want := verbs(cs), []string{"get", "update", "update", "update", "update"}; !slices.Equal(got, want) {
		t.Errorf("verbs = %v, want %v", got, want)
	}
}

func TestConfigMapLockWithoutAnnotation(t *testing.T) {
	ctx := context.Background()
	for name, annotations := range map[string]map[string]string{
		"nil annotations":   nil,
		"other annotations": {"example.com/owner": "platform-team"},
	} {
		t.Run(name, func(t *testing.T) {
			seed := seededConfigMap(annotations)
			cs := newClientset(t, seed.DeepCopy())
			l := newConfigMapLock(t, cs, "istiod-a", "canary")
			rec, raw, err := l.Get(ctx)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if *rec != (Record{}) || raw != nil {
				t.Errorf("Get = %s, %q; want an empty record and no raw bytes", fmtRecord(*rec), raw)
			}
			want := Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30}
			if err := l.Update(ctx, want); err != nil {
				t.Fatalf("Update: %v", err)
			}
			cm := storedConfigMap(t, cs)
			if got := cm.Annotations[LeaderAnnotationKey]; got != string(EncodeRecord(want)) {
				t.Errorf("record annotation = %s", got)
			}
			checkOtherContent(t, cm, seed)
		})
	}
}

// TestConfigMapLockCorruptAnnotation: a broken record is reported with its raw
// bytes, and the lock can still overwrite it without touching anything else.
func TestConfigMapLockCorruptAnnotation(t *testing.T) {
	ctx := context.Background()
	for _, c := range fixtureCases(t) {
		if c.want != nil {
			continue
		}
		t.Run(c.file, func(t *testing.T) {
			bad := readFixture(t, c.file)
			seed := seededConfigMap(map[string]string{
				LeaderAnnotationKey: string(bad),
				"example.com/owner": "platform-team",
			})
			cs := newClientset(t, seed.DeepCopy())
			l := newConfigMapLock(t, cs, "istiod-a", "canary")

			rec, raw, err := l.Get(ctx)
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("Get error = %v, want ErrCorruptRecord", err)
			}
			if rec != nil {
				t.Errorf("Get returned record %s with a corrupt annotation", fmtRecord(*rec))
			}
			if string(raw) != string(bad) {
				t.Errorf("raw = %q, want the annotation %q", raw, bad)
			}

			want := Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30,
				AcquireTime: mustTime(t, "2026-01-02T03:04:05Z"), RenewTime: mustTime(t, "2026-01-02T03:04:05Z")}
			if err := l.Update(ctx, want); err != nil {
				t.Fatalf("Update over a corrupt record: %v", err)
			}
			cm := storedConfigMap(t, cs)
			checkOtherContent(t, cm, seed)
			got, _, err := l.Get(ctx)
			if err != nil {
				t.Fatalf("Get after the repair: %v", err)
			}
			if !sameRecord(*got, want) {
				t.Errorf("Get after the repair = %s, want %s", fmtRecord(*got), fmtRecord(want))
			}
			if v := verbs(cs); !slices.Equal(v, []string{"get", "update", "get"}) {
				t.Errorf("verbs = %v", v)
			}
		})
	}
}

// TestConfigMapLockConflict: a write behind the lock's back makes the lock's
// next Update fail with a Conflict and leaves the other write in place.
func TestConfigMapLockConflict(t *testing.T) {
	ctx := context.Background()
	seed := seededConfigMap(map[string]string{LeaderAnnotationKey: string(readFixture(t, "valid.json"))})
	cs := newClientset(t, seed)
	l := newConfigMapLock(t, cs, "istiod-a", "canary")
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatalf("Get: %v", err)
	}

	// Someone else renews the record through the API.
	theirs := Record{HolderIdentity: "istiod-b", HolderKey: "default", LeaseDurationSeconds: 30,
		AcquireTime: mustTime(t, "2026-01-02T03:05:00Z"), RenewTime: mustTime(t, "2026-01-02T03:05:00Z"), LeaderTransitions: 4}
	cm, err := cs.CoreV1().ConfigMaps(testNamespace).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[LeaderAnnotationKey] = string(EncodeRecord(theirs))
	if _, err := cs.CoreV1().ConfigMaps(testNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("concurrent write: %v", err)
	}

	mine := Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30, LeaderTransitions: 4}
	if err := l.Update(ctx, mine); !apierrors.IsConflict(err) {
		t.Fatalf("Update over a stale version = %v, want a Conflict", err)
	}
	if got := storedConfigMap(t, cs).Annotations[LeaderAnnotationKey]; got != string(EncodeRecord(theirs)) {
		t.Errorf("the conflicting Update overwrote the record: %s", got)
	}
	// A conflict does not move the lock forward: it keeps failing until the
	// caller reads again, and then succeeds.
	if err := l.Update(ctx, mine); !apierrors.IsConflict(err) {
		t.Errorf("second Update without Get = %v, want a Conflict", err)
	}
	got, _, err := l.Get(ctx)
	if err != nil || !sameRecord(*got, theirs) {
		t.Fatalf("Get = %v, %v; want their record", got, err)
	}
	if err := l.Update(ctx, mine); err != nil {
		t.Fatalf("Update after a fresh Get: %v", err)
	}
}

// TestConfigMapLockTwoCandidates: two locks read the same version; only the
// first writer wins.
func TestConfigMapLockTwoCandidates(t *testing.T) {
	ctx := context.Background()
	cs := newClientset(t, seededConfigMap(map[string]string{LeaderAnnotationKey: string(readFixture(t, "released.json"))}))
	a := newConfigMapLock(t, cs, "istiod-a", "canary")
	b := newConfigMapLock(t, cs, "istiod-b", "default")
	for _, l := range []*ConfigMapLock{a, b} {
		if _, _, err := l.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Update(ctx, Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30}); err != nil {
		t.Fatalf("first writer: %v", err)
	}
	if err := b.Update(ctx, Record{HolderIdentity: "istiod-b", HolderKey: "default", LeaseDurationSeconds: 30}); !apierrors.IsConflict(err) {
		t.Fatalf("second writer = %v, want a Conflict", err)
	}
	rec, _, err := b.Get(ctx)
	if err != nil || rec.HolderIdentity != "istiod-a" {
		t.Errorf("holder after the race = %v, %v; want istiod-a", rec, err)
	}
}

// TestConfigMapIstiodFixture checks testdata/records/configmap-istiod.yaml: it
// is a ConfigMap carrying valid.json, and a lock update keeps the rest of it.
func TestConfigMapIstiodFixture(t *testing.T) {
	ctx := context.Background()
	var seed corev1.ConfigMap
	if err := yaml.UnmarshalStrict(readFixture(t, "configmap-istiod.yaml"), &seed); err != nil {
		t.Fatalf("configmap-istiod.yaml: %v", err)
	}
	if seed.Kind != "ConfigMap" || seed.APIVersion != "v1" || seed.Namespace != "istio-system" || seed.Name != "istio-leader" {
		t.Fatalf("configmap-istiod.yaml is %s %s %s/%s", seed.APIVersion, seed.Kind, seed.Namespace, seed.Name)
	}
	if got, want := seed.Annotations[LeaderAnnotationKey], string(readFixture(t, "valid.json")); got != want {
		t.Fatalf("leader annotation of configmap-istiod.yaml = %s\nwant valid.json = %s", got, want)
	}
	if len(seed.Annotations) < 2 || len(seed.Labels) == 0 || len(seed.Data) == 0 {
		t.Fatalf("configmap-istiod.yaml should carry unrelated annotations, labels and data")
	}

	seed.ResourceVersion = "3" // as the API server would have it
	cs := newClientset(t, seed.DeepCopy())
	l, err := NewConfigMapLock(cs.CoreV1(), seed.Namespace, seed.Name, Config{Identity: "istiod-b", Key: "default"})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := l.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rec.HolderIdentity != "istiod-a" || rec.HolderKey != "canary" || rec.LeaderTransitions != 3 {
		t.Errorf("Get = %s", fmtRecord(*rec))
	}
	next := *rec
	next.HolderIdentity, next.HolderKey, next.LeaderTransitions = "istiod-b", "default", 4
	if err := l.Update(ctx, next); err != nil {
		t.Fatalf("Update: %v", err)
	}
	obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), seed.Namespace, seed.Name)
	if err != nil {
		t.Fatal(err)
	}
	checkOtherContent(t, obj.(*corev1.ConfigMap), &seed)
}
