package revision

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

const (
	// ElectionID is the per-revision election whose leader (one per
	// revision) runs this controller; its Lease is ElectionID-<revision>.
	// It is meshd's own: the controller does not deploy gateways, so it
	// never takes istiod's istio-gateway-deployment-<revision>, which would
	// stop istiod's gateway controller of that revision.
	ElectionID = "meshd-revision"
	// Name is the controller's name in logs and metrics.
	Name = "revision"

	// DefaultRevisionLabel is the default Options.RevisionLabel.
	DefaultRevisionLabel = revisions.DefaultRevisionLabel
	// Data keys of the ConfigMap.
	KeyNamespaces = "namespaces"
	KeyCount      = "count"
)

// ConfigMapName is the name of the ConfigMap written for revision.
func ConfigMapName(revision string) string { return "meshd-revision-" + revision }

// Options configure New.
type Options struct {
	// MeshNamespace holds the ConfigMap. Required.
	MeshNamespace string
	// Revision whose namespaces are listed. Empty means
	// election.DefaultRevision.
	Revision string
	// RevisionLabel is the namespace label naming a revision. Default
	// DefaultRevisionLabel.
	RevisionLabel string
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the controller's counters; nil means they are not
	// registered.
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.Revision == "" {
		o.Revision = election.DefaultRevision
	}
	if o.RevisionLabel == "" {
		o.RevisionLabel = DefaultRevisionLabel
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
	add(controllers.CheckDNSLabel("Revision", o.Revision))
	add(controllers.CheckLabelKey("RevisionLabel", o.RevisionLabel))
	return errlist.Join(errs...)
}
