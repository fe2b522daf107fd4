package daemon

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/election/identity"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Kind names one of the daemon's elections and the controllers it gates.
// The values are what --controllers accepts.
type Kind string

const (
	// KindNamespace is istiod's prioritized election NamespaceController (a
	// ConfigMap lock shared with istiod), gating the root-certificate
	// controller, which does istiod's job with istiod's data. Remote
	// instances take part with a remote key.
	KindNamespace Kind = "namespace"
	// KindStatus is meshd's own prioritized election status.ElectionID on a
	// Lease, gating the status controller.
	KindStatus Kind = "status"
	// KindRevision is meshd's own per-revision election revision.ElectionID
	// (Lease <id>-<revision>), gating the revision controller.
	KindRevision Kind = "revision"
)

// AllKinds returns every kind in the order the daemon starts them.
func AllKinds() []Kind { return []Kind{KindNamespace, KindStatus, KindRevision} }

// ParseKinds reads a comma-separated list of kinds, such as the value of
// --controllers. Spaces around names are ignored, repetitions are dropped and
// the result is in AllKinds order. It returns an error naming every unknown
// name, or when the list is empty.
func ParseKinds(list string) ([]Kind, error) {
	seen := map[Kind]bool{}
	var unknown []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		k := Kind(name)
		if !slices.Contains(AllKinds(), k) {
			unknown = append(unknown, fmt.Sprintf("%q", name))
			continue
		}
		seen[k] = true
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown controllers %s: want a comma-separated list of %s", strings.Join(unknown, ", "), kindList())
	}
	var kinds []Kind
	for _, k := range AllKinds() {
		if seen[k] {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no controllers selected: want a comma-separated list of %s", kindList())
	}
	return kinds, nil
}

func kindList() string {
	names := make([]string, 0, len(AllKinds()))
	for _, k := range AllKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

// Controller is work that runs only while this instance leads an election
// (see controllers.Controller). Run must return soon after ctx is cancelled,
// which happens when leadership ends; it is called again in a later term.
type Controller = controllers.Controller

// ControllerEnv is what the daemon hands to a ControllerFactory.
type ControllerEnv struct {
	// Client talks to the cluster the controllers work in.
	Client kubernetes.Interface
	// SourceClient, when not nil, talks to this instance's own cluster,
	// where the mesh's root lives, while Client talks to a remote cluster.
	SourceClient kubernetes.Interface
	// Cluster is the ID of the cluster Client talks to.
	Cluster   string
	Namespace string
	Identity  string
	Revision  string
	Remote    bool
	// SelfSignedRoot is Config.SelfSignedRoot.
	SelfSignedRoot bool
	// ClusterTrustBundle is Config.ClusterTrustBundle.
	ClusterTrustBundle bool
	// Recorder records Kubernetes Events while the daemon runs.
	Recorder resourcelock.EventRecorder
	// Logger is the daemon's logger, named after the kind.
	Logger *zap.Logger
	// Registerer is the daemon's metrics registry, served on /metrics.
	Registerer prometheus.Registerer
}

// ControllerFactory builds the controllers gated by the election of kind.
// It is called once per selected kind by New, and with KindNamespace for
// every remote cluster the daemon adds (ControllerEnv.SourceClient set).
type ControllerFactory func(kind Kind, env ControllerEnv) ([]Controller, error)

// Defaults of Config.
const (
	DefaultNamespace = revisions.DefaultMeshNamespace
	// MaxShutdownTimeout caps the default ShutdownTimeout.
	MaxShutdownTimeout = 10 * time.Second
)

// Config configures a Daemon. The zero value of every field but Client has a
// default, given on the field.
type Config struct {
	// Client talks to the cluster. Required.
	Client kubernetes.Interface
	// ElectionClient, if set, is used by the elections (locks, the default
	// revision watch) instead of Client, so that controller traffic cannot
	// hold up lock renewals in a shared client-side rate limiter.
	ElectionClient kubernetes.Interface

	// Namespace holds the election locks; default "istio-system".
	Namespace string
	// Identity is the holder identity; default identity.Draw(),
	// <hostname>_<random suffix>, unique to this process.
	Identity string
	// Revision is this instance's control-plane revision; default "default".
	Revision string
	// Remote marks an instance that serves a remote cluster: its key in
	// the namespace election is "^"+revision.
	Remote bool
	// TTL is the lease duration of every election; default
	// LEADER_ELECTION_TTL.
	TTL time.Duration

	// ClusterID names this instance's own cluster; default
	// multicluster.DefaultClusterID ("Kubernetes", istiod's default). It
	// labels the metrics and, with Multicluster, is the Secret key that is
	// not a remote cluster.
	ClusterID string
	// Multicluster makes the daemon watch the Secrets labelled
	// istio/multiCluster=true in Namespace and, for every remote cluster
	// they name, run the namespace election of that cluster with a remote
	// key and its controllers, publishing this cluster's mesh root there.
	// Needs KindNamespace among Kinds, and get, list and watch on Secrets
	// in Namespace.
	Multicluster bool
	// ExternalControlPlane makes the daemon join a remote cluster's
	// election only when that cluster's mesh namespace names ClusterID (or
	// "*") in its topology.istio.io/controlPlaneClusters annotation, as
	// istiod does with EXTERNAL_ISTIOD.
	ExternalControlPlane bool
	// RemoteClients connects to a remote cluster; default
	// DefaultRemoteClients.
	RemoteClients RemoteClientsFunc

	// ElectionMode is how the candidates of meshd's own Lease elections
	// (status, revision) agree on a leader; default election.Racing.
	// istiod's ConfigMap election (namespace) always races. With
	// election.Coordinated the daemon also runs the namespace's
	// coordinator election; when the API server does not serve
	// LeaseCandidates it says so once and races.
	ElectionMode election.Mode
	// Sessions renews meshd's own elections (status, revision) through one
	// session Lease per process when they race (election.WithSessions);
	// istiod's election (namespace) never uses it.
	Sessions bool
	// Pod, when set, owns this instance's LeaseCandidates, so that they go
	// with the Pod.
	Pod *metav1.OwnerReference
	// BinaryVersion is what this instance's LeaseCandidates announce (a
	// semantic version without "v"); default the module's version.
	BinaryVersion string

	// SelfSignedRoot lets the namespace controller mint a self-signed root
	// when the mesh has no CA Secret (see package rootcert). Never set it
	// beside a live istiod. Default false: without a CA Secret no root is
	// published and /readyz says why.
	SelfSignedRoot bool

	// ClusterTrustBundle makes the namespace controller publish the root in
	// the ClusterTrustBundle istio.io:istiod-ca:root-cert (certificates.k8s.io
	// v1beta1) instead of a ConfigMap in every namespace, in this cluster
	// and in every remote one, as istiod does with
	// ENABLE_CLUSTER_TRUST_BUNDLE_API.
	ClusterTrustBundle bool

	// Kinds selects the elections (and so the controllers) to run; default
	// AllKinds().
	Kinds []Kind
	// Controllers builds the controllers of each kind; default
	// BuiltinControllers.
	Controllers ControllerFactory

	// MonitoringAddress is where the monitoring endpoints listen; default
	// monitoring.DefaultAddress (":15014").
	MonitoringAddress string
	// MonitoringListener, if set, is used instead of listening on
	// MonitoringAddress. Run closes it.
	MonitoringListener net.Listener
	// HealthTolerance is how long past its lease a leader that has not
	// renewed still counts as healthy; default TTL/2. With it, /healthz
	// fails for a leader whose last renew is 1.5 x TTL old: its own renew
	// deadline (TTL/2) passed a whole TTL before, and followers have treated
	// the lease as expired for TTL/2, so the process is stuck, not slow.
	HealthTolerance time.Duration
	// ShutdownTimeout bounds how long Run takes to return once its context
	// is cancelled: controllers get half of it to stop (or
	// LEADER_ELECTION_STOP_TIMEOUT, when shorter), the rest is for releasing
	// the locks. Default: TTL or MaxShutdownTimeout, whichever is smaller.
	ShutdownTimeout time.Duration

	// ShutdownDeadline, if set, is set by Run when shutdown begins, to a
	// little before ShutdownTimeout ends; wrap the clients' transports with
	// it so that no API request outlasts the shutdown (see
	// ShutdownDeadline). Without it, a lock release to an API server that
	// does not answer can outlast ShutdownTimeout.
	ShutdownDeadline *ShutdownDeadline

	// LedgerFile, if set, receives a line when each controller starts and
	// stops (see internal/ledger), so that tests can prove that no two
	// processes ran the same controller at once.
	LedgerFile string

	// Logger receives the daemon's logs; default a no-op logger.
	Logger *zap.Logger
}

// withDefaults returns c with every empty field filled in.
func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.ElectionClient == nil {
		c.ElectionClient = c.Client
	}
	if c.Identity == "" {
		c.Identity = identity.Draw()
	}
	if c.Revision == "" {
		c.Revision = election.DefaultRevision
	}
	if c.ClusterID == "" {
		c.ClusterID = multicluster.DefaultClusterID
	}
	if c.RemoteClients == nil {
		c.RemoteClients = DefaultRemoteClients
	}
	if c.ElectionMode == "" {
		c.ElectionMode = election.Racing
	}
	if c.TTL == 0 {
		c.TTL = features.LeaderElectionTTL.Get()
	}
	if c.Kinds == nil {
		c.Kinds = AllKinds()
	}
	if c.Controllers == nil {
		c.Controllers = BuiltinControllers
	}
	if c.MonitoringAddress == "" {
		c.MonitoringAddress = monitoring.DefaultAddress
	}
	if c.HealthTolerance == 0 {
		c.HealthTolerance = c.TTL / 2
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = min(c.TTL, MaxShutdownTimeout)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// validate reports every problem of a defaulted Config at once. The
// elections validate the rest (revision, identity, timing) when New builds
// them.
func (c Config) validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.Client == nil {
		bad("Client is required")
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		bad("invalid Namespace %q: %s", c.Namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(c.Revision); len(msgs) > 0 {
		bad("invalid Revision %q: %s", c.Revision, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsConfigMapKey(c.ClusterID); len(msgs) > 0 {
		bad("invalid ClusterID %q: %s", c.ClusterID, strings.Join(msgs, "; "))
	}
	if c.Multicluster && !slices.Contains(c.Kinds, KindNamespace) {
		bad("Multicluster needs kind %q", KindNamespace)
	}
	if c.ExternalControlPlane && !c.Multicluster {
		bad("ExternalControlPlane applies only with Multicluster")
	}
	if c.TTL < time.Second {
		bad("TTL %v must be at least 1s", c.TTL)
	}
	if len(c.Kinds) == 0 {
		bad("Kinds must not be empty")
	}
	seen := map[Kind]bool{}
	for _, k := range c.Kinds {
		if !slices.Contains(AllKinds(), k) {
			bad("unknown kind %q", k)
		} else if seen[k] {
			bad("kind %q given twice", k)
		}
		seen[k] = true
	}
	if c.HealthTolerance < 0 {
		bad("HealthTolerance %v must not be negative", c.HealthTolerance)
	}
	if c.ShutdownTimeout < 0 {
		bad("ShutdownTimeout %v must not be negative", c.ShutdownTimeout)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("daemon: invalid config: %s", strings.Join(problems, "; "))
}
