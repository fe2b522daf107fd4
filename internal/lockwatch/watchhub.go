// Package lockwatch shares watches of lock objects: a WatchHub runs one
// informer per client, namespace and kind for every lock that subscribes to
// it, and wakes each subscriber only for its own object. Package election
// makes one hub per Shared; nothing is shared beyond one hub.
package lockwatch

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/refcount"
)

// WatchKey names one shared watch: every lock of the same kind in the same
// namespace, reached through the same client.
type WatchKey struct {
	// Client is the client the watch goes through; it must be comparable
	// (clientsets are pointers).
	Client any
	// Namespace is the namespace watched.
	Namespace string
	// Resource is the kind of object watched, as its API resource name.
	Resource string
}

// SharedWatch is how a lock is followed through a WatchHub.
type SharedWatch struct {
	// Key identifies the watch shared with other locks.
	Key WatchKey
	// Name is the lock object's name within the watch.
	Name string
	// ListWatch builds the list-watch of every object of the key. It is
	// called once per shared watch, by its first subscriber.
	ListWatch func() cache.ListerWatcher
	// Example is an empty object of the type ListWatch delivers.
	Example runtime.Object
}

// ErrForeignObject is returned by a lock's Observe (lockcap.Watchable) for an
// object a watch delivered that is not the lock's own (a watch that ignored
// its field selector).
var ErrForeignObject = errors.New("object is not the lock object")

// Source is a lock whose object can be followed by a watch of its own
// (lockcap.Watchable is one).
type Source interface {
	// ListWatch lists and watches only the lock object.
	ListWatch() cache.ListerWatcher
	// ExampleObject is an empty object of the lock's type.
	ExampleObject() runtime.Object
}

// SharedWatchable is a Source whose object can be followed through a
// watch shared with the other locks of the same client, namespace and kind.
// The objects the shared watch delivers may be of another type than the
// lock's Get reads (for example metadata only); its Observe accepts them.
type SharedWatchable interface {
	Source
	SharedWatch() SharedWatch
}

// Subscriber receives what a WatchHub sees of one lock object. Both
// functions are called from the hub's delivery goroutine, one call at a
// time, and must not block.
type Subscriber struct {
	// OnObject receives the newest version of the object, or its deletion
	// (obj may then be a cache.DeletedFinalStateUnknown).
	OnObject func(obj any, deleted bool)
	// OnHealth receives true once the watch has listed (or delivered an
	// event) and false when it breaks, until it is back.
	OnHealth func(ok bool)
}

// WatchHub runs one informer per WatchKey for all the locks that subscribe
// to it, and wakes each subscriber only for its own object. The informer is
// started by the first subscriber and stopped by the last, so 1000 electors
// following Leases in one namespace through one hub open one watch instead
// of 1000.
//
// Nothing is shared beyond one hub: the program creates a hub and hands it
// to every lock follower that should share watches (package election's
// Group does so for its elections), and two hubs never share a watch.
//
// A WatchHub is safe for concurrent use. It runs goroutines only while it
// has subscribers, so an unused hub needs no stopping. The zero value is an
// empty hub, as NewWatchHub returns.
type WatchHub struct {
	watches refcount.Registry[WatchKey, *hubEntry]
}

// NewWatchHub returns an empty hub.
func NewWatchHub() *WatchHub { return &WatchHub{} }

// Watches is the number of informers the hub runs now.
func (h *WatchHub) Watches() int { return h.watches.Len() }

// Subscribe follows lock's object until the returned function is called.
// That function returns once the subscriber will not be called again and, if
// it was the last subscriber of its watch, once the watch's goroutines have
// stopped. A lock that is not a SharedWatchable (or whose client cannot be a
// map key) gets a watch of its own, restricted to its object.
//
// A subscriber joining a watch that has already listed is called at once
// with the object as cached (if it exists) and with the watch's health.
func (h *WatchHub) Subscribe(lock Source, s Subscriber) (unsubscribe func()) {
	sw := sharedWatchOf(lock)
	return h.join(sw, sw.Name, s)
}

