// Package gate shows how to run a controller-runtime manager only while a
// meshd election is won. A manager cannot be started twice, so the run
// function builds a new one for every term and runs it until the term
// ends; the manager's own leader election stays off, since the meshd
// election decides. This is a module of its own so that meshd itself does
// not depend on controller-runtime.
package gate

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/meshd-io/meshd/pkg/election"
)

// NewManager builds a fresh manager, with its controllers, for one term.
// It must not enable the manager's own leader election, and must set
// Options.Controller.SkipNameValidation: controller-runtime refuses a
// controller name already registered in the process, which every term
// after the first would do.
type NewManager func() (manager.Manager, error)

// Gate adds to le a run function that, in every term, builds a manager
// with newManager and runs it until the term ends. A manager that fails to
// build or to run ends the term with its error (the election contends
// again after a back-off); one that returns nil while the term goes on
// leaves the term running without it, as any run function that returns nil.
func Gate(le *election.LeaderElection, newManager NewManager) *election.LeaderElection {
	return le.Add(func(ctx context.Context) error {
		mgr, err := newManager()
		if err != nil {
			return fmt.Errorf("build the manager: %w", err)
		}
		// Start blocks until ctx, the term, ends, then stops the
		// controllers and waits for them: the work has stopped before
		// the election releases the lock.
		return mgr.Start(ctx)
	})
}
