package rootcert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/meshd-io/meshd/internal/errlist"
	ct "github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// wait bounds every convergence in these tests.
const wait = 20 * time.Second

// newCert returns a fresh certificate for a test source.
func newCert(t *testing.T) string {
	t.Helper()
	cert, err := generateRootCert(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// createSource plugs cert in as the mesh's CA: the Secret cacerts.
func createSource(t *testing.T, client kubernetes.Interface, ns, cert string) {
	t.Helper()
	createSecret(t, client, ns, PluggedCASecret, PluggedRootKey, cert)
}

// createSecret creates Secret name in ns with cert under key, and other
// keys a CA Secret has.
func createSecret(t *testing.T, client kubernetes.Interface, ns, name, key, cert string) {
	t.Helper()
	_, err := client.CoreV1().Secrets(ns).Create(ct.Context(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string][]byte{key: []byte(cert), "ca-key.pem": []byte("not read")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// updateSecret sets key of Secret name in ns to value.
func updateSecret(t *testing.T, client kubernetes.Interface, ns, name, key, value string) {
	t.Helper()
	s, err := client.CoreV1().Secrets(ns).Get(ct.Context(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data[key] = []byte(value)
	if _, err := client.CoreV1().Secrets(ns).Update(ct.Context(t), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newController(t *testing.T, client kubernetes.Interface, opts Options) *Controller {
	t.Helper()
	c, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkTarget returns nil when namespace ns holds cert in a ConfigMap that
// the controller would leave alone.
func checkTarget(ctx context.Context, client kubernetes.Interface, ns, cert string) error {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, TargetConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if cm.Data[TargetKey] != cert {
		return fmt.Errorf("namespace %s: %s holds another certificate", ns, TargetKey)
	}
	if cm.Labels[ConfigLabel] != "true" {
		return fmt.Errorf("namespace %s: label %s=%q", ns, ConfigLabel, cm.Labels[ConfigLabel])
	}
	return nil
}

// checkEveryNamespace returns nil when every live namespace holds cert.
func checkEveryNamespace(ctx context.Context, client kubernetes.Interface, cert string) error {
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp != nil {
			continue
		}
		errs = append(errs, checkTarget(ctx, client, ns.Name, cert))
	}
	return errlist.Join(errs...)
}

func TestCopiesIntoEveryNamespace(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	before := c.NewNamespace(t)
	cert := newCert(t)
	createSource(t, c.Client, mesh, cert)
	leaks := ct.LeakCheck(t)

	reg := prometheus.NewRegistry()
	stop := ct.Run(t, newController(t, c.Client, Options{MeshNamespace: mesh, Registerer: reg}))
	testutil.Eventually(t, wait, func() error { return checkEveryNamespace(ctx, c.Client, cert) })
	if err := checkTarget(ctx, c.Client, before, cert); err != nil {
		t.Fatal(err)
	}

	after := c.NewNamespace(t)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, after, cert) })

	if n := ct.Counter(t, reg, "meshd_controller_writes_total", "namespace"); n < 2 {
		t.Errorf("writes_total = %v, want at least 2", n)
	}
	if n := ct.Counter(t, reg, "meshd_controller_reconciles_total", "namespace"); n < 2 {
		t.Errorf("reconciles_total = %v, want at least 2", n)
	}
	stop()
	leaks()
}

func TestRepairsEditsAndDeletion(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	ns := c.NewNamespace(t)
	cert := newCert(t)
	createSource(t, c.Client, mesh, cert)
	// A target that exists with someone else's content, which must survive.
	_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: TargetConfigMap, Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "keep"}},
		Data: map[string]string{TargetKey: "stale", "extra": "keep"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaks := ct.LeakCheck(t)
	stop := ct.Run(t, newController(t, c.Client, Options{MeshNamespace: mesh}))

	keptOthers := func() error {
		if err := checkTarget(ctx, c.Client, ns, cert); err != nil {
			return err
		}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, TargetConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["extra"] != "keep" || cm.Labels["team"] != "a" || cm.Annotations["note"] != "keep" {
			return fmt.Errorf("other content lost: labels %v annotations %v data keys %d", cm.Labels, cm.Annotations, len(cm.Data))
		}
		return nil
	}
	testutil.Eventually(t, wait, keptOthers)

	ct.UpdateConfigMap(t, c.Client, ns, TargetConfigMap, func(cm *corev1.ConfigMap) {
		cm.Data[TargetKey] = "tampered"
		delete(cm.Labels, ConfigLabel)
	})
	testutil.Eventually(t, wait, keptOthers)

	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, TargetConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, cert) })
	stop()
	leaks()
}

func TestFollowsSourceChanges(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	first, second, istiod := newCert(t), newCert(t), newCert(t)
	createSource(t, c.Client, mesh, first)
	createSecret(t, c.Client, mesh, IstiodCASecret, IstiodCAKey, istiod)
	leaks := ct.LeakCheck(t)
	stop := ct.Run(t, newController(t, c.Client, Options{MeshNamespace: mesh}))
	// The plugged-in CA wins over istiod's own.
	testutil.Eventually(t, wait, func() error { return checkEveryNamespace(ctx, c.Client, first) })
	updateSecret(t, c.Client, mesh, PluggedCASecret, PluggedRootKey, second)
	testutil.Eventually(t, wait, func() error { return checkEveryNamespace(ctx, c.Client, second) })
	// Without cacerts, istiod's generated CA is the root.
	if err := c.Client.CoreV1().Secrets(mesh).Delete(ctx, PluggedCASecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error { return checkEveryNamespace(ctx, c.Client, istiod) })
	stop()
	leaks()
}

// A cacerts Secret without root-cert.pem is skipped, as istiod skips it.
func TestUsesIstiodCAWhenPluggedHasNoRoot(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	ns := c.NewNamespace(t)
	istiod := newCert(t)
	createSecret(t, c.Client, mesh, PluggedCASecret, "ca-cert.pem", newCert(t))
	createSecret(t, c.Client, mesh, IstiodCASecret, IstiodCAKey, istiod)
	leaks := ct.LeakCheck(t)
	stop := ct.Run(t, newController(t, c.Client, Options{MeshNamespace: mesh}))
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, istiod) })
	stop()
	leaks()
}

