package resourcelock

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
)

// kubeObject is a pointer to a Kubernetes object type such as
// *corev1.ConfigMap.
type kubeObject interface {
	runtime.Object
	metav1.Object
}

// objectClient is the part of a typed client a lock uses, for one namespace.
type objectClient[T kubeObject, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// kindAdapter is what differs between lock kinds: the object type, and where
// in it the record lives.
type kindAdapter[T kubeObject] struct {
	kind, apiVersion string
	// newObject returns an empty object named namespace/name.
	newObject func(namespace, name string) T
	// copyObject deep-copies an object.
	copyObject func(T) T
	// readRecord decodes the record of an object, as Interface.Get returns it.
	readRecord func(T) (*Record, []byte, error)
	// writeRecord stores r into an object (a copy the lock owns).
	writeRecord func(T, Record)
	// resource is the API resource of the kind, as in URLs ("leases").
	resource schema.GroupVersionResource
	// fromMetadata, set for a kind whose record lives in the object's
	// metadata, builds an object from metadata alone: the shared watch of
	// such a kind then follows the metadata only (see SharedWatch).
	fromMetadata func(metav1.ObjectMeta) T
}

// objectLock is a lock kept in one Kubernetes object, shared by all kinds:
// it remembers the object version last read or written, writes over it with
// optimistic concurrency, and keeps everything in the object it does not own.
type objectLock[T kubeObject, L runtime.Object] struct {
	client    objectClient[T, L]
	namespace string
	name      string
	cfg       Config
	kind      kindAdapter[T]

	// noWatchList is set by New for clients that cannot stream lists.
	noWatchList bool
	// clientNoWatchList is the typed client's own answer.
	clientNoWatchList bool
	// hubKey is the client a hub's shared watch of this kind and
	// namespace is keyed by, and goes through: the clientset given to New,
	// or else the typed client given to the kind's constructor.
	hubKey any

	obj      T
	valid    bool // obj holds an object version
	partial  bool // obj was built from metadata only: writes read it first
	replaced bool // obj has another uid than the version it replaced; see Replaced
	// handoverRead is set once handover holds the decoded handover
	// annotation of obj: a renewal consults it several times, so it is
	// decoded at most once per version, and not at all after the lock's own
	// write, which knows what it wrote.
	handoverRead bool
	handover     lockmeta.Handover

	// session is the mark a record of this holder carries, once
	// SetSession turned marks on (sessionOn); see session.go.
	session   lockmeta.SessionMark
	sessionOn bool
}

// set remembers obj as the version last seen; forget drops it.
func (l *objectLock[T, L]) set(obj T) {
	l.replaced = l.valid && l.obj.GetUID() != "" && obj.GetUID() != "" && l.obj.GetUID() != obj.GetUID()
	l.obj, l.valid, l.partial = obj, true, false
	l.handover, l.handoverRead = lockmeta.Handover{}, false
}

func (l *objectLock[T, L]) forget() {
	var zero T
	l.obj, l.valid, l.partial = zero, false, false
	l.handover, l.handoverRead = lockmeta.Handover{}, false
}

// Get reads the object and decodes its record.
func (l *objectLock[T, L]) Get(ctx context.Context) (*Record, []byte, error) {
	obj, err := l.client.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	obj.SetManagedFields(nil) // as the shared watch trims what it caches (package lockwatch)
	l.set(obj)
	return l.decode()
}

func (l *objectLock[T, L]) decode() (*Record, []byte, error) {
	rec, raw, err := l.kind.readRecord(l.obj)
	if err != nil {
		return nil, raw, fmt.Errorf("%s: %w", l.Describe(), err)
	}
	return rec, raw, nil
}

// Create creates the object holding the record and nothing else.
func (l *objectLock[T, L]) Create(ctx context.Context, r Record) error {
	obj := l.kind.newObject(l.namespace, l.name)
	l.kind.writeRecord(obj, r)
	h := l.advertise(obj, lockmeta.Handover{}, r)
	created, err := l.client.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.set(created)
	l.handover, l.handoverRead = h, true
	return nil
}

// Update writes the record over the last seen version, keeping its labels,
// other annotations and data.
func (l *objectLock[T, L]) Update(ctx context.Context, r Record) error {
	base, err := l.writable(ctx)
	if err != nil {
		return err
	}
	obj := l.kind.copyObject(base)
	l.kind.writeRecord(obj, r)
	h := l.advertise(obj, l.Handover(), r) // writable left base as the version last seen
	if err := l.write(ctx, obj); err != nil {
		return err
	}
	l.handover, l.handoverRead = h, true
	return nil
}

// advertise applies Config.advertise, the session mark and the holder's
// Pod mark to an object's metadata; cur is its decoded handover annotation.
// It returns the handover annotation the object then carries.
func (l *objectLock[T, L]) advertise(obj T, cur lockmeta.Handover, r Record) lockmeta.Handover {
	meta := metav1.ObjectMeta{Annotations: obj.GetAnnotations()}
	h := l.cfg.advertise(&meta, cur, r)
	l.markSession(&meta, r)
	l.markHolderPod(&meta, r)
	obj.SetAnnotations(meta.Annotations)
	return h
}

func (l *objectLock[T, L]) write(ctx context.Context, obj T) error {
	updated, err := l.client.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	updated.SetManagedFields(nil) // as the shared watch trims what it caches (package lockwatch)
	l.set(updated)
	return nil
}

// Handover implements lockcap.HandoverLock.
func (l *objectLock[T, L]) Handover() lockmeta.Handover {
	if !l.valid {
		return lockmeta.Handover{}
	}
	if !l.handoverRead {
		l.handover, l.handoverRead = lockmeta.ReadHandover(l.obj.GetAnnotations()), true
	}
	return l.handover
}

// RequestHandover implements lockcap.HandoverLock.
func (l *objectLock[T, L]) RequestHandover(ctx context.Context, h lockmeta.Handover) error {
	base, err := l.writable(ctx)
	if err != nil {
		return err
	}
	// The fence carried to a named holder (Handover.FenceMillis) stays
	// while another candidate asks or takes its request back: that holder
	// may not have seen the record naming it yet, and its work must still
	// wait the fence out. Only the holder's own writes drop it.
	if cur := l.Handover(); h.Holder != l.cfg.Identity && cur.Holder == h.Holder {
		h.FenceMillis = cur.FenceMillis
	}
	obj := l.kind.copyObject(base)
	meta := metav1.ObjectMeta{Annotations: obj.GetAnnotations()}
	lockmeta.WriteHandover(&meta, h)
	obj.SetAnnotations(meta.Annotations)
	return l.write(ctx, obj)
}

// ListWatch implements lockcap.Watchable.
func (l *objectLock[T, L]) ListWatch() cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", l.name).String()
	return &lockwatch.ListWatch{
		ListWatch: cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = selector
				return l.client.List(ctx, opts)
			},
			WatchFuncWithContext: serverTimedWatch(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return l.client.Watch(ctx, opts)
			}),
		},
		NoWatchList: l.noWatchList || l.clientNoWatchList,
	}
}

