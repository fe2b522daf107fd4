package revision

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/fake"

	ct "github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

const wait = 20 * time.Second

func TestNewReportsEveryBadOption(t *testing.T) {
	_, err := New(nil, Options{MeshNamespace: "Bad_NS", Revision: "a.b", RevisionLabel: "no spaces/allowed here"})
	if err == nil {
		t.Fatal("New accepted invalid options")
	}
	for _, want := range []string{"nil Kubernetes client", "Options.MeshNamespace", "Options.Revision", "Options.RevisionLabel"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(fake.NewClientset(), Options{MeshNamespace: "istio-system"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "revision" || c.opts.Revision != election.DefaultRevision || c.opts.RevisionLabel != "istio.io/rev" ||
		c.cmName != "meshd-revision-default" || c.selector.String() != "istio.io/rev=default" {
		t.Fatalf("defaults not applied: %+v, %s, %s", c.opts, c.cmName, c.selector)
	}
}

func TestListsTheNamespacesOfTheRevision(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	// Namespaces are cluster-wide and outlive tests: a fresh revision name
	// keeps other runs' namespaces out of the list.
	rev := "r-" + rand.String(6)
	other := rev + "-other"
	label := func(ns, value string) { ct.SetNamespaceLabel(t, c.Client, ns, DefaultRevisionLabel, &value) }
	first, second, third := c.NewNamespace(t), c.NewNamespace(t), c.NewNamespace(t)
	label(first, rev)
	label(third, other)

	leaks := ct.LeakCheck(t)
	reg := prometheus.NewRegistry()
	ctrl, err := New(c.Client, Options{MeshNamespace: mesh, Revision: rev, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	stop := ct.Run(t, ctrl)

	expect := func(namespaces ...string) {
		t.Helper()
		want := strings.Join(namespaces, "\n")
		testutil.Eventually(t, wait, func() error {
			cm, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, ConfigMapName(rev), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data[KeyNamespaces] != want || cm.Data[KeyCount] != fmt.Sprint(len(namespaces)) {
				return fmt.Errorf("namespaces %q count %q, want %q count %d", cm.Data[KeyNamespaces], cm.Data[KeyCount], want, len(namespaces))
			}
			return nil
		})
	}
	sorted := func(names ...string) []string {
		slices.Sort(names)
		return names
	}

	expect(first)
	label(second, rev)
	expect(sorted(first, second)...)
	label(third, rev) // relabelled from another revision
	expect(sorted(first, second, third)...)
	ct.SetNamespaceLabel(t, c.Client, first, DefaultRevisionLabel, nil) // unlabelled
	expect(sorted(second, third)...)
	label(second, other) // moved to another revision
	expect(third)

	// Other keys survive, and edits and deletion are repaired.
	ct.UpdateConfigMap(t, c.Client, mesh, ConfigMapName(rev), func(cm *corev1.ConfigMap) {
		cm.Data["note"] = "keep"
		cm.Data[KeyNamespaces] = "tampered"
	})
	expect(third)
	cm, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, ConfigMapName(rev), metav1.GetOptions{})
	if err != nil || cm.Data["note"] != "keep" {
		t.Fatalf("other keys lost: %v %v", err, cm.Data)
	}
	if err := c.Client.CoreV1().ConfigMaps(mesh).Delete(ctx, ConfigMapName(rev), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(third)

	// A deleted namespace drops out (it stays Terminating here, since the
	// test cluster runs no namespace controller).
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, third, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect()
	if n := ct.Counter(t, reg, "meshd_controller_writes_total", Name); n < 7 {
		t.Errorf("writes_total = %v, want at least 7", n)
	}
	stop()
	leaks()

	// After Run returns nothing is written any more.
	label(first, rev)
	testutil.Consistently(t, time.Second, func() error {
		cm, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, ConfigMapName(rev), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data[KeyCount] != "0" {
			return errors.New("written after Run returned")
		}
		return nil
	})

	// And a new term catches up.
	stop = ct.Run(t, ctrl)
	expect(first)
	stop()
}
