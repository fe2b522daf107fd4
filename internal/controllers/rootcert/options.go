package rootcert

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

const (
	// ElectionID is the election whose leader runs this controller.
	ElectionID = election.NamespaceController
	// Name is the controller's name in logs and metrics.
	Name = "namespace"

	// ClusterTrustBundleName is the certificates.k8s.io/v1beta1
	// ClusterTrustBundle the root is published in with
	// Options.ClusterTrustBundle, the name istiod uses.
	ClusterTrustBundleName = "istio.io:istiod-ca:root-cert"
	// ClusterTrustBundleSigner is its signer name, istiod's.
	ClusterTrustBundleSigner = "istio.io/istiod-ca"

	// TargetConfigMap is the ConfigMap written into every namespace.
	TargetConfigMap = "istio-ca-root-cert"
	// TargetKey is the data key of TargetConfigMap holding the certificate.
	TargetKey = "root-cert.pem"
	// PluggedCASecret is the Secret in the mesh namespace holding a CA that
	// an operator plugged in; istiod reads its root from PluggedRootKey.
	PluggedCASecret = "cacerts"
	// PluggedRootKey is the data key of PluggedCASecret with the root.
	PluggedRootKey = "root-cert.pem"
	// IstiodCASecret is the Secret in the mesh namespace where istiod keeps
	// the CA it generated itself; its certificate, IstiodCAKey, is the root.
	IstiodCASecret = "istio-ca-secret"
	// IstiodCAKey is the data key of IstiodCASecret with the root.
	IstiodCAKey = "ca-cert.pem"

	// DefaultSourceConfigMap is the default Options.SourceConfigMap, used
	// only with Options.SelfSignedRoot.
	DefaultSourceConfigMap = "meshd-root-cert"
	// DefaultSourceKey is the default Options.SourceKey.
	DefaultSourceKey = "root-cert.pem"

	// ConfigLabel marks the ConfigMaps istiod manages; targets carry it with
	// the value "true".
	ConfigLabel = "istio.io/config"
	// GeneratedAnnotation marks a source ConfigMap holding a certificate the
	// controller generated; its value is "true".
	GeneratedAnnotation = "meshd.io/generated-root-cert"
)

// IstiodExcludedNamespaces are the namespaces istiod's namespace controller
// skips. The default exclusion list is empty; pass this to match istiod.
var IstiodExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// Options configure New.
type Options struct {
	// MeshNamespace holds the mesh CA's Secrets (and, with SelfSignedRoot,
	// the source ConfigMap). Required.
	MeshNamespace string
	// SourceClient is the cluster the mesh's root is read from: its CA
	// Secrets (and, with SelfSignedRoot, the source ConfigMap) in
	// MeshNamespace. Default: the cluster the controller writes into. Set
	// it to publish the root of this control plane's cluster into a remote
	// cluster; the controller then also reads the remote cluster's own CA
	// Secrets and publishes nothing while they hold a different root, since
	// the workloads there trust that one (docs/multicluster.md).
	SourceClient kubernetes.Interface
	// ClusterTrustBundle publishes the root in the cluster-scoped
	// ClusterTrustBundle ClusterTrustBundleName (certificates.k8s.io
	// v1beta1, a beta API off by default) instead of a ConfigMap in every
	// namespace, as istiod does with ENABLE_CLUSTER_TRUST_BUNDLE_API.
	// Writing a bundle with a signer name needs the verb attest on
	// signers.certificates.k8s.io named ClusterTrustBundleSigner.
	ClusterTrustBundle bool
	// SelfSignedRoot lets the controller mint a self-signed root when the
	// mesh has no CA Secret, and keep it in SourceConfigMap. Never set it
	// beside a live istiod: the minted root is not the one sidecars trust.
	// It is for demos and meshes without istiod. Default false: with no CA
	// Secret nothing is published.
	SelfSignedRoot bool
	// SourceConfigMap names the ConfigMap in MeshNamespace the self-signed
	// root is kept in (created when absent). Only used with SelfSignedRoot.
	// Default DefaultSourceConfigMap.
	SourceConfigMap string
	// SourceKey is the data key of SourceConfigMap holding the certificate.
	// Default DefaultSourceKey.
	SourceKey string
	// ExcludedNamespaces are never written to. Default: none.
	ExcludedNamespaces []string
	// Workers is how many namespaces are written at once. Default 4.
	Workers int
	// Recorder, if set, receives a Warning Event when no root can be
	// published, on the Secret PluggedCASecret of the mesh namespace.
	Recorder resourcelock.EventRecorder
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the controller's counters; nil means they are not
	// registered.
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.SourceConfigMap == "" {
		o.SourceConfigMap = DefaultSourceConfigMap
	}
	if o.SourceKey == "" {
		o.SourceKey = DefaultSourceKey
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// validate reports every invalid field of defaulted options.
func (o Options) validate() error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	add(controllers.CheckDNSLabel("MeshNamespace", o.MeshNamespace))
	add(controllers.CheckName("SourceConfigMap", o.SourceConfigMap))
	add(controllers.CheckConfigMapKey("SourceKey", o.SourceKey))
	for i, ns := range o.ExcludedNamespaces {
		add(controllers.CheckDNSLabel(fmt.Sprintf("ExcludedNamespaces[%d]", i), ns))
	}
	if o.Workers < 0 {
		add(fmt.Errorf("invalid Options.Workers %d: must not be negative", o.Workers))
	}
	return errlist.Join(errs...)
}
