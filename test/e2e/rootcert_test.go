package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// In a mesh without a CA Secret, meshd leads the namespace election but
// writes istio-ca-root-cert nowhere, and /readyz and /debug/elections say
// why. When istiod's CA Secret appears, its root is published byte for byte.
func TestNoCASecretPublishesNothing(t *testing.T) {
	m := newMesh(t)
	ctx := context.Background()
	if err := cluster.Client.CoreV1().Secrets(m.ns).Delete(ctx, "cacerts", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	app := cluster.NewNamespace(t)
	p, err := meshdproc.Start(meshdproc.Options{Binary: meshdBinary, Name: "no-ca", Kubeconfig: m.kubeconfig, Namespace: m.ns,
		Revision: "stable", TTL: 2 * time.Second, LogDir: m.logDir, Controllers: "namespace",
		Env: []string{"GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.procs = append(m.procs, p)
	m.mu.Unlock()

	testutil.Eventually(t, 30*time.Second, func() error {
		err := p.Ready(ctx)
		if err == nil || !strings.Contains(err.Error(), "no mesh root certificate") {
			return fmt.Errorf("/readyz: %v", err)
		}
		return nil
	})
	els, err := p.Elections(ctx)
	if err != nil || len(els) != 1 || !els[0].Leader || len(els[0].Problems) != 1 ||
		!strings.Contains(els[0].Problems[0], m.ns+"/cacerts") {
		t.Fatalf("/debug/elections: %+v, %v", els, err)
	}
	testutil.Consistently(t, 2*time.Second, func() error {
		for _, ns := range []string{m.ns, app} {
			_, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("istio-ca-root-cert written into %s", ns)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})

	root := createCASecret(t, m.ns, "istio-ca-secret", "ca-cert.pem")
	testutil.Eventually(t, 30*time.Second, func() error {
		cm, err := cluster.Client.CoreV1().ConfigMaps(app).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["root-cert.pem"] != root {
			return fmt.Errorf("%s holds another root", app)
		}
		return p.Ready(ctx)
	})
}
