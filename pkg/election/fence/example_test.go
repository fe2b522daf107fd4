package fence_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/fence"
)

// A run function writes through fence.Update with the context it was given,
// which carries its term. Here two terms are made up with election.WithTerm:
// after term 4 has written, a write in term 3 is refused.
func ExampleUpdate() {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "status"}})
	configMaps := client.CoreV1().ConfigMaps("istio-system")
	write := func(transitions int, holder string) error {
		term := election.Term{Lock: "istio-system/istio-status-leader", Identity: holder, Transitions: transitions, Elected: true}
		_, err := fence.Update(election.WithTerm(context.Background(), term), configMaps, "status",
			func(cm *corev1.ConfigMap) error {
				cm.Data = map[string]string{"writer": holder}
				return nil
			})
		return err
	}
	fmt.Println("term 4:", write(4, "meshd-1"))
	fmt.Println("term 3 refused:", errors.Is(write(3, "meshd-0"), fence.ErrStaleTerm))
	cm, _ := configMaps.Get(context.Background(), "status", metav1.GetOptions{})
	fmt.Println("writer:", cm.Data["writer"])
	// Output:
	// term 4: <nil>
	// term 3 refused: true
	// writer: meshd-1
}
