package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/pkg/election"
)

// setUpCoordination settles the mode of the Lease elections and, when
// meshd coordinates them, adds the coordinator election.
func (d *Daemon) setUpCoordination() error {
	d.mode = d.resolveMode()
	if d.mode != election.Coordinated {
		return nil
	}
	return d.newCoordinator()
}

// resolveMode is the mode of the daemon's Lease elections: the configured
// one, or racing when a coordinated mode was asked for but the API server
// does not serve LeaseCandidates (said once, in the log).
func (d *Daemon) resolveMode() election.Mode {
	mode := d.cfg.ElectionMode
	if mode == election.Racing {
		return mode
	}
	ok, err := coordinated.Supported(d.cfg.ElectionClient.Discovery())
	if ok {
		d.log.Info("meshd's Lease elections are coordinated", zap.String("mode", string(mode)))
		return mode
	}
	d.log.Warn("the API server does not serve coordination.k8s.io/v1beta1 LeaseCandidates; meshd's Lease elections race instead",
		zap.String("asked", string(mode)), zap.Error(err))
	return election.Racing
}

// newCoordinator adds the namespace's coordinator election to the group,
// with a counter of its decisions.
func (d *Daemon) newCoordinator() error {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshd_coordinator_decisions_total",
		Help: "Writes of the coordinator of meshd's coordinated elections, by Lease and kind of decision (assign a vacant lease, prefer a better candidate, clear a preference, set the strategy).",
	}, []string{"lease", "decision"})
	if err := d.metricsReg.Register(decisions); err != nil {
		return err
	}
	le, err := d.group.NewCoordinator(d.cfg.Namespace, d.cfg.Identity, func(lease, decision string) {
		decisions.WithLabelValues(lease, decision).Inc()
	})
	if err != nil {
		return err
	}
	d.elections = append(d.elections, le)
	d.reporters = append(d.reporters, nil)
	return nil
}
