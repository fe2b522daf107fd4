package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/election/lockread"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// lock is one election lock as the demo last saw it through its watch.
type lock struct {
	Name          string
	Kind          election.LockKind
	Holder        string
	Key           string
	LeaseDuration time.Duration
	Transitions   int
	// HolderSince is when the demo saw the current holder (or the empty
	// holder) appear: the end point of every handover it measures.
	HolderSince time.Time
	// Written is when the demo last saw the object change at all (a renew,
	// a handover request, ...). Electors judge expiry the same way: from
	// when they saw the last change, by their own clock.
	Written time.Time
	Err     string
}

// lockWatcher follows every lock in the mesh namespace with two informers
// (ConfigMaps and Leases) and lets the story wait for conditions on them.
// Timestamps are taken when an event arrives, so a measured handover ends
// when the new record reached a watcher, as it does for the electors.
type lockWatcher struct {
	factory informers.SharedInformerFactory

	mu      sync.Mutex
	locks   map[string]lock // by kind/name
	history map[string][]change
	status  map[string]string
	changed chan struct{} // closed and replaced on every change
}

// change is a new holder of a lock (or the empty holder of a released one),
// at the time the watch delivered it.
type change struct {
	Holder, Key string
	At          time.Time
}

func newLockWatcher(client kubernetes.Interface, namespace string) (*lockWatcher, error) {
	w := &lockWatcher{
		factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace)),
		locks:   map[string]lock{},
		history: map[string][]change{},
		changed: make(chan struct{}),
	}
	cms := w.factory.Core().V1().ConfigMaps().Informer()
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observeConfigMap(obj, false) },
		UpdateFunc: func(_, obj any) { w.observeConfigMap(obj, false) },
		DeleteFunc: func(obj any) { w.observeConfigMap(obj, true) },
	}); err != nil {
		return nil, err
	}
	leases := w.factory.Coordination().V1().Leases().Informer()
	if _, err := leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observeLease(obj, false) },
		UpdateFunc: func(_, obj any) { w.observeLease(obj, false) },
		DeleteFunc: func(obj any) { w.observeLease(obj, true) },
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// start runs the informers until ctx ends and waits for their first list.
func (w *lockWatcher) start(ctx context.Context) error {
	w.factory.Start(ctx.Done())
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watching %v in the mesh namespace: cache did not sync", typ)
		}
	}
	return nil
}

// stop waits for the informers to stop; their context must be done.
func (w *lockWatcher) stop() { w.factory.Shutdown() }

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (w *lockWatcher) observeConfigMap(obj any, deleted bool) {
	cm, ok := tombstone(obj).(*corev1.ConfigMap)
	if !ok {
		return
	}
	if cm.Name == statusConfigMap {
		w.mu.Lock()
		w.status = nil
		if !deleted {
			w.status = cm.Data
		}
		w.mu.Unlock()
		w.notify()
		return
	}
	rec, err := lockread.Object(cm)
	if rec == nil && err == nil {
		return // not a lock
	}
	l := lock{Name: cm.Name, Kind: election.ConfigMapLock}
	if err != nil {
		l.Err = err.Error()
	} else {
		l.fill(rec)
	}
	w.update(l, deleted)
}

func (w *lockWatcher) observeLease(obj any, deleted bool) {
	lease, ok := tombstone(obj).(*coordinationv1.Lease)
	if !ok {
		return
	}
	l := lock{Name: lease.Name, Kind: election.LeaseLock}
	l.fill(resourcelock.LeaseToRecord(lease))
	w.update(l, deleted)
}

func (l *lock) fill(rec *resourcelock.Record) {
	l.Holder = rec.HolderIdentity
	l.Key = rec.HolderKey
	l.LeaseDuration = time.Duration(rec.LeaseDurationSeconds) * time.Second
	l.Transitions = rec.LeaderTransitions
}

func (w *lockWatcher) update(l lock, deleted bool) {
	now := time.Now()
	id := string(l.Kind) + "/" + l.Name
	w.mu.Lock()
	old, seen := w.locks[id]
	switch {
	case deleted:
		delete(w.locks, id)
	default:
		l.Written = now
		l.HolderSince = old.HolderSince
		if !seen || old.Holder != l.Holder || old.Key != l.Key {
			l.HolderSince = now
			w.history[l.Name] = append(w.history[l.Name], change{Holder: l.Holder, Key: l.Key, At: now})
		}
		w.locks[id] = l
	}
	w.mu.Unlock()
	w.notify()
}

func (w *lockWatcher) notify() {
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// snapshot returns every lock sorted by name, and the data of the status
// ConfigMap (nil when absent).
func (w *lockWatcher) snapshot() ([]lock, map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]lock, 0, len(w.locks))
	for _, l := range w.locks {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, w.status
}

// get returns the lock of that name (either kind).
func (w *lockWatcher) get(name string) (lock, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.locks {
		if l.Name == name {
			return l, true
		}
	}
	return lock{}, false
}

// changesSince returns the holder changes of the lock named name seen after t.
func (w *lockWatcher) changesSince(name string, t time.Time) []change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []change
	for _, c := range w.history[name] {
		if c.At.After(t) {
			out = append(out, c)
		}
	}
	return out
}

// waitLock waits until the lock named name satisfies cond and returns it.
// It fails with a description of the lock's last state after timeout.
func (w *lockWatcher) waitLock(ctx context.Context, timeout time.Duration, name, what string, cond func(lock) bool) (lock, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		l, ok := w.get(name)
		if ok && cond(l) {
			return l, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			state := "does not exist"
			if ok {
				state = fmt.Sprintf("is held by %q (key %q)", l.Holder, l.Key)
			}
			if ctx.Err() == context.DeadlineExceeded {
				return l, fmt.Errorf("%s: not within %v; %s %s", what, timeout, name, state)
			}
			return l, ctx.Err()
		}
	}
}

// holdsSteady fails if the holder of the lock named name changes within d.
func (w *lockWatcher) holdsSteady(ctx context.Context, d time.Duration, name string) error {
	start, ok := w.get(name)
	if !ok {
		return fmt.Errorf("%s does not exist", name)
	}
	l, err := w.waitLock(ctx, d, name, "", func(l lock) bool { return l.Holder != start.Holder })
	if err == nil {
		return fmt.Errorf("%s changed hands from %s to %q", name, start.Holder, l.Holder)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}
