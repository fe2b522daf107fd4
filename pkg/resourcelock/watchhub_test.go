package resourcelock

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// recorder collects what a subscriber receives.
type recorder struct {
	mu      sync.Mutex
	names   []string
	healthy bool
}

func (r *recorder) subscriber() lockwatch.Subscriber {
	return lockwatch.Subscriber{
		OnObject: func(obj any, _ bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.names = append(r.names, lockwatch.ObjectName(obj))
		},
		OnHealth: func(ok bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.healthy = ok
		},
	}
}

func (r *recorder) snapshot() ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...), r.healthy
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newLeaseLocks(t *testing.T, client *fake.Clientset, ns string, n int) []*LeaseLock {
	t.Helper()
	locks := make([]*LeaseLock, n)
	for i := range locks {
		l, err := New(LeasesResourceLock, ns, fmt.Sprintf("lock-%d", i), client, Config{Identity: "me"})
		if err != nil {
			t.Fatal(err)
		}
		locks[i] = l.(*LeaseLock)
	}
	return locks
}

func TestHubOpensOneWatchPerNamespaceAndWakesOnlyTheOwner(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	hub := lockwatch.NewWatchHub()
	locks := newLeaseLocks(t, client, "ns", 20)
	other := newLeaseLocks(t, client, "other", 1)[0]
	recs := make([]*recorder, len(locks)+1)
	var unsubs []func()
	for i, l := range append(locks, other) {
		recs[i] = &recorder{}
		unsubs = append(unsubs, hub.Subscribe(l, recs[i].subscriber()))
	}
	if got := hub.Watches(); got != 2 {
		t.Fatalf("hub runs %d watches for 2 namespaces", got)
	}
	for _, r := range recs {
		waitFor(t, "the watch to list", func() bool { _, ok := r.snapshot(); return ok })
	}
	ctx := context.Background()
	for _, name := range []string{"lock-3", "lock-7", "unrelated"} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if _, err := client.CoordinationV1().Leases("ns").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "lock-3 and lock-7 to be delivered", func() bool {
		a, _ := recs[3].snapshot()
		b, _ := recs[7].snapshot()
		return len(a) == 1 && len(b) == 1
	})
	for i, r := range recs {
		names, _ := r.snapshot()
		want := 0
		if i == 3 || i == 7 {
			want = 1
		}
		if len(names) != want {
			t.Errorf("subscriber %d got %v, want %d object(s) of its own", i, names, want)
		}
	}
	if got := kubetest.CountVerbs(client, "leases"); got["list"] != 2 || got["watch"] != 2 {
		t.Fatalf("21 locks in 2 namespaces sent %v, want one list and one watch per namespace", got)
	}
	for _, u := range unsubs {
		u()
	}
	if got := hub.Watches(); got != 0 {
		t.Fatalf("%d watches still run after every subscriber left", got)
	}
}

func TestHubGivesALateSubscriberTheCachedObject(t *testing.T) {
	defer goleak.VerifyNone(t)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-1", Namespace: "ns", ResourceVersion: "7"}}
	client := fake.NewClientset(lease)
	hub := new(lockwatch.WatchHub) // the zero value is an empty hub
	locks := newLeaseLocks(t, client, "ns", 2)
	first := &recorder{}
	defer hub.Subscribe(locks[0], first.subscriber())()
	waitFor(t, "the watch to list", func() bool { _, ok := first.snapshot(); return ok })

	late := &recorder{}
	defer hub.Subscribe(locks[1], late.subscriber())()
	names, ok := late.snapshot()
	if !ok || len(names) != 1 || names[0] != "lock-1" {
		t.Fatalf("a subscriber joining a listed watch got %v (healthy %v), want lock-1 at once", names, ok)
	}
	if got := kubetest.CountVerbs(client, "leases"); got["list"] != 1 {
		t.Fatalf("the late subscriber listed again: %v", got)
	}
}

