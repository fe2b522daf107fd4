package status

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/testing/controllertest"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

// TestOlderTermDoesNotOverwrite runs the controller in a term older than
// the one that last wrote its ConfigMap, as a leader paused past its lease
// would: it tries, is refused, and the successor's content stays.
func TestOlderTermDoesNotOverwrite(t *testing.T) {
	successor := controllertest.TestTerm
	successor.Transitions, successor.Identity = 2, "successor"
	stored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: ConfigMapName},
		Data: map[string]string{"written-by": "successor"}}
	fence.Stamp(stored, successor)
	client := kubetest.NewClientset(stored)

	ctrl, err := New(client, Options{MeshNamespace: "istio-system", Identity: "paused", Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, ctrl) // in term 1
	testutil.Eventually(t, 10*time.Second, func() error {
		if !slices.Contains(kubetest.Verbs(client), "get configmaps") {
			return errors.New("the controller has not tried a fenced write yet")
		}
		return nil
	})
	testutil.Consistently(t, 300*time.Millisecond, func() error { return unchanged(client, stored) })
	if v := kubetest.Verbs(client); slices.Contains(v, "update configmaps") || slices.Contains(v, "create configmaps") {
		t.Fatalf("the older term wrote: %v", v)
	}
}

func unchanged(client *fake.Clientset, want *corev1.ConfigMap) error {
	got, err := client.CoreV1().ConfigMaps(want.Namespace).Get(context.Background(), want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.Data["written-by"] != "successor" || got.Annotations[fence.Annotation] != want.Annotations[fence.Annotation] {
		return errors.New("the successor's ConfigMap was overwritten")
	}
	return nil
}
