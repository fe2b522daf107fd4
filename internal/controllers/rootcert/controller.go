package rootcert

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1beta1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1beta1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshd-io/meshd/internal/controllers"
)

// Controller is the namespace controller. Build it with New; run it with
// Run while leading ElectionID.
type Controller struct {
	client kubernetes.Interface
	// source is where the root is read from: Options.SourceClient, else
	// client. remoteTarget is set when they differ.
	source       kubernetes.Interface
	remoteTarget bool
	opts         Options
	excluded     map[string]bool
	log          *zap.Logger
	metrics      *controllers.Metrics

	mu sync.Mutex
	// distributed is the certificate this process last distributed, in any
	// term. It is only used to re-create a deleted self-signed source.
	distributed string
	// problem is why the current term publishes no root, nil when it does
	// or when no term runs.
	problem error
}

var _ controllers.Controller = (*Controller)(nil)

// New validates opts and returns a controller. It returns an error naming
// every invalid option; it does not contact the API server.
func New(client kubernetes.Interface, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	metrics, err := controllers.Prepare(Name, client, opts.validate(), opts.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		client:       client,
		source:       client,
		remoteTarget: opts.SourceClient != nil,
		opts:         opts,
		excluded:     map[string]bool{},
		log:          opts.Logger.With(zap.String("controller", Name)),
		metrics:      metrics,
	}
	if opts.SourceClient != nil {
		c.source = opts.SourceClient
	}
	for _, ns := range opts.ExcludedNamespaces {
		c.excluded[ns] = true
	}
	return c, nil
}

// Name returns "namespace".
func (c *Controller) Name() string { return Name }

// key is a queued item: the source, or one namespace's target.
type key struct {
	source    bool
	bundle    bool
	namespace string
}

var (
	sourceKey = key{source: true}
	bundleKey = key{bundle: true}
)

// Run keeps the certificate in every namespace until ctx is done, then
// returns after its informers and workers have stopped.
func (c *Controller) Run(ctx context.Context) {
	c.log.Info("started")
	defer c.log.Info("stopped")
	// The problem is this term's: a follower has none.
	defer c.clearProblem()
	t := c.newTerm()
	t.loop().Run(ctx)
}

// term is the state of one Run.
type term struct {
	c         *Controller
	queue     workqueue.TypedRateLimitingInterface[key]
	informers []cache.SharedIndexInformer
	nsLister  corelisters.NamespaceLister          // nil with ClusterTrustBundle
	tgtLister corelisters.ConfigMapLister          // nil with ClusterTrustBundle
	ctbLister certlisters.ClusterTrustBundleLister // only with ClusterTrustBundle
	srcLister corelisters.ConfigMapLister          // nil without SelfSignedRoot
	// caSecrets caches each CA Secret of the source cluster by name,
	// nothing else.
	caSecrets map[string]cache.Store
	// targetCA caches the target cluster's own CA Secrets, only when it is
	// not the source cluster.
	targetCA map[string]cache.Store
	synced   []cache.InformerSynced

	mu sync.Mutex
	// bundle is the certificate distributed in this term; empty until the
	// source has been read.
	bundle string
}