// SubscribeAll follows every object of lock's shared watch (the objects of
// its kind in its namespace, through its client) until the returned
// function is called, as Subscribe does for one object. A subscriber
// joining a watch that has already listed is called at once with every
// cached object.
func (h *WatchHub) SubscribeAll(lock Source, s Subscriber) (unsubscribe func()) {
	return h.join(sharedWatchOf(lock), "", s)
}

// join adds a subscriber of the named object ("" for all) to sw's watch,
// starting the watch if it is the first. The watch stops, its goroutines
// awaited, when its last subscriber leaves.
func (h *WatchHub) join(sw SharedWatch, name string, s Subscriber) (unsubscribe func()) {
	// Starting a watch cannot fail (a broken watch reports its health), so
	// Acquire returns no error.
	e, release, _ := h.watches.Acquire(sw.Key, func() (*hubEntry, func(), error) {
		e := startHubEntry(sw)
		return e, e.stop, nil
	})
	sub := &hubSub{name: name, Subscriber: s}
	e.add(sub)
	var once sync.Once
	return func() {
		once.Do(func() {
			e.remove(sub)
			release()
		})
	}
}

// privateWatch is the client of a WatchKey that no other lock shares: every
// new one is a distinct pointer.
type privateWatch struct{ _ byte }

// sharedWatchOf returns how lock is followed: its shared watch when it has
// one, otherwise a watch of its own.
func sharedWatchOf(lock Source) SharedWatch {
	if s, ok := lock.(SharedWatchable); ok {
		sw := s.SharedWatch()
		if sw.Key.Client != nil && reflect.TypeOf(sw.Key.Client).Comparable() && sw.ListWatch != nil && sw.Example != nil {
			return sw
		}
	}
	return SharedWatch{
		Key:       WatchKey{Client: new(privateWatch)},
		ListWatch: lock.ListWatch,
		Example:   lock.ExampleObject(),
	}
}

// hubSub is one subscription; an empty name receives every object.
type hubSub struct {
	name string
	Subscriber
}

// hubEntry is one shared informer and its subscribers.
type hubEntry struct {
	key      WatchKey
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// mu serialises deliveries with joins and leaves, so that a subscriber
	// never sees an older version after a newer one and is never called
	// after it left.
	mu     sync.Mutex
	byName map[string][]*hubSub
	ok     bool
	// ended is set when the reflector gave its watch up (see
	// followWatches), until it lists again or opens the next one: no watch
	// is open meanwhile, whatever the informer still hands on from the one
	// that ended.
	ended bool
	// synced is set once the first list has been delivered; events before
	// it do not make the watch healthy.
	synced bool
}

// ListWatch is the ListerWatcher a lock hands the hub: its list and watch
// of the lock's objects, and whether the client can stream the initial
// list (fake clientsets cannot). The hub wraps its list to learn when the
// informer relists.
type ListWatch struct {
	cache.ListWatch
	NoWatchList bool
}

// IsWatchListSemanticsUnSupported is consulted by client-go's reflector.
func (lw *ListWatch) IsWatchListSemanticsUnSupported() bool { return lw.NoWatchList }

func startHubEntry(sw SharedWatch) *hubEntry {
	e := &hubEntry{key: sw.Key, byName: map[string][]*hubSub{}}
	lw := sw.ListWatch()
	if l, ok := lw.(*ListWatch); ok && l.ListWithContextFunc != nil {
		list := l.ListWithContextFunc
		l.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			e.relisting()
			obj, err := list(ctx, o)
			if err == nil && meta.LenList(obj) == 0 {
				e.listedNothing()
			}
			return obj, err
		}
	}
	if l, ok := lw.(*ListWatch); ok && l.WatchFuncWithContext != nil {
		l.WatchFuncWithContext = e.followWatches(l.WatchFuncWithContext)
	}
	e.informer = cache.NewSharedIndexInformer(lw, sw.Example, 0, cache.Indexers{})
	_ = e.informer.SetTransform(trimForCache)
	_ = e.informer.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) { e.setHealth(false) })
	reg, _ := e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.deliver(obj, false) },
		UpdateFunc: func(_, obj any) { e.deliver(obj, false) },
		DeleteFunc: func(obj any) { e.deliver(obj, true) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		e.informer.RunWithContext(ctx)
	}()
	go func() {
		defer e.wg.Done()
		// The handler's registration has synced once the whole first list
		// has been delivered to it: then, and not at the first object, the
		// cache tells every subscriber whether its object exists. Electors
		// wait for it before their first attempt, so it is checked often.
		if reg != nil && waitSynced(ctx, reg.HasSynced) {
			e.setHealth(true)
		}
	}()
	return e
}

