package elector

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// lockWatch follows the lock object with an informer restricted to it. The
// informer's goroutines only hand over the newest object; the election loop
// takes it (ingest) when it is ready, so the lock is only ever touched by
// the loop.
type lockWatch struct {
	le   *LeaderElector
	lock resourcelock.Watchable

	// events has room for one wake-up; the newest object waits in pending.
	events chan struct{}

	mu      sync.Mutex
	pending any
	deleted bool
	fresh   bool // pending or deleted holds something not yet ingested

	// ok is true from the first successful list or event until the watch
	// reports an error, and again from the next event.
	ok atomic.Bool

	// recordGone is set by ingest when the lock object was deleted or
	// replaced by one without a record while this candidate holds it; the
	// leader then writes its record again at once (used by the loop only).
	recordGone bool
}

// takeRecordGone reports and clears recordGone.
func (w *lockWatch) takeRecordGone() bool {
	gone := w.recordGone
	w.recordGone = false
	return gone
}

func newLockWatch(le *LeaderElector, lock resourcelock.Watchable) *lockWatch {
	return &lockWatch{le: le, lock: lock, events: make(chan struct{}, 1)}
}

// watchEvents is the channel the election loop selects on; nil (never ready)
// without a watch.
func (le *LeaderElector) watchEvents() <-chan struct{} {
	if le.watch == nil {
		return nil
	}
	return le.watch.events
}

// healthy reports whether the watch can be trusted to report every change.
func (w *lockWatch) healthy() bool { return w.ok.Load() }

// start runs the informer until the returned function is called; that
// function waits for the informer to stop.
func (w *lockWatch) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	lw := w.lock.ListWatch()
	inner := cache.ToListerWatcherWithContext(lw)
	counted := &countingListWatch{
		ListWatch: cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				w.le.metrics.Request(w.le.cfg.Name, "list")
				return inner.ListWithContext(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				w.le.metrics.Request(w.le.cfg.Name, "watch")
				return inner.WatchWithContext(ctx, opts)
			},
		},
		noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(lw),
	}
	inf := cache.NewSharedIndexInformer(counted, w.lock.ExampleObject(), 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if w.ok.Swap(false) {
			w.le.log.Info("watch of the lock broke; polling until it is back", zap.Error(err))
		}
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.deliver(obj, false) },
		UpdateFunc: func(_, obj any) { w.deliver(obj, false) },
		DeleteFunc: func(obj any) { w.deliver(obj, true) },
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		inf.RunWithContext(ctx)
	}()
	go func() {
		defer wg.Done()
		// An absent object produces no event: a completed list still means
		// the watch is up.
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.ok.Store(true)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		w.ok.Store(false)
	}
}

// countingListWatch keeps the lock's answer to whether its client can
// stream lists.
type countingListWatch struct {
	cache.ListWatch
	noWatchList bool
}

// IsWatchListSemanticsUnSupported is consulted by client-go's reflector.
func (lw *countingListWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }

// deliver is called by the informer with the newest object (or a deletion).
func (w *lockWatch) deliver(obj any, deleted bool) {
	w.mu.Lock()
	w.pending, w.deleted, w.fresh = obj, deleted, true
	w.mu.Unlock()
	w.ok.Store(true)
	select {
	case w.events <- struct{}{}:
	default:
	}
}

// ingest takes what the watch delivered into the lock and the elector's
// observation. It returns false when there was nothing new.
func (w *lockWatch) ingest() bool {
	w.mu.Lock()
	obj, deleted, fresh := w.pending, w.deleted, w.fresh
	w.pending, w.fresh = nil, false
	w.mu.Unlock()
	if !fresh {
		return false
	}
	le := w.le
	now := le.clock.Now()
	rec, raw, err := w.lock.Observe(obj, deleted)
	mine := le.GetLeader() == le.cfg.Lock.Identity()
	switch {
	case errors.Is(err, resourcelock.ErrForeignObject):
		return false
	case err == nil && deleted && (le.holderMayBeWorking(now) || mine):
		// A deletion is not a release. Followers keep the holder's lease as
		// they saw it; the holder keeps leading and recreates the lock at
		// once, before a candidate that never saw its record takes it.
		le.log.Info("the lock object was deleted while held; keeping the holder's lease",
			zap.String("holder", le.GetLeader()))
		w.recordGone = mine
		return false
	case err == nil && le.keepsPrevious(rec, now):
		// Re-created without a record: not a release either.
		le.log.Info("the lock object was replaced by one without a record while held; keeping the holder's lease",
			zap.String("holder", le.GetLeader()))
		w.recordGone = mine
		return false
	case err == nil:
		le.observe(rec, raw, now)
	case raw != nil:
		le.observeCorrupt(raw, err, now)
	default:
		le.log.Warn("ignoring a watch event", zap.Error(err))
		return false
	}
	return true
}
