package controllers

import (
	"context"
	"sync"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NewQueue returns the rate-limited queue a controller uses for one Run:
// failed items come back with per-item exponential backoff (5ms doubling to
// 1000s) under an overall token bucket, as in client-go's controllers.
func NewQueue[T comparable](name string) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name})
}

// Loop is one Run of a controller: its informers, its queue and the
// function that handles one queued item. Build a fresh Loop, with fresh
// informers and queue, for every Run: informers and queues cannot be
// restarted.
type Loop[T comparable] struct {
	// Informers are run until ctx is done. Event handlers must be added
	// before Run.
	Informers []cache.SharedIndexInformer
	// Synced are waited for before any worker starts; normally the
	// HasSynced of each handler registration.
	Synced []cache.InformerSynced
	// Queue feeds the workers. Run shuts it down.
	Queue workqueue.TypedRateLimitingInterface[T]
	// Workers is how many items are handled at once; at least 1.
	Workers int
	// Reconcile handles one item. An error requeues the item with backoff.
	Reconcile func(ctx context.Context, item T) error
	// OnSynced, if set, runs once the caches have synced and before the
	// workers start; it usually queues the initial work.
	OnSynced func()
	// Background functions run alongside the workers (tickers, for
	// example) and must return when ctx is done.
	Background []func(ctx context.Context)

	Metrics *Metrics
	Log     *zap.Logger
}

// Run runs the loop until ctx is done. It returns after the workers, the
// background functions and the informers have all returned.
func (l Loop[T]) Run(ctx context.Context) {
	log := l.Log
	if log == nil {
		log = zap.NewNop()
	}
	var wg sync.WaitGroup
	// Deferred calls run last-in first-out: the queue is shut down (ending
	// the workers) before we wait for everything else.
	defer wg.Wait()
	defer l.Queue.ShutDown()

	for _, inf := range l.Informers {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), l.Synced...) {
		log.Debug("stopped before the caches synced")
		return
	}
	log.Debug("caches synced; starting workers")
	if l.OnSynced != nil {
		l.OnSynced()
	}
	for _, bg := range l.Background {
		wg.Go(func() { bg(ctx) })
	}
	var workers sync.WaitGroup
	for range max(l.Workers, 1) {
		workers.Go(func() {
			for l.processNext(ctx, log) {
			}
		})
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	workers.Wait()
	log.Debug("workers stopped")
}

// processNext handles one item; false means the queue was shut down.
func (l Loop[T]) processNext(ctx context.Context, log *zap.Logger) bool {
	item, shutdown := l.Queue.Get()
	if shutdown {
		return false
	}
	defer l.Queue.Done(item)
	err := l.Reconcile(ctx, item)
	l.Metrics.Reconciled()
	switch {
	case err == nil:
		l.Queue.Forget(item)
	case ctx.Err() != nil:
		// Shutting down: the failure is most likely the cancellation, and
		// the next term starts from scratch anyway.
		l.Queue.Forget(item)
	case IsRace(err):
		// A stale cache lost a race with another writer; the informer is
		// about to deliver the newer object.
		log.Debug("retrying after a write race", zap.Any("item", item), zap.Error(err))
		l.Queue.AddRateLimited(item)
	default:
		l.Metrics.Failed()
		log.Warn("reconcile failed; retrying with backoff", zap.Any("item", item),
			zap.Int("retries", l.Queue.NumRequeues(item)), zap.Error(err))
		l.Queue.AddRateLimited(item)
	}
	return true
}

// IsRace reports whether err is the expected outcome of writing from a
// stale cache: a Conflict on update or AlreadyExists on create. Such
// failures are retried but not counted as errors.
func IsRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// Enqueue returns informer event handlers that add key(obj) to q for every
// add, update and delete; a key function returning ok=false skips the event.
// Tombstones of deletions are unwrapped before key is called.
func Enqueue[T comparable](q workqueue.TypedInterface[T], key func(obj any) (T, bool)) cache.ResourceEventHandler {
	add := func(obj any) {
		if k, ok := key(obj); ok {
			q.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			add(obj)
		},
	}
}