// trimForCache drops what no lock reads from an object before the shared
// watch caches it and hands it to subscribers: the managed fields, often a
// third of a small object such as a Lease. It trims a copy: a watch may
// share the objects it delivers with their sender (the fake clientset's
// does), so changing them in place would race with it. A lock writing over
// such an object sends no managed fields, which the API server answers by
// keeping the stored ones.
func trimForCache(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok || len(o.GetManagedFields()) == 0 {
		return obj, nil
	}
	if r, ok := obj.(runtime.Object); ok {
		c := r.DeepCopyObject()
		if m, ok := c.(metav1.Object); ok {
			m.SetManagedFields(nil)
			return c, nil
		}
	}
	return obj, nil
}

// syncPoll is how often a new shared watch checks whether it has listed.
const syncPoll = 5 * time.Millisecond

// waitSynced polls synced until it is true (true) or ctx ends (false).
func waitSynced(ctx context.Context, synced func() bool) bool {
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// stop ends the informer and waits for its goroutines.
func (e *hubEntry) stop() {
	e.cancel()
	e.wg.Wait()
}

// add registers sub and tells it what the watch already knows: the cached
// object (every cached object for a subscriber of all), even while the first list is being delivered (the handler may
// have passed it before sub joined), and the health once listed. The cache
// is never behind what the handler has delivered, and a version delivered
// again later is one the lock already holds or an older one it ignores.
func (e *hubEntry) add(sub *hubSub) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byName[sub.name] = append(e.byName[sub.name], sub)
	if sub.name == "" {
		for _, obj := range e.informer.GetStore().List() {
			sub.object(obj, false)
		}
	} else {
		key := sub.name
		if e.key.Namespace != "" {
			key = e.key.Namespace + "/" + sub.name
		}
		if obj, exists, err := e.informer.GetStore().GetByKey(key); err == nil && exists {
			sub.object(obj, false)
		}
	}
	if e.ok {
		sub.health(true)
	}
}

