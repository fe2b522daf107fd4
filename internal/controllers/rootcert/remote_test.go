package rootcert

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/meshd-io/meshd/internal/errlist"
	ct "github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// With a SourceClient the controller reads the root from one cluster and
// writes it into another, and stops publishing while the other cluster has
// a different root of its own.
func TestPublishesSourceRootIntoRemoteCluster(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ct.Context(t)
	mesh := c.NewNamespace(t)
	cert := newCert(t)
	createSource(t, c.Client, mesh, cert)

	remote := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mesh}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
	)
	leaks := ct.LeakCheck(t)
	events := record.NewFakeRecorder(10)
	ctrl := newController(t, remote, Options{MeshNamespace: mesh, SourceClient: c.Client, Recorder: events})
	stop := ct.Run(t, ctrl)
	testutil.Eventually(t, wait, func() error {
		return errlist.Join(checkTarget(ctx, remote, "app", cert), checkTarget(ctx, remote, mesh, cert))
	})
	// Nothing is written into the source cluster's other namespaces.
	if _, err := c.Client.CoreV1().ConfigMaps(mesh).Get(ctx, TargetConfigMap, metav1.GetOptions{}); err == nil {
		t.Errorf("%s written into the source cluster", TargetConfigMap)
	}

	// The remote cluster gets a CA of its own with another root: the
	// controller says so and leaves the remote alone, even when the source
	// root changes.
	other := newCert(t)
	createSecret(t, remote, mesh, IstiodCASecret, IstiodCAKey, other)
	testutil.Eventually(t, wait, func() error {
		if err := ctrl.Problem(); err == nil || !strings.Contains(err.Error(), "differs") {
			return fmt.Errorf("problem %v, want one about the differing root", err)
		}
		return nil
	})
	for _, want := range []string{IstiodCASecret + " key " + IstiodCAKey + " in this cluster", PluggedCASecret + " key " + PluggedRootKey + " in the control plane's cluster"} {
		if !strings.Contains(ctrl.Problem().Error(), want) {
			t.Errorf("problem %q does not mention %q", ctrl.Problem(), want)
		}
	}
	select {
	case ev := <-events.Events:
		if !strings.HasPrefix(ev, "Warning "+ReasonMeshRootMismatch+" ") {
			t.Errorf("event = %q", ev)
		}
	case <-time.After(wait):
		t.Error("no Event recorded")
	}
	rotated := newCert(t)
	updateSecret(t, c.Client, mesh, PluggedCASecret, PluggedRootKey, rotated)
	testutil.Consistently(t, 2*time.Second, func() error { return checkTarget(ctx, remote, "app", cert) })

	// Once the remote's own root is the source's (a shared root), the
	// controller publishes again.
	updateSecret(t, remote, mesh, IstiodCASecret, IstiodCAKey, "\n"+rotated)
	testutil.Eventually(t, wait, func() error { return checkTarget(ctx, remote, "app", rotated) })
	if err := ctrl.Problem(); err != nil {
		t.Errorf("problem with a shared root: %v", err)
	}
	stop()
	leaks()
}

func TestSameCertificates(t *testing.T) {
	a, b := newCert(t), newCert(t)
	for _, tc := range []struct {
		x, y string
		want bool
	}{
		{a, a, true},
		{a, "\n\n" + a + "\n", true},
		{a + b, a + b, true},
		{a, b, false},
		{a + b, b + a, false},
		{a, a + b, false},
		{"", "", false},
		{"not pem", "not pem", false},
	} {
		if got := sameCertificates(tc.x, tc.y); got != tc.want {
			t.Errorf("sameCertificates(%.30q, %.30q) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}
