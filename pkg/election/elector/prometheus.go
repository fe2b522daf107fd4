package elector

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

var _ Metrics = (*PrometheusMetrics)(nil)

// NewPrometheusMetrics creates the metrics and registers them with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	labels := []string{"name"}
	m := &PrometheusMetrics{
		leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshd_election_leader",
			Help: "1 while this process leads the election, else 0.",
		}, labels),
		acquired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_acquired_total",
			Help: "Terms of leadership started by this process.",
		}, labels),
		steals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_steals_total",
			Help: "Unexpired locks taken by this process because it outranked the holder's key.",
		}, labels),
		renewFailure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_renew_failures_total",
			Help: "Renew attempts of this process that failed.",
		}, labels),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_lost_total",
			Help: "Terms of this process that ended without a release (taken over or renew deadline passed).",
		}, labels),
		requested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_handover_requests_total",
			Help: "Requests written by this process asking a holder to hand the lock over.",
		}, labels),
		handedOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_handovers_total",
			Help: "Terms of this process ended by handing the lock to a candidate that asked for it.",
		}, labels),
		master: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "As client-go's elector exports it: 1 while this process holds the lease called name, 0 while it is a backup.",
		}, labels),
		slowPath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leader_election_slowpath_total",
			Help: "As client-go's elector exports it: renewals of the lease called name that could not write from the cached object and read it first.",
		}, labels),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_api_requests_total",
			Help: "API requests made by this process's elector, by verb.",
		}, []string{"name", "verb"}),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_steal_cycles_total",
			Help: "Steal cycles detected by this process: it outranked the holder and the holder outranked it.",
		}, labels),
		suspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshd_election_preemption_suspended",
			Help: "1 while this process has suspended preemption after a steal cycle (the candidates disagree), else 0.",
		}, labels),
		runFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshd_election_run_failures_total",
			Help: "Terms of this process ended by its run functions returning or panicking.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.leading, m.master, m.slowPath, m.acquired, m.steals, m.renewFailure, m.lost, m.requested, m.handedOver, m.requests,
		m.cycles, m.suspended, m.runFailed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

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

func (m *PrometheusMetrics) Acquired(name string)          { m.acquired.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) Stole(name string)             { m.steals.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) RenewFailed(name string)       { m.renewFailure.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) Lost(name string)              { m.lost.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) HandoverRequested(name string) { m.requested.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) HandedOver(name string)        { m.handedOver.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) Request(name, verb string)     { m.requests.WithLabelValues(name, verb).Inc() }
func (m *PrometheusMetrics) SlowPath(name string)          { m.slowPath.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) StealCycle(name string)        { m.cycles.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) RunFailed(name string)         { m.runFailed.WithLabelValues(name).Inc() }
func (m *PrometheusMetrics) SetPreemptionSuspended(name string, suspended bool) {
	v := 0.0
	if suspended {
		v = 1
	}
	m.suspended.WithLabelValues(name).Set(v)
}
