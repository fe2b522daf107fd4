package sim

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// actorClient is one actor's connection to the in-memory API: the calls a
// lock makes (get, list, watch, create, update) pass the actor's faults,
// writes are logged, and watches are the world's. Everything else goes
// straight to the fake clientset.
type actorClient struct {
	kubernetes.Interface
	api   *apiServer
	state *actorState
}

func newActorClient(api *apiServer, state *actorState) *actorClient {
	return &actorClient{Interface: api.cs, api: api, state: state}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list and
// then watch, as with any fake clientset.
func (c *actorClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c *actorClient) CoreV1() corev1client.CoreV1Interface {
	return &coreClient{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

func (c *actorClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return &coordinationClient{CoordinationV1Interface: c.Interface.CoordinationV1(), c: c}
}

// call runs one request of verb on the object name through the actor's
// faults. in is the object a create or update sends (nil for a get): its
// times lose their monotonic readings on the way in, as a real client's
// serialization drops them (see monotime.go).
func call[T runtime.Object](ctx context.Context, c *actorClient, verb, resource, name string, in T, do func(T) (T, error)) (T, error) {
	var zero T
	c.api.gate.wait(c.state.name, verb, resource, name)
	if err := c.state.before(ctx, verb, resource); err != nil {
		return zero, err
	}
	if err := c.state.objectDown(verb, resource, name); err != nil {
		return zero, err
	}
	var (
		out  T
		err  error
		lost bool
	)
	switch verb {
	case "get":
		out, err = do(in)
	case "create", "update":
		kind := ""
		if c.state.writeFaultsArmed() {
			kind = c.api.writeKind(c.state.name, resource, name, in)
		}
		fail, lostReply := c.state.takeWriteFault(kind)
		if fail && !lostReply {
			return zero, apierrors.NewInternalError(fmt.Errorf("sim: injected server error on the %s write %s %s %s", kind, verb, resource, name))
		}
		lost = lostReply
		typ := watch.Added
		if verb == "update" {
			typ = watch.Modified
		}
		if sent, ok := in.DeepCopyObject().(T); ok {
			stripMonotonic(sent)
			in = sent
		}
		var obj runtime.Object
		obj, err = c.api.mutate(c.state.name, resource, typ, func() (runtime.Object, error) { return do(in) })
		if err == nil {
			out = obj.(T)
		}
	}
	if err != nil {
		return zero, err
	}
	if lost {
		return zero, apierrors.NewServerTimeout(schema.GroupResource{Resource: resource}, verb, 1)
	}
	if err := c.state.after(verb, resource); err != nil {
		return zero, err
	}
	return out, nil
}

func (c *actorClient) list(ctx context.Context, resource, rv string, do func() (runtime.Object, error)) (runtime.Object, error) {
	c.api.gate.wait(c.state.name, "list", resource, "")
	if err := c.state.before(ctx, "list", resource); err != nil {
		return nil, err
	}
	obj, err := c.api.list(c.state.name, resource, rv, do)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func (c *actorClient) watch(ctx context.Context, resource string, opts metav1.ListOptions) (watch.Interface, error) {
	c.api.gate.wait(c.state.name, "watch", resource, "")
	if err := c.state.before(ctx, "watch", resource); err != nil {
		return nil, err
	}
	w := c.api.openWatch(c.state, resource, opts.ResourceVersion)
	w.onStop = c.api.dropWatch
	return w, nil
}

type coreClient struct {
	corev1client.CoreV1Interface
	c *actorClient
}

func (c *coreClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c *coreClient) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return &configMapClient{ConfigMapInterface: c.CoreV1Interface.ConfigMaps(ns), c: c.c}
}

type configMapClient struct {
	corev1client.ConfigMapInterface
	c *actorClient
}

func (m *configMapClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error) {
	return call(ctx, m.c, "get", configMaps, name, nil, func(*corev1.ConfigMap) (*corev1.ConfigMap, error) { return m.ConfigMapInterface.Get(ctx, name, opts) })
}

func (m *configMapClient) Create(ctx context.Context, o *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return call(ctx, m.c, "create", configMaps, o.Name, o, func(o *corev1.ConfigMap) (*corev1.ConfigMap, error) { return m.ConfigMapInterface.Create(ctx, o, opts) })
}

func (m *configMapClient) Update(ctx context.Context, o *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	return call(ctx, m.c, "update", configMaps, o.Name, o, func(o *corev1.ConfigMap) (*corev1.ConfigMap, error) { return m.ConfigMapInterface.Update(ctx, o, opts) })
}

func (m *configMapClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	obj, err := m.c.list(ctx, configMaps, opts.ResourceVersion, func() (runtime.Object, error) { return m.ConfigMapInterface.List(ctx, opts) })
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMapList), nil
}

func (m *configMapClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return m.c.watch(ctx, configMaps, opts)
}

type coordinationClient struct {
	coordinationv1client.CoordinationV1Interface
	c *actorClient
}

func (c *coordinationClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c *coordinationClient) Leases(ns string) coordinationv1client.LeaseInterface {
	return &leaseClient{LeaseInterface: c.CoordinationV1Interface.Leases(ns), c: c.c}
}

type leaseClient struct {
	coordinationv1client.LeaseInterface
	c *actorClient
}

func (l *leaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	return call(ctx, l.c, "get", leases, name, nil, func(*coordinationv1.Lease) (*coordinationv1.Lease, error) {
		return l.LeaseInterface.Get(ctx, name, opts)
	})
}

func (l *leaseClient) Create(ctx context.Context, o *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return call(ctx, l.c, "create", leases, o.Name, o, func(o *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		return l.LeaseInterface.Create(ctx, o, opts)
	})
}

func (l *leaseClient) Update(ctx context.Context, o *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return call(ctx, l.c, "update", leases, o.Name, o, func(o *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		return l.LeaseInterface.Update(ctx, o, opts)
	})
}

func (l *leaseClient) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	obj, err := l.c.list(ctx, leases, opts.ResourceVersion, func() (runtime.Object, error) { return l.LeaseInterface.List(ctx, opts) })
	if err != nil {
		return nil, err
	}
	return obj.(*coordinationv1.LeaseList), nil
}

func (l *leaseClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return l.c.watch(ctx, leases, opts)
}

// Delete passes the actor's faults and is logged like the other writes: a
// session deletes its Lease when it ends.
func (l *leaseClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	l.c.api.gate.wait(l.c.state.name, "delete", leases, name)
	if err := l.c.state.before(ctx, "delete", leases); err != nil {
		return err
	}
	if err := l.c.state.objectDown("delete", leases, name); err != nil {
		return err
	}
	_, err := l.c.api.mutate(l.c.state.name, leases, watch.Deleted, func() (runtime.Object, error) {
		last, err := l.LeaseInterface.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return last, l.LeaseInterface.Delete(ctx, name, opts)
	})
	if err != nil {
		return err
	}
	return l.c.state.after("delete", leases)
}
