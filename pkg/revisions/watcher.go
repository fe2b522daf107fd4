package revisions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NewDefaultWatcher returns a DefaultWatcher following the webhook named by
// opts (see Options for the defaults). It validates opts and returns an error
// naming every invalid field; it does not contact the API server, which
// happens in Run.
//
// The watcher lists and watches MutatingWebhookConfigurations with the field
// selector metadata.name=<WebhookName>, so it holds at most one object and the
// API server sends it nothing else. Events for other names, which a server (or
// a fake client) ignoring the selector could deliver, are ignored.
func NewDefaultWatcher(client kubernetes.Interface, opts Options) (DefaultWatcher, error) {
	if client == nil {
		return nil, errors.New("revisions: nil Kubernetes client")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}

	selector := fields.OneTermEqualSelector("metadata.name", opts.WebhookName).String()
	webhooks := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	lw := listAndWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return webhooks.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			// The API server picks how long the watch lasts: by default
			// 30 to 60 minutes, against client-go's 5 to 10, so the watch
			// is re-opened a few times an hour rather than about 8.
			o.TimeoutSeconds = nil
			return webhooks.Watch(ctx, o)
		},
	}}
	informer := cache.NewSharedIndexInformer(lw, &admissionregistrationv1.MutatingWebhookConfiguration{}, 0, cache.Indexers{})

	w := &informerWatcher{
		name:     opts.WebhookName,
		label:    opts.RevisionLabel,
		log:      opts.Logger.With(zap.String("webhook", opts.WebhookName), zap.String("label", opts.RevisionLabel)),
		informer: informer,
	}
	// The informer delivers the events of one handler registration one at a
	// time, in order, from a single goroutine: that is what serialises the
	// calls of the user's handlers.
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: w.remove,
	})
	if err != nil {
		return nil, fmt.Errorf("revisions: registering the webhook event handler: %w", err)
	}
	w.registration = reg
	return w, nil
}

// listAndWatch makes the informer list, then watch. client-go's streaming
// alternative ("watch-list") waits out its retry backoff, up to 30s after a
// long outage, without looking at the stop channel, so Run could outlive
// stop by that much; with list and watch every wait ends with stop.
type listAndWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector not to stream.
func (listAndWatch) IsWatchListSemanticsUnSupported() bool { return true }

type informerWatcher struct {
	name  string
	label string
	log   *zap.Logger

	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration

	mu       sync.Mutex
	started  bool
	current  string
	handlers []func(revision string)
}

func (w *informerWatcher) Run(stop <-chan struct{}) {
	w.mu.Lock()
	started := w.started
	w.started = true
	w.mu.Unlock()
	if started {
		w.log.Warn("default revision watcher already running; this Run only waits for stop")
		<-stop
		return
	}
	w.log.Debug("watching the default revision")
	// Run returns after the informer's goroutines, including the one calling
	// our handlers, have finished.
	w.informer.Run(stop)
	w.log.Debug("stopped watching the default revision")
}

// HasSynced is true once the initial list has been delivered to our handler,
// so GetDefault already reflects it.
func (w *informerWatcher) HasSynced() bool { return w.registration.HasSynced() }

func (w *informerWatcher) GetDefault() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

func (w *informerWatcher) AddHandler(h func(revision string)) {
	if h == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers = append(w.handlers, h)
}

// observe handles an added or updated object.
func (w *informerWatcher) observe(obj any) {
	wh, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	if !ok || wh.Name != w.name {
		return
	}
	w.set(wh.Labels[w.label])
}

// remove handles a deleted object, possibly seen only as a tombstone after a
// relist.
func (w *informerWatcher) remove(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if wh, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok && wh.Name != w.name {
		return
	}
	w.set("")
}

// set records the default and calls the handlers when it changed. It runs on
// the informer's delivery goroutine only.
func (w *informerWatcher) set(revision string) {
	w.mu.Lock()
	previous := w.current
	if revision == previous {
		w.mu.Unlock()
		return
	}
	w.current = revision
	handlers := slices.Clone(w.handlers)
	w.mu.Unlock()

	w.log.Info("default revision changed", zap.String("from", previous), zap.String("to", revision))
	for _, h := range handlers {
		h(revision)
	}
}
