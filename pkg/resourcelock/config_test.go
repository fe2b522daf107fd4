package resourcelock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

var lockKinds = []string{ConfigMapsResourceLock, LeasesResourceLock}

func TestNew(t *testing.T) {
	cs := newClientset(t)
	cfg := Config{Identity: "istiod-a", Key: "canary"}
	for _, c := range []struct {
		kind, describe string
	}{
		{ConfigMapsResourceLock, "ConfigMap istio-system/istio-leader"},
		{LeasesResourceLock, "Lease istio-system/istio-leader"},
	} {
		l, err := New(c.kind, testNamespace, testName, cs, cfg)
		if err != nil {
			t.Fatalf("New(%q): %v", c.kind, err)
		}
		switch l.(type) {
		case *ConfigMapLock:
			if c.kind != ConfigMapsResourceLock {
				t.Errorf("New(%q) built a ConfigMapLock", c.kind)
			}
		case *LeaseLock:
			if c.kind != LeasesResourceLock {
				t.Errorf("New(%q) built a LeaseLock", c.kind)
			}
		default:
			t.Errorf("New(%q) built a %T", c.kind, l)
		}
		if l.Describe() != c.describe || l.Identity() != "istiod-a" || l.Key() != "canary" {
			t.Errorf("New(%q): Describe %q, Identity %q, Key %q", c.kind, l.Describe(), l.Identity(), l.Key())
		}
	}
	// A dotted name is a valid object name.
	if _, err := New(LeasesResourceLock, testNamespace, "istio-leader.canary", cs, cfg); err != nil {
		t.Errorf("New with a dotted name: %v", err)
	}
	if len(cs.Actions()) != 0 {
		t.Errorf("New talked to the API server: %v", verbs(cs))
	}
}

func TestNewUnknownKind(t *testing.T) {
	cs := newClientset(t)
	for _, kind := range []string{"", "endpoints", "ConfigMaps", "leases.coordination.k8s.io", "endpointsleases"} {
		l, err := New(kind, testNamespace, testName, cs, Config{Identity: "istiod-a"})
		if err == nil || l != nil {
			t.Errorf("New(%q) = %v, %v; want an error", kind, l, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", kind)) {
			t.Errorf("New(%q) error %q does not name the kind", kind, err)
		}
	}
}

// TestNewInvalidLocation: every problem is reported, all in one error.
func TestNewInvalidLocation(t *testing.T) {
	long := strings.Repeat("a", 300)
	const (
		badName      = "invalid lock name"
		badNamespace = "invalid lock namespace"
		noIdentity   = "lock identity must not be empty"
	)
	cases := []struct {
		name, namespace, lockName, identity string
		want                                []string
	}{
		{name: "underscore in name", namespace: testNamespace, lockName: "Bad_Name", identity: "a", want: []string{badName}},
		{name: "empty name", namespace: testNamespace, lockName: "", identity: "a", want: []string{badName}},
		{name: "300-char name", namespace: testNamespace, lockName: long, identity: "a", want: []string{badName}},
		{name: "uppercase namespace", namespace: "Istio-System", lockName: testName, identity: "a", want: []string{badNamespace}},
		{name: "empty namespace", namespace: "", lockName: testName, identity: "a", want: []string{badNamespace}},
		{name: "dotted namespace", namespace: "istio.system", lockName: testName, identity: "a", want: []string{badNamespace}},
		{name: "64-char namespace", namespace: strings.Repeat("n", 64), lockName: testName, identity: "a", want: []string{badNamespace}},
		{name: "empty identity", namespace: testNamespace, lockName: testName, identity: "", want: []string{noIdentity}},
		{name: "everything wrong", namespace: "Bad_NS", lockName: "Bad_Name", identity: "", want: []string{badNamespace, badName, noIdentity}},
		{name: "everything empty", want: []string{badNamespace, badName, noIdentity}},
		{name: "long name, empty rest", lockName: long, want: []string{badNamespace, badName, noIdentity}},
	}
	cs := newClientset(t)
	for _, kind := range lockKinds {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				l, err := New(kind, c.namespace, c.lockName, cs, Config{Identity: c.identity})
				if err == nil {
					t.Fatalf("New = %v, nil; want an error", l)
				}
				if l != nil {
					// A typed nil pointer in the interface counts too: callers
					// test the Interface against nil.
					t.Errorf("New returned a non-nil Interface (%T) along with its error", l)
				}
				msg := err.Error()
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q lacks %q", msg, w)
					}
				}
				var merr *multierror.Error
				if !errors.As(err, &merr) {
					t.Fatalf("error %T is not a list of problems", err)
				}
				if len(merr.Errors) != len(c.want) {
					t.Errorf("%d problems reported, want %d: %q", len(merr.Errors), len(c.want), msg)
				}
				if strings.Contains(c.name, "300") && !strings.Contains(msg, "253") {
					t.Errorf("error %q does not say what the length limit is", msg)
				}
			})
		}
	}
}

