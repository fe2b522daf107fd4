// Package electionmetrics is the Prometheus adapter of the elector's
// Metrics (pkg/election/elector): the meshd_election_ series, labelled by
// election name, and the two series of client-go's elector that dashboards
// already graph. Package election registers it for programs that give a
// Prometheus registerer; programs never build it themselves.
package electionmetrics
