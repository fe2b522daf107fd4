package elector

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/metrics/electionmetrics"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A renewal whose write from the cached object conflicts, and that reads the
// lock before writing again, counts once on leader_election_slowpath_total;
// a plain renewal does not.
func TestSlowPathCountsRenewalsThatRead(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	m, err := electionmetrics.NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		Clock:     h.clock, Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, acquired)
	mustAttempt(t, le, true, acquired)
	if v := slowPathCount(t, reg, lockName); v != 0 {
		t.Fatalf("slow path after a plain renewal = %v, want 0", v)
	}
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	cm.Labels = map[string]string{"touched": "yes"}
	if _, err := h.client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.verbs()
	mustAttempt(t, le, true, acquired)
	assertVerbs(t, h.verbs(), "update configmaps", "get configmaps", "update configmaps")
	if v := slowPathCount(t, reg, lockName); v != 1 {
		t.Fatalf("slow path after a conflicting renewal = %v, want 1", v)
	}
}

// slowPathCount reads leader_election_slowpath_total of the election name
// from reg.
func slowPathCount(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "leader_election_slowpath_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
