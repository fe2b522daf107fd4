package sim

import (
	"context"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// Resources the in-memory API serves to actors.
const (
	configMaps = "configmaps"
	leases     = "leases"
)

// apiEvent is one change of an object, as a watch reports it.
type apiEvent struct {
	at       time.Time
	resource string
	typ      watch.EventType
	obj      runtime.Object
	rv       int64
	writer   string // the actor that wrote it; "" for the world
}

// apiServer is the in-memory API: the fake clientset of package kubetest
// (which enforces resourceVersion on updates) plus a log of every change and
// watches whose delivery the world controls. Every mutating call runs under
// mu, so the log is in the order of the writes.
type apiServer struct {
	cs    *fake.Clientset
	clock *simClock
	ns    string
	// gate orders the requests of actors (nil outside a world).
	gate *callGate

	mu       sync.Mutex
	events   []apiEvent
	lastRV   int64
	watchers []*simWatcher
	onChange func(apiEvent) // called under mu for every change
}

func newAPIServer(clk *simClock, ns string) *apiServer {
	return &apiServer{cs: kubetest.NewUnmanagedClientset(), clock: clk, ns: ns}
}

// mutate runs a write of writer against the fake clientset and logs its
// effect.
func (a *apiServer) mutate(writer, resource string, typ watch.EventType, write func() (runtime.Object, error)) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	obj, err := write()
	if err != nil {
		return obj, err
	}
	a.logLocked(writer, resource, typ, obj)
	return obj, nil
}

func (a *apiServer) logLocked(writer, resource string, typ watch.EventType, obj runtime.Object) {
	rv := objectRV(obj)
	if rv > a.lastRV {
		a.lastRV = rv
	}
	ev := apiEvent{at: a.clock.Now(), resource: resource, typ: typ, obj: obj.DeepCopyObject(), rv: rv, writer: writer}
	a.events = append(a.events, ev)
	for _, w := range a.watchers {
		w.offer(ev)
	}
	if a.onChange != nil {
		a.onChange(ev)
	}
}

// list lists a resource with the resourceVersion of the latest change, so
// that a watch from it misses nothing.
func (a *apiServer) list(resource string, list func() (runtime.Object, error)) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	obj, err := list()
	if err != nil {
		return nil, err
	}
	if lm, lerr := meta.ListAccessor(obj); lerr == nil {
		lm.SetResourceVersion(strconv.FormatInt(a.lastRV, 10))
	}
	return obj, nil
}

// openWatch starts a watch of resource for actor from resourceVersion rv:
// it reports every logged change after rv (a deletion of the object at rv
// included), and every later one, when the world delivers it.
func (a *apiServer) openWatch(actor *actorState, resource, rv string) *simWatcher {
	a.mu.Lock()
	defer a.mu.Unlock()
	from, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || from == 0 {
		from = a.lastRV
	}
	w := newSimWatcher(actor, resource, from)
	for _, ev := range a.events {
		w.offer(ev)
	}
	a.watchers = append(a.watchers, w)
	return w
}

// dropWatch forgets a stopped watch.
func (a *apiServer) dropWatch(w *simWatcher) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, x := range a.watchers {
		if x == w {
			a.watchers = append(a.watchers[:i], a.watchers[i+1:]...)
			return
		}
	}
}

// deliver hands every due event to its watchers, one event at a time, and
// calls settle after each: in rounds over the watchers in the order they
// were opened, each sending at most one event a round.
func (a *apiServer) deliver(settle func()) {
	now := a.clock.Now()
	for {
		a.mu.Lock()
		ws := append([]*simWatcher(nil), a.watchers...)
		a.mu.Unlock()
		sent := false
		for _, w := range ws {
			if w.flushOne(now) {
				sent = true
				settle()
			}
		}
		if !sent {
			return
		}
	}
}

// nextDelivery is when the earliest queued event becomes due.
func (a *apiServer) nextDelivery() (time.Time, bool) {
	a.mu.Lock()
	ws := append([]*simWatcher(nil), a.watchers...)
	a.mu.Unlock()
	var best time.Time
	found := false
	for _, w := range ws {
		if t, ok := w.due(); ok && (!found || t.Before(best)) {
			best, found = t, true
		}
	}
	return best, found
}

// breakWatches closes every open watch of actor, as a broken connection does.
func (a *apiServer) breakWatches(actor *actorState) {
	a.mu.Lock()
	ws := append([]*simWatcher(nil), a.watchers...)
	a.mu.Unlock()
	for _, w := range ws {
		if w.actor == actor {
			w.close()
		}
	}
}

func objectRV(obj runtime.Object) int64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	return rv
}

// The world's own writes, made as an operator or another tool would.

// getLock reads the lock object; nil when absent.
func (a *apiServer) getLock(kind, name string) runtime.Object {
	ctx := context.Background()
	var (
		obj runtime.Object
		err error
	)
	if kind == leases {
		obj, err = a.cs.CoordinationV1().Leases(a.ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		obj, err = a.cs.CoreV1().ConfigMaps(a.ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil
	}
	return obj
}

// putLock creates obj, or updates it when update is set.
func (a *apiServer) putLock(kind string, obj runtime.Object, update bool) error {
	ctx := context.Background()
	typ := watch.Added
	if update {
		typ = watch.Modified
	}
	_, err := a.mutate("", kind, typ, func() (runtime.Object, error) {
		switch o := obj.(type) {
		case *coordinationv1.Lease:
			if update {
				return a.cs.CoordinationV1().Leases(a.ns).Update(ctx, o, metav1.UpdateOptions{})
			}
			return a.cs.CoordinationV1().Leases(a.ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			if update {
				return a.cs.CoreV1().ConfigMaps(a.ns).Update(ctx, o, metav1.UpdateOptions{})
			}
			return a.cs.CoreV1().ConfigMaps(a.ns).Create(ctx, o, metav1.CreateOptions{})
		}
		panic("sim: unexpected lock object type")
	})
	return err
}

// deleteLock deletes the lock object, if present.
func (a *apiServer) deleteLock(kind, name string) error {
	ctx := context.Background()
	last := a.getLock(kind, name)
	if last == nil {
		return nil
	}
	_, err := a.mutate("", kind, watch.Deleted, func() (runtime.Object, error) {
		if kind == leases {
			return last, a.cs.CoordinationV1().Leases(a.ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
		return last, a.cs.CoreV1().ConfigMaps(a.ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	return err
}

// annotate sets a foreign annotation or label on the lock object with a
// read-modify-write, as kubectl annotate does; a conflict is returned.
func (a *apiServer) annotate(kind, name, key, value string, label bool) error {
	obj := a.getLock(kind, name)
	if obj == nil {
		return nil
	}
	m, _ := meta.Accessor(obj)
	set := m.GetAnnotations()
	if label {
		set = m.GetLabels()
	}
	if set == nil {
		set = map[string]string{}
	}
	set[key] = value
	if label {
		m.SetLabels(set)
	} else {
		m.SetAnnotations(set)
	}
	return a.putLock(kind, obj, true)
}
