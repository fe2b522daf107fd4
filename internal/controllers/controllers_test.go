package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestApplyConfigMapCreatesWhenAbsent(t *testing.T) {
	client := kubetest.NewClientset()
	want := OwnedConfigMap{Namespace: "ns", Name: "cm", Labels: map[string]string{"l": "1"}, Data: map[string]string{"k": "v"}}
	wrote, err := ApplyConfigMap(context.Background(), client.CoreV1(), nil, want)
	if err != nil || !wrote {
		t.Fatalf("ApplyConfigMap = %v, %v", wrote, err)
	}
	cm, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" || cm.Labels["l"] != "1" {
		t.Fatalf("stored %v, %v", cm, err)
	}
	// The cache lagging behind: the create races and says so.
	_, err = ApplyConfigMap(context.Background(), client.CoreV1(), nil, want)
	if !IsRace(err) {
		t.Fatalf("second create: err = %v, want AlreadyExists", err)
	}
}

func TestApplyConfigMapKeepsOtherContent(t *testing.T) {
	stored := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: map[string]string{"other": "x"},
			Annotations: map[string]string{"a": "b"}},
		Data:       map[string]string{"k": "old", "keep": "me"},
		BinaryData: map[string][]byte{"bin": {1}, "l2": {2}},
	}
	client := kubetest.NewClientset(stored.DeepCopy())
	current, _ := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	client.ClearActions()
	want := OwnedConfigMap{Namespace: "ns", Name: "cm", Labels: map[string]string{"l": "1"},
		Data: map[string]string{"k": "new", "l2": "moved"}}

	wrote, err := ApplyConfigMap(context.Background(), client.CoreV1(), current, want)
	if err != nil || !wrote {
		t.Fatalf("ApplyConfigMap = %v, %v", wrote, err)
	}
	got, _ := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	if got.Data["k"] != "new" || got.Data["keep"] != "me" || got.Data["l2"] != "moved" || got.Labels["other"] != "x" ||
		got.Labels["l"] != "1" || got.Annotations["a"] != "b" || len(got.BinaryData["bin"]) != 1 || got.BinaryData["l2"] != nil {
		t.Fatalf("stored after update: %+v", got)
	}
	if current.Data["k"] != "old" {
		t.Fatal("the cached object was modified")
	}
	if !Owns(got, want) {
		t.Fatal("Owns is false right after a write")
	}

	// Nothing to do: no request.
	client.ClearActions()
	wrote, err = ApplyConfigMap(context.Background(), client.CoreV1(), got, want)
	if err != nil || wrote {
		t.Fatalf("no-op ApplyConfigMap = %v, %v", wrote, err)
	}
	if v := kubetest.Verbs(client); len(v) != 0 {
		t.Fatalf("no-op sent %v", v)
	}

	// Writing from a stale copy is a conflict, not an overwrite.
	_, err = ApplyConfigMap(context.Background(), client.CoreV1(), current, OwnedConfigMap{Namespace: "ns", Name: "cm",
		Data: map[string]string{"k": "stale"}})
	if !apierrors.IsConflict(err) || !IsRace(err) {
		t.Fatalf("stale update: err = %v, want a Conflict", err)
	}
}

func TestNewMetricsSharesVectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewMetrics(reg, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(reg, "b")
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewMetrics(reg, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Reconciled()
	again.Reconciled()
	b.Wrote()
	b.Failed()
	var nilMetrics *Metrics
	nilMetrics.Reconciled()
	if _, err := NewMetrics(nil, "unregistered"); err != nil {
		t.Fatal(err)
	}

	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"meshd_controller_reconciles_total/a": 2, "meshd_controller_reconciles_total/b": 0,
		"meshd_controller_writes_total/a": 0, "meshd_controller_writes_total/b": 1,
		"meshd_controller_errors_total/a": 0, "meshd_controller_errors_total/b": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}

	// A clashing collector of the same name is an error, not a panic.
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "meshd_controller_writes_total", Help: "x"}))
	if _, err := NewMetrics(clash, "a"); err == nil || !strings.Contains(err.Error(), "writes_total") {
		t.Fatalf("clash: err = %v", err)
	}
}

func TestLoopCountsAndRetries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, _ := NewMetrics(reg, "loop")
	q := NewQueue[string]("test")
	var handled atomicList
	var fails, races atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop[string]{
			Queue:   q,
			Workers: 2,
			Reconcile: func(_ context.Context, item string) error {
				handled.add(item)
				switch {
				case item == "fail" && fails.Add(1) <= 2:
					return errors.New("boom")
				case item == "race" && races.Add(1) <= 1:
					return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("stale"))
				}
				return nil
			},
			OnSynced: func() { q.Add("ok"); q.Add("fail"); q.Add("race") },
			Metrics:  m,
		}.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !handled.has("ok", 1) || !handled.has("fail", 3) || !handled.has("race", 2) {
		if time.Now().After(deadline) {
			t.Fatalf("items handled: %v", handled.items())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !q.ShuttingDown() {
		t.Error("queue not shut down after Run")
	}
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "meshd_controller_errors_total" && f.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Errorf("errors_total = %v, want 2 (races are not errors)", f.GetMetric()[0].GetCounter().GetValue())
		}
	}
}

func TestLoopStopsBeforeSync(t *testing.T) {
	q := NewQueue[string]("test")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Loop[string]{
		Queue:     q,
		Synced:    []cache.InformerSynced{func() bool { return false }},
		Reconcile: func(context.Context, string) error { t.Error("reconciled before sync"); return nil },
		OnSynced:  func() { t.Error("OnSynced before sync") },
	}.Run(ctx)
	if !q.ShuttingDown() {
		t.Error("queue not shut down")
	}
}

func TestCheckers(t *testing.T) {
	for _, err := range []error{
		CheckDNSLabel("A", "Bad_Label"), CheckName("B", "bad name"), CheckConfigMapKey("C", "a/b"), CheckLabelKey("D", "a b"),
	} {
		if err == nil || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("err = %v", err)
		}
	}
	for _, err := range []error{
		CheckDNSLabel("A", "ok"), CheckName("B", "a.b-c"), CheckConfigMapKey("C", "root-cert.pem"), CheckLabelKey("D", "istio.io/rev"),
	} {
		if err != nil {
			t.Error(err)
		}
	}
}

// atomicList records handled items from several workers.
type atomicList struct {
	mu    sync.Mutex
	store []string
}

func (l *atomicList) add(item string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.store = append(l.store, item)
}

// has reports whether item was handled at least n times.
func (l *atomicList) has(item string, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	count := 0
	for _, s := range l.store {
		if s == item {
			count++
		}
	}
	return count >= n
}

func (l *atomicList) items() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.store)
}
