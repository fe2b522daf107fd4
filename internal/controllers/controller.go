package controllers

import (
	"context"

	"github.com/meshd-io/meshd/pkg/election"
)

// Controller is work that runs only while its election is led.
type Controller interface {
	// Name is the short name used in logs and in the controller label of the
	// metrics, for example "namespace", "status" or "revision".
	Name() string
	// Run starts informers, reconciles and writes until ctx is done. It
	// returns after everything it started has stopped.
	Run(ctx context.Context)
}

// Gate makes the controllers run while e is led: each one's Run is
// registered as a run function of e. Call it before e.Run.
func Gate(e *election.LeaderElection, cs ...Controller) {
	for _, c := range cs {
		e.AddRunFunctionContext(c.Run)
	}
}