func TestPublishesNothingWithoutCA(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	ns := c.NewNamespace(t)
	leaks := ct.LeakCheck(t)
	events := record.NewFakeRecorder(10)
	ctrl := newController(t, c.Client, Options{MeshNamespace: mesh, Recorder: events})
	stop := ct.Run(t, ctrl)
	testutil.Eventually(t, wait, func() error {
		if ctrl.Problem() == nil {
			return errors.New("no problem reported")
		}
		return nil
	})
	for _, want := range []string{"no mesh root certificate", mesh + "/cacerts", "root-cert.pem", mesh + "/istio-ca-secret", "ca-cert.pem"} {
		if !strings.Contains(ctrl.Problem().Error(), want) {
			t.Errorf("problem %q does not mention %q", ctrl.Problem(), want)
		}
	}
	select {
	case ev := <-events.Events:
		if !strings.HasPrefix(ev, "Warning "+ReasonNoMeshRoot+" ") {
			t.Errorf("event = %q", ev)
		}
	case <-time.After(wait):
		t.Error("no Event recorded")
	}
	testutil.Consistently(t, 2*time.Second, func() error {
		for _, n := range []string{mesh, ns} {
			if _, err := c.Client.CoreV1().ConfigMaps(n).Get(ctx, TargetConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s: %s written without a CA Secret (err %v)", n, TargetConfigMap, err)
			}
		}
		if _, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, DefaultSourceConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a self-signed source was created (err %v)", err)
		}
		return nil
	})
	// The CA appearing later is picked up by the watch.
	cert := newCert(t)
	createSecret(t, c.Client, mesh, IstiodCASecret, IstiodCAKey, cert)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, cert) })
	if err := ctrl.Problem(); err != nil {
		t.Errorf("problem after the CA appeared: %v", err)
	}
	stop()
	leaks()
}

