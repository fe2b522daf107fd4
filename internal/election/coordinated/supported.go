package coordinated

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// leaseCandidateGroupVersion serves LeaseCandidates.
const leaseCandidateGroupVersion = "coordination.k8s.io/v1beta1"

// Supported reports whether the API server serves
// coordination.k8s.io/v1beta1 leasecandidates. A server that does not know
// the group version answers false with no error; any other failure to ask
// is an error, so that a caller can tell "no" from "cannot tell".
func Supported(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(leaseCandidateGroupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("coordinated: discover %s: %w", leaseCandidateGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "leasecandidates" {
			return true, nil
		}
	}
	return false, nil
}
