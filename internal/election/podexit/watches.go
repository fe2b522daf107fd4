package podexit

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Watches runs one watch per Pod for every Publisher and Judge given the
// same Watches: a program's elections that follow the same holder, and a
// holder's elections that read their own Pod, share one watch of that
// Pod. Each watch selects its Pod by name (a field selector), keeps the
// Pod's metadata and status only, and runs while it has a subscriber: it
// starts with its first and stops, its goroutine awaited, with its last.
// The zero value is not usable: call NewWatches. It is safe for concurrent
// use.
type Watches struct {
	mu      sync.Mutex
	running map[watchKey]*podWatch
}

// NewWatches returns Watches that run nothing yet.
func NewWatches() *Watches { return &Watches{running: map[watchKey]*podWatch{}} }

// Running is the number of Pod watches running now.
func (w *Watches) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

type watchKey struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

// podWatch is one running watch of one Pod.
type podWatch struct {
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	pod  *corev1.Pod // the latest version delivered; nil when none or deleted
	subs map[*Subscription]struct{}
}

// Subscription is one user's view of a shared Pod watch.
type Subscription struct {
	owner  *Watches
	key    watchKey
	watch  *podWatch
	notify func(*corev1.Pod)
	once   sync.Once
}

// Subscribe follows the Pod namespace/name through client, sharing the
// watch with every other subscriber of the same client and Pod. notify,
// if not nil, receives every version the watch delivers (nil: the Pod was
// deleted); it is called from the watch's goroutine and must not block.
func (w *Watches) Subscribe(client kubernetes.Interface, namespace, name string, notify func(*corev1.Pod)) *Subscription {
	key := watchKey{client: client, namespace: namespace, name: name}
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.running[key]
	if pw == nil {
		pw = startPodWatch(key)
		w.running[key] = pw
	}
	s := &Subscription{owner: w, key: key, watch: pw, notify: notify}
	pw.mu.Lock()
	pw.subs[s] = struct{}{}
	pw.mu.Unlock()
	return s
}

// Pod is the latest version of the Pod the watch delivered: nil while it
// has not listed, or when the Pod is missing or was deleted. Only its
// metadata and status are kept.
func (s *Subscription) Pod() *corev1.Pod {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.pod
}

// Close ends the subscription; the last one stops the watch and waits for
// it. It may be called more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		w := s.owner
		w.mu.Lock()
		pw := s.watch
		pw.mu.Lock()
		delete(pw.subs, s)
		last := len(pw.subs) == 0
		pw.mu.Unlock()
		if last {
			delete(w.running, s.key)
		}
		w.mu.Unlock()
		if last {
			close(pw.stop)
			<-pw.done
		}
	})
}

func startPodWatch(key watchKey) *podWatch {
	pw := &podWatch{stop: make(chan struct{}), done: make(chan struct{}), subs: map[*Subscription]struct{}{}}
	selector := fields.OneTermEqualSelector("metadata.name", key.name).String()
	pods := key.client.CoreV1().Pods(key.namespace)
	lw := &podListWatch{
		ListWatch: cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = selector
				return pods.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return pods.Watch(ctx, opts)
			},
		},
		noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(key.client),
	}
	deliver := func(obj any) {
		pod, _ := obj.(*corev1.Pod)
		if pod != nil && pod.Name != key.name {
			return
		}
		pw.mu.Lock()
		pw.pod = pod
		subs := make([]*Subscription, 0, len(pw.subs))
		for s := range pw.subs {
			subs = append(subs, s)
		}
		pw.mu.Unlock()
		for _, s := range subs {
			if s.notify != nil {
				s.notify(pod)
			}
		}
	}
	_, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Transform:     keepMetadataAndStatus,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { deliver(obj) },
			UpdateFunc: func(_, obj any) { deliver(obj) },
			DeleteFunc: func(any) { deliver(nil) },
		},
	})
	go func() {
		defer close(pw.done)
		controller.Run(pw.stop)
	}()
	return pw
}

// keepMetadataAndStatus drops what the judgement never reads: the spec
// (a control plane's is large) and the managed fields.
func keepMetadataAndStatus(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Status: *pod.Status.DeepCopy()}
	slim.ManagedFields = nil
	return slim, nil
}

// podListWatch tells client-go's reflector whether the client can stream
// lists.
type podListWatch struct {
	cache.ListWatch
	noWatchList bool
}

// IsWatchListSemanticsUnSupported is consulted by client-go's reflector.
func (lw *podListWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }
