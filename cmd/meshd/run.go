package main

import (
	"context"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers/rootcert"
	"github.com/meshd-io/meshd/internal/daemon"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

type runOptions struct {
	kube              kubeFlags
	identity          string
	revision          string
	remote            bool
	clusterID         string
	multicluster      bool
	externalCP        bool
	trustBundle       bool
	monitoringAddress string
	ttl               time.Duration
	ttlSet            bool // --ttl was given, so 0 is a value and not "unset"
	controllers       string
	logLevel          string
	logFormat         string
	ledgerFile        string
	selfSignedRoot    bool
	electionMode      string
	sessions          bool
	podUID            string
}

func newRunCommand() *cobra.Command {
	var (
		o   runOptions
		env envBindings
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Contend in the elections and run the controllers (the default command)",
		Long: `Run the daemon. Each selected controller runs only while this instance leads
its election:

  namespace  the mesh's root certificate (Secret cacerts, root-cert.pem, else
             Secret istio-ca-secret, ca-cert.pem) into istio-ca-root-cert
             of every namespace (with --cluster-trust-bundle, into the
             ClusterTrustBundle istio.io:istiod-ca:root-cert instead);
             istiod's job, so istiod's election
             (ConfigMap lock istio-namespace-controller-election, prioritized)
  status     revisions and election leaders into meshd-status
             (meshd's Lease meshd-status-leader, prioritized)
  revision   the namespaces of this revision into meshd-revision-<revision>
             (meshd's Lease meshd-revision-<revision>, one leader per revision)

With --multicluster, meshd also reads the remote clusters of the mesh from
the Secrets labelled istio/multiCluster=true in its namespace (one
kubeconfig per data key, the key being the cluster ID, as istiod reads
them) and, for each, contends in that cluster's namespace election with a
remote key, publishing this cluster's mesh root there while it leads.
Secrets are followed at run time; a bad one is reported (log, Event,
/debug/clusters) and skipped. See docs/multicluster.md.

Without a CA Secret the namespace controller publishes nothing and /readyz
says why; --self-signed-root mints a root instead (never beside istiod).

Endpoints on --monitoring-address: /healthz fails when a lock this instance
leads has not been renewed for 1.5 x ttl (the lease plus ttl/2 tolerance),
/readyz succeeds once the elections run and the default revision is known
and no controller is blocked (such as by a missing mesh root certificate),
/metrics, /debug/elections and /debug/clusters (JSON).

On SIGTERM or SIGINT meshd stops its controllers and releases every lock it
holds, within ttl or 10s, whichever is smaller; it exits 1 if that takes
longer. A second signal ends it at once.

Other settings are environment variables; see "meshd env".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every setting is checked before anything talks to the cluster.
			o.ttlSet = cmd.Flags().Changed("ttl")
			kinds, err := o.check(env.apply(cmd.Flags()))
			if err != nil {
				return err
			}
			return runDaemon(cmd.Context(), &o, kinds, cmd)
		},
	}
	o.register(cmd.Flags(), &env)
	return cmd
}

// register defines the flags of "meshd run" on fs.
func (o *runOptions) register(fs *pflag.FlagSet, env *envBindings) {
	o.kube.register(fs, env)
	env.stringVarP(fs, &o.identity, "identity", "", "POD_NAME", "", "holder identity written into the locks; <hostname>_<random suffix>, unique to this process, when empty")
	env.stringVarP(fs, &o.revision, "revision", "", "REVISION", election.DefaultRevision, "control-plane revision of this instance")
	fs.BoolVar(&o.remote, "remote", false, "this instance serves a remote cluster (holder key ^<revision>)")
	env.stringVarP(fs, &o.clusterID, "cluster-id", "", "CLUSTER_ID", multicluster.DefaultClusterID, "ID of this instance's own cluster; a remote cluster Secret's key equal to it is ignored")
	env.boolVar(fs, &o.multicluster, "multicluster", "ENABLE_MULTICLUSTER", false,
		"also run the namespace election and controller of every remote cluster named by the Secrets labelled "+multicluster.SecretLabel+"=true in the namespace")
	env.boolVar(fs, &o.trustBundle, "cluster-trust-bundle", "ENABLE_CLUSTER_TRUST_BUNDLE_API", false,
		"publish the mesh root in the ClusterTrustBundle "+rootcert.ClusterTrustBundleName+" (certificates.k8s.io/v1beta1) instead of a ConfigMap in every namespace")
	env.boolVar(fs, &o.externalCP, "external-control-plane", "EXTERNAL_ISTIOD", false,
		"with --multicluster, join a remote cluster's election only when its mesh namespace lists this cluster in "+multicluster.ControlPlaneClustersAnnotation)
	fs.StringVar(&o.monitoringAddress, "monitoring-address", monitoring.DefaultAddress, "address of the health, readiness, metrics and debug endpoints; port 0 takes a free port, which the \"meshd running\" log line names")
	fs.DurationVar(&o.ttl, "ttl", 0, "lease duration of every election; renew deadline ttl/2, retry period ttl/4 (default $LEADER_ELECTION_TTL, else "+
		election.DefaultTTL.String()+")")
	env.stringVarP(fs, &o.electionMode, "election-mode", "", "LEADER_ELECTION_MODE", string(election.Racing),
		"how meshd's Lease elections agree on a leader: racing, coordinated or oldest-emulation-version (istiod's ConfigMap elections always race)")
	env.boolVar(fs, &o.sessions, "sessions", "LEADER_ELECTION_SESSIONS", false,
		"renew meshd's own racing Lease elections through one heartbeat Lease per process; every candidate must be a meshd with sessions")
	env.stringVarP(fs, &o.podUID, "pod-uid", "", "POD_UID", "", "UID of this instance's Pod; owner of its LeaseCandidates in coordinated mode, so that they go with the Pod")
	fs.StringVar(&o.controllers, "controllers", kindList(daemon.AllKinds()), "comma-separated controllers to run")
	fs.StringVar(&o.logLevel, "log-level", "info", "minimum log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", logFormatJSON, "log format: json or console")
	fs.BoolVar(&o.selfSignedRoot, "self-signed-root", false, "when the mesh has no CA Secret (cacerts, istio-ca-secret), mint a self-signed root and publish it; for demos only, never beside a live istiod")
	fs.StringVar(&o.ledgerFile, "ledger-file", "", "append every controller term (start and stop, monotonic clock) to this file, for overlap checks in tests")
	_ = fs.MarkHidden("ledger-file")
}

// runDaemon runs the daemon with checked settings until a signal stops it.
func runDaemon(ctx context.Context, o *runOptions, kinds []daemon.Kind, cmd *cobra.Command) error {
	log, err := newLogger(o.logLevel, o.logFormat, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	bridgeKlog(log)
	features.Default().SetLogger(log)

	// No request may outlast the shutdown bound, even to an API server
	// that does not answer.
	deadline := daemon.NewShutdownDeadline()
	clients, err := o.kube.clients(2, deadline.WrapTransport)
	if err != nil {
		return err
	}
	d, err := daemon.New(daemon.Config{
		Client:               clients[0],
		ElectionClient:       clients[1],
		Namespace:            o.kube.namespace,
		Identity:             o.identity,
		Revision:             o.revision,
		Remote:               o.remote,
		ClusterID:            o.clusterID,
		Multicluster:         o.multicluster,
		ExternalControlPlane: o.externalCP,
		ClusterTrustBundle:   o.trustBundle,
		RemoteClients: func(c multicluster.Cluster) (kubernetes.Interface, kubernetes.Interface, error) {
			clients, err := remoteClients(c.Kubeconfig, 2, deadline.WrapTransport)
			if err != nil {
				return nil, nil, err
			}
			return clients[0], clients[1], nil
		},
		TTL:               o.ttl,
		Kinds:             kinds,
		MonitoringAddress: o.monitoringAddress,
		LedgerFile:        o.ledgerFile,
		SelfSignedRoot:    o.selfSignedRoot,
		ElectionMode:      election.Mode(o.electionMode),
		Sessions:          o.sessions,
		Pod:               podOwner(o.identity, o.podUID),
		ShutdownDeadline:  deadline,
		Logger:            log,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		// After the first signal the default handling returns, so that a
		// second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	log.Info("starting meshd", zap.String("version", buildVersion()))
	if err := d.Run(ctx); err != nil {
		log.Error("meshd stopped with an error", zap.Error(err))
		return err
	}
	log.Info("meshd stopped")
	return nil
}

func kindList(kinds []daemon.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ",")
}

// podOwner is the owner reference of this instance's Pod, when its name
// (the identity, from POD_NAME) and UID are both known; nil otherwise.
func podOwner(name, uid string) *metav1.OwnerReference {
	if name == "" || uid == "" {
		return nil
	}
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
}
