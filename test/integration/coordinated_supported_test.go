package integration

import (
	"testing"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// TestCoordinatedNotSupported checks that a plain API server (coordinated
// leader election off, as this package's cluster runs) is reported as not
// serving LeaseCandidates, without an error.
func TestCoordinatedNotSupported(t *testing.T) {
	c := testcluster.Get(t)
	ok, err := coordinated.Supported(c.Client.Discovery())
	if err != nil || ok {
		t.Fatalf("Supported = %v, %v on a server without coordination.k8s.io/v1beta1", ok, err)
	}
}