func (c *Controller) newTerm() *term {
	byName := func(name string) func(*metav1.ListOptions) {
		sel := fields.OneTermEqualSelector("metadata.name", name).String()
		return func(o *metav1.ListOptions) { o.FieldSelector = sel }
	}
	t := &term{c: c, queue: controllers.NewQueue[key](Name), caSecrets: map[string]cache.Store{}, targetCA: map[string]cache.Store{}}
	watch := func(inf cache.SharedIndexInformer, toKey func(obj any) (key, bool)) {
		reg, _ := inf.AddEventHandler(controllers.Enqueue(t.queue, toKey))
		// AddEventHandler fails only on a stopped informer; these are new.
		t.informers = append(t.informers, inf)
		t.synced = append(t.synced, reg.HasSynced)
	}
	source := func(any) (key, bool) { return sourceKey, true }

	if c.opts.ClusterTrustBundle {
		bundles := certinformers.NewFilteredClusterTrustBundleInformer(c.client, 0, cache.Indexers{}, byName(ClusterTrustBundleName))
		t.ctbLister = certlisters.NewClusterTrustBundleLister(bundles.GetIndexer())
		watch(bundles, func(any) (key, bool) { return bundleKey, true })
	} else {
		t.watchNamespaces(watch, byName(TargetConfigMap))
	}
	// One informer per CA Secret, each limited to its name, so that a Role
	// with resourceNames is enough to read them and no other Secret is seen.
	for _, name := range []string{PluggedCASecret, IstiodCASecret} {
		inf := coreinformers.NewFilteredSecretInformer(c.source, c.opts.MeshNamespace, 0, cache.Indexers{}, byName(name))
		t.caSecrets[name] = inf.GetStore()
		watch(inf, source)
		if c.remoteTarget {
			own := coreinformers.NewFilteredSecretInformer(c.client, c.opts.MeshNamespace, 0, cache.Indexers{}, byName(name))
			t.targetCA[name] = own.GetStore()
			watch(own, source)
		}
	}
	if c.opts.SelfSignedRoot {
		src := coreinformers.NewFilteredConfigMapInformer(c.source, c.opts.MeshNamespace, 0, cache.Indexers{}, byName(c.opts.SourceConfigMap))
		t.srcLister = corelisters.NewConfigMapLister(src.GetIndexer())
		watch(src, source)
	}
	return t
}

// watchNamespaces watches every namespace and its target ConfigMap.
func (t *term) watchNamespaces(watch func(cache.SharedIndexInformer, func(any) (key, bool)), byTarget func(*metav1.ListOptions)) {
	c := t.c
	namespaces := coreinformers.NewNamespaceInformer(c.client, 0, cache.Indexers{})
	t.nsLister = corelisters.NewNamespaceLister(namespaces.GetIndexer())
	watch(namespaces, func(obj any) (key, bool) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok || !c.wanted(ns) {
			return key{}, false
		}
		return key{namespace: ns.Name}, true
	})
	targets := coreinformers.NewFilteredConfigMapInformer(c.client, metav1.NamespaceAll, 0, cache.Indexers{}, byTarget)
	t.tgtLister = corelisters.NewConfigMapLister(targets.GetIndexer())
	watch(targets, func(obj any) (key, bool) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != TargetConfigMap {
			return key{}, false
		}
		return key{namespace: cm.Namespace}, true
	})
}

func (t *term) loop() controllers.Loop[key] {
	return controllers.Loop[key]{
		Informers: t.informers,
		Synced:    t.synced,
		Queue:     t.queue,
		Workers:   t.c.opts.Workers,
		Reconcile: t.reconcile,
		// The sources may not exist, so no event would bring them: queue.
		OnSynced: func() { t.queue.Add(sourceKey) },
		Metrics:  t.c.metrics,
		Log:      t.c.log,
	}
}

// wanted reports whether namespace ns should hold the certificate.
func (c *Controller) wanted(ns *corev1.Namespace) bool {
	terminating := ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating
	return !terminating && !c.excluded[ns.Name]
}

func (t *term) reconcile(ctx context.Context, k key) error {
	if k.source {
		return t.syncSource(ctx)
	}
	if k.bundle {
		return t.syncBundle(ctx)
	}
	return t.syncNamespace(ctx, k.namespace)
}

