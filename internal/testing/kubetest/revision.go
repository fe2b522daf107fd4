package kubetest

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/revisions"
)

// SetDefaultRevision makes revision the default of the mesh in namespace
// ns, as istioctl's revision tag does: it creates or updates the webhook
// revisions.DefaultWebhookName(ns) with the label
// revisions.DefaultRevisionLabel; an empty revision removes the label. A
// webhook it creates is deleted when the test ends.
func SetDefaultRevision(t testing.TB, client kubernetes.Interface, ns, revision string) {
	t.Helper()
	ctx := context.Background()
	name := revisions.DefaultWebhookName(ns)
	hooks := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := hooks.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		wh = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		setRevisionLabel(wh, revision)
		if _, err := hooks.Create(ctx, wh, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	setRevisionLabel(wh, revision)
	if _, err := hooks.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setRevisionLabel(wh *admissionv1.MutatingWebhookConfiguration, revision string) {
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	if revision == "" {
		delete(wh.Labels, revisions.DefaultRevisionLabel)
		return
	}
	wh.Labels[revisions.DefaultRevisionLabel] = revision
}
