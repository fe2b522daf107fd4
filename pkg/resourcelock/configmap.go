package resourcelock

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// ConfigMapLock keeps the record as JSON in the LeaderAnnotationKey annotation
// of a ConfigMap. This is the lock istiod uses for its prioritized elections.
type ConfigMapLock struct {
	client    corev1client.ConfigMapsGetter
	namespace string
	name      string
	cfg       Config

	// noWatchList is set by New for clients that cannot stream lists.
	noWatchList bool

	// cm is the object version last read or written; updates start from it
	// so that other annotations, labels and data survive and conflicts show.
	cm *corev1.ConfigMap
}

var (
	_ HandoverLock = (*ConfigMapLock)(nil)
	_ Watchable    = (*ConfigMapLock)(nil)
)

// NewConfigMapLock returns a lock on the ConfigMap namespace/name. It does not
// talk to the API server.
func NewConfigMapLock(client corev1client.ConfigMapsGetter, namespace, name string, cfg Config) (*ConfigMapLock, error) {
	if err := validateLocation(namespace, name, cfg); err != nil {
		return nil, err
	}
	return &ConfigMapLock{client: client, namespace: namespace, name: name, cfg: cfg}, nil
}

// Get reads the ConfigMap. A ConfigMap without the annotation yields an empty
// record (free to take).
func (l *ConfigMapLock) Get(ctx context.Context) (*Record, []byte, error) {
	cm, err := l.client.ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.cm = cm
	return l.decode()
}

// decode returns the record of the last seen ConfigMap.
func (l *ConfigMapLock) decode() (*Record, []byte, error) {
	raw, found := l.cm.Annotations[LeaderAnnotationKey]
	if !found {
		return &Record{}, nil, nil
	}
	rec, err := DecodeRecord([]byte(raw))
	if err != nil {
		return nil, []byte(raw), fmt.Errorf("%s: %w", l.Describe(), err)
	}
	return rec, []byte(raw), nil
}

// Create creates the ConfigMap with the record and nothing else.
func (l *ConfigMapLock) Create(ctx context.Context, r Record) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        l.name,
			Namespace:   l.namespace,
			Annotations: map[string]string{LeaderAnnotationKey: string(EncodeRecord(r))},
		},
	}
	l.cfg.advertise(&cm.ObjectMeta, r)
	created, err := l.client.ConfigMaps(l.namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.cm = created
	return nil
}

// Update replaces only the record annotation of the last seen ConfigMap.
func (l *ConfigMapLock) Update(ctx context.Context, r Record) error {
	if l.cm == nil {
		return ErrNotInitialized
	}
	cm := l.cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LeaderAnnotationKey] = string(EncodeRecord(r))
	l.cfg.advertise(&cm.ObjectMeta, r)
	updated, err := l.client.ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.cm = updated
	return nil
}

// Handover implements HandoverLock.
func (l *ConfigMapLock) Handover() Handover {
	if l.cm == nil {
		return Handover{}
	}
	return readHandover(l.cm.Annotations)
}

// RequestHandover implements HandoverLock.
func (l *ConfigMapLock) RequestHandover(ctx context.Context, h Handover) error {
	if l.cm == nil {
		return ErrNotInitialized
	}
	cm := l.cm.DeepCopy()
	writeHandover(&cm.ObjectMeta, h)
	updated, err := l.client.ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.cm = updated
	return nil
}

// ListWatch implements Watchable.
func (l *ConfigMapLock) ListWatch() cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", l.name).String()
	return &listWatch{
		ListWatch: cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = selector
				return l.client.ConfigMaps(l.namespace).List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return l.client.ConfigMaps(l.namespace).Watch(ctx, opts)
			},
		},
		noWatchList: l.noWatchList || watchlist.DoesClientNotSupportWatchListSemantics(l.client),
	}
}

// ExampleObject implements Watchable.
func (l *ConfigMapLock) ExampleObject() runtime.Object { return &corev1.ConfigMap{} }

// Observe implements Watchable.
func (l *ConfigMapLock) Observe(obj any, deleted bool) (*Record, []byte, error) {
	o, ok := ownObject(obj, l.namespace, l.name)
	if !ok {
		return nil, nil, ErrForeignObject
	}
	if deleted {
		l.cm = nil
		return &Record{}, nil, nil
	}
	cur, ok := o.(*corev1.ConfigMap)
	if !ok {
		return nil, nil, fmt.Errorf("%s: watch delivered %T, not a ConfigMap", l.Describe(), o)
	}
	if l.cm == nil || newer(cur.ResourceVersion, l.cm.ResourceVersion) {
		l.cm = cur
	}
	return l.decode()
}

// Peek implements Watchable.
func (l *ConfigMapLock) Peek() (*Record, []byte, error) {
	if l.cm == nil {
		return nil, nil, ErrNotInitialized
	}
	return l.decode()
}

// RecordEvent records an event on the ConfigMap.
func (l *ConfigMapLock) RecordEvent(eventType, reason, message string) {
	if l.cfg.EventRecorder == nil {
		return
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
	if l.cm != nil {
		obj.ObjectMeta = *l.cm.ObjectMeta.DeepCopy()
	}
	obj.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	l.cfg.EventRecorder.Eventf(obj, eventType, reason, "%s", message)
}

// ResourceVersion implements Interface.
func (l *ConfigMapLock) ResourceVersion() string {
	if l.cm == nil {
		return ""
	}
	return l.cm.ResourceVersion
}

// Identity implements Interface.
func (l *ConfigMapLock) Identity() string { return l.cfg.Identity }

// Key implements Interface.
func (l *ConfigMapLock) Key() string { return l.cfg.Key }

// Describe implements Interface.
func (l *ConfigMapLock) Describe() string {
	return fmt.Sprintf("ConfigMap %s/%s", l.namespace, l.name)
}