// syncSelfSigned reads the self-signed source ConfigMap, creating it when
// absent, and distributes its certificate. Only with SelfSignedRoot.
func (t *term) syncSelfSigned(ctx context.Context) error {
	c := t.c
	ns, name := c.opts.MeshNamespace, c.opts.SourceConfigMap
	cm, err := t.srcLister.ConfigMaps(ns).Get(name)
	if err == nil {
		return t.useSource(cm)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}

	cert, generated := c.lastDistributed(), false
	if cert == "" {
		if cert, err = generateRootCert(time.Now()); err != nil {
			return err
		}
		generated = true
	}
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{c.opts.SourceKey: cert},
	}
	if generated {
		src.Annotations = map[string]string{GeneratedAnnotation: "true"}
	}
	_, err = c.source.CoreV1().ConfigMaps(ns).Create(ctx, src, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another instance won the race, or our cache lags: use what is
		// stored, read directly since the cache may not have it yet.
		stored, err := c.source.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read source ConfigMap %s/%s: %w", ns, name, err)
		}
		return t.useSource(stored)
	}
	if err != nil {
		return fmt.Errorf("create source ConfigMap %s/%s: %w", ns, name, err)
	}
	c.metrics.Wrote()
	c.log.Info("created the root certificate source", zap.String("configmap", ns+"/"+name), zap.Bool("generated", generated))
	t.distribute(cert, "ConfigMap "+ns+"/"+name)
	return nil
}

// useSource distributes the certificate of the source ConfigMap cm.
func (t *term) useSource(cm *corev1.ConfigMap) error {
	cert := cm.Data[t.c.opts.SourceKey]
	if err := checkCertificates(cert); err != nil {
		// Retried with backoff; an update of the source retries at once.
		return fmt.Errorf("source ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, t.c.opts.SourceKey, err)
	}
	t.distribute(cert, "ConfigMap "+cm.Namespace+"/"+cm.Name)
	return nil
}

// distribute makes cert, read from the source from, the certificate of this
// term and, if it changed, queues every namespace. In a remote target
// whose own mesh root differs, it withdraws the certificate instead and
// says why.
func (t *term) distribute(cert, from string) {
	if err := t.checkTargetRoot(cert, from); err != nil {
		t.c.setProblem(err)
		t.mu.Lock()
		t.bundle = ""
		t.mu.Unlock()
		return
	}
	t.c.setProblem(nil)
	t.mu.Lock()
	changed := t.bundle != cert
	t.bundle = cert
	t.mu.Unlock()
	if !changed {
		return
	}
	t.c.setDistributed(cert)
	if t.ctbLister != nil {
		t.c.log.Info("distributing the root certificate", zap.String("from", from), zap.String("clusterTrustBundle", ClusterTrustBundleName))
		t.queue.Add(bundleKey)
		return
	}
	nss, _ := t.nsLister.List(labels.Everything())
	t.c.log.Info("distributing the root certificate", zap.String("from", from), zap.Int("namespaces", len(nss)))
	for _, ns := range nss {
		if t.c.wanted(ns) {
			t.queue.Add(key{namespace: ns.Name})
		}
	}
}

func (t *term) currentBundle() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bundle
}

// syncNamespace makes the target in namespace name hold the certificate.
func (t *term) syncNamespace(ctx context.Context, name string) error {
	cert := t.currentBundle()
	if cert == "" {
		// Not read yet: distribute queues every namespace once it is.
		return nil
	}
	ns, err := t.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !t.c.wanted(ns) {
		return nil
	}
	current, err := t.tgtLister.ConfigMaps(name).Get(TargetConfigMap)
	if apierrors.IsNotFound(err) {
		current, err = nil, nil
	}
	if err != nil {
		return err
	}
	// Not fenced by the term: istiod writes these ConfigMaps too, without a
	// stamp, and every leader writes the same root (docs/controllers.md).
	wrote, err := controllers.ApplyConfigMap(ctx, t.c.client.CoreV1(), current, controllers.OwnedConfigMap{
		Namespace: name,
		Name:      TargetConfigMap,
		Labels:    map[string]string{ConfigLabel: "true"},
		Data:      map[string]string{TargetKey: cert},
	})
	if err != nil {
		return err
	}
	if wrote {
		t.c.metrics.Wrote()
		t.c.log.Debug("wrote the root certificate", zap.String("namespace", name), zap.Bool("created", current == nil))
	}
	return nil
}

func (c *Controller) lastDistributed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.distributed
}

func (c *Controller) setDistributed(cert string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.distributed = cert
}
