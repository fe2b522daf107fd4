// Package controllertest helps test leader-gated controllers against a real
// API server: running a controller for the length of a test, polling with
// deadlines, checking for leaked goroutines and reading counters.
package controllertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

// Timeout bounds every wait of these helpers.
const Timeout = 30 * time.Second

// TestTerm is the election term Run gives a controller: the first term of
// a test lock, as if its election had been won once.
var TestTerm = election.Term{Lock: "meshd-test/controllertest", Identity: "controllertest", Transitions: 1, Elected: true}

// Run starts c.Run in a goroutine, in TestTerm, and returns a function that
// cancels it and waits until Run has returned, failing the test if that
// takes longer than Timeout. The function is also registered with
// t.Cleanup; calling it twice is harmless.
func Run(t testing.TB, c controllers.Controller) (stop func()) {
	t.Helper()
	return RunInTerm(t, c, TestTerm)
}

// RunInTerm is Run in the given election term, as election.TermFrom reads
// it from the context of c.Run.
func RunInTerm(t testing.TB, c controllers.Controller, term election.Term) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(election.WithTerm(context.Background(), term))
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	stop = func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(Timeout):
			t.Fatalf("%s controller: Run did not return within %v of cancellation", c.Name(), Timeout)
		}
	}
	t.Cleanup(stop)
	return stop
}

// LeakCheck records the goroutines running now and returns a function that
// fails the test if any other goroutine is still running when it is called
// (goleak retries for a while, so goroutines on their way out pass). Call it
// after stopping the controller. Goroutines of the API client's transport
// are ignored: connections are shared and pooled across tests.
func LeakCheck(t testing.TB) func() {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, ignore)
	}
}

// Counter returns the value of the counter name{controller=controller} in
// reg, or 0 when it has not been exported.
func Counter(t testing.TB, reg prometheus.Gatherer, name, controller string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Context returns a context cancelled after Timeout or when the test ends.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// SetNamespaceLabel sets (value non-nil) or removes (nil) a label of a
// namespace, retrying on conflicts.
func SetNamespaceLabel(t testing.TB, client kubernetes.Interface, namespace, key string, value *string) {
	t.Helper()
	ctx := Context(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if value == nil {
			delete(ns.Labels, key)
		} else {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[key] = *value
		}
		_, err = client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("label namespace %s: %v", namespace, err)
	}
}

// UpdateConfigMap applies mutate to the stored ConfigMap and writes it back,
// retrying on conflicts.
func UpdateConfigMap(t testing.TB, client kubernetes.Interface, namespace, name string, mutate func(*corev1.ConfigMap)) {
	t.Helper()
	ctx := Context(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(cm)
		_, err = client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update ConfigMap %s/%s: %v", namespace, name, err)
	}
}

// OlderTermDoesNotOverwrite checks that a controller writes its ConfigMap
// namespace/name fenced by its term: the object was last written by a
// later term, as after a takeover, and the controller, built by build on a
// fake clientset and run in TestTerm like a leader paused past its lease,
// tries to write it, is refused and leaves the successor's content alone.
func OlderTermDoesNotOverwrite(t *testing.T, namespace, name string, build func(kubernetes.Interface) (controllers.Controller, error)) {
	t.Helper()
	successor := TestTerm
	successor.Transitions, successor.Identity = TestTerm.Transitions+1, "successor"
	stored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string]string{"written-by": "successor"}}
	fence.Stamp(stored, successor)
	client := kubetest.NewClientset(stored.DeepCopy())
	ctrl, err := build(client)
	if err != nil {
		t.Fatal(err)
	}
	Run(t, ctrl)
	testutil.Eventually(t, Timeout, func() error {
		if !slices.Contains(kubetest.Verbs(client), "get configmaps") {
			return errors.New("the controller has not tried a fenced write yet")
		}
		return nil
	})
	testutil.Consistently(t, 300*time.Millisecond, func() error {
		got, err := client.CoreV1().ConfigMaps(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Data["written-by"] != "successor" || got.Annotations[fence.Annotation] != stored.Annotations[fence.Annotation] {
			return fmt.Errorf("the successor's ConfigMap was overwritten: %v %v", got.Annotations, got.Data)
		}
		return nil
	})
	for _, v := range kubetest.Verbs(client) {
		if v == "update configmaps" || v == "create configmaps" {
			t.Fatalf("the older term wrote: %v", kubetest.Verbs(client))
		}
	}
}
