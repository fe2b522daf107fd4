package controllers

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are one controller's counters. All controllers share three
// counter vectors with a controller label:
//
//	meshd_controller_reconciles_total  items taken from the queue and handled
//	meshd_controller_writes_total      successful creates and updates
//	meshd_controller_errors_total      reconciles that failed and were retried
//
// A nil *Metrics counts nothing.
type Metrics struct {
	reconciles prometheus.Counter
	writes     prometheus.Counter
	errors     prometheus.Counter
}

const metricsPrefix = "meshd_controller_"

// NewMetrics returns the counters of the named controller, registered into
// reg. Several controllers (or several instances of one) may use the same
// registry: the vectors are registered once and shared. A nil reg gives
// counters that work but are not exported.
func NewMetrics(reg prometheus.Registerer, controller string) (*Metrics, error) {
	vec := func(name, help string) (*prometheus.CounterVec, error) {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + name,
			Help: help,
		}, []string{"controller"})
		if reg == nil {
			return v, nil
		}
		if err := reg.Register(v); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					return existing, nil
				}
			}
			return nil, fmt.Errorf("register %s%s: %w", metricsPrefix, name, err)
		}
		return v, nil
	}
	reconciles, err := vec("reconciles_total", "Work items handled by a leader-gated controller.")
	if err != nil {
		return nil, err
	}
	writes, err := vec("writes_total", "Objects created or updated by a leader-gated controller.")
	if err != nil {
		return nil, err
	}
	errs, err := vec("errors_total", "Failed reconciles of a leader-gated controller; each is retried with backoff.")
	if err != nil {
		return nil, err
	}
	return &Metrics{
		reconciles: reconciles.WithLabelValues(controller),
		writes:     writes.WithLabelValues(controller),
		errors:     errs.WithLabelValues(controller),
	}, nil
}

// Reconciled counts a handled work item.
func (m *Metrics) Reconciled() {
	if m != nil {
		m.reconciles.Inc()
	}
}

// Wrote counts a successful create or update.
func (m *Metrics) Wrote() {
	if m != nil {
		m.writes.Inc()
	}
}

// Failed counts a failed reconcile.
func (m *Metrics) Failed() {
	if m != nil {
		m.errors.Inc()
	}
}