// ExampleObject implements lockcap.Watchable.
func (l *objectLock[T, L]) ExampleObject() runtime.Object { return l.kind.newObject("", "") }

// Observe implements lockcap.Watchable.
func (l *objectLock[T, L]) Observe(obj any, deleted bool) (*Record, []byte, error) {
	o, ok := ownObject(obj, l.namespace, l.name)
	if !ok {
		return nil, nil, lockwatch.ErrForeignObject
	}
	if deleted {
		l.forget()
		return &Record{}, nil, nil
	}
	if m, ok := o.(*metav1.PartialObjectMetadata); ok && l.kind.fromMetadata != nil {
		return l.observeMetadata(m)
	}
	cur, ok := o.(T)
	if !ok {
		return nil, nil, fmt.Errorf("%s: watch delivered %T, not a %s", l.Describe(), o, l.kind.kind)
	}
	if !l.valid || newer(cur.GetResourceVersion(), l.obj.GetResourceVersion()) {
		l.set(cur)
	}
	return l.decode()
}

// Peek implements lockcap.Watchable.
func (l *objectLock[T, L]) Peek() (*Record, []byte, error) {
	if !l.valid {
		return nil, nil, ErrNotInitialized
	}
	return l.decode()
}

// RecordEvent records an event on the object.
func (l *objectLock[T, L]) RecordEvent(eventType, reason, message string) {
	if l.cfg.EventRecorder == nil {
		return
	}
	obj := l.kind.newObject(l.namespace, l.name)
	if l.valid {
		obj = l.kind.copyObject(l.obj)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(l.kind.apiVersion, l.kind.kind))
	l.cfg.EventRecorder.Eventf(obj, eventType, reason, "%s", message)
}

// ResourceVersion implements Interface.
func (l *objectLock[T, L]) ResourceVersion() string {
	if !l.valid {
		return ""
	}
	return l.obj.GetResourceVersion()
}

// Replaced reports whether the object version last read, written or
// watched belongs to another object than the version seen before it: the
// API server gives an object a new uid whenever it is created, so the
// object was deleted and created again in between. False when either
// version is unknown (a deletion seen in between) or carries no uid.
func (l *objectLock[T, L]) Replaced() bool { return l.replaced }

// ObjectUID is the uid of the object version last read, written or
// watched; empty when none is known.
func (l *objectLock[T, L]) ObjectUID() string {
	if !l.valid {
		return ""
	}
	return string(l.obj.GetUID())
}

// Identity implements Interface.
func (l *objectLock[T, L]) Identity() string { return l.cfg.Identity }

// Key implements Interface.
func (l *objectLock[T, L]) Key() string { return l.cfg.Key }

// Describe implements Interface.
func (l *objectLock[T, L]) Describe() string {
	return fmt.Sprintf("%s %s/%s", l.kind.kind, l.namespace, l.name)
}
