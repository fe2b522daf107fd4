package rootcert

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncBundle makes the ClusterTrustBundle hold the certificate of this
// term, with istiod's signer name. Only with Options.ClusterTrustBundle.
func (t *term) syncBundle(ctx context.Context) error {
	cert := t.currentBundle()
	if cert == "" {
		// Not read yet: distribute queues the bundle once it is.
		return nil
	}
	bundles := t.c.client.CertificatesV1beta1().ClusterTrustBundles()
	current, err := t.ctbLister.Get(ClusterTrustBundleName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = bundles.Create(ctx, &certificatesv1beta1.ClusterTrustBundle{
			ObjectMeta: metav1.ObjectMeta{Name: ClusterTrustBundleName},
			Spec:       certificatesv1beta1.ClusterTrustBundleSpec{SignerName: ClusterTrustBundleSigner, TrustBundle: cert},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer brings it, and another pass
		}
		if err != nil {
			return fmt.Errorf("create ClusterTrustBundle %s: %w", ClusterTrustBundleName, err)
		}
		t.c.metrics.Wrote()
		t.c.log.Debug("created the ClusterTrustBundle", zap.String("name", ClusterTrustBundleName))
		return nil
	case err != nil:
		return err
	case current.Spec.TrustBundle == cert:
		return nil
	}
	// The signer name cannot change: a bundle with another one is not
	// istiod's, and is left alone.
	if current.Spec.SignerName != ClusterTrustBundleSigner {
		return fmt.Errorf("ClusterTrustBundle %s has signer %q, not %q; not writing it", ClusterTrustBundleName, current.Spec.SignerName, ClusterTrustBundleSigner)
	}
	updated := current.DeepCopy()
	updated.Spec.TrustBundle = cert
	// Optimistic concurrency: a conflict is retried from the cache.
	if _, err := bundles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ClusterTrustBundle %s: %w", ClusterTrustBundleName, err)
	}
	t.c.metrics.Wrote()
	t.c.log.Debug("updated the ClusterTrustBundle", zap.String("name", ClusterTrustBundleName))
	return nil
}