func TestHubTellsEverySubscriberWhenTheWatchBreaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	first := watch.NewFake()
	var served sync.Mutex
	calls := 0
	client.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		served.Lock()
		defer served.Unlock()
		calls++
		if calls == 1 {
			return true, first, nil
		}
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	hub := lockwatch.NewWatchHub()
	locks := newLeaseLocks(t, client, "ns", 3)
	recs := []*recorder{{}, {}, {}}
	for i, l := range locks {
		defer hub.Subscribe(l, recs[i].subscriber())()
	}
	for _, r := range recs {
		waitFor(t, "the watch to list", func() bool { _, ok := r.snapshot(); return ok })
	}
	first.Stop() // the connection drops; every later watch fails
	for i, r := range recs {
		waitFor(t, fmt.Sprintf("subscriber %d to see the watch broken", i), func() bool { _, ok := r.snapshot(); return !ok })
	}
}

func TestHubJoinsAndLeavesAtAnyTimeWithoutLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	hub := lockwatch.NewWatchHub()
	locks := newLeaseLocks(t, client, "ns", 8)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			for range 20 {
				var calls sync.Mutex
				left := false
				unsub := hub.Subscribe(l, lockwatch.Subscriber{
					OnObject: func(any, bool) {
						calls.Lock()
						defer calls.Unlock()
						if left {
							t.Error("a subscriber was called after it left")
						}
					},
				})
				time.Sleep(time.Duration(rng.Intn(3)) * time.Millisecond)
				unsub()
				calls.Lock()
				left = true
				calls.Unlock()
			}
		}()
	}
	for i := range 30 {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lock-%d", i%8), Namespace: "ns"}}
		if i < 8 {
			_, _ = client.CoordinationV1().Leases("ns").Create(ctx, lease, metav1.CreateOptions{})
		} else {
			_, _ = client.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if got := hub.Watches(); got != 0 {
		t.Fatalf("%d watches still run after every subscriber left", got)
	}
}

func TestConfigMapWriteAfterMetadataObservationKeepsDataAndConflictsOnChange(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: "ns", ResourceVersion: "5",
			Annotations: map[string]string{LeaderAnnotationKey: `{"holderIdentity":"other","leaseDurationSeconds":30}`, "keep": "me"}},
		Data: map[string]string{"config": "precious"},
	}
	meta := func(rv string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: *cm.ObjectMeta.DeepCopy()}
		m.ResourceVersion = rv
		return m
	}
	tests := []struct {
		name       string
		observedRV string
		wantVerbs  []string
		wantErr    func(error) bool
	}{
		{"same version: read, then write", "5", []string{"get", "update"}, func(err error) bool { return err == nil }},
		{"changed since observed: conflict, no write", "4", []string{"get"}, apierrors.IsConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(cm.DeepCopy())
			l, err := NewConfigMapLock(client.CoreV1(), "ns", "lock", Config{Identity: "me"})
			if err != nil {
				t.Fatal(err)
			}
			rec, _, err := l.Observe(meta(tc.observedRV), false)
			if err != nil || rec.HolderIdentity != "other" {
				t.Fatalf("Observe(metadata) = %+v, %v", rec, err)
			}
			if l.ResourceVersion() != tc.observedRV {
				t.Fatalf("ResourceVersion = %q after observing %q", l.ResourceVersion(), tc.observedRV)
			}
			client.ClearActions()
			err = l.Update(context.Background(), Record{HolderIdentity: "me", LeaseDurationSeconds: 30})
			if !tc.wantErr(err) {
				t.Fatalf("Update: unexpected error %v", err)
			}
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if fmt.Sprint(verbs) != fmt.Sprint(tc.wantVerbs) {
				t.Fatalf("verbs = %v, want %v", verbs, tc.wantVerbs)
			}
			got, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "lock", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Data["config"] != "precious" || got.Annotations["keep"] != "me" {
				t.Fatalf("the write lost data or annotations: %+v", got)
			}
		})
	}
}