func (e *hubEntry) remove(sub *hubSub) {
	e.mu.Lock()
	defer e.mu.Unlock()
	subs := e.byName[sub.name]
	for i, s := range subs {
		if s == sub {
			subs = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if len(subs) == 0 {
		delete(e.byName, sub.name)
	} else {
		e.byName[sub.name] = subs
	}
}

// deliver wakes the subscribers of obj's name, and those of every name. An
// event also means the watch works.
func (e *hubEntry) deliver(obj any, deleted bool) {
	name := ObjectName(obj)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ended {
		e.markHealthy()
	}
	e.subscribersOf(name, func(sub *hubSub) { sub.object(obj, deleted) })
	if e.ended {
		// Handed on from a watch that has ended since: no proof that a
		// watch works, whatever the subscriber made of the delivery.
		e.subscribersOf(name, func(sub *hubSub) { sub.health(false) })
	}
}

// subscribersOf calls f for the subscribers of the object name, then for
// those of every name; e.mu is held.
func (e *hubEntry) subscribersOf(name string, f func(*hubSub)) {
	for _, sub := range e.byName[name] {
		f(sub)
	}
	if name != "" {
		for _, sub := range e.byName[""] {
			f(sub)
		}
	}
}

func (e *hubEntry) setHealth(ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok {
		e.synced = true
		if !e.ended {
			e.markHealthy()
		}
		return
	}
	if !e.ok {
		return
	}
	e.ok = false
	e.each(func(s *hubSub) { s.health(false) })
}

// relisting is called as the informer lists again after its first list:
// its watch has ended, and client-go's reflector may have waited out a
// back-off with no watch open (counted as broken since it gave the watch
// up: see followWatches). What the subscribers saw is stale, and
// the list's objects will reach them in the order of their names, not of
// their writes (a session's echo then proves nothing about the Leases
// named after it); so the watch counts as broken until the list delivers
// its first object, as after a failed request.
func (e *hubEntry) relisting() {
	e.mu.Lock()
	synced := e.synced
	e.ended = false // the list's deliveries make the watch healthy again
	e.mu.Unlock()
	if synced {
		e.setHealth(false)
	}
}

// veryShortWatch is how long a watch that delivered nothing must last for
// client-go's reflector to open the next one at once: one that the server
// closes sooner it gives up, as after an error event.
const veryShortWatch = time.Second

// followWatches wraps the informer's watch function so that the hub knows
// when no watch is open. When a watch ends, client-go's reflector either
// opens the next one at once from the last version it saw (the watch lasted
// a second or delivered an event: the server's routine timeout), which
// misses nothing, or gives it up (it delivered an error, such as an expired
// version, or ended within a second without an event) and lists again only
// after a back-off of up to half a minute, reporting nothing to the error
// handler. In the second case no watch is open until that list, yet what
// the watch delivered last made the hub healthy, and subscribers that trust
// the watch would wait for changes nobody delivers: the hub counts such an
// end as a break (see givenUp). A watch that streams the initial list
// (SendInitialEvents) is a list, and counts as one (see relisting).
func (e *hubEntry) followWatches(open cache.WatchFuncWithContext) cache.WatchFuncWithContext {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if o.SendInitialEvents != nil && *o.SendInitialEvents {
			e.relisting()
		}
		start := time.Now() // the reflector times the watch from before it asks, by the real clock
		w, err := open(ctx, o)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		if e.ended {
			// Opened again without a list (the reflector retries an
			// internal error at once): from the last version seen, it
			// delivers every change since, in a new period of health.
			e.ended = false
			e.markHealthy()
		}
		e.mu.Unlock()
		return newJudgedWatch(w, start, e.givenUp), nil
	}
}

// givenUp is called when the reflector is about to give its watch up: the
// watch counts as broken until the informer lists again or opens the next
// watch, whatever the informer still hands on from the one that ended.
func (e *hubEntry) givenUp() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended, e.ok = true, false
	// Every subscriber, even while the hub has not reported the first
	// list yet: a follower counts a delivery as a working watch.
	e.each(func(s *hubSub) { s.health(false) })
}

// judgedWatch hands a watch's events on to the reflector and judges, as
// the reflector will, whether its end gives the watch up: after an error
// event, or when it ends within veryShortWatch without an event. It tells
// the hub before the reflector can act on it.
type judgedWatch struct {
	src  watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newJudgedWatch(src watch.Interface, start time.Time, givenUp func()) *judgedWatch {
	w := &judgedWatch{src: src, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.forward(start, givenUp)
	return w
}

func (w *judgedWatch) forward(start time.Time, givenUp func()) {
	defer close(w.out)
	events := 0
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-w.src.ResultChan():
			if !ok {
				if events == 0 && time.Since(start) < veryShortWatch {
					givenUp()
				}
				return
			}
			if ev.Type == watch.Error {
				givenUp()
			}
			events++
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}
}

// ResultChan implements watch.Interface.
func (w *judgedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface.
func (w *judgedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.src.Stop()
	})
}

// listedNothing is called when a list found no object: nothing will be
// delivered to make the watch healthy again, unless the cache held objects
// that the list now deletes.
func (e *hubEntry) listedNothing() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.informer.GetStore().ListKeys()) == 0 {
		e.markHealthy()
	}
}

// markHealthy records a working watch; e.mu is held.
func (e *hubEntry) markHealthy() {
	if e.ok || !e.synced {
		return
	}
	e.ok = true
	e.each(func(s *hubSub) { s.health(true) })
}

func (e *hubEntry) each(f func(*hubSub)) {
	for _, subs := range e.byName {
		for _, s := range subs {
			f(s)
		}
	}
}

func (s *hubSub) object(obj any, deleted bool) {
	if s.OnObject != nil {
		s.OnObject(obj, deleted)
	}
}

func (s *hubSub) health(ok bool) {
	if s.OnHealth != nil {
		s.OnHealth(ok)
	}
}

// ObjectName is the name of a delivered object or tombstone; "" when it has
// none.
func ObjectName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if tomb.Obj == nil {
			_, name, _ := cache.SplitMetaNamespaceKey(tomb.Key)
			return name
		}
		obj = tomb.Obj
	}
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}
