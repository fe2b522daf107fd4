package rootcert

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	ct "github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// checkBundle returns nil when the ClusterTrustBundle holds cert with
// istiod's signer.
func checkBundle(ctx context.Context, client kubernetes.Interface, cert string) error {
	b, err := client.CertificatesV1beta1().ClusterTrustBundles().Get(ctx, ClusterTrustBundleName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if b.Spec.SignerName != ClusterTrustBundleSigner || b.Spec.TrustBundle != cert {
		return fmt.Errorf("bundle signer %q, holds the certificate: %v", b.Spec.SignerName, b.Spec.TrustBundle == cert)
	}
	return nil
}

// With ClusterTrustBundle the root goes into one cluster-scoped bundle
// instead of a ConfigMap per namespace; here into a second cluster (the
// only one serving the beta API), read from the shared one, as for a
// remote cluster.
func TestPublishesClusterTrustBundle(t *testing.T) {
	source := testcluster.Get(t)
	target, err := testcluster.Start(testcluster.Options{APIServerFlags: []string{
		"--feature-gates=ClusterTrustBundle=true",
		"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := target.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := ct.Context(t)
	mesh := source.NewNamespace(t)
	cert := newCert(t)
	createSource(t, source.Client, mesh, cert)
	leaks := ct.LeakCheck(t)

	ctrl := newController(t, target.Client, Options{MeshNamespace: mesh, SourceClient: source.Client, ClusterTrustBundle: true})
	stop := ct.Run(t, ctrl)
	testutil.Eventually(t, wait, func() error { return checkBundle(ctx, target.Client, cert) })
	// No ConfigMap is written in bundle mode.
	if _, err := target.Client.CoreV1().ConfigMaps("default").Get(ctx, TargetConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s written in bundle mode (err %v)", TargetConfigMap, err)
	}

	// A rotated root is followed; an edit is repaired; a deletion too.
	rotated := newCert(t)
	updateSecret(t, source.Client, mesh, PluggedCASecret, PluggedRootKey, rotated)
	testutil.Eventually(t, wait, func() error { return checkBundle(ctx, target.Client, rotated) })
	b, err := target.Client.CertificatesV1beta1().ClusterTrustBundles().Get(ctx, ClusterTrustBundleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.TrustBundle = cert
	if _, err := target.Client.CertificatesV1beta1().ClusterTrustBundles().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error { return checkBundle(ctx, target.Client, rotated) })
	if err := target.Client.CertificatesV1beta1().ClusterTrustBundles().Delete(ctx, ClusterTrustBundleName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error { return checkBundle(ctx, target.Client, rotated) })
	stop()
	leaks()

	// After the term, nothing writes it any more.
	b, err = target.Client.CertificatesV1beta1().ClusterTrustBundles().Get(ctx, ClusterTrustBundleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.TrustBundle = cert
	if _, err := target.Client.CertificatesV1beta1().ClusterTrustBundles().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, time.Second, func() error {
		if err := checkBundle(ctx, target.Client, cert); err != nil {
			return fmt.Errorf("the bundle was written after the term ended: %w", err)
		}
		return nil
	})
}
