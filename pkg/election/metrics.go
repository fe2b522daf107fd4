package election

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd-io/meshd/internal/metrics/electionmetrics"
)

// newPrometheusMetrics registers every election metric with reg. Terms ended
// by a failed run function are counted by the elector itself
// (meshd_election_run_failures_total), since a failure ends its term.
func newPrometheusMetrics(reg prometheus.Registerer) (*electionmetrics.PrometheusMetrics, error) {
	m, err := electionmetrics.NewPrometheusMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering election metrics (elections sharing a registerer belong in one Group): %w", err)
	}
	return m, nil
}