func TestGeneratesMissingSourceOnce(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	leaks := ct.LeakCheck(t)

	// Two instances start at once with no source: one creates it and both
	// distribute that one.
	selfSigned := Options{MeshNamespace: mesh, SelfSignedRoot: true}
	stopA := ct.Run(t, newController(t, c.Client, selfSigned))
	stopB := ct.Run(t, newController(t, c.Client, selfSigned))
	var generated *corev1.ConfigMap
	testutil.Eventually(t, wait, func() error {
		src, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, DefaultSourceConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		generated = src
		return nil
	})
	if generated.Annotations[GeneratedAnnotation] != "true" {
		t.Errorf("generated source lacks %s: %v", GeneratedAnnotation, generated.Annotations)
	}
	cert := generated.Data[DefaultSourceKey]
	if err := checkCertificates(cert); err != nil {
		t.Fatalf("generated source: %v", err)
	}
	if ca := parseOne(t, cert); !ca.IsCA {
		t.Error("generated certificate is not a CA")
	}
	testutil.Eventually(t, wait, func() error { return checkEveryNamespace(ctx, c.Client, cert) })
	stopA()
	stopB()

	// A new instance reuses the stored source instead of generating again.
	ctrl := newController(t, c.Client, selfSigned)
	stop := ct.Run(t, ctrl)
	fresh := c.NewNamespace(t)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, fresh, cert) })
	src, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, DefaultSourceConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src.ResourceVersion != generated.ResourceVersion {
		t.Errorf("source rewritten by a later instance: resourceVersion %s -> %s", generated.ResourceVersion, src.ResourceVersion)
	}
	// Deleting the source does not rotate the root: it comes back as it was.
	if err := c.Client.CoreV1().ConfigMaps(mesh).Delete(ctx, DefaultSourceConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		src, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, DefaultSourceConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if src.Data[DefaultSourceKey] != cert {
			return errors.New("source re-created with another certificate")
		}
		return nil
	})
	// A real CA Secret wins over the self-signed root even in this mode.
	real := newCert(t)
	createSource(t, c.Client, mesh, real)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, fresh, real) })
	if ctrl.Problem() != nil {
		t.Errorf("problem: %v", ctrl.Problem())
	}
	stop()
	leaks()
}

func TestInvalidSourceIsNotDistributed(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	ns := c.NewNamespace(t)
	createSource(t, c.Client, mesh, "not a certificate")
	// An invalid plugged-in root is not replaced by istiod's generated one:
	// istiod would not use that one either.
	createSecret(t, c.Client, mesh, IstiodCASecret, IstiodCAKey, newCert(t))
	leaks := ct.LeakCheck(t)
	reg := prometheus.NewRegistry()
	ctrl := newController(t, c.Client, Options{MeshNamespace: mesh, Registerer: reg})
	stop := ct.Run(t, ctrl)

	testutil.Eventually(t, wait, func() error {
		if n := ct.Counter(t, reg, "meshd_controller_errors_total", "namespace"); n < 1 {
			return errors.New("no error counted for the invalid source")
		}
		return nil
	})
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, TargetConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("target written from an invalid source: err = %v", err)
	}
	if err := ctrl.Problem(); err == nil || !strings.Contains(err.Error(), "cacerts key root-cert.pem") {
		t.Errorf("problem = %v", err)
	}

	// Fixing the source is picked up at once, not after the backoff.
	cert := newCert(t)
	updateSecret(t, c.Client, mesh, PluggedCASecret, PluggedRootKey, cert)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, cert) })
	stop()
	leaks()
}

func TestSkipsExcludedNamespaces(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	excluded := c.NewNamespace(t)
	included := c.NewNamespace(t)
	cert := newCert(t)
	createSource(t, c.Client, mesh, cert)
	leaks := ct.LeakCheck(t)
	stop := ct.Run(t, newController(t, c.Client, Options{MeshNamespace: mesh, ExcludedNamespaces: []string{excluded}}))

	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, included, cert) })
	testutil.Consistently(t, time.Second, func() error {
		_, err := c.Client.CoreV1().ConfigMaps(excluded).Get(ctx, TargetConfigMap, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("excluded namespace: err = %v", err)
		}
		return nil
	})
	stop()
	leaks()
}

func TestStopsWritingWhenCancelled(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	ns := c.NewNamespace(t)
	cert := newCert(t)
	createSource(t, c.Client, mesh, cert)
	leaks := ct.LeakCheck(t)
	ctrl := newController(t, c.Client, Options{MeshNamespace: mesh})

	// Two terms in a row, as after losing and regaining leadership.
	for range 2 {
		stop := ct.Run(t, ctrl)
		testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, cert) })
		ct.UpdateConfigMap(t, c.Client, ns, TargetConfigMap, func(cm *corev1.ConfigMap) { cm.Data[TargetKey] = "edited" })
		testutil.Eventually(t, wait, func() error { return checkTarget(ctx, c.Client, ns, cert) })
		stop()
	}
	leaks()

	ct.UpdateConfigMap(t, c.Client, ns, TargetConfigMap, func(cm *corev1.ConfigMap) { cm.Data[TargetKey] = "edited" })
	testutil.Consistently(t, 2*time.Second, func() error {
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, TargetConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data[TargetKey] != "edited" {
			return errors.New("target repaired after Run returned")
		}
		return nil
	})
}