func TestSharedWatchFollowsConfigMapMetadataOnlyOnARealServer(t *testing.T) {
	real, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	fakeClient := fake.NewClientset()
	cfg := Config{Identity: "me"}
	build := func(kind string, client kubernetes.Interface) lockwatch.SharedWatchable {
		l, err := New(kind, "ns", "lock", client, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l.(lockwatch.SharedWatchable)
	}
	typedCM, err := NewConfigMapLock(real.CoreV1(), "ns", "lock", cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		lock         lockwatch.SharedWatchable
		wantClient   any
		wantResource string
		wantExample  any
	}{
		{"ConfigMap, real server", build(ConfigMapsResourceLock, real), real, "configmaps (metadata)", &metav1.PartialObjectMetadata{}},
		{"ConfigMap on the typed client, real server", typedCM, real.CoreV1(), "configmaps (metadata)", &metav1.PartialObjectMetadata{}},
		{"ConfigMap, fake clientset", build(ConfigMapsResourceLock, fakeClient), fakeClient, "configmaps", &corev1.ConfigMap{}},
		{"Lease, real server", build(LeasesResourceLock, real), real, "leases", &coordinationv1.Lease{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sw := tc.lock.SharedWatch()
			want := lockwatch.WatchKey{Client: tc.wantClient, Namespace: "ns", Resource: tc.wantResource}
			if sw.Key != want || sw.Name != "lock" {
				t.Fatalf("key %+v name %q, want %+v and lock", sw.Key, sw.Name, want)
			}
			if fmt.Sprintf("%T", sw.Example) != fmt.Sprintf("%T", tc.wantExample) {
				t.Fatalf("example %T, want %T", sw.Example, tc.wantExample)
			}
		})
	}
}

func TestLeaseWritesAfterAWatchedVersionSendOnlyTheUpdate(t *testing.T) {
	client := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-0", Namespace: "ns"}})
	l := newLeaseLocks(t, client, "ns", 1)[0]
	// What the shared watch delivers: the whole Lease.
	seen, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "lock-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Observe(seen, false); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := l.Update(context.Background(), Record{HolderIdentity: "me", LeaseDurationSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	if got := kubetest.CountVerbs(client, "leases"); fmt.Sprint(got) != "map[update:1]" {
		t.Fatalf("a write after a whole-object observation sent %v, want one update", got)
	}
}

// A watch that ends without an error (here: at once, with no event, which
// client-go's reflector calls a very short watch) is not reported to the
// informer's error handler; the reflector waits out a back-off and lists
// again. Until that list has delivered an object, the subscribers must
// know that what they saw may be stale, and that the list's objects come in
// the order of their names: the hub counts the relist as a broken watch.
func TestHubCountsARelistAsABreakUntilItDelivers(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-0", Namespace: "ns"}})
	var mu sync.Mutex
	lists := 0
	release := make(chan struct{})
	client.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists++
		n := lists
		mu.Unlock()
		if n == 2 {
			<-release
		}
		return false, nil, nil // the tracker answers
	})
	watches := make(chan *watch.FakeWatcher, 8)
	client.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watches <- w
		return true, w, nil
	})
	hub := lockwatch.NewWatchHub()
	rec := &recorder{}
	unsubscribe := hub.Subscribe(newLeaseLocks(t, client, "ns", 1)[0], rec.subscriber())
	waitFor(t, "the first list", func() bool { _, ok := rec.snapshot(); return ok })
	(<-watches).Stop()
	waitFor(t, "the relist", func() bool { mu.Lock(); defer mu.Unlock(); return lists >= 2 })
	if _, ok := rec.snapshot(); ok {
		t.Error("while the informer lists again, the hub still reports its watch healthy")
	}
	close(release)
	waitFor(t, "the relist to deliver", func() bool { _, ok := rec.snapshot(); return ok })
	unsubscribe()
}

