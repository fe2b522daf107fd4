package electionmetrics

import "github.com/prometheus/client_golang/prometheus"

// PrometheusMetrics exports elector metrics with the meshd_election_ prefix,
// labelled by election name, and the two series of client-go's elector that
// dashboards already graph: leader_election_master_status and
// leader_election_slowpath_total, with the same names, label and meaning.
type PrometheusMetrics struct {
	leading      *prometheus.GaugeVec
	master       *prometheus.GaugeVec
	slowPath     *prometheus.CounterVec
	acquired     *prometheus.CounterVec
	steals       *prometheus.CounterVec
	renewFailure *prometheus.CounterVec
	lost         *prometheus.CounterVec
	requested    *prometheus.CounterVec
	handedOver   *prometheus.CounterVec
	requests     *prometheus.CounterVec
	cycles       *prometheus.CounterVec
	suspended    *prometheus.GaugeVec
	runFailed    *prometheus.CounterVec
}

// NewPrometheusMetrics creates the metrics and registers them with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	var collectors []prometheus.Collector
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"name"})
		collectors = append(collectors, g)
		return g
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"name"}, labels...))
		collectors = append(collectors, c)
		return c
	}
	m := &PrometheusMetrics{
		leading: gauge("meshd_election_leader", "1 while this process leads the election, else 0."),
		master: gauge("leader_election_master_status",
			"As client-go's elector exports it: 1 while this process holds the lease called name, 0 while it is a backup."),
		slowPath: counter("leader_election_slowpath_total",
			"As client-go's elector exports it: renewals of the lease called name that could not write from the cached object and read it first."),
		acquired: counter("meshd_election_acquired_total", "Terms of leadership started by this process."),
		steals: counter("meshd_election_steals_total",
			"Unexpired locks taken by this process because it outranked the holder's key."),
		renewFailure: counter("meshd_election_renew_failures_total", "Renew attempts of this process that failed."),
		lost: counter("meshd_election_lost_total",
			"Terms of this process that ended without a release (taken over or renew deadline passed)."),
		requested: counter("meshd_election_handover_requests_total",
			"Requests written by this process asking a holder to hand the lock over."),
		handedOver: counter("meshd_election_handovers_total",
			"Terms of this process ended by handing the lock to a candidate that asked for it."),
		requests: counter("meshd_election_api_requests_total", "API requests made by this process's elector, by verb.", "verb"),
		cycles: counter("meshd_election_steal_cycles_total",
			"Steal cycles detected by this process: it outranked the holder and the holder outranked it."),
		suspended: gauge("meshd_election_preemption_suspended",
			"1 while this process has suspended preemption after a steal cycle (the candidates disagree), else 0."),
		runFailed: counter("meshd_election_run_failures_total",
			"Terms of this process ended by its run functions returning or panicking."),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetLeading sets the leader gauge of the election name.
func (m *PrometheusMetrics) SetLeading(name string, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leading.WithLabelValues(name).Set(v)
	m.master.WithLabelValues(name).Set(v)
}

// Init makes every series of election name exist, at 0, before anything
// happens, so that rates and alerts see a zero rather than no data.
func (m *PrometheusMetrics) Init(name string) {
	m.SetLeading(name, false)
	m.SetPreemptionSuspended(name, false)
	for _, c := range []*prometheus.CounterVec{m.slowPath, m.acquired, m.steals, m.renewFailure, m.lost, m.requested, m.handedOver, m.cycles, m.runFailed} {
		c.WithLabelValues(name)
	}
	for _, verb := range []string{"get", "create", "update"} {
		m.requests.WithLabelValues(name, verb)
	}
}

// Acquired counts a lock taken by this candidate.
func (m *PrometheusMetrics) Acquired(name string) { m.acquired.WithLabelValues(name).Inc() }

// Stole counts a lock taken from a live holder of lower priority.
func (m *PrometheusMetrics) Stole(name string) { m.steals.WithLabelValues(name).Inc() }

// RenewFailed counts a renew that did not succeed in time.
func (m *PrometheusMetrics) RenewFailed(name string) { m.renewFailure.WithLabelValues(name).Inc() }

// Lost counts a term that ended without this candidate releasing it.
func (m *PrometheusMetrics) Lost(name string) { m.lost.WithLabelValues(name).Inc() }

// HandoverRequested counts a handover request written by this candidate.
func (m *PrometheusMetrics) HandoverRequested(name string) { m.requested.WithLabelValues(name).Inc() }

// HandedOver counts a term handed to a named successor.
func (m *PrometheusMetrics) HandedOver(name string) { m.handedOver.WithLabelValues(name).Inc() }

// Request counts one API request of the election, by verb.
func (m *PrometheusMetrics) Request(name, verb string) { m.requests.WithLabelValues(name, verb).Inc() }

// SlowPath counts an acquire attempt that had to read the lock.
func (m *PrometheusMetrics) SlowPath(name string) { m.slowPath.WithLabelValues(name).Inc() }

// StealCycle counts a steal the damper judged part of a cycle.
func (m *PrometheusMetrics) StealCycle(name string) { m.cycles.WithLabelValues(name).Inc() }

// RunFailed counts a run function that returned an error or panicked.
func (m *PrometheusMetrics) RunFailed(name string) { m.runFailed.WithLabelValues(name).Inc() }

// SetPreemptionSuspended sets the gauge of a damper-suspended preemption.
func (m *PrometheusMetrics) SetPreemptionSuspended(name string, suspended bool) {
	v := 0.0
	if suspended {
		v = 1
	}
	m.suspended.WithLabelValues(name).Set(v)
}
