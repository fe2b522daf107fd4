package sim

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
	// known is what each actor's watch of a resource has taken in: the
	// objects of its latest list and the events delivered since, by name.
	// A list after a broken watch answers with it (see list).
	known map[watchKey]map[string]runtime.Object
	// catchUp holds, from such a list to the watch that follows it, the
	// changes that list left out.
	catchUp map[watchKey][]apiEvent
}

// watchKey names the watch of one resource by one actor.
type watchKey struct{ actor, resource string }

func newAPIServer(clk *simClock, ns string) *apiServer {
	cs := kubetest.NewUnmanagedClientset()
	assignUIDs(cs)
	return &apiServer{cs: cs, clock: clk, ns: ns,
		known: map[watchKey]map[string]runtime.Object{}, catchUp: map[watchKey][]apiEvent{}}
}

// assignUIDs makes cs give every object created without a uid one of its
// own and keep it through updates, as the API server does: an object
// deleted and created again under the same name has a new uid. (The Pods
// of the model come with the uids it chose.)
func assignUIDs(cs *fake.Clientset) {
	var mu sync.Mutex
	next := 0
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetUID() == "" {
			mu.Lock()
			next++
			m.SetUID(types.UID("uid-" + strconv.Itoa(next)))
			mu.Unlock()
		}
		return false, nil, nil
	})
	cs.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		m, err := meta.Accessor(a.(k8stesting.UpdateAction).GetObject())
		if err != nil || m.GetUID() != "" {
			return false, nil, nil
		}
		if stored, err := cs.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName()); err == nil {
			if sm, err := meta.Accessor(stored); err == nil {
				m.SetUID(sm.GetUID())
			}
		}
		return false, nil, nil
	})
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

// list lists a resource for actor with the resourceVersion of the latest
// change, so that a watch from it misses nothing.
//
// A first list (resourceVersion "" or "0") shows every object as it is.
// A list after a broken watch (client-go's reflector then asks from the
// version it last saw) shows the objects as the actor's watch last saw
// them, and the watch opened next delivers what changed meanwhile first,
// one object at a time in the order of their names (deletions last), as
// the world delivers every event: the same objects in the same order a
// fresh list would show, but each followed by a settled world. A fresh
// list would be handed to subscribers all at once by the informer's own
// goroutines, racing the elector loops that its first object wakes; how
// far the informer got when a loop looked would then be up to the Go
// scheduler, not the seed. The order of names is kept: unlike a watch, a
// list does not show changes in the order they were made, and electors
// must cope with that.
func (a *apiServer) list(actor, resource, rv string, list func() (runtime.Object, error)) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	obj, err := list()
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(strconv.FormatInt(a.lastRV, 10))
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	key := watchKey{actor, resource}
	current := make(map[string]runtime.Object, len(items))
	for _, it := range items {
		if m, err := meta.Accessor(it); err == nil {
			current[m.GetName()] = it
		}
	}
	seen, relist := a.known[key]
	if !relist || rv == "" || rv == "0" {
		a.known[key] = current
		delete(a.catchUp, key)
		return obj, nil
	}
	a.catchUp[key] = a.changes(resource, seen, current)
	kept := make([]runtime.Object, 0, len(seen))
	for _, name := range sortedNames(seen) {
		kept = append(kept, seen[name].DeepCopyObject())
	}
	if err := meta.SetList(obj, kept); err != nil {
		return nil, err
	}
	return obj, nil
}

// changes are the events that take a watch that saw seen to current: the
// objects added or changed, by name, then the ones deleted, by name.
func (a *apiServer) changes(resource string, seen, current map[string]runtime.Object) []apiEvent {
	now := a.clock.Now()
	var evs []apiEvent
	for _, name := range sortedNames(current) {
		obj := current[name]
		typ := watch.Modified
		if old, ok := seen[name]; !ok {
			typ = watch.Added
		} else if objectRV(old) == objectRV(obj) {
			continue
		}
		evs = append(evs, apiEvent{at: now, resource: resource, typ: typ, obj: obj.DeepCopyObject(), rv: objectRV(obj)})
	}
	for _, name := range sortedNames(seen) {
		if _, ok := current[name]; !ok {
			evs = append(evs, apiEvent{at: now, resource: resource, typ: watch.Deleted, obj: seen[name].DeepCopyObject(), rv: objectRV(seen[name])})
		}
	}
	return evs
}

// noteDelivered updates what the watch of w's actor has seen with ev.
func (a *apiServer) noteDelivered(w *simWatcher, ev apiEvent) {
	m, err := meta.Accessor(ev.obj)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.known[watchKey{w.actor.name, w.resource}]
	if seen == nil {
		return
	}
	if ev.typ == watch.Deleted {
		delete(seen, m.GetName())
		return
	}
	seen[m.GetName()] = ev.obj
}

func sortedNames(objs map[string]runtime.Object) []string {
	names := make([]string, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
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
	key := watchKey{actor.name, resource}
	if evs, ok := a.catchUp[key]; ok {
		// What the list before this watch left out comes first.
		delete(a.catchUp, key)
		w.queue = append(w.queue, evs...)
	}
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
			if ev, ok := w.flushOne(now); ok {
				a.noteDelivered(w, ev)
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
