package election

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/election/lockread"
)

// Leader is who holds an election's lock, as its record says.
type Leader struct {
	// Identity is the holder's identity; "" when nobody holds the lock
	// (released, or not created yet).
	Identity string
	// Key is the holder's key: its revision, "^<revision>" when remote.
	Key string
	// Transitions is the record's leaderTransitions.
	Transitions int
}

// OnNewLeader calls fn each time the holder of le's lock changes, as
// client-go's OnNewLeader callback does, with the holder as the lock's
// record names it: this process's identity when it leads, another's
// (istiod's too) otherwise, "" when the lock is released or missing. The
// first call reports the holder found when the watch starts. It watches the
// lock object on its own (one watch, by name), so it sees every holder,
// whether or not le runs; calls of fn never overlap and come in order.
// OnNewLeader blocks until ctx ends and returns once its watch has stopped;
// it returns an error only when le's lock kind is unknown.
func OnNewLeader(ctx context.Context, client kubernetes.Interface, le *LeaderElection, fn func(Leader)) error {
	st := le.Status()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(st.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", st.Name).String()
		}))
	var informer cache.SharedIndexInformer
	switch st.Lock {
	case ConfigMapLock:
		informer = factory.Core().V1().ConfigMaps().Informer()
	case LeaseLock:
		informer = factory.Coordination().V1().Leases().Informer()
	default:
		return fmt.Errorf("election: OnNewLeader: unknown lock kind %q", st.Lock)
	}

	var (
		mu    sync.Mutex
		known bool
		last  Leader
	)
	report := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = tomb.Obj, true
		}
		meta, ok := obj.(metav1.Object)
		if !ok || meta.GetName() != st.Name {
			return
		}
		var now Leader
		if !deleted {
			ro, ok := obj.(runtime.Object)
			if !ok {
				return
			}
			rec, err := lockread.Object(ro)
			if err != nil {
				return // a corrupt record names nobody we could report
			}
			if rec != nil {
				now = Leader{Identity: rec.HolderIdentity, Key: rec.HolderKey, Transitions: rec.LeaderTransitions}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if known && now.Identity == last.Identity && now.Key == last.Key {
			return
		}
		known, last = true, now
		fn(now)
	}
	// The handler runs on the informer's delivery goroutine; mu orders it
	// with the report of a missing lock below.
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { report(obj, false) },
		UpdateFunc: func(_, obj any) { report(obj, false) },
		DeleteFunc: func(obj any) { report(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("election: OnNewLeader: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		informer.Run(ctx.Done())
	}()
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		// Nothing reported by the initial list: the lock does not exist
		// yet; say so once.
		mu.Lock()
		if !known {
			known = true
			fn(Leader{})
		}
		mu.Unlock()
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}
