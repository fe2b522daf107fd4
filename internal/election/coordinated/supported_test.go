package coordinated

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSupported(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		fail      bool
		want      bool
	}{
		{"served", []*metav1.APIResourceList{{GroupVersion: "coordination.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "leasecandidates"}}}}, false, true},
		{"group version absent", []*metav1.APIResourceList{{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "leases"}}}}, false, false},
		{"resource absent", []*metav1.APIResourceList{{GroupVersion: "coordination.k8s.io/v1beta1"}}, false, false},
		{"discovery fails", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			d := client.Discovery().(*fakediscovery.FakeDiscovery)
			d.Resources = tc.resources
			if tc.fail {
				d.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			got, err := Supported(d)
			if (err != nil) != tc.fail || got != tc.want {
				t.Fatalf("Supported = %v, %v; want %v, error %v", got, err, tc.want, tc.fail)
			}
		})
	}
}
