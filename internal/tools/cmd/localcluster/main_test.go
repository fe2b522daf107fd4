package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// The local control plane serves LeaseCandidates with -coordinated, and
// only then: the coordinated election modes can be tried locally.
func TestCoordinatedServesLeaseCandidates(t *testing.T) {
	for _, coordinated := range []bool{true, false} {
		c, err := testcluster.Start(options(filepath.Join(t.TempDir(), "data"), 3*time.Minute, coordinated))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Client.CoordinationV1beta1().LeaseCandidates("default").List(context.Background(), metav1.ListOptions{})
		if stopErr := c.Stop(); stopErr != nil {
			t.Errorf("stop: %v", stopErr)
		}
		if served := err == nil; served != coordinated {
			t.Errorf("coordinated %v: list LeaseCandidates: %v", coordinated, err)
		}
	}
}