// TestLockVerbs pins the API calls each operation makes, for both kinds.
func TestLockVerbs(t *testing.T) {
	rec := Record{HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30}
	type op func(ctx context.Context, l Interface) error
	get := func(ctx context.Context, l Interface) error { _, _, err := l.Get(ctx); return err }
	create := func(ctx context.Context, l Interface) error { return l.Create(ctx, rec) }
	update := func(ctx context.Context, l Interface) error { return l.Update(ctx, rec) }
	event := func(ctx context.Context, l Interface) error {
		l.RecordEvent(corev1.EventTypeNormal, "R", "m")
		return nil
	}

	cases := []struct {
		name   string
		exists bool
		ops    []op
		want   []string
	}{
		{name: "create", ops: []op{create}, want: []string{"create"}},
		{name: "get missing", ops: []op{get}, want: []string{"get"}},
		{name: "get update", exists: true, ops: []op{get, update}, want: []string{"get", "update"}},
		{name: "create update", ops: []op{create, update}, want: []string{"create", "update"}},
		{name: "get update update", exists: true, ops: []op{get, update, update}, want: []string{"get", "update", "update"}},
		{name: "update before get", exists: true, ops: []op{update}, want: []string{}},
		{name: "record event", exists: true, ops: []op{get, event}, want: []string{"get"}},
	}
	for _, kind := range lockKinds {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				cs := newClientset(t)
				if c.exists {
					var seed runtime.Object = seededLease(t)
					if kind == ConfigMapsResourceLock {
						seed = seededConfigMap(nil)
					}
					if err := cs.Tracker().Add(seed); err != nil {
						t.Fatal(err)
					}
				}
				l, err := New(kind, testNamespace, testName, cs, Config{Identity: "istiod-a", Key: "canary", EventRecorder: record.NewFakeRecorder(10)})
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range c.ops {
					_ = o(context.Background(), l) // errors are covered elsewhere
				}
				if got := verbs(cs); !slices.Equal(got, c.want) {
					t.Errorf("verbs = %v, want %v", got, c.want)
				}
				for _, a := range cs.Actions() {
					if a.GetNamespace() != testNamespace || a.GetResource().Resource != kind {
						t.Errorf("action %s on %s in %q", a.GetVerb(), a.GetResource(), a.GetNamespace())
					}
				}
			})
		}
	}
}

// capturingRecorder keeps what RecordEvent passes on, object included.
type capturingRecorder struct {
	objects  []runtime.Object
	messages []string
}

func (r *capturingRecorder) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.objects = append(r.objects, object)
	r.messages = append(r.messages, eventType+" "+reason+" "+fmt.Sprintf(messageFmt, args...))
}

func TestRecordEvent(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		kind, objKind, apiVersion string
	}{
		{ConfigMapsResourceLock, "ConfigMap", "v1"},
		{LeasesResourceLock, "Lease", "coordination.k8s.io/v1"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			cs := newClientset(t)
			fr := record.NewFakeRecorder(10)
			fr.IncludeObject = true
			l, err := New(c.kind, testNamespace, testName, cs, Config{Identity: "istiod-a", EventRecorder: fr})
			if err != nil {
				t.Fatal(err)
			}
			suffix := fmt.Sprintf(" involvedObject{kind=%s,apiVersion=%s}", c.objKind, c.apiVersion)

			// Before the object is known, and after it was created.
			l.RecordEvent(corev1.EventTypeNormal, "LeaderElection", "istiod-a became leader")
			if err := l.Create(ctx, Record{HolderIdentity: "istiod-a"}); err != nil {
				t.Fatal(err)
			}
			// A message is not a format string.
			l.RecordEvent(corev1.EventTypeWarning, "LeaderLost", "lost at 100%d of %s")
			want := []string{
				"Normal LeaderElection istiod-a became leader" + suffix,
				"Warning LeaderLost lost at 100%d of %s" + suffix,
			}
			for _, w := range want {
				select {
				case got := <-fr.Events:
					if got != w {
						t.Errorf("event %q, want %q", got, w)
					}
				default:
					t.Errorf("missing event %q", w)
				}
			}
			select {
			case extra := <-fr.Events:
				t.Errorf("unexpected event %q", extra)
			default:
			}
		})
	}
}

// TestRecordEventObject: the event is about the lock object, identified well
// enough for the API server to attach it (name, namespace and, once read, UID).
func TestRecordEventObject(t *testing.T) {
	ctx := context.Background()
	for _, kind := range lockKinds {
		t.Run(kind, func(t *testing.T) {
			cs := newClientset(t)
			cm := seededConfigMap(nil)
			lease := seededLease(t)
			lease.UID = cm.UID
			if err := cs.Tracker().Add(cm); err != nil {
				t.Fatal(err)
			}
			if err := cs.Tracker().Add(lease); err != nil {
				t.Fatal(err)
			}
			rec := &capturingRecorder{}
			l, err := New(kind, testNamespace, testName, cs, Config{Identity: "istiod-a", EventRecorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			l.RecordEvent(corev1.EventTypeNormal, "Before", "unread")
			if _, _, err := l.Get(ctx); err != nil {
				t.Fatal(err)
			}
			l.RecordEvent(corev1.EventTypeNormal, "After", "read")
			if len(rec.objects) != 2 {
				t.Fatalf("%d events, want 2", len(rec.objects))
			}
			for i, wantUID := range []string{"", string(cm.UID)} {
				m, ok := rec.objects[i].(metav1.Object)
				if !ok {
					t.Fatalf("event object %T has no metadata", rec.objects[i])
				}
				if m.GetName() != testName || m.GetNamespace() != testNamespace || string(m.GetUID()) != wantUID {
					t.Errorf("event %d about %s/%s uid %q, want %s/%s uid %q",
						i, m.GetNamespace(), m.GetName(), m.GetUID(), testNamespace, testName, wantUID)
				}
			}
			if rec.messages[1] != "Normal After read" {
				t.Errorf("message = %q", rec.messages[1])
			}
		})
	}
}

func TestRecordEventNilRecorder(t *testing.T) {
	cs := newClientset(t)
	for _, kind := range lockKinds {
		l, err := New(kind, testNamespace, testName, cs, Config{Identity: "istiod-a"})
		if err != nil {
			t.Fatal(err)
		}
		l.RecordEvent(corev1.EventTypeNormal, "LeaderElection", "no recorder: nothing happens")
	}
	if len(cs.Actions()) != 0 {
		t.Errorf("RecordEvent without a recorder talked to the API server: %v", verbs(cs))
	}
}
