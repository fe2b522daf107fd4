package status

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/testing/controllertest"
)

func TestOlderTermDoesNotOverwrite(t *testing.T) {
	controllertest.OlderTermDoesNotOverwrite(t, "istio-system", ConfigMapName, func(client kubernetes.Interface) (controllers.Controller, error) {
		return New(client, Options{MeshNamespace: "istio-system", Identity: "paused", Interval: 50 * time.Millisecond})
	})
}