// watchedLeases is a fake clientset with one Lease whose watches the test
// controls: each opened watch is sent on watches, and lists are counted.
type watchedLeases struct {
	client  *fake.Clientset
	watches chan *watch.FakeWatcher
	mu      sync.Mutex
	lists   int
}

func newWatchedLeases() *watchedLeases {
	wl := &watchedLeases{
		client:  fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-0", Namespace: "ns"}}),
		watches: make(chan *watch.FakeWatcher, 8),
	}
	wl.client.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		wl.mu.Lock()
		wl.lists++
		wl.mu.Unlock()
		return false, nil, nil // the tracker answers
	})
	wl.client.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		wl.watches <- w
		return true, w, nil
	})
	return wl
}

func (wl *watchedLeases) listed() int { wl.mu.Lock(); defer wl.mu.Unlock(); return wl.lists }

// healthLog records what the hub reports of its watch's health.
type healthLog struct {
	mu  sync.Mutex
	log []bool
}

func (h *healthLog) subscriber() lockwatch.Subscriber {
	return lockwatch.Subscriber{
		OnObject: func(any, bool) {},
		OnHealth: func(ok bool) { h.mu.Lock(); h.log = append(h.log, ok); h.mu.Unlock() },
	}
}

func (h *healthLog) reports() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.log...)
}

func (h *healthLog) healthy() bool {
	r := h.reports()
	return len(r) > 0 && r[len(r)-1]
}

// watchDeliveredAnEvent subscribes to a hub's watch of wl's Lease, waits
// for the first list, and has the first watch deliver an event.
func watchDeliveredAnEvent(t *testing.T) (*watchedLeases, *healthLog, *watch.FakeWatcher, func()) {
	t.Helper()
	wl := newWatchedLeases()
	health := &healthLog{}
	unsubscribe := lockwatch.NewWatchHub().Subscribe(newLeaseLocks(t, wl.client, "ns", 1)[0], health.subscriber())
	waitFor(t, "the first list", health.healthy)
	first := <-wl.watches
	first.Modify(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-0", Namespace: "ns", ResourceVersion: "5"}})
	return wl, health, first, unsubscribe
}

// A watch the server ends after it delivered an event (its routine
// timeout) is opened again at once by the reflector, from the last version
// seen, without a list: it misses nothing, so the hub reports no break,
// and the electors that trust it neither write nor poll.
func TestHubReportsNoBreakWhenAWatchEndsAndIsOpenedAgain(t *testing.T) {
	defer goleak.VerifyNone(t)
	wl, health, first, unsubscribe := watchDeliveredAnEvent(t)
	defer unsubscribe()
	first.Stop() // the server ends the watch
	select {
	case <-wl.watches:
	case <-time.After(10 * time.Second):
		t.Fatal("the reflector did not open the next watch")
	}
	if n := wl.listed(); n != 1 {
		t.Fatalf("the informer listed %d times, want 1: the watch should have been opened again from the last version", n)
	}
	for _, ok := range health.reports() {
		if !ok {
			t.Fatalf("the hub reported a break (%v) for a watch that was opened again from the last version seen", health.reports())
		}
	}
}

// A watch that delivers an error event (here: its version has expired) is
// given up by the reflector, which lists again only after a back-off and
// tells no error handler: the hub counts the watch broken from the error
// until the list delivers, whatever it handed on before.
func TestHubCountsAWatchEndedByAnErrorBrokenUntilTheNextList(t *testing.T) {
	defer goleak.VerifyNone(t)
	wl, health, first, unsubscribe := watchDeliveredAnEvent(t)
	defer unsubscribe()
	gone := apierrors.NewResourceExpired("too old resource version")
	first.Error(&gone.ErrStatus)
	waitFor(t, "the error to count as a break", func() bool { return !health.healthy() })
	if n := wl.listed(); n != 1 {
		t.Fatalf("the break was reported only once the informer listed again (%d lists)", n)
	}
	waitFor(t, "the list after the back-off to make the watch healthy", func() bool { return wl.listed() >= 2 && health.healthy() })
}
