package electionmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestPrometheusMetricsStartAtZeroAndCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Init("istio-leader")
	// Every series of the election exists at 0 before anything happens.
	want := map[string]int{
		"leader_election_master_status": 1, "leader_election_slowpath_total": 1, "meshd_election_leader": 1,
		"meshd_election_acquired_total": 1, "meshd_election_steals_total": 1, "meshd_election_renew_failures_total": 1,
		"meshd_election_lost_total": 1, "meshd_election_handover_requests_total": 1, "meshd_election_handovers_total": 1,
		"meshd_election_api_requests_total": 3, "meshd_election_preemption_suspended": 1,
		"meshd_election_run_failures_total": 1, "meshd_election_steal_cycles_total": 1,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if n, ok := want[f.GetName()]; !ok || len(f.GetMetric()) != n {
			t.Errorf("%s: %d series, want %d", f.GetName(), len(f.GetMetric()), n)
		}
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue() + s.GetGauge().GetValue(); v != 0 {
				t.Errorf("%s = %v after Init, want 0", f.GetName(), v)
			}
		}
		delete(want, f.GetName())
	}
	if len(want) != 0 {
		t.Errorf("missing after Init: %v", want)
	}

	m.SetLeading("istio-leader", true)
	m.SlowPath("istio-leader")
	m.SlowPath("istio-leader")
	if v := gauge(t, m.master, "istio-leader"); v != 1 {
		t.Errorf("leader_election_master_status = %v while leading, want 1", v)
	}
	if v := counter(t, m.slowPath, "istio-leader"); v != 2 {
		t.Errorf("leader_election_slowpath_total = %v, want 2", v)
	}
	m.SetLeading("istio-leader", false)
	if v := gauge(t, m.master, "istio-leader"); v != 0 {
		t.Errorf("leader_election_master_status = %v as a backup, want 0", v)
	}
}

func gauge(t *testing.T, v *prometheus.GaugeVec, name string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(name).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func counter(t *testing.T, v *prometheus.CounterVec, name string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(name).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
