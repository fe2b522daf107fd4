package status

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/lockstatus"
)

// Controller is the status controller. Build it with New; run it with Run
// while leading ElectionID.
type Controller struct {
	client    kubernetes.Interface
	opts      Options
	heartbeat time.Duration
	log       *zap.Logger
	metrics   *controllers.Metrics
	now       func() time.Time

	mu     sync.Mutex
	queues map[workqueue.TypedInterface[refresh]]struct{} // of running terms, for Trigger
}

var _ controllers.Controller = (*Controller)(nil)

// refresh is the only queued item: the status is computed as a whole.
type refresh struct{}

// New validates opts and returns a controller. It returns an error naming
// every invalid option; it does not contact the API server.
func New(client kubernetes.Interface, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	metrics, err := controllers.Prepare(Name, client, opts.validate(), opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Controller{
		client: client,
		opts:   opts,
		// One interval early: a refresh comes at least every Interval, so
		// a write then comes at least every HeartbeatIntervals × Interval.
		heartbeat: (HeartbeatIntervals - 1) * opts.Interval,
		log:       opts.Logger.With(zap.String("controller", Name)),
		metrics:   metrics,
		now:       time.Now,
		queues:    map[workqueue.TypedInterface[refresh]]struct{}{},
	}, nil
}

// Name returns "status".
func (c *Controller) Name() string { return Name }

// Trigger asks a running controller to refresh soon. It does not block and
// does nothing while Run is not running.
func (c *Controller) Trigger() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.queues {
		q.Add(refresh{})
	}
}

// Run keeps the status ConfigMap up to date until ctx is done, then returns
// after its informer, ticker and worker have stopped.
func (c *Controller) Run(ctx context.Context) {
	c.log.Info("started")
	defer c.log.Info("stopped")

	queue := controllers.NewQueue[refresh](Name)
	c.mu.Lock()
	c.queues[queue] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.queues, queue)
		c.mu.Unlock()
	}()

	sel := fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
	informer := coreinformers.NewFilteredConfigMapInformer(c.client, c.opts.MeshNamespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = sel })
	lister := corelisters.NewConfigMapLister(informer.GetIndexer())
	// Someone else's edit or delete is repaired at once; our own writes
	// come back too and are found to need nothing.
	reg, _ := informer.AddEventHandler(controllers.Enqueue(queue, func(obj any) (refresh, bool) {
		cm, ok := obj.(*corev1.ConfigMap)
		return refresh{}, ok && cm.Name == ConfigMapName
	}))

	var lastWrite time.Time // only touched by the single worker
	controllers.Loop[refresh]{
		Informers: []cache.SharedIndexInformer{informer},
		Synced:    []cache.InformerSynced{reg.HasSynced},
		Queue:     queue,
		Workers:   1,
		Reconcile: func(ctx context.Context, _ refresh) error { return c.sync(ctx, lister, &lastWrite) },
		OnSynced:  func() { queue.Add(refresh{}) },
		Background: []func(context.Context){func(ctx context.Context) {
			tick := time.NewTicker(c.opts.Interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					queue.Add(refresh{})
				}
			}
		}},
		Metrics: c.metrics,
		Log:     c.log,
	}.Run(ctx)
}

// sync reads the locks and writes the status if it is stale. lastWrite is
// the time of this term's last write, updated on success.
func (c *Controller) sync(ctx context.Context, lister corelisters.ConfigMapLister, lastWrite *time.Time) error {
	locks, err := lockstatus.List(ctx, c.client, c.opts.MeshNamespace)
	if err != nil {
		return err
	}
	now := c.now()
	snap := compute(locks, now, c.opts.Revision, c.opts.PerRevisionElections)

	current, err := lister.ConfigMaps(c.opts.MeshNamespace).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		current, err = nil, nil
	}
	if err != nil {
		return err
	}
	if current != nil && !snap.stale(current.Data, c.opts.Identity, now, *lastWrite, c.heartbeat) {
		return nil
	}
	wrote, err := controllers.ApplyFencedConfigMap(ctx, c.client.CoreV1(), current, controllers.OwnedConfigMap{
		Namespace: c.opts.MeshNamespace,
		Name:      ConfigMapName,
		Data:      snap.data(c.opts.Identity, now),
	})
	if err != nil {
		return err
	}
	if wrote {
		*lastWrite = now
		c.metrics.Wrote()
		c.log.Debug("wrote the status", zap.Strings("revisions", snap.revisions), zap.Int("leaders", len(snap.leaders)))
	}
	return nil
}
