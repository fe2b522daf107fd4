package multicluster

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Handler receives the remote clusters. Update is called once the Secrets
// have been read and again after every change of them, never concurrently:
// clusters holds one Cluster per ID, sorted by ID; problems has one error
// per Secret key that was skipped (a *ClusterError).
type Handler interface {
	Update(clusters []Cluster, problems []error)
}

// HandlerFunc is a Handler.
type HandlerFunc func(clusters []Cluster, problems []error)

// Update calls f.
func (f HandlerFunc) Update(clusters []Cluster, problems []error) { f(clusters, problems) }

// Watcher follows the Secrets labelled SecretLabel=true in one namespace.
// Build it with NewWatcher and call Run once.
type Watcher struct {
	client    kubernetes.Interface
	namespace string
	localID   string
	handler   Handler
	log       *zap.Logger

	dirty  chan struct{}
	synced atomic.Bool
	// chosen maps a cluster ID named by several Secrets to the Secret
	// that provides it, so that a second Secret cannot take it over.
	// Used by the Run goroutine only.
	chosen map[string]string
}

// NewWatcher returns a watcher of the Secrets in namespace, read with
// client; localID is the local cluster's ID, which Secrets cannot add.
func NewWatcher(client kubernetes.Interface, namespace, localID string, h Handler, log *zap.Logger) *Watcher {
	if log == nil {
		log = zap.NewNop()
	}
	return &Watcher{client: client, namespace: namespace, localID: localID, handler: h, log: log,
		dirty: make(chan struct{}, 1), chosen: map[string]string{}}
}

// HasSynced reports whether the Secrets have been read and handed to the
// handler once.
func (w *Watcher) HasSynced() bool { return w.synced.Load() }

// Run watches the Secrets until ctx ends, and returns once the watch has
// stopped. Each change is handed to the handler before the next is read.
func (w *Watcher) Run(ctx context.Context) {
	selector := labels.SelectorFromSet(labels.Set{SecretLabel: "true"}).String()
	inf := coreinformers.NewFilteredSecretInformer(w.client, w.namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	poke := func(any) {
		select {
		case w.dirty <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, obj any) { poke(obj) },
		DeleteFunc: poke,
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	lister := corelisters.NewSecretLister(inf.GetIndexer())
	poke(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.dirty:
		}
		secrets, err := lister.Secrets(w.namespace).List(labels.Everything())
		if err != nil { // a lister over a store does not fail
			w.log.Error("listing the remote cluster Secrets", zap.Error(err))
			continue
		}
		clusters, problems := w.resolve(secrets)
		w.handler.Update(clusters, problems)
		w.synced.Store(true)
	}
}

// resolve turns the Secrets into one cluster per ID. An ID named by
// several Secrets stays with the Secret that provided it so far, else goes
// to the first by name; the others are reported.
func (w *Watcher) resolve(secrets []*corev1.Secret) ([]Cluster, []error) {
	slices.SortFunc(secrets, func(a, b *corev1.Secret) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	byID := map[string][]Cluster{}
	var problems []error
	for _, s := range secrets {
		if s.Labels[SecretLabel] != "true" {
			continue
		}
		cs, errs := Parse(s, w.localID)
		problems = append(problems, errs...)
		for _, c := range cs {
			byID[c.ID] = append(byID[c.ID], c)
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]Cluster, 0, len(ids))
	chosen := map[string]string{}
	for _, id := range ids {
		candidates := byID[id]
		pick := 0
		for i, c := range candidates {
			if c.Secret == w.chosen[id] {
				pick = i
			}
		}
		out = append(out, candidates[pick])
		chosen[id] = candidates[pick].Secret
		for i, c := range candidates {
			if i != pick {
				problems = append(problems, &ClusterError{ID: id, Secret: c.Secret,
					Err: errDuplicate(candidates[pick].Secret)})
			}
		}
	}
	w.chosen = chosen
	return out, problems
}

type errDuplicate string

func (e errDuplicate) Error() string {
	return "the cluster ID is already provided by Secret " + string(e) + "; ignored"
}
