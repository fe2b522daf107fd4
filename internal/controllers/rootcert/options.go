package rootcert

import (
	"fmt"

	"github.com/hashicorp/go-multierror"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/pkg/election"
)

const (
	// ElectionID is the election whose leader runs this controller.
	ElectionID = election.NamespaceController
	// Name is the controller's name in logs and metrics.
	Name = "namespace"

	// TargetConfigMap is the ConfigMap written into every namespace.
	TargetConfigMap = "istio-ca-root-cert"
	// TargetKey is the data key of TargetConfigMap holding the certificate.
	TargetKey = "root-cert.pem"
	// DefaultSourceConfigMap is the default Options.SourceConfigMap.
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
	// MeshNamespace holds the source ConfigMap. Required.
	MeshNamespace string
	// SourceConfigMap names the ConfigMap in MeshNamespace the certificate
	// is read from (and created in when absent). Default
	// DefaultSourceConfigMap.
	SourceConfigMap string
	// SourceKey is the data key of SourceConfigMap holding the certificate.
	// Default DefaultSourceKey.
	SourceKey string
	// ExcludedNamespaces are never written to. Default: none.
	ExcludedNamespaces []string
	// Workers is how many namespaces are written at once. Default 4.
	Workers int
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
	var errs *multierror.Error
	add := func(err error) {
		if err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	add(controllers.CheckDNSLabel("MeshNamespace", o.MeshNamespace))
	add(controllers.CheckName("SourceConfigMap", o.SourceConfigMap))
	add(controllers.CheckConfigMapKey("SourceKey", o.SourceKey))
	for i, ns := range o.ExcludedNamespaces {
		add(controllers.CheckDNSLabel(fmt.Sprintf("ExcludedNamespaces[%d]", i), ns))
	}
	if o.Workers < 0 {
		add(fmt.Errorf("invalid Options.Workers %d: must not be negative", o.Workers))
	}
	return errs.ErrorOrNil()
}
