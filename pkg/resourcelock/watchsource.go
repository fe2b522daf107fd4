package resourcelock

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/lockwatch"
)

var (
	_ lockwatch.SharedWatchable = (*LeaseLock)(nil)
	_ lockwatch.SharedWatchable = (*ConfigMapLock)(nil)
)

// SharedWatch implements lockwatch.SharedWatchable: one watch of every object of the
// lock's kind in its namespace, shared by the locks built on the same client.
//
// A kind whose record lives in the metadata (ConfigMap) is followed by its
// metadata only when the lock's client talks to a real API server: the data
// of the namespace's objects is then never transferred or cached, and a
// write after such an observation reads the whole object first (see
// writable). Otherwise (a fake clientset, a Lease) whole objects are
// watched.
func (l *objectLock[T, L]) SharedWatch() lockwatch.SharedWatch {
	key := lockwatch.WatchKey{Client: l.hubKey, Namespace: l.namespace, Resource: l.kind.resource.Resource}
	if l.kind.fromMetadata != nil {
		if rc := restClientOf(l.hubKey); rc != nil {
			key.Resource += " (metadata)"
			gvr, ns := l.kind.resource, l.namespace
			return lockwatch.SharedWatch{
				Key: key, Name: l.name,
				ListWatch: func() cache.ListerWatcher { return metadataListWatch(rc, gvr, ns) },
				Example:   &metav1.PartialObjectMetadata{},
			}
		}
	}
	client, noWatchList := l.client, l.noWatchList || l.clientNoWatchList
	return lockwatch.SharedWatch{
		Key: key, Name: l.name,
		ListWatch: func() cache.ListerWatcher {
			return namespaceListWatch(noWatchList,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return client.List(ctx, o) },
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return client.Watch(ctx, o) })
		},
		Example: l.kind.newObject("", ""),
	}
}

func namespaceListWatch(noWatchList bool,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	return &lockwatch.ListWatch{
		ListWatch:   cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: serverTimedWatch(watchFn)},
		NoWatchList: noWatchList,
	}
}

// serverTimedWatch makes watchFn's watches last as long as the API server
// lets a watch without a timeout of its own last: by default a random 30 to
// 60 minutes (kube-apiserver's --min-request-timeout, times one to two).
// client-go's reflector asks for a random 5 to 10 minutes, which made each
// shared watch re-open about 8 times an hour; a watch ended by the server
// is re-opened from the last version seen, as before. A dead connection is
// still noticed by the client's HTTP/2 health checks and TCP keep-alives,
// not only by the timeout.
func serverTimedWatch(watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.TimeoutSeconds = nil
		return watchFn(ctx, o)
	}
}

// restClientOf returns the REST client of the core API group behind client
// (a clientset, or the typed core/v1 client) when it reaches an API server
// over HTTP; nil otherwise (a fake clientset, another group).
func restClientOf(client any) *rest.RESTClient {
	var ri rest.Interface
	switch c := client.(type) {
	case kubernetes.Interface:
		ri = c.CoreV1().RESTClient()
	case interface{ RESTClient() rest.Interface }:
		ri = c.RESTClient()
	}
	rc, ok := ri.(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil || !strings.HasSuffix(rc.Get().URL().Path, coreAPIPath) {
		return nil
	}
	return rc
}

// coreAPIPath ends the URL path of the core API group's REST client.
const coreAPIPath = "/api/v1"

// metadataListWatch lists and watches the metadata of the objects of gvr in
// ns through the HTTP client, server address and rate limiter of rc. A
// client that cannot be built yields a list-watch that fails, which the
// elector treats as a broken watch (it polls).
func metadataListWatch(rc *rest.RESTClient, gvr schema.GroupVersionResource, ns string) cache.ListerWatcher {
	md, err := metadataClientFrom(rc)
	if err != nil {
		fail := func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, err }
		failWatch := func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, err }
		return namespaceListWatch(true, fail, failWatch)
	}
	res := md.Resource(gvr).Namespace(ns)
	return namespaceListWatch(true,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) })
}

// metadataClientFrom builds a metadata client that shares rc's connection
// pool (and so its credentials and transport wrappers) and rate limiter.
func metadataClientFrom(rc *rest.RESTClient) (metadata.Interface, error) {
	u := rc.Get().URL()
	base := strings.TrimSuffix(u.Path, coreAPIPath)
	cfg := &rest.Config{Host: u.Scheme + "://" + u.Host + base, RateLimiter: rc.GetRateLimiter()}
	if cfg.RateLimiter == nil {
		cfg.QPS = -1 // rc has none: do not add one
	}
	md, err := metadata.NewForConfigAndClient(cfg, rc.Client)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return md, nil
}

// observeMetadata takes the metadata delivered by a metadata-only watch,
// when newer than the version held. The lock then holds an object without
// the rest of its content, marked partial: writes read the whole object
// first (see writable).
func (l *objectLock[T, L]) observeMetadata(m *metav1.PartialObjectMetadata) (*Record, []byte, error) {
	if !l.valid || newer(m.ResourceVersion, l.obj.GetResourceVersion()) {
		l.set(l.kind.fromMetadata(*m.ObjectMeta.DeepCopy()))
		l.partial = true
	}
	return l.decode()
}

// writable returns the whole object a write starts from. After a
// metadata-only observation it reads the object, so that the write keeps
// everything else in it, and fails with a Conflict when the object changed
// since the version observed: the caller decided on that version, and
// optimistic concurrency must hold as if it had written over it.
func (l *objectLock[T, L]) writable(ctx context.Context) (T, error) {
	if !l.valid {
		var zero T
		return zero, ErrNotInitialized
	}
	if !l.partial {
		return l.obj, nil
	}
	seen := l.obj.GetResourceVersion()
	obj, err := l.client.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		var zero T
		return zero, err
	}
	l.set(obj)
	if obj.GetResourceVersion() != seen {
		var zero T
		return zero, apierrors.NewConflict(l.kind.resource.GroupResource(), l.name,
			fmt.Errorf("changed since resourceVersion %s was observed", seen))
	}
	return obj, nil
}
