package election

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd-io/meshd/pkg/election/elector"
)

// runFailureCounter is what a metrics sink may add to elector.Metrics to
// count terms ended by a failed run function.
type runFailureCounter interface {
	RunFailed(name string)
}

// prometheusMetrics is elector.PrometheusMetrics plus the election's own
// counter.
type prometheusMetrics struct {
	*elector.PrometheusMetrics
	runFailures *prometheus.CounterVec
}

var _ runFailureCounter = (*prometheusMetrics)(nil)

// newPrometheusMetrics registers every election metric with reg.
func newPrometheusMetrics(reg prometheus.Registerer) (*prometheusMetrics, error) {
	m := &prometheusMetrics{runFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshd_election_run_failures_total",
		Help: "Terms of this process ended because a run function returned an error or panicked.",
	}, []string{"name"})}
	var err error
	if m.PrometheusMetrics, err = elector.NewPrometheusMetrics(reg); err == nil {
		err = reg.Register(m.runFailures)
	}
	if err != nil {
		return nil, fmt.Errorf("registering election metrics (elections sharing a registerer belong in one Group): %w", err)
	}
	return m, nil
}

// RunFailed counts a term ended by a failed run function.
func (m *prometheusMetrics) RunFailed(name string) { m.runFailures.WithLabelValues(name).Inc() }
