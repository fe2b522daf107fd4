package revision

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/controllers"
)

// Controller is the per-revision controller. Build it with New; run it with
// Run while leading the revision's Lease.
type Controller struct {
	client   kubernetes.Interface
	opts     Options
	cmName   string
	selector labels.Selector
	log      *zap.Logger
	metrics  *controllers.Metrics
}

var _ controllers.Controller = (*Controller)(nil)

// resync is the only queued item: the list is computed as a whole.
type resync struct{}

// New validates opts and returns a controller. It returns an error naming
// every invalid option; it does not contact the API server.
func New(client kubernetes.Interface, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	metrics, err := controllers.Prepare(Name, client, opts.validate(), opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Controller{
		client:   client,
		opts:     opts,
		cmName:   ConfigMapName(opts.Revision),
		selector: labels.SelectorFromSet(labels.Set{opts.RevisionLabel: opts.Revision}),
		log:      opts.Logger.With(zap.String("controller", Name), zap.String("revision", opts.Revision)),
		metrics:  metrics,
	}, nil
}

// Name returns "revision".
func (c *Controller) Name() string { return Name }

// Run keeps the revision's ConfigMap up to date until ctx is done, then
// returns after its informers and worker have stopped.
func (c *Controller) Run(ctx context.Context) {
	c.log.Info("started")
	defer c.log.Info("stopped")

	queue := controllers.NewQueue[resync](Name)
	labelSel := c.selector.String()
	namespaces := coreinformers.NewFilteredNamespaceInformer(c.client, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = labelSel })
	nameSel := fields.OneTermEqualSelector("metadata.name", c.cmName).String()
	configMaps := coreinformers.NewFilteredConfigMapInformer(c.client, c.opts.MeshNamespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = nameSel })
	nsLister := corelisters.NewNamespaceLister(namespaces.GetIndexer())
	cmLister := corelisters.NewConfigMapLister(configMaps.GetIndexer())

	// A namespace leaving the selector (unlabelled) arrives as a delete.
	nsReg, _ := namespaces.AddEventHandler(controllers.Enqueue(queue, func(any) (resync, bool) { return resync{}, true }))
	cmReg, _ := configMaps.AddEventHandler(controllers.Enqueue(queue, func(obj any) (resync, bool) {
		cm, ok := obj.(*corev1.ConfigMap)
		return resync{}, ok && cm.Name == c.cmName
	}))

	controllers.Loop[resync]{
		Informers: []cache.SharedIndexInformer{namespaces, configMaps},
		Synced:    []cache.InformerSynced{nsReg.HasSynced, cmReg.HasSynced},
		Queue:     queue,
		Workers:   1,
		Reconcile: func(ctx context.Context, _ resync) error { return c.sync(ctx, nsLister, cmLister) },
		// Without labelled namespaces no event would come: queue once.
		OnSynced: func() { queue.Add(resync{}) },
		Metrics:  c.metrics,
		Log:      c.log,
	}.Run(ctx)
}

// sync writes the current list if it differs from the stored one.
func (c *Controller) sync(ctx context.Context, nsLister corelisters.NamespaceLister, cmLister corelisters.ConfigMapLister) error {
	// The selector is applied again: a server (or fake) that ignores it
	// must not add namespaces of other revisions.
	nss, err := nsLister.List(c.selector)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(nss))
	for _, ns := range nss {
		if ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating {
			names = append(names, ns.Name)
		}
	}
	slices.Sort(names)

	current, err := cmLister.ConfigMaps(c.opts.MeshNamespace).Get(c.cmName)
	if apierrors.IsNotFound(err) {
		current, err = nil, nil
	}
	if err != nil {
		return err
	}
	wrote, err := controllers.ApplyFencedConfigMap(ctx, c.client.CoreV1(), current, controllers.OwnedConfigMap{
		Namespace: c.opts.MeshNamespace,
		Name:      c.cmName,
		Data: map[string]string{
			KeyNamespaces: strings.Join(names, "\n"),
			KeyCount:      strconv.Itoa(len(names)),
		},
	})
	if err != nil {
		return err
	}
	if wrote {
		c.metrics.Wrote()
		c.log.Info("wrote the namespaces of the revision", zap.Int("count", len(names)))
	}
	return nil
}
