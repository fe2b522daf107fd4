package status

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/pkg/election"
)

const (
	// ElectionID is the election whose leader runs this controller: a
	// Lease of meshd's own. The controller does no job of istiod's, so it
	// never takes istiod's election istio-status-leader.
	ElectionID = "meshd-status-leader"
	// Name is the controller's name in logs and metrics.
	Name = "status"

	// ConfigMapName is the ConfigMap written in the mesh namespace.
	ConfigMapName = "meshd-status"
	// Data keys of ConfigMapName.
	KeyRevisions  = "revisions"
	KeyLeaders    = "leaders"
	KeyUpdatedBy  = "updatedBy"
	KeyUpdateTime = "updateTime"

	// DefaultInterval is the default Options.Interval.
	DefaultInterval = 10 * time.Second
	// HeartbeatIntervals × Interval is the longest the ConfigMap goes
	// unwritten while the controller runs.
	HeartbeatIntervals = 6
)

// DefaultPerRevisionElections is the default Options.PerRevisionElections.
var DefaultPerRevisionElections = []string{revision.ElectionID}

// Options configure New.
type Options struct {
	// MeshNamespace holds the locks and the status ConfigMap. Required.
	MeshNamespace string
	// Identity is written as updatedBy. Required.
	Identity string
	// Revision is this instance's revision, always listed as running.
	// Empty means election.DefaultRevision.
	Revision string
	// Interval between refreshes. Zero means DefaultInterval.
	Interval time.Duration
	// PerRevisionElections are the election IDs whose Leases are named
	// <id>-<revision>. Nil means DefaultPerRevisionElections; an empty,
	// non-nil slice means none.
	PerRevisionElections []string
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
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.PerRevisionElections == nil {
		o.PerRevisionElections = DefaultPerRevisionElections
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
	if o.Identity == "" {
		add(errors.New("Options.Identity must not be empty"))
	}
	add(controllers.CheckDNSLabel("Revision", o.Revision))
	if o.Interval < 0 {
		add(fmt.Errorf("invalid Options.Interval %v: must be positive", o.Interval))
	}
	for i, id := range o.PerRevisionElections {
		if id == "" {
			add(fmt.Errorf("Options.PerRevisionElections[%d] must not be empty", i))
		}
	}
	return errlist.Join(errs...)
}
